"""The floor: a compiled dualmpi plan run by the smallest possible loop (no checks, no copies).

``floor_loop(runner)`` returns a function that runs the persistent requests of an
:class:`dualmpi.engine.mpi.MPIRunner` round by round — ``Startall``, the local moves
between a rank's own nodes, ``Waitall`` — and nothing else: no argument checks, no
copy of the user's buffers in or out (but, for a runner bound to the user's buffers,
the rank's own block from its send to its receive buffer, which the collective needs),
no watchdog, no statistics.  Where the engine's compiled loop is built
(:mod:`dualmpi.engine.cloop`) the floor is that C loop called directly (through the same
compiled bound call as dualmpi's, :mod:`dualmpi.engine.recall`, when it is built; else
ctypes); ``python_loop``
is the same in Python.  It is what the topology's schedule costs on this host, the
reference for dualmpi's own overhead (``benchmarks/engine.py``).  ``schedule_loop`` is
*native MPI on the same schedule's messages*: the plan's messages (payload only, no
trailer) sent the way a plain mpi4py program would send them, ``Irecv``/``Isend`` per
round and a ``Waitall``.
"""

import ctypes

from mpi4py import MPI

from dualmpi.engine import recall

__all__ = ["floor_loop", "python_loop", "neighbor_loop", "schedule_loop"]


def _where(runner):
    """Return ``(buffer, types)``: what a round's segments are offsets into, and a type list.

    A runner bound to the user's buffers (``runner.absolute``) runs segments at absolute
    addresses (``MPI.BOTTOM``); any other, offsets into its store.
    """
    return (MPI.BOTTOM if runner.absolute else runner.store), []


def _segments(where, types, offs, lens):
    """Return an mpi4py buffer spec of the segments ``(offs, lens)`` of ``where``."""
    if offs.size == 0:
        return [MPI.BOTTOM, 0, MPI.BYTE]
    if offs.size == 1 and where is not MPI.BOTTOM:
        a = int(offs[0])
        return [where[a:a + int(lens[0])], MPI.BYTE]
    dtype = MPI.BYTE.Create_hindexed(lens.tolist(), offs.tolist()).Commit()
    types.append(dtype)
    return [where, 1, dtype]


def floor_loop(runner, own=True, checked=False):
    """Return a no-argument function running ``runner``'s rounds once: the C loop, else Python.

    The C loop is called with no flags: the rounds and, with ``own`` (default), the copies
    a zero-copy runner makes of the rank's own blocks (from its send to its receive buffer
    during the first round; a reduction's blocks from the send buffer to where they are
    combined, before it) — data movement the collective needs (MPI's own collectives make
    it too) — and nothing else: the engine's own call also clears and checks the trailers
    and counts the call.  ``own=False`` is the rounds alone.  ``checked=True`` (the
    compiled loop only, else None) passes the flags the engine's own call passes: a new call
    number and signature, the trailers checked after each round, the call counted, and
    every round waiting on the alarm line too (:mod:`dualmpi.engine.alarm`) — what the
    checks cost in C, without the Python call around them.
    """
    compiled = None
    if checked and getattr(runner, "_c", None) is None:
        return None
    if getattr(runner, "_c", None) is not None:
        flags = 0
        if checked:
            from dualmpi.engine.mpi import _F_CHECK, _F_COUNT, _F_START

            flags = _F_START | _F_CHECK | _F_COUNT
        compiled = runner.c_call(flags, pre=runner.seed_copies() if own else (),
                                 mid=runner.own_copies() if own else ())
    if compiled is not None and not isinstance(compiled[1], tuple):
        fn, arg, keep = compiled
        module = recall.load()
        if module is not None:  # the cheapest call from Python: the bound call dualmpi makes
            return module.Recall(ctypes.cast(fn, ctypes.c_void_p).value, arg.value,
                                 (fn, arg, keep), None, None, runner._failed)

        def run():
            fn(arg)
        run.keep = keep
        return run
    if compiled is not None:  # a reduction: the segments in C, the combines in between
        fn, args, keep = compiled
        combines = [combine for _, _, combine in runner._segments]

        def run():
            for arg, combine in zip(args, combines):
                fn(arg)
                if combine is not None:
                    combine()
        run.keep = keep
        return run
    return python_loop(runner)


def python_loop(runner):
    """Return a no-argument function running ``runner``'s rounds once, as leanly as Python can.

    The same work as :func:`floor_loop`'s C loop: a zero-copy runner's copies of the rank's
    own blocks, each round's ``Startall``, local moves, ``Waitall`` and combines.
    """
    # (with the copies of the small messages received whole to their segments: mpi.PACK_SMALL)
    unpacked = getattr(runner, "_unpack", None) or [()] * len(runner._loop)
    rounds = [(reqs, move, combine, unpack) for (_, reqs, move, combine, _, _, _), unpack
              in zip(runner._loop, unpacked)]
    startall, waitall = MPI.Prequest.Startall, MPI.Request.Waitall
    seeds, own = runner.seed_copies(), runner.own_copies()
    if own and rounds:  # the rank's own block, while the first round's messages fly
        first = rounds[0][1]

        def copy_own():
            if first is not None:
                first()
            for dst, src, n in own:
                ctypes.memmove(dst, src, n)
        rounds[0] = (rounds[0][0], copy_own, *rounds[0][2:])

    def run():
        for dst, src, n in seeds:
            ctypes.memmove(dst, src, n)
        for reqs, move, combine, unpack in rounds:
            startall(reqs)
            if move is not None:
                move()
            waitall(reqs)
            for dst, src, n in unpack:
                ctypes.memmove(dst, src, n)
            if combine is not None:
                combine()
    return run


def neighbor_loop(runner):
    """Return the same plan run as one persistent neighbourhood collective per round.

    Each round becomes an ``MPI_Neighbor_alltoallw_init`` on the graph communicator: the
    round's message to or from each peer as a datatype of store segments, zero counts
    for the other neighbours.  Every rank takes part in every round, idle or not, and
    exchanges with every neighbour (zero-byte messages to the idle ones) — filler the
    papers' algorithms do not send, which is one reason the engine uses point-to-point
    requests: docs/performance.md has the comparison.
    """
    graph = runner.transport.graph
    store, types = _where(runner)
    peers = runner.transport.peers
    index = {peer: i for i, peer in enumerate(peers)}
    reqs = []

    def spec(messages):
        counts, displs, dtypes = [0] * len(peers), [0] * len(peers), [MPI.BYTE] * len(peers)
        for peer, offs, lens in messages:
            i = index[peer]
            if offs.size == 1 and store is not MPI.BOTTOM:
                counts[i], displs[i] = int(lens[0]), int(offs[0])
            elif offs.size:
                dt = MPI.BYTE.Create_hindexed(lens.tolist(), offs.tolist()).Commit()
                types.append(dt)
                counts[i], dtypes[i] = 1, dt
        return [store, (counts, displs), dtypes]

    moves = {k: move for k, _, move, _, _, _, _ in runner._loop}
    mine = {rnd.index: rnd for rnd in runner.bound.rounds}
    rounds = []
    # a neighbourhood collective is collective: every rank takes part in every round
    for k in range(runner.plan.num_rounds + runner.bound.packets - 1):
        rnd = mine.get(k)
        req = graph.Neighbor_alltoallw_init(spec(rnd.sends if rnd else []),
                                            spec(rnd.recvs if rnd else []))
        reqs.append(req)
        rounds.append((req, moves.get(k)))

    def run():
        for req, move in rounds:
            req.Start()
            if move is not None:
                move()
            req.Wait()
    run.free = lambda: ([r.Free() for r in reqs], [t.Free() for t in types])
    return run


def schedule_loop(runner):
    """Return the schedule's messages sent as a plain mpi4py program would (no dualmpi).

    Per round: an ``Irecv`` from and an ``Isend`` to each peer of the round (the same
    bytes as the plan's message, without its 8-byte trailer; several segments as one
    hindexed datatype), the local moves, ``Waitall``, then the round's combines (a
    reduction).  New requests every round, as a hand-written program makes them: the
    difference to :func:`python_loop` is what persistent requests save.
    """
    graph = runner.transport.graph
    where, types = _where(runner)

    def spec(offs, lens):
        return _segments(where, types, offs, lens)

    extra = {k: (move, combine) for k, _, move, combine, _, _, _ in runner._loop}
    rounds = []
    for rnd in runner.bound.rounds:
        tag = rnd.index % 32768
        move, combine = extra.get(rnd.index, (None, None))
        rounds.append(([(spec(o, n), peer, tag) for peer, o, n in rnd.recvs],
                       [(spec(o, n), peer, tag) for peer, o, n in rnd.sends], move, combine))
    irecv, isend, waitall = graph.Irecv, graph.Isend, MPI.Request.Waitall

    seeds = runner.seed_copies()

    def run():
        for dst, src, n in seeds:  # a plain program's copy of the send buffer, too
            ctypes.memmove(dst, src, n)
        for recvs, sends, move, combine in rounds:
            reqs = [irecv(*r) for r in recvs] + [isend(*s) for s in sends]
            if move is not None:
                move()
            waitall(reqs)
            if combine is not None:
                combine()
    run.free = lambda: [t.Free() for t in types]
    return run
