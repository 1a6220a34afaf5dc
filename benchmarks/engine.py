"""Engine benchmark: dualmpi.Comm against the floor, native MPI and the engine before issue 13.

Run under mpiexec, one rank per node, e.g.::

    mpiexec -n 8 python -m mpi4py benchmarks/engine.py dualcube:r=2 \\
        --json benchmarks/results/engine_dualcube_r2_np8.json --before

For every collective and block size it times, interleaved within each repeat and
starting each repeat with the next variant (A B C D, B C D A, ...; the job's first row after
``--warmup`` seconds of its calls untimed):

* ``dualmpi``: the public call (``net.Alltoall(send, recv)``): argument checks, copy
  in, the compiled plan's rounds, copy out;
* ``floor``: the same compiled plan — the very persistent requests the call runs (its
  zero-copy binding where it has one, with the copy of the rank's own block that binding
  needs) — run by the smallest loop (``benchmarks/floor.py``): the engine's compiled C
  loop called directly where it is built, and ``floor-python``, the same loop in Python;
  ``floor-rounds``, where the call copies its own block, the rounds alone;
* ``checked`` (``--layers``): the floor's C loop with the flags the call itself passes
  (a new call number, the trailers checked, the call counted, every round also waiting on
  the alarm line), so ``checked/floor`` is what those checks cost in C and
  ``dualmpi/checked`` what the Python call around the C loop costs (with, below
  ``calls.ZERO_COPY_ABOVE``, the copies in and out of the store);
* ``floor-merged``: for a repeated v-variant, which sends its count table in its plan's
  messages (``dualmpi.engine.plan.merge``; zero-copy from 32 KiB moved by a rank), the
  merged plan in the same smallest loop, so ``floor-merged/floor`` is what the count
  table's agreement costs and ``dualmpi/floor-merged`` what the call adds to the plan it runs;
* ``native``: the MPI library's own collective on the same buffers;
* ``native-schedule``: native MPI on the same schedule's messages — the plan's messages
  sent as a plain mpi4py program would (``Irecv``/``Isend`` per round, ``Waitall``:
  ``floor.schedule_loop``), so ``native-schedule/native`` is what the network's schedule
  costs against MPI's own algorithm, and ``floor/native-schedule`` what persistent requests
  and the C loop save;
* ``before`` (``--before``): the per-message engine dualmpi had before the compiled
  plans (commit 4043cad, extracted with ``git archive``), on the same schedule;
* ``against`` (``--against COMMIT``): ``dualmpi.Comm`` of another commit (extracted the
  same way) on the same buffers, e.g. the commit before a change, so a change's
  before/after is timed in one run.

``--collectives`` also takes the in-place calls (``IN_PLACE``) and v-variants whose counts
change on every call (``CHANGING``: ``alltoallv_changing`` alternates the equal counts and
every count one byte less, on the same buffers; the floor is then the last call's plan), and
calls that alternate between two sets of buffers (``ALTERNATING``: ``alltoall_alternating``,
the same plan on the buffers and on copies of them, in turn), and calls whose buffers are
specs written in the call (``SPECS``: ``alltoall_spec`` passes ``[buf, MPI.BYTE]``, a new list
every call), calls on a new view of each buffer every call (``VIEWS``: ``alltoall_views``
passes ``send[:]`` and ``recv[:]``, as a program slicing its arrays in the call does;
``ialltoall_views`` the same, started and waited for), both at once (``SPEC_VIEWS``:
``alltoall_specviews`` passes ``[send[:], MPI.BYTE]``), and
v-variants whose counts never repeat (``FRESH``: ``alltoallv_fresh`` takes
each call's counts from the next of :data:`FRESH_TABLES` tables, more than the engine keeps
plans for, every count 1 to 250 bytes less than the block: a program whose counts depend on
its data, as a sample sort's do).

``--collectives nonblocking`` times the nonblocking form of every collective of ``all``
(``NONBLOCKING``: ``ibcast`` is ``net.Ibcast(buf, 0).Wait()`` against
``MPI.COMM_WORLD.Ibcast(buf, 0).Wait()``), with the blocking form's plan as its floor and
native schedule (the same schedule); ``--collectives neighbor`` the neighbourhood
collectives, blocking and nonblocking (``NEIGHBOR``: ``neighbor_alltoall`` is
``net.Neighbor_alltoall``), against MPI's own on a distributed graph of ``MPI.COMM_WORLD``
with the same neighbours (``net.Get_dist_neighbors()``): one message per link, no plan, so
no floor.

A repeat times ``k`` calls, each after a barrier (OSU method; with ``--in-a-row`` one barrier,
then the ``k`` calls one after the other, as a program's loop runs them), and keeps the largest
per-rank mean; the table gives the median over repeats and the ratios.  The results
of ``dualmpi`` are checked against ``native`` before anything is timed.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dualmpi  # noqa: E402
from dualmpi.collectives import COLLECTIVES  # noqa: E402
from dualmpi.engine import cloop  # noqa: E402
from dualmpi.topology import from_spec  # noqa: E402
from floor import floor_loop, neighbor_loop, python_loop, schedule_loop  # noqa: E402
from results_io import run_meta, write_results  # noqa: E402

BEFORE = "4043cad"


def calls_for(size):
    """Calls per repeat: fewer for large blocks."""
    return 20 if size <= 1024 else 10 if size <= 65536 else 4


#: Every collective the benchmark times (``--collectives all``): the papers' four, then the
#: rest of MPI's (v-variants with equal counts; reductions on doubles with MPI.SUM).
ALL = ("bcast", "scatter", "allgather", "alltoall", "gather", "scatterv", "gatherv",
       "allgatherv", "alltoallv", "alltoallw", "allreduce", "reduce", "scan", "exscan",
       "reduce_scatter_block", "reduce_scatter", "barrier")
_REDUCING = ("allreduce", "reduce", "scan", "exscan", "reduce_scatter_block", "reduce_scatter")
#: Also timed when asked for (``--collectives nonblocking``, or by name): the nonblocking form
#: of each of :data:`ALL`, started and waited for (``net.Ibcast(buf, 0).Wait()``), against MPI's
#: own nonblocking form; the floor is the blocking form's plan (the same schedule).
NONBLOCKING = tuple("i" + c for c in ALL)
#: Also timed when asked for (``--collectives neighbor``, or by name): the neighbourhood
#: collectives over the network's links (``net.Neighbor_allgather``), against MPI's own on a
#: distributed graph of ``MPI.COMM_WORLD`` with the same neighbours, blocking and nonblocking.
#: They run no compiled plan: no floor, and the native schedule is MPI's own call.
NEIGHBOR = ("neighbor_allgather", "neighbor_allgatherv", "neighbor_alltoall",
            "neighbor_alltoallv", "neighbor_alltoallw")
NEIGHBOR += tuple("i" + c for c in NEIGHBOR)
#: Also timed when asked for (not in ``all``): ``MPI.IN_PLACE`` calls, the data in the receive
#: buffer (the allreduce with MPI.MAX, so that repeated calls leave the data as it is).
IN_PLACE = ("allgather_in_place", "allreduce_in_place")
#: Also timed when asked for: v-variants whose counts change on every call, the same buffers:
#: every count one byte less on every other call (a program whose counts never repeat).
CHANGING = ("scatterv_changing", "gatherv_changing", "allgatherv_changing",
            "alltoallv_changing")
#: Also timed when asked for: v-variants whose counts never repeat (see :func:`fresh_call`).
FRESH = ("scatterv_fresh", "gatherv_fresh", "allgatherv_fresh", "alltoallv_fresh")
#: Count tables a ``*_fresh`` call cycles through: more than the engine's plan cache holds
#: (``dualmpi.engine.core.CACHE_SIZE``), so no call finds its plan made.
FRESH_TABLES = 97
#: Also timed when asked for: calls alternating between two sets of buffers (a program that
#: swaps its arrays, ``a, b = b, a``), the second a copy of the first.
ALTERNATING = ("bcast_alternating", "alltoall_alternating", "allgather_alternating",
               "allreduce_alternating")
#: Also timed when asked for: the buffers passed as specs written in the call
#: (``[buf, MPI.BYTE]``, a new list every call), as mpi4py programs often do.
SPECS = ("bcast_spec", "alltoall_spec", "allgather_spec", "allreduce_spec")
#: Also timed when asked for: a new view of each buffer every call (``buf[:]``: new array
#: objects of the same shape, as ``a[i:j]`` or ``np.empty_like(x)`` in the call are).
VIEWS = ("bcast_views", "alltoall_views", "allgather_views", "allreduce_views",
         "ibcast_views", "ialltoall_views", "iallgather_views", "iallreduce_views")
#: Also timed when asked for: specs of a new view of each buffer every call
#: (``[buf[:], MPI.BYTE]``, as ``[np.empty(n), MPI.DOUBLE]`` in the call is).
SPEC_VIEWS = ("bcast_specviews", "alltoall_specviews", "allgather_specviews",
              "allreduce_specviews")


def base(coll):
    """The collective a name times (without ``_changing``, ``_alternating``, ``_spec``,
    ``_views``, ``_specviews`` or ``_fresh``; a nonblocking form's blocking one)."""
    for suffix in ("_changing", "_alternating", "_specviews", "_spec", "_views", "_fresh"):
        coll = coll.removesuffix(suffix)
    if coll in NONBLOCKING or coll in NEIGHBOR and coll.startswith("i"):
        coll = coll[1:]
    return coll


class Waited:
    """``target`` whose collective methods are its nonblocking ones, waited for: ``Bcast(...)``
    is ``target.Ibcast(...).Wait()`` (the methods looked up once, as attributes)."""

    def __init__(self, target, names):
        self.target = target
        for name in names:
            start = getattr(target, "I" + name.lower())
            setattr(self, name, lambda *args, _start=start, **kw: _start(*args, **kw).Wait())

    def __getattr__(self, name):  # (not the methods above: they are attributes)
        return getattr(self.target, name)


#: The method names :func:`api_call` calls (a :class:`Waited` target's).
METHODS = ("Barrier", "Bcast", "Scatter", "Gather", "Allgather", "Alltoall", "Scatterv",
           "Gatherv", "Allgatherv", "Alltoallv", "Alltoallw", "Allreduce", "Reduce", "Scan",
           "Exscan", "Reduce_scatter_block", "Reduce_scatter")
NEIGHBOR_METHODS = ("Neighbor_allgather", "Neighbor_allgatherv", "Neighbor_alltoall",
                    "Neighbor_alltoallv", "Neighbor_alltoallw")


def degree(target):
    """The number of neighbours of this rank on ``target`` (a dualmpi.Comm or a graph
    communicator): its neighbourhood collectives' blocks."""
    return target.Get_dist_neighbors_count()[0]


def fresh_call(target, coll, send, recv):
    """Return a function calling v-variant ``coll`` with the next of :data:`FRESH_TABLES`
    count tables each time (the same tables on every rank, every count 1 to
    ``min(block, 250)`` bytes less than the block; the buffers' views made beforehand)."""
    ranks, me = target.Get_size(), target.Get_rank()
    piece = send.size // ranks if coll in ("scatterv", "alltoallv") else send.size
    less = [np.random.default_rng([7, t]).integers(1, min(piece, 250) + 1, (ranks, ranks))
            if piece > 1 else np.zeros((ranks, ranks), np.int64) for t in range(FRESH_TABLES)]
    calls = []
    for d in less:
        counts = [int(c) for c in piece - d[0]]  # (rooted and gathered: row 0 of the table)
        if coll == "alltoallv":
            calls.append((target.Alltoallv, ([send, [int(c) for c in piece - d[me]]],
                                             [recv, [int(c) for c in piece - d[:, me]]])))
        elif coll == "scatterv":
            calls.append((target.Scatterv, ([send, counts], recv[:counts[me]], 0)))
        elif coll == "gatherv":
            calls.append((target.Gatherv, (send[:counts[me]], [recv, counts], 0)))
        else:
            calls.append((target.Allgatherv, (send[:counts[me]], [recv, counts])))
    turn = [-1]

    def fresh():
        turn[0] = (turn[0] + 1) % len(calls)
        method, args = calls[turn[0]]
        method(*args)
    return fresh


def buffers(coll, ranks, size, rng):
    """Return ``(send, recv)`` for one collective at one block size (uint8; doubles to reduce)."""
    coll = base(coll)

    def data(n):
        return rng.integers(0, 255, n, dtype=np.uint8)

    if coll == "barrier":
        return None, None
    if coll == "bcast":
        return data(size), None
    if coll.startswith("neighbor_"):  # (ranks: this rank's neighbours)
        gathers = coll.startswith("neighbor_allgather")
        return data(size if gathers else size * ranks), np.zeros(size * ranks, np.uint8)
    if coll in ("scatter", "scatterv"):
        return data(size * ranks), np.zeros(size, np.uint8)
    if coll in ("gather", "gatherv", "allgather", "allgatherv"):
        return data(size), np.zeros(size * ranks, np.uint8)
    if coll == "allgather_in_place":  # this rank's piece in its place in the receive buffer
        return None, data(size * ranks)
    if coll == "allreduce_in_place":
        return None, rng.integers(0, 100, max(1, size // 8)).astype(np.float64)
    if coll in _REDUCING:  # doubles of integer values (sums exact in any order), MPI.SUM
        n = max(1, size // 8)
        if coll in ("reduce_scatter_block", "reduce_scatter"):
            return rng.integers(0, 100, n * ranks).astype(np.float64), np.zeros(n)
        return rng.integers(0, 100, n).astype(np.float64), np.zeros(n)
    return data(size * ranks), np.zeros(size * ranks, np.uint8)


def api_call(target, coll, send, recv, less=0):
    """Return a function calling ``coll`` on ``target`` (a dualmpi.Comm or an MPI communicator).

    ``less``: a v-variant's counts that many bytes less than the buffers'."""
    if coll in NONBLOCKING or coll in NEIGHBOR and coll.startswith("i"):
        methods = NEIGHBOR_METHODS if coll in NEIGHBOR else METHODS
        return api_call(Waited(target, methods), coll[1:], send, recv, less)
    if coll.startswith("neighbor_"):
        return neighbor_call(target, coll, send, recv)
    ranks = target.Get_size()
    if coll.endswith("_fresh"):
        return fresh_call(target, base(coll), send, recv)
    if coll.endswith("_changing"):  # the counts of the equal-count call, then one byte less
        calls = [api_call(target, coll.removesuffix("_changing"), send, recv, less)
                 for less in (0, 1)]
        turn = [1]

        def changing():
            turn[0] ^= 1
            calls[turn[0]]()
        return changing
    if coll.endswith("_alternating"):  # these buffers, then copies of them, in turn
        calls = [api_call(target, base(coll), send, recv),
                 api_call(target, base(coll), None if send is None else send.copy(),
                          None if recv is None else recv.copy())]
        turn = [1]

        def alternating():
            turn[0] ^= 1
            calls[turn[0]]()
        return alternating
    if coll.endswith("_specviews"):  # [buf[:], datatype]: a new list and view every call
        kind = base(coll)
        t = MPI.DOUBLE if kind in _REDUCING else MPI.BYTE
        if kind == "bcast":
            return lambda: target.Bcast([send[:], t], 0)
        if kind == "allreduce":
            return lambda: target.Allreduce([send[:], t], [recv[:], t], MPI.SUM)
        method = getattr(target, kind.capitalize())
        return lambda: method([send[:], t], [recv[:], t])
    if coll.endswith("_spec"):  # [buf, datatype], a new list every call
        kind = base(coll)
        t = MPI.DOUBLE if kind in _REDUCING else MPI.BYTE
        if kind == "bcast":
            return lambda: target.Bcast([send, t], 0)
        if kind == "allreduce":
            return lambda: target.Allreduce([send, t], [recv, t], MPI.SUM)
        method = getattr(target, kind.capitalize())
        return lambda: method([send, t], [recv, t])
    if coll.endswith("_views"):  # a new view of each buffer every call
        kind = base(coll)
        if coll.removesuffix("_views") in NONBLOCKING:  # started and waited for
            target = Waited(target, METHODS)
        if kind == "bcast":
            return lambda: target.Bcast(send[:], 0)
        if kind == "allreduce":
            return lambda: target.Allreduce(send[:], recv[:], MPI.SUM)
        method = getattr(target, kind.capitalize())
        return lambda: method(send[:], recv[:])
    if coll == "barrier":
        return lambda: target.Barrier()
    if coll == "bcast":
        return lambda: target.Bcast(send, 0)
    if coll == "scatter":
        return lambda: target.Scatter(send, recv, 0)
    if coll == "gather":
        return lambda: target.Gather(send, recv, 0)
    if coll == "allgather":
        return lambda: target.Allgather(send, recv)
    if coll == "alltoall":
        return lambda: target.Alltoall(send, recv)
    if coll in ("scatterv", "gatherv", "allgatherv"):
        piece = send.size // ranks if coll == "scatterv" else send.size
        counts = [piece - less] * ranks
        if coll == "scatterv":
            mine = recv[:piece - less] if less else recv
            return lambda: target.Scatterv([send, counts], mine, 0)
        mine = send[:piece - less] if less else send
        if coll == "gatherv":
            return lambda: target.Gatherv(mine, [recv, counts], 0)
        return lambda: target.Allgatherv(mine, [recv, counts])
    if coll == "alltoallv":
        counts = [send.size // ranks - less] * ranks
        return lambda: target.Alltoallv([send, counts], [recv, counts])
    if coll == "alltoallw":  # counts of MPI.BYTE, displacements in bytes
        piece = send.size // ranks
        spec = [[piece] * ranks, [piece * i for i in range(ranks)], [MPI.BYTE] * ranks]
        return lambda: target.Alltoallw([send] + spec, [recv] + spec)
    if coll == "reduce_scatter":
        counts = [recv.size] * ranks
        return lambda: target.Reduce_scatter(send, recv, counts, MPI.SUM)
    if coll == "allgather_in_place":
        return lambda: target.Allgather(MPI.IN_PLACE, recv)
    if coll == "allreduce_in_place":
        return lambda: target.Allreduce(MPI.IN_PLACE, recv, op=MPI.MAX)
    method = {"allreduce": "Allreduce", "reduce": "Reduce", "scan": "Scan", "exscan": "Exscan",
              "reduce_scatter_block": "Reduce_scatter_block"}[coll]
    if coll == "reduce":
        return lambda: target.Reduce(send, recv, root=0)
    return lambda: getattr(target, method)(send, recv)


def neighbor_call(target, coll, send, recv):
    """Return a function calling neighbourhood collective ``coll`` on ``target`` (a
    dualmpi.Comm or a distributed-graph communicator of as many neighbours): blocks of equal
    size, one per neighbour (of ``MPI.BYTE``, displacements in bytes for the ``w`` form)."""
    d = degree(target)
    piece = recv.size // d
    counts, displs = [piece] * d, [piece * i for i in range(d)]
    if coll == "neighbor_allgather":
        return lambda: target.Neighbor_allgather(send, recv)
    if coll == "neighbor_allgatherv":
        return lambda: target.Neighbor_allgatherv(send, [recv, counts])
    if coll == "neighbor_alltoall":
        return lambda: target.Neighbor_alltoall(send, recv)
    if coll == "neighbor_alltoallv":
        return lambda: target.Neighbor_alltoallv([send, counts], [recv, counts])
    spec = [counts, displs, [MPI.BYTE] * d]
    return lambda: target.Neighbor_alltoallw([send] + spec, [recv] + spec)


def neighbor_row(net, graph, coll, size, repeats, rng, world, against=None, in_a_row=False):
    """Time neighbourhood collective ``coll`` of blocks of ``size`` bytes on ``net``, on
    ``graph`` (MPI's own, the same neighbours) and on ``against`` (``dualmpi.Comm`` of
    another commit, if given); check the results first; return the row."""
    d = degree(net)
    send, recv = buffers(coll, d, size, rng)
    send2, recv2 = send.copy(), np.zeros_like(recv)
    variants = {"dualmpi": api_call(net, coll, send, recv),
                "native": api_call(graph, coll, send2, recv2)}
    outs = [recv]
    if against is not None:
        recv3 = np.zeros_like(recv)
        variants["against"] = api_call(against, coll, send.copy(), recv3)
        outs.append(recv3)
    for call in variants.values():
        call()
    if not world.allreduce(int(all(np.array_equal(out, recv2) for out in outs)), op=MPI.MIN):
        raise SystemExit(f"{coll} {size}: dualmpi differs from native MPI")
    k = calls_for(size * d)
    times = time_interleaved(variants, k, repeats, world, in_a_row)
    med = {name: statistics.median(ts) for name, ts in times.items()}
    row = {"collective": coll, "size": size, "calls_per_repeat": k, "neighbors": d,
           "times": times, "median": med, "dualmpi/native": med["dualmpi"] / med["native"]}
    if against is not None:
        row["dualmpi/against"] = med["dualmpi"] / med["against"]
    return row


def same_results(coll, rank, send, send2, recv, recv2):
    """True when dualmpi's results equal native MPI's (what MPI defines of them)."""
    coll = base(coll)
    if coll == "barrier":
        return True
    if coll == "bcast":
        return np.array_equal(send, send2)
    if coll in ("gather", "gatherv", "reduce") and rank != 0:
        return True  # nothing is defined off the root
    if coll == "exscan" and rank == 0:
        return True  # undefined on rank 0
    return np.array_equal(recv, recv2)


def extract(world, commit, name):
    """Extract package ``dualmpi`` of ``commit`` as package ``name`` and put it on the path.

    Rank 0 runs ``git archive`` into a temporary folder and tells the others where it is.
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    where = None
    if world.Get_rank() == 0:
        where = tempfile.mkdtemp(prefix=f"{name}-")
        tar = subprocess.run(["git", "-C", root, "archive", commit, "dualmpi"],
                             check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", where], input=tar, check=True)
        os.rename(os.path.join(where, "dualmpi"), os.path.join(where, name))
    where = world.bcast(where, root=0)
    sys.path.insert(0, where)


def load_before(world):
    """Import the engine of commit ``BEFORE`` as ``dualmpi_before``."""
    extract(world, BEFORE, "dualmpi_before")
    import dualmpi_before.executors.mpi as old
    from dualmpi_before.collectives import build_schedule as old_build
    from dualmpi_before.executors.inprocess import initial_store
    from dualmpi_before.topology import from_spec as old_spec
    return old, old_build, initial_store, old_spec


def load_against(world, commit):
    """Import ``dualmpi`` of ``commit`` as ``dualmpi_against``."""
    extract(world, commit, "dualmpi_against")
    import dualmpi_against

    return dualmpi_against


def before_call(old, topo_spec, coll, size):
    """Return ``(call, cleanup)`` for the old engine running ``coll`` once on fresh data."""
    mod, old_build, initial_store, old_spec = old
    topo = old_spec(topo_spec)
    link = mod.LinkComm(MPI.COMM_WORLD, topo)
    sched = old_build(coll, topo, 0)
    engine = mod.NodeEngine(link, sched, size, None)
    stats = mod.MPIRunStats(active_rounds=np.zeros(sched.num_rounds, dtype=np.int8))
    store = initial_store(coll, topo, 0, link.node, size)

    def call():
        engine.run(dict(store), stats)

    def cleanup():
        engine.watchdog.close()
        link.free()
    return call, cleanup


def detach(net, runner):
    """Take ``runner`` out of the engine's plan cache (True), so that the ``*_fresh`` calls'
    new plans, which evict the oldest, do not free the requests the floor runs."""
    bound = net._engine._bound
    for key in [key for key, run in bound.items() if run is runner]:
        del bound[key]
    return True


#: Seconds the job's first timed row runs its variants untimed first (``--warmup``): a job's
#: first row read erratic in every variant (on Q_1 one repeat in three 2-5x the others: the
#: ranks still settling after the launch), every later row not.
FIRST_ROW_WARMUP = [0.0]


def time_interleaved(variants, k, repeats, world, in_a_row=False):
    """Return ``{name: [time per repeat]}``: every variant warmed up once (the job's first row:
    for :data:`FIRST_ROW_WARMUP` seconds, on every rank alike), then timed
    (:func:`time_calls`, ``k`` calls) once per repeat, each repeat starting with the next
    variant so that none always follows the slow one."""
    times = {name: [] for name in variants}
    for call in variants.values():  # warm-up
        call()
    warmup, FIRST_ROW_WARMUP[0] = FIRST_ROW_WARMUP[0], 0.0
    t0 = MPI.Wtime()
    while warmup > 0 and world.allreduce(int(MPI.Wtime() - t0 < warmup), op=MPI.MAX):
        for call in variants.values():
            for _ in range(k):
                call()
    order = list(variants.items())
    for rep in range(repeats):
        for name, call in order[rep % len(order):] + order[:rep % len(order)]:
            times[name].append(time_calls(call, k, world, in_a_row))
    return times


def time_calls(call, k, world, in_a_row=False):
    """Return the largest per-rank mean time of ``k`` calls, each after a barrier (``in_a_row``:
    one barrier, then the ``k`` calls one after the other)."""
    if in_a_row:
        world.Barrier()
        t0 = MPI.Wtime()
        for _ in range(k):
            call()
        return world.allreduce((MPI.Wtime() - t0) / k, op=MPI.MAX)
    total = 0.0
    for _ in range(k):
        world.Barrier()
        t0 = MPI.Wtime()
        call()
        total += MPI.Wtime() - t0
    return world.allreduce(total / k, op=MPI.MAX)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec")
    parser.add_argument("--json", required=True)
    parser.add_argument("--sizes", default="8,1024,65536,1048576")
    parser.add_argument("--collectives", default=",".join(COLLECTIVES),
                        help="comma-separated, of " + ", ".join(ALL + IN_PLACE + CHANGING +
                                                                ALTERNATING + SPECS + VIEWS +
                                                                SPEC_VIEWS + FRESH +
                                                                NONBLOCKING + NEIGHBOR)
                        + "; all (all but the in-place, changing, alternating, spec, views, fresh, "
                        "nonblocking and neighbourhood ones); nonblocking (the nonblocking "
                        "form of each of all's); neighbor (the neighbourhood collectives, "
                        "blocking and nonblocking)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warmup", type=float, default=0.5, metavar="SECONDS",
                        help="run the job's first row untimed this long first (default 0.5)")
    parser.add_argument("--before", action="store_true", help="also time the engine of " + BEFORE)
    parser.add_argument("--against", metavar="COMMIT",
                        help="also time dualmpi.Comm of COMMIT on the same buffers")
    parser.add_argument("--neighbor", action="store_true",
                        help="also time the plan as persistent neighbourhood collectives")
    parser.add_argument("--in-a-row", action="store_true",
                        help="time a repeat's calls one after the other after one barrier (a "
                             "program's throughput), not each after a barrier (its latency)")
    parser.add_argument("--layers", action="store_true",
                        help="also time the C loop with the call's own checks (checked)")
    args = parser.parse_args()
    world = MPI.COMM_WORLD
    me, ranks = world.Get_rank(), world.Get_size()
    topo = from_spec(args.spec)
    sizes = [int(s) for s in args.sizes.split(",")]
    groups = {"all": ALL, "nonblocking": NONBLOCKING, "neighbor": NEIGHBOR}
    colls = [c for name in args.collectives.split(",") for c in groups.get(name, (name,))]
    unknown = sorted(set(colls) - set(ALL) - set(IN_PLACE) - set(CHANGING) - set(ALTERNATING) -
                     set(SPECS) - set(VIEWS) - set(SPEC_VIEWS) - set(FRESH) - set(NONBLOCKING) -
                     set(NEIGHBOR))
    if unknown:
        raise SystemExit(f"--collectives: unknown {', '.join(unknown)} (choose from "
                         f"{', '.join(ALL)}, the groups all, nonblocking and neighbor, or see "
                         "--help)")
    if args.warmup < 0 or args.warmup != args.warmup:
        raise SystemExit("--warmup: a number of seconds, 0 or more")
    FIRST_ROW_WARMUP[0] = args.warmup
    load = [os.getloadavg()]
    net = dualmpi.Comm(world, topo)  # as a user gets it: the watchdog on
    old = load_before(world) if args.before else None
    against = None if args.against is None else \
        load_against(world, args.against).Comm(world, args.spec)
    rng = np.random.default_rng(me)
    rows = []
    graph = None
    if any(coll in NEIGHBOR for coll in colls):  # MPI's own on the same neighbours
        if world.allreduce(degree(net), op=MPI.MIN) == 0:
            raise SystemExit("--collectives: the neighbourhood collectives need every rank to "
                             f"have a neighbour ({args.spec} on {ranks} ranks has a rank "
                             "without one)")
        sources, destinations, _ = net.Get_dist_neighbors()
        graph = world.Create_dist_graph_adjacent(sources, destinations)
    for coll in colls:
        for size in sizes:
            if coll in NEIGHBOR:
                row = neighbor_row(net, graph, coll, size, args.repeats, rng, world, against,
                                   args.in_a_row)
                rows.append(row)
                if me == 0:
                    med = row["median"]
                    print(f"{coll:9s} {size:>8} dualmpi {med['dualmpi'] * 1e6:9.1f} us  native "
                          f"{med['native'] * 1e6:9.1f}  dualmpi/native "
                          f"{row['dualmpi/native']:6.2f}" + (
                              f"  dualmpi/against {row['dualmpi/against']:5.2f}"
                              if against is not None else ""), flush=True)
                continue
            send, recv = buffers(coll, ranks, size, rng)
            ours = api_call(net, coll, send, recv)
            # the results must be the native ones before anything is timed
            send2 = None if send is None else send.copy()
            recv2 = None if recv is None else \
                recv.copy() if coll in IN_PLACE else np.zeros_like(recv)
            ours()
            api_call(world, coll, send2, recv2)()
            same = same_results(coll, me, send, send2, recv, recv2)
            if not world.allreduce(int(same), op=MPI.MIN):
                raise SystemExit(f"{coll} {size}: dualmpi differs from native MPI")
            ours()
            ours()  # the same buffers again: the call now runs its zero-copy plan where it can
            if coll.removesuffix("_views") in NONBLOCKING:  # the floor: the blocking form's
                blocking = api_call(net, coll[1:], send, recv)  # plan, on these buffers
                blocking()
                blocking()
            # the floor runs exactly the requests the call runs (a call that ran its plan once,
            # a *_fresh one: the runner its repeat would make, the same messages)
            runner = net._last_runner
            detached = coll.endswith("_fresh") and detach(net, runner)
            variants = {"dualmpi": ours, "floor": floor_loop(runner),
                        "native": api_call(world, coll, send2, recv2),
                        "native-schedule": schedule_loop(runner)}
            if getattr(runner, "_c", None) is not None:
                variants["floor-python"] = python_loop(runner)
                # every rank times the same variants (the root of a scatter alone copies)
                if world.allreduce(len(runner.own_copies()) + len(runner.seed_copies()),
                                   op=MPI.MAX):
                    variants["floor-rounds"] = floor_loop(runner, own=False)
            if against is not None:
                other = api_call(against, coll, None if send is None else send.copy(),
                                 None if recv is None else np.zeros_like(recv))
                other()
                other()
                variants["against"] = other
            merged = [run for _, run in runner.companions.values() if run is not None]
            if world.allreduce(len(merged), op=MPI.MIN) == 1:
                # a speculated v-variant: its plan and its count table's in one plan
                variants["floor-merged"] = floor_loop(merged[0])
            if args.neighbor:
                variants["floor-neighbor"] = neighbor_loop(runner)
            checked = floor_loop(runner, checked=True) if args.layers else None
            if checked is not None:
                variants["checked"] = checked
            cleanup = None
            if old is not None:
                variants["before"], cleanup = before_call(old, args.spec, coll, size)
            k = calls_for(size * (ranks if base(coll) == "alltoall" else 1))
            times = time_interleaved(variants, k, args.repeats, world, args.in_a_row)
            if cleanup is not None:
                cleanup()
            for name in ("floor-neighbor", "native-schedule"):
                variants[name].free() if name in variants else None
            if detached:  # (and no remembered call may run it again)
                runner.free()
                net._forget()
            med = {name: statistics.median(ts) for name, ts in times.items()}
            row = {"collective": coll, "size": size, "calls_per_repeat": k,
                   "packets": runner.bound.packets, "times": times, "median": med,
                   "dualmpi/floor": med["dualmpi"] / med["floor"],
                   "dualmpi/native": med["dualmpi"] / med["native"],
                   "floor/native": med["floor"] / med["native"],
                   "floor/native-schedule": med["floor"] / med["native-schedule"],
                   "native-schedule/native": med["native-schedule"] / med["native"],
                   "rounds": len(runner.bound.rounds)}
            if "floor-neighbor" in med:
                row["neighbor/floor"] = med["floor-neighbor"] / med["floor"]
            if "checked" in med:
                row["checked/floor"] = med["checked"] / med["floor"]
                row["dualmpi/checked"] = med["dualmpi"] / med["checked"]
            row["compiled_loop"] = "floor-python" in med
            if "floor-python" in med:
                row["python/floor"] = med["floor-python"] / med["floor"]
            if "floor-rounds" in med:
                row["dualmpi/floor-rounds"] = med["dualmpi"] / med["floor-rounds"]
            if "floor-merged" in med:
                row["dualmpi/floor-merged"] = med["dualmpi"] / med["floor-merged"]
                row["floor-merged/floor"] = med["floor-merged"] / med["floor"]
            if "against" in med:
                row["dualmpi/against"] = med["dualmpi"] / med["against"]
            if "before" in med:
                row["before/native"] = med["before"] / med["native"]
                row["before/dualmpi"] = med["before"] / med["dualmpi"]
            rows.append(row)
            if me == 0:
                extra = "" if "before" not in med else \
                    f" before/native {row['before/native']:6.2f} speed-up {row['before/dualmpi']:5.2f}"
                if "dualmpi/against" in row:
                    extra += f" dualmpi/against {row['dualmpi/against']:5.2f}"
                if "floor-merged/floor" in row:
                    extra += (f" dualmpi/floor-merged {row['dualmpi/floor-merged']:5.2f}"
                              f" floor-merged/floor {row['floor-merged/floor']:5.2f}")
                if "neighbor/floor" in row:
                    extra += f" neighbor/floor {row['neighbor/floor']:5.2f}"
                if "checked/floor" in row:
                    extra += (f" checked/floor {row['checked/floor']:5.2f} dualmpi/checked "
                              f"{row['dualmpi/checked']:5.2f}")
                print(f"{coll:9s} {size:>8} dualmpi {med['dualmpi'] * 1e6:9.1f} us  floor "
                      f"{med['floor'] * 1e6:9.1f}  native {med['native'] * 1e6:9.1f}  "
                      f"dualmpi/floor {row['dualmpi/floor']:5.2f}  dualmpi/native "
                      f"{row['dualmpi/native']:6.2f}  schedule/native "
                      f"{row['native-schedule/native']:6.2f}{extra}", flush=True)
    # the point-to-point progress thread and its idle sleep (benchmarks/progress_thread.py)
    from dualmpi.engine.router import POLL

    thread = {"progress_thread": bool(net._router.threaded), "poll_cold_s": POLL["cold"]}
    net.Free()
    if graph is not None:
        graph.Free()
    if against is not None:
        against.Free()
    load.append(os.getloadavg())
    if me == 0:
        meta = run_meta(args.spec, load, args.repeats, before=BEFORE if args.before else None,
                        against=None if args.against is None else subprocess.run(
                            ["git", "-C", os.path.dirname(os.path.dirname(os.path.abspath(
                                __file__))), "rev-parse", args.against],
                            capture_output=True, text=True).stdout.strip() or args.against,
                        compiled_loop=not cloop.reason(), compiled_loop_reason=cloop.reason(),
                        in_a_row=args.in_a_row, first_row_warmup_s=args.warmup,
                        **thread)
        write_results(args.json, "dualmpi-engine-bench/1", meta, rows)


if __name__ == "__main__":
    main()
