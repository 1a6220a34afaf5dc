"""The fixed cost of a repeated call (issue 25, item 3): loops of one small call, interleaved.

A call with a cached plan on 2 ranks playing Q_1 (one link: the network's schedule is MPI's
own exchange) should cost within 1.5 µs of mpi4py's own call.  ``benchmarks/engine.py`` times
each call on its own between barriers, so its per-call figures carry a barrier's noise; this
times loops of ``--calls`` calls of the same 8-byte call (``net.Ibcast(buf, 0).Wait()``, ...)
on every implementation in turn, interleaved (dualmpi, [the ``--against`` commit,] native,
dualmpi, ...), and reports per form the median over ``--repeats`` loops of each one's µs a
call, the medians of the per-repeat differences ``dualmpi - native`` and ratios, and the load
average before and after.  Every form's result is checked against native MPI's first.  The
lower-case forms (``allreduce``, ``gather``, ...) are mpi4py's object collectives on a small
int a rank.  ``Allreduce_beside_fresh`` is a repeated ``Allreduce`` of 1,000 doubles beside an
``Alltoallv`` whose count table is new to the engine's cache every call (a sample sort's);
``gather_sizes``, ``allgather_sizes``, ``bcast_sizes`` object collectives whose pickles change
size every call (a count table or size new to the cache every call: ``benchmarks/engine.py``'s
``*_fresh`` forms time the buffer v-variants so);
``send_recv``, ``isend_recv`` and ``sendrecv`` a ping-pong of small ints with the paired rank.

Run from the repository root, one timing benchmark at a time::

    mpiexec -n 2 python -m mpi4py benchmarks/percall.py hypercube:n=1 --repeats 15 \\
        --against eda3c58 --json benchmarks/results/percall_loops_issue25_q1_np2.json
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dualmpi  # noqa: E402
from engine import load_against  # noqa: E402
from results_io import run_meta, write_results  # noqa: E402

#: The forms timed: name -> call(comm, send, recv, gathered), the same argument objects every
#: call (a repeat); ``recv`` and ``gathered`` are the results (the object collectives below
#: write theirs there).
FORMS = {
    "Ibcast": lambda c, s, r, g: c.Ibcast(r, 0).Wait(),
    "Iallreduce": lambda c, s, r, g: c.Iallreduce(s, r).Wait(),
    "Iallgather": lambda c, s, r, g: c.Iallgather(s, g).Wait(),
    "Ibarrier": lambda c, s, r, g: c.Ibarrier().Wait(),
    "Bcast": lambda c, s, r, g: c.Bcast(r, 0),
    "Allreduce": lambda c, s, r, g: c.Allreduce(s, r),
    "Allgather": lambda c, s, r, g: c.Allgather(s, g),
    "Barrier": lambda c, s, r, g: c.Barrier(),
    "Allreduce_uint8": lambda c, s, r, g: c.Allreduce(s, r),
    "Iallreduce_uint8": lambda c, s, r, g: c.Iallreduce(s, r).Wait(),
    "Allreduce_int16": lambda c, s, r, g: c.Allreduce(s, r),
}

def _put(a, value):
    """Write an object collective's result (a number or a list; None: nothing) into ``a``."""
    if value is not None:
        a[:] = value


# The object (pickle) collectives, lower-case as in mpi4py: small ints whose pickles keep their
# sizes from call to call, each result written into ``recv`` or ``gathered`` for the check.
FORMS.update({
    "bcast": lambda c, s, r, g: _put(r, c.bcast(int(r[0]), 0)),
    "scatter": lambda c, s, r, g: _put(r, c.scatter(
        [j + 7 for j in range(g.size)] if c.Get_rank() == 0 else None, 0)),
    "gather": lambda c, s, r, g: _put(g, c.gather(int(s[0]), 0)),
    "allgather": lambda c, s, r, g: _put(g, c.allgather(int(s[0]))),
    "alltoall": lambda c, s, r, g: _put(g, c.alltoall([int(s[0]) * 100 + j
                                                      for j in range(g.size)])),
    "reduce": lambda c, s, r, g: _put(r, c.reduce(int(s[0]), root=0)),
    "allreduce": lambda c, s, r, g: _put(r, c.allreduce(int(s[0]))),
    "scan": lambda c, s, r, g: _put(r, c.scan(int(s[0]))),
    "exscan": lambda c, s, r, g: _put(r, c.exscan(int(s[0]))),
    "barrier": lambda c, s, r, g: c.barrier(),
})

#: Count tables an ``*_beside_fresh`` form's ``Alltoallv`` cycles through (1 to 200 bytes a
#: pair): more than the engine keeps plans (``dualmpi.engine.core.CACHE_SIZE``), so each is new
#: to its cache and drops an older plan.
FRESH_TABLES = 200
#: Per communicator: the ``Alltoallv``'s turn and its buffers.
_FRESH = {}


def _beside_fresh(c, s, r, g):
    """``Allreduce(s, r)`` (the same buffers every call: a repeat), then an ``Alltoallv`` with
    the next of :data:`FRESH_TABLES` count tables (new to the engine's cache: a plan made, an
    older one dropped); the first bytes it received go to ``g`` for the check."""
    c.Allreduce(s, r)
    p = c.Get_size()
    turn, send, recv = _FRESH.get(id(c)) or (0, None, None)
    if send is None:
        send = (np.arange(FRESH_TABLES * p) + c.Get_rank()).astype(np.uint8)
        recv = np.zeros(FRESH_TABLES * p, dtype=np.uint8)
    k = turn % FRESH_TABLES + 1
    counts = [k] * p
    c.Alltoallv([send, counts], [recv, counts])
    g.view(np.uint8)[:] = np.resize(recv[:k * p], g.nbytes)
    _FRESH[id(c)] = (turn + 1, send, recv)


FORMS["Allreduce_beside_fresh"] = _beside_fresh

#: Per form and communicator: how many calls so far (the ``*_sizes`` forms).
_TURNS = {}


def _turn(form, c):
    """Return the call's number among ``form``'s calls on ``c`` (0 first)."""
    key = (form, id(c))
    t = _TURNS.get(key, 0)
    _TURNS[key] = t + 1
    return t


#: The ``*_sizes`` forms' objects are lists of 1 to this many ints, the length rank- and
#: call-dependent: a prime more than the engine keeps plans, so each call's pickle sizes make
#: a count table new to its cache.
SIZES = 97


def _sized(form):
    """An object collective whose pickles change size every call (a list of a length that
    depends on the call and the rank); the lengths it returns go to ``g`` for the check."""
    def call(c, s, r, g):
        me = c.Get_rank()
        obj = list(range((_turn(form, c) * 7 + me * 13) % SIZES + 1))
        if form == "gather_sizes":
            out = c.gather(obj, 0)
        elif form == "allgather_sizes":
            out = c.allgather(obj)
        else:  # bcast_sizes
            out = [c.bcast(obj if me == 0 else None, 0)]
        if out is not None:
            g.view(np.int64)[:len(out)] = [len(x) for x in out]
    return call


for _form in ("gather_sizes", "allgather_sizes", "bcast_sizes"):
    FORMS[_form] = _sized(_form)


def _exchange(c, s, r, how):
    """One object exchange with the paired rank (``rank ^ 1``; none for the last of an odd
    count): the lower rank sends first; what it receives goes to ``r``."""
    me = c.Get_rank()
    peer = me ^ 1
    if peer >= c.Get_size():
        return
    obj = int(s[0])
    if how == "sendrecv":
        r[0] = c.sendrecv(obj, peer, 7, source=peer, recvtag=7)
    elif me < peer:
        how(c, obj, peer)
        r[0] = c.recv(source=peer, tag=7)
    else:
        r[0] = c.recv(source=peer, tag=7)
        how(c, obj, peer)


# The object point-to-point forms (lower-case, mpi4py's): a ping-pong of small ints with the
# paired rank, one link away on Q_1.
FORMS.update({
    "send_recv": lambda c, s, r, g: _exchange(c, s, r, lambda c, o, p: c.send(o, p, 7)),
    "isend_recv": lambda c, s, r, g: _exchange(c, s, r,
                                               lambda c, o, p: c.isend(o, p, 7).wait()),
    "sendrecv": lambda c, s, r, g: _exchange(c, s, r, "sendrecv"),
})

#: The element type of a form's buffers (int64 where not named: one element).
DTYPES = {"Allreduce_uint8": np.uint8, "Iallreduce_uint8": np.uint8,
          "Allreduce_int16": np.int16, "Allreduce_beside_fresh": np.float64}
#: The elements of a form's buffers where not one (8 bytes).
ELEMENTS = {"Allreduce_beside_fresh": 1000}


def buffers(rank, size, dtype=np.int64, n=None):
    """Fresh buffers of 8 bytes (or ``n`` elements) a rank of ``dtype``: ``send`` and ``recv``
    (rank 0's ``recv`` is the broadcast's data) and ``gathered`` (as much per rank)."""
    n = 8 // np.dtype(dtype).itemsize if n is None else n
    recv = np.full(n, 7 if rank == 0 else 0, dtype=dtype)
    return np.full(n, rank + 1, dtype=dtype), recv, np.zeros(n * size, dtype=dtype)


def loop(world, call, comm, bufs, calls):
    """Return µs a call of ``calls`` calls of ``call`` on ``bufs`` (the ranks start together)."""
    world.Barrier()
    t0 = time.perf_counter()
    for _ in range(calls):
        call(comm, *bufs)
    return (time.perf_counter() - t0) / calls * 1e6


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("spec", help="the network, e.g. hypercube:n=1")
    p.add_argument("--forms", default=",".join(FORMS), help="comma-separated, of: "
                   + ", ".join(FORMS))
    p.add_argument("--calls", type=int, default=2000, help="calls per loop (default 2000)")
    p.add_argument("--repeats", type=int, default=15, help="loops of each (default 15)")
    p.add_argument("--against", metavar="COMMIT", help="also time dualmpi.Comm of COMMIT")
    p.add_argument("--json", metavar="PATH", help="write the rows to PATH")
    args = p.parse_args(argv)
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    forms = [f for f in args.forms.split(",") if f]
    bad = [f for f in forms if f not in FORMS]
    if bad or args.calls < 1 or args.repeats < 1:
        # (every rank says it: the first rank to leave ends the job, the others' output with it)
        print(f"percall.py: rank {rank}: bad --forms {bad}, --calls or --repeats",
              file=sys.stderr, flush=True)
        return 2
    load0 = os.getloadavg()[0]
    comms = {"dualmpi": dualmpi.Comm(world, args.spec)}
    if args.against:
        comms["against"] = load_against(world, args.against).Comm(world, args.spec)
    comms["native"] = world
    rows = []
    for form in forms:
        call = FORMS[form]
        bufs = {name: buffers(rank, size, DTYPES.get(form, np.int64), ELEMENTS.get(form))
                for name in comms}
        for name, comm in comms.items():  # (the check, and the warm-up: plans cached)
            for _ in range(3):
                call(comm, *bufs[name])
        ok = all(np.array_equal(bufs[name][1], bufs["native"][1]) and
                 np.array_equal(bufs[name][2], bufs["native"][2]) for name in comms)
        if not world.allreduce(int(ok), op=MPI.MIN):
            if rank == 0:
                print(f"percall.py: {form}: a result differs from native MPI's", file=sys.stderr)
            return 1
        times = {name: [] for name in comms}
        for _ in range(args.repeats):
            for name, comm in comms.items():
                times[name].append(loop(world, call, comm, bufs[name], args.calls))
        # (per repeat, the slowest rank's loop: what the call costs the job)
        times = {name: np.max(world.allgather(np.array(t)), axis=0).tolist()
                 for name, t in times.items()}
        med = {name: statistics.median(t) for name, t in times.items()}
        row = {"form": form, "bytes": int(bufs["native"][0].nbytes),
               "dtype": np.dtype(DTYPES.get(form, np.int64)).name,
               "us": med, "samples": times,
               "dualmpi-native_us": statistics.median(
                   d - n for d, n in zip(times["dualmpi"], times["native"])),
               "dualmpi/native": statistics.median(
                   d / n for d, n in zip(times["dualmpi"], times["native"]))}
        if args.against:
            row["dualmpi/against"] = statistics.median(
                d / a for d, a in zip(times["dualmpi"], times["against"]))
        rows.append(row)
        if rank == 0:
            extra = (f"  against {med['against']:6.2f}  dualmpi/against {row['dualmpi/against']:5.2f}"
                     if args.against else "")
            print(f"{form:16s} dualmpi {med['dualmpi']:6.2f} us  native {med['native']:6.2f}"
                  f"  dualmpi-native {row['dualmpi-native_us']:5.2f} us"
                  f"  dualmpi/native {row['dualmpi/native']:5.2f}{extra}", flush=True)
    load1 = os.getloadavg()[0]
    for name, comm in comms.items():
        if name != "native":
            comm.Free()
    if rank == 0:
        print(f"load average {load0:.2f} -> {load1:.2f}")
        if args.json:
            write_results(args.json, "percall-1", run_meta(args.spec, (load0, load1), args.repeats,
                                                           calls=args.calls, against=args.against),
                          rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
