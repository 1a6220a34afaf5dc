"""MPI tests: one node per rank; run with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi``.

Every test lets all ranks finish their communication, then the ranks agree on the
verdict with an allreduce before asserting, so a failure on one rank cannot hang
the others.
"""

import numpy as np
import pytest

from dualmpi.collectives import COLLECTIVES, build_schedule, paper_steps
from dualmpi.errors import LinkError, RankCountError
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


@pytest.mark.mpi(min_size=1)
def test_graph_comm_matches_topology():
    from dualmpi.executors.mpi import graph_comm

    world = MPI.COMM_WORLD
    specs = _specs_for(world.Get_size(), with_metacube=True)
    assert specs, "run with a power-of-two number of ranks"
    for spec in specs:
        topo = from_spec(spec)
        g = graph_comm(world, topo)
        sources, dests, _ = g.Get_dist_neighbors()
        me = g.Get_rank()
        mine = list(topo.neighbors(me))
        everyone = world.allgather(sorted(dests))
        symmetric = all(
            (u in everyone[v]) == (v in everyone[u])
            for u in range(topo.num_nodes) for v in range(topo.num_nodes)
        )
        ok = (me == world.Get_rank() and list(sources) == mine and list(dests) == mine
              and symmetric and g.Get_topology() == MPI.DIST_GRAPH)
        g.Free()
        assert _agree(ok), spec


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("size", [0, 1, 65536])
def test_collective_verified(collective, size):
    from dualmpi.executors.mpi import LinkComm, run_schedule

    world = MPI.COMM_WORLD
    for spec in _specs_for(world.Get_size(), with_metacube=True):
        topo = from_spec(spec)
        root = topo.num_nodes - 1
        sched = build_schedule(collective, topo, root)
        link = LinkComm(world, topo)
        row = run_schedule(link, sched, size, iters=1, warmup=0)
        link.free()
        want_rounds = paper_steps(collective, topo)
        if isinstance(topo, DualCube) and topo.r == 1 and collective != "alltoall":
            want_rounds = 1  # F_1 is one link: the cluster rounds are empty
        ok = (row["verified"] and row["link_violations"] == 0
              and row["messages"] == sched.num_messages
              and row["delivered"] == row["expected"]
              and row["rounds"] == want_rounds and row["hop_rounds"] == sched.num_rounds)
        assert _agree(ok), (spec, row)


@pytest.mark.mpi(min_size=8)
@pytest.mark.parametrize("collective", ["bcast", "scatter"])
def test_every_root(collective):
    from dualmpi.executors.mpi import LinkComm, run_schedule

    world = MPI.COMM_WORLD
    if world.Get_size() != 8:
        pytest.skip("every root is checked at 8 ranks")
    for spec in _specs_for(8):
        topo = from_spec(spec)
        link = LinkComm(world, topo)
        results = [run_schedule(link, build_schedule(collective, topo, root), 64)["verified"]
                   for root in range(topo.num_nodes)]
        link.free()
        assert _agree(all(results)), spec


@pytest.mark.mpi(min_size=2)
def test_non_neighbour_send_raises_on_sender():
    from dualmpi.executors.mpi import LinkComm

    world = MPI.COMM_WORLD
    topo = from_spec(_specs_for(world.Get_size())[-1])
    link = LinkComm(world, topo)
    me = link.node
    strangers = [v for v in range(topo.num_nodes) if v != me and not topo.is_link(me, v)]
    raised = True
    if strangers:
        try:
            link.isend(np.zeros(4, dtype=np.uint8), strangers[0], 0)
            raised = False
        except LinkError as exc:
            raised = str(me) in str(exc) and str(strangers[0]) in str(exc)
    sent = sum(link.link_messages.values())
    link.free()
    assert _agree(raised and sent == 0)


@pytest.mark.mpi(min_size=1)
def test_wrong_rank_count_raises_on_every_rank():
    from dualmpi.executors.mpi import graph_comm

    world = MPI.COMM_WORLD
    wrong = DualCube(3) if world.Get_size() != 32 else DualCube(2)
    try:
        graph_comm(world, wrong)
        raised = False
    except RankCountError as exc:
        raised = f"mpiexec -n {wrong.num_nodes}" in str(exc)
    assert _agree(raised)


@pytest.mark.mpi(min_size=8)
@pytest.mark.parametrize("switching", ["store-and-forward", "cut-through"])
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_virtual_clock_and_switching(collective, switching):
    """The clocks carried by real messages give the schedule's coefficients; packets pipeline."""
    from dualmpi.executors.mpi import LinkComm, run_schedule
    from dualmpi.executors.options import make_options
    from dualmpi.simulator import simulate_schedule

    world = MPI.COMM_WORLD
    opts = make_options(None, switching, 3, "ts=1e-5,tw=1e-9,th=1e-6")
    for spec in _specs_for(world.Get_size(), with_metacube=True):
        topo = from_spec(spec)
        sched = build_schedule(collective, topo, 0)
        link = LinkComm(world, topo)
        row = run_schedule(link, sched, 100, iters=1, warmup=0, options=opts)
        link.free()
        model = simulate_schedule(sched)["model"]
        ok = (row["verified"] and {k: row["virtual"][k] for k in ("ts", "tw", "th")} == model
              and row["messages"] == sched.num_messages and row["hop_rounds"] == sched.num_rounds
              and row["virtual"]["time"] > 0)
        assert _agree(ok), (spec, row)


@pytest.mark.mpi(min_size=32)
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_collectives_survive_link_faults(collective, seed):
    """Two random failed links (degree - 1 of the dual-cube F_3 / MC(2,1)): every block arrives,
    over detours, and no failed link carries anything."""
    from dualmpi.executors.mpi import LinkComm, run_schedule
    from dualmpi.topology.faults import parse_faults

    world = MPI.COMM_WORLD
    spec = {32: "dualcube:r=3", 64: "metacube:k=2,m=1"}.get(world.Get_size())
    if spec is None:
        pytest.skip("run at 32 or 64 ranks")
    topo = parse_faults(from_spec(spec), random_links=2, seed=seed)
    link = LinkComm(world, topo)
    row = run_schedule(link, build_schedule(collective, topo, 1), 32)
    failed = {tuple(sorted(x)) for x in topo.failed_links}
    used = {tuple(sorted(key)) for key in link.link_messages}
    link.free()
    assert _agree(row["verified"] and not used & failed), row
