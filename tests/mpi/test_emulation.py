"""MPI tests of the engine through ``dualmpi.Comm``: run with ``mpiexec -n N python -m mpi4py -m
pytest --with-mpi``.

Every test lets all ranks finish their communication, then the ranks agree on the
verdict with an allreduce before asserting, so a failure on one rank cannot hang
the others.  The CLI's :func:`~dualmpi.measure.collective.run_collective` fills the buffers
with patterns and checks every delivered byte.
"""

import pytest

from dualmpi.collectives import COLLECTIVES, build_schedule, paper_steps
from dualmpi.errors import RankCountError
from dualmpi.simulator import simulate
from dualmpi.topology import DualCube, from_spec

MPI = pytest.importorskip("mpi4py.MPI")


def _specs_for(size, with_metacube=False):
    """Return the topology specs whose node count is ``size``."""
    n = size.bit_length() - 1
    if 1 << n != size:
        return []
    specs = [f"hypercube:n={n}"]
    if n % 2 == 1:
        specs.append(f"dualcube:r={(n + 1) // 2}")
        if with_metacube and n >= 3:
            specs.append(f"metacube:k=1,m={(n - 1) // 2}")
    if with_metacube and n == 6:
        specs.append("metacube:k=2,m=1")
    return specs


def _agree(ok, comm=None):
    """Return True when ``ok`` holds on every rank (collective)."""
    comm = comm or MPI.COMM_WORLD
    return bool(comm.allreduce(1 if ok else 0, op=MPI.MIN))


def _comm(topo, q=None, **options):
    from dualmpi import Comm

    return Comm(MPI.COMM_WORLD, topo, q, **options)


def _run(net, collective, size, root=0, iters=1):
    from dualmpi.measure.collective import run_collective

    return run_collective(net, collective, size, root, iters, 0)


@pytest.mark.mpi(min_size=1)
def test_graph_comm_edges_are_the_links():
    """One node per rank: the graph communicator's edges are exactly the topology's links."""
    world = MPI.COMM_WORLD
    specs = _specs_for(world.Get_size(), with_metacube=True)
    assert specs, "run with a power-of-two number of ranks"
    for spec in specs:
        topo = from_spec(spec)
        net = _comm(topo)
        g = net._transport.graph
        sources, dests, _ = g.Get_dist_neighbors()
        me = g.Get_rank()
        mine = sorted(topo.neighbors(me))
        ok = (me == world.Get_rank() and sorted(sources) == mine and sorted(dests) == mine
              and g.Get_topology() == MPI.DIST_GRAPH)
        net.Free()
        assert _agree(ok), spec


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("size", [0, 1, 65536])
def test_collective_verified(collective, size):
    world = MPI.COMM_WORLD
    for spec in _specs_for(world.Get_size(), with_metacube=True):
        topo = from_spec(spec)
        root = world.Get_size() - 1
        sched = build_schedule(collective, topo, root)
        net = _comm(topo)
        row = _run(net, collective, size, root)
        net.Free()
        want_rounds = paper_steps(collective, topo)
        if isinstance(topo, DualCube) and topo.r == 1 and collective != "alltoall":
            want_rounds = 1  # F_1 is one link: the cluster rounds are empty
        ok = (row["verified"] and row["messages"] == sched.num_messages
              and row["delivered"] == row["expected"]
              and row["rounds"] == want_rounds and row["hop_rounds"] == sched.num_rounds)
        assert _agree(ok), (spec, row)


@pytest.mark.mpi(min_size=8)
@pytest.mark.parametrize("collective", ["bcast", "scatter"])
def test_every_root(collective):
    world = MPI.COMM_WORLD
    if world.Get_size() != 8:
        pytest.skip("every root is checked at 8 ranks")
    for spec in _specs_for(8):
        net = _comm(from_spec(spec))
        results = [_run(net, collective, 64, root)["verified"] for root in range(8)]
        net.Free()
        assert _agree(all(results)), spec


@pytest.mark.mpi(min_size=1)
def test_wrong_rank_count_raises_on_every_rank():
    """More ranks than nodes, or a block that does not add up: RankCountError on every rank."""
    world = MPI.COMM_WORLD
    try:
        if world.Get_size() == 1:
            _comm(from_spec("hypercube:n=3"), 3)
        else:
            _comm(from_spec("hypercube:n=0"))
        raised = False
    except RankCountError as exc:
        raised = "ranks" in str(exc)
    assert _agree(raised)


@pytest.mark.mpi(min_size=8)
@pytest.mark.parametrize("packets", [1, 3])
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_pipelined_and_whole_blocks(collective, packets):
    """Whole blocks (store-and-forward) and blocks cut into 3 pieces forwarded as they arrive
    (cut-through): the same data, the same link messages; the virtual clocks give the
    schedule's coefficients."""
    from dualmpi.engine.virtual import replay_clocks

    world = MPI.COMM_WORLD
    for spec in _specs_for(world.Get_size(), with_metacube=True):
        topo = from_spec(spec)
        sched = build_schedule(collective, topo, 0)
        net = _comm(topo, packets=packets)
        row = _run(net, collective, 100)
        net.Free()
        model = simulate(topo, collective, 0)["model"]
        clocks = replay_clocks(sched, 100)
        ok = (row["verified"] and row["packets"] == packets
              and {k: clocks[k] for k in ("ts", "tw", "th")} == model
              and row["messages"] == sched.num_messages and row["hop_rounds"] == sched.num_rounds)
        assert _agree(ok), (spec, row)


@pytest.mark.mpi(min_size=8)
def test_crc_option_checks_every_message():
    world = MPI.COMM_WORLD
    for spec in _specs_for(world.Get_size())[:1]:
        net = _comm(from_spec(spec), verify=True)
        rows = [_run(net, c, 33) for c in COLLECTIVES]
        net.Free()
        assert _agree(all(r["verified"] and r["checksum_failures"] == 0 for r in rows)), rows


@pytest.mark.mpi(min_size=32)
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_collectives_survive_link_faults(collective, seed):
    """Two random failed links (degree - 1 of the dual-cube F_3 / MC(2,1)): every block arrives,
    over detours, and no failed link carries anything."""
    from dualmpi.topology.faults import parse_faults

    world = MPI.COMM_WORLD
    spec = {32: "dualcube:r=3", 64: "metacube:k=2,m=1"}.get(world.Get_size())
    if spec is None:
        pytest.skip("run at 32 or 64 ranks")
    topo = parse_faults(from_spec(spec), random_links=2, seed=seed)
    net = _comm(topo)
    row = _run(net, collective, 32, 1)
    failed = {tuple(sorted(x)) for x in topo.failed_links}
    used = {tuple(sorted(key)) for key in net.stats()["links"]}
    net.Free()
    assert _agree(row["verified"] and not used & failed), row


# -- several nodes per rank ------------------------------------------------------------------------
SPECS = ["dualcube:r=3", "metacube:k=2,m=1"]


def _skip_unless_several_nodes_per_rank(topo, world):
    """These tests need several nodes per rank; beyond 8 oversubscribed ranks they only slow CI."""
    size = world.Get_size()
    if topo.num_nodes % size or topo.num_nodes == size or size > 8:
        pytest.skip("run at 2 and 8 ranks (several nodes on every rank)")


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_many_nodes_per_rank(spec, collective):
    """A rank plays a block of nodes; moves between its own nodes are counted like the rest."""
    world = MPI.COMM_WORLD
    topo = from_spec(spec)
    _skip_unless_several_nodes_per_rank(topo, world)
    sched = build_schedule(collective, topo, 0)
    net = _comm(topo)
    row = _run(net, collective, 24)
    net.Free()
    ok = row["verified"] and row["messages"] == sched.num_messages and row["delivered"] > 0
    assert _agree(ok), row


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("spec", SPECS + ["dualcube:r=4", "hypercube:n=6"])
def test_total_exchange_many_nodes_per_rank(spec):
    world = MPI.COMM_WORLD
    topo = from_spec(spec)
    _skip_unless_several_nodes_per_rank(topo, world)
    net = _comm(topo)
    row = _run(net, "alltoall", 40)
    net.Free()
    sim = simulate(topo, "alltoall")
    p = topo.num_nodes
    ok = (row["verified"] and row["delivered"] == p * (p - 1)
          and row["messages"] == sim["link_transfers"] and row["hop_rounds"] == sim["model"]["th"])
    assert _agree(ok), row


@pytest.mark.mpi(min_size=2)
def test_uneven_block_mapping_is_refused_on_every_rank():
    world = MPI.COMM_WORLD
    topo = from_spec(f"hypercube:n={world.Get_size().bit_length() + 1}")  # at least 2 nodes a rank
    try:
        _comm(topo, 3)
        raised = False
    except RankCountError as exc:
        raised = "nodes each play" in str(exc)
    assert _agree(raised)
