"""MPI tests of the small sends the compiled loop makes with ``MPI_Isend``
(``dualmpi.engine.mpi.IMMEDIATE``).

A blocking plan's message of at most ``IMMEDIATE`` bytes (its trailer included) leaves with
``MPI_Isend`` instead of its persistent request's ``MPI_Start``: Open MPI sends a message
that small straight into the receiver's queue from ``MPI_Isend`` only.  Results are compared
with ``MPI.COMM_WORLD``'s on the same buffers (the bytes around them untouched), and the
runner's tables are read after the calls: each round's sends of at most ``IMMEDIATE`` bytes
(for a payload sent apart, its trailer's message), and only those, are the loop's
``MPI_Isend`` rows, and their slots of the compiled loop's request array are
``MPI_REQUEST_NULL`` (a request of ``MPI_Isend``, freed when it completed; a persistent
request keeps its handle), every other slot a persistent request.  Such a message whose
segments (its trailer's included) are not one run of memory travels packed
(``dualmpi.engine.mpi.PACK_SMALL``): the send's ``MPI_Isend`` row sends bytes from a slot of
the runner's ``_small`` array its segments are copied to, and each small receive lands whole
in such a slot, copied to its segments and trailer; the tables are checked for that too, and
for the nonblocking plans' rounds (``dualmpi.engine.nonblocking._Compiled``), whose slots are
in the run's store after the spare block.  Run
with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi tests/mpi/test_immediate_mpi.py`` at
N = 1, 2, 4, 8, 32, 64.
"""

import numpy as np
import pytest

import dualmpi
from dualmpi.collectives.allreduce import available
from dualmpi.engine import cloop
from dualmpi.engine.mpi import IMMEDIATE, MPIRunner, _runs, _small_bytes
from dualmpi.errors import DualmpiError
from dualmpi.topology import from_spec

MPI = pytest.importorskip("mpi4py.MPI")

from test_apart_mpi import PAD, _calls, _icalls, _net, _padded, _sample, _three_calls  # noqa: E402,E501
from test_icollectives_mpi import NETS, RANK, SIZE, WORLD, _agree  # noqa: E402
from collective_cases import blocks_of  # noqa: E402


def _immediate_errors(run):
    """Return what differs from the rule in a blocking runner's compiled loop (see the module's
    docstring), and ``(immediate, persistent)``: how many sends of each kind it has.

    A message whose payload goes apart from its trailer (``apart_limit`` bytes or more) leaves
    as two: its trailer's message is 8 bytes, an ``MPI_Isend`` — in a merged plan (``parts``
    > 1: a v-variant's count table in its messages) with the table's rows, whose length the
    runner does not keep, so there either kind is allowed."""
    bad, counts = [], [0, 0]
    handles = run._c_arrays[1]
    null = MPI.REQUEST_NULL.handle
    merged = run.parts > 1
    at = 0
    for k, (rnd, (_, reqs, *_), rows, (_, late, _)) in enumerate(
            zip(run.bound.rounds, run._loop, run._imm, run._apart)):
        must, may = [], []  # the peers whose message is an MPI_Isend, or may be one
        for peer, _, lens in rnd.sends:
            size = int(lens.sum())
            if run.apart_tag is not None and size >= run.apart_limit:
                (may if merged else must).append(peer)  # (its trailer's message)
            elif size + 8 <= IMMEDIATE:
                must.append(peer)
        got = sorted(row[3] for row in rows)
        if any(p not in got for p in must) or any(p not in must + may for p in got):
            bad.append((k, "immediate peers", got, sorted(must), sorted(may)))
        n, ni = len(reqs), len(rows)
        slots = handles[at:at + n].tolist()
        imm = slots[n - late - ni:n - late]
        if any(h != null for h in imm) or \
                any(h == null for h in slots[:n - late - ni] + slots[n - late:]):
            bad.append((k, "slots", n, ni, late))
        counts[0] += ni
        counts[1] += len(rnd.sends) - ni
        at += n + 1  # (the alarm line's slot after each round's)
    return bad, counts


def _packed_errors(run):
    """Return what differs from the packing rule in a blocking runner's tables (see the
    module's docstring), and ``(sends, receives)``: how many of each travel packed.

    A send of at most ``IMMEDIATE`` bytes with its trailer, not apart, whose segments and
    the signature word are not one run: its ``MPI_Isend`` row sends that many bytes of
    ``MPI.BYTE`` from ``_small``, and the round's copies into that slot are its segments'
    lengths, in order.  A receive of a payload whose message has at most ``IMMEDIATE`` bytes:
    the round's copies out of ``_small`` cover it and its trailer.  (A merged plan's messages
    carry the count table's rows, whose segments the runner does not keep: not checked.)"""
    bad, counts = [], [0, 0]
    if run.parts > 1:
        return bad, counts
    lo, hi = run._small.ctypes.data, run._small.ctypes.data + run._small.size
    inside = lambda a, m: lo <= a and a + m <= hi  # noqa: E731
    sig = run._sig_addr - (0 if run.absolute else run.store.ctypes.data)
    for k, (rnd, rows, packs, unpacks) in enumerate(
            zip(run.bound.rounds, run._imm, run._pack, run._unpack)):
        want = []
        for peer, offs, lens in rnd.sends:
            size = int(lens.sum()) + 8
            if size <= IMMEDIATE and _runs(offs.tolist() + [sig], lens.tolist() + [8]) > 1:
                want.append((peer, lens.tolist() + [8]))
        packed = [row for row in rows if inside(row[0], row[1])]
        if sorted((r[3], r[1]) for r in packed) != sorted((p, sum(n)) for p, n in want) or \
                any(r[2] != MPI.BYTE.handle for r in packed) or \
                sorted(n for _, _, n in packs) != sorted(m for _, n in want for m in n) or \
                any(not inside(dst, n) for dst, _, n in packs):
            bad.append((k, "packed sends", [r[3] for r in packed], [p for p, _ in want]))
        got = sum(int(lens.sum()) + 8 for _, _, lens in rnd.recvs
                  if 8 < int(lens.sum()) + 8 <= IMMEDIATE)
        if sum(n for _, _, n in unpacks) != got or any(not inside(src, n)
                                                        for _, src, n in unpacks):
            bad.append((k, "unpacked receives", sum(n for _, _, n in unpacks), got))
        counts[0] += len(packed)
        counts[1] += sum(1 for _, _, lens in rnd.recvs if 8 < int(lens.sum()) + 8 <= IMMEDIATE)
    # every slot received into has the spare block apart from it (two blocks: a longer message
    # of another call is cut short there, not written past the slot)
    slotted = []
    for dtype in run._types:
        blocks = blocks_of(dtype)
        if any(inside(a, n) for a, n in blocks):
            slotted.append(blocks)
    if len(slotted) != counts[1] or any(len(b) != 2 or not inside(*b[0]) or inside(*b[1]) or
                                        b[1][1] != 8 for b in slotted):
        bad.append(("receive slots", slotted[:3], counts[1]))
    return bad, counts


@pytest.mark.mpi
@pytest.mark.parametrize("net_i", [0, 1])
@pytest.mark.parametrize("n", _sample([1, IMMEDIATE // 8 - 1, IMMEDIATE // 8],
                                      IMMEDIATE // 8 - 1))
def test_small_sends_leave_with_isend_and_match_mpi(net_i, n):
    """Pieces of 8 bytes, and just under and at ``IMMEDIATE`` bytes with the trailer, six
    collectives and ``Barrier``, three calls each on the same buffers with new contents: equal
    to ``COMM_WORLD``'s, the padding untouched, and each round's sends of at most
    ``IMMEDIATE`` bytes made with ``MPI_Isend`` (their slots ``MPI_REQUEST_NULL`` after the
    calls), every larger one a persistent request; on more than one rank some made with
    ``MPI_Isend`` at 8 bytes a piece, some persistent at ``IMMEDIATE // 8`` elements.  The
    small messages whose segments are not one run travel packed (:func:`_packed_errors`), on
    more than one rank some sends and receives at 8 bytes a piece."""
    if cloop.load() is None:
        pytest.skip(f"no compiled loop: {cloop.reason()}")
    net = _net(net_i)
    bad, counts, packed = [], np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64)
    calls = dict(_calls(n), Barrier=(lambda c, s, r: c.Barrier(), 0, 0))
    for name, (call, ns, nr) in calls.items():
        bad += _three_calls(net, name, call, call, ns, nr, name == "Reduce" and RANK != 0)
        run = net._last_runner
        if not isinstance(run, MPIRunner):  # (one rank: no messages)
            continue
        if run._c is None:
            bad.append((name, "not in the compiled loop"))
            continue
        wrong, (imm, persistent) = _immediate_errors(run)
        bad += [(name,) + w for w in wrong]
        counts += (imm, persistent)
        wrong, both = _packed_errors(run)
        bad += [(name,) + w for w in wrong]
        packed += both
    total = np.zeros(2, dtype=np.int64)
    WORLD.Allreduce(packed, total)
    if SIZE > 1 and n == 1 and not total.all():  # (Allgather: a piece and a trailer apart)
        bad.append(("no small message packed", total.tolist()))
    WORLD.Allreduce(counts, total)
    if SIZE > 1 and n == 1 and not total[0]:
        bad.append(("no send made with MPI_Isend", total.tolist()))
    if SIZE > 1 and n == IMMEDIATE // 8 and not total[1]:
        bad.append(("no persistent send", total.tolist()))
    assert _agree(not bad), bad


def _blocks(row):
    """The blocks ``[(offset, length)]`` of a nonblocking plan's message row ``(peer, start,
    stop, datatype, ...)``: one slice of the store, or its hindexed datatype's."""
    if row[3] is None:
        return [(row[1], row[2] - row[1])]
    return blocks_of(row[3])


def _compiled_packed_errors(comp):
    """Return what differs from the packing rule in a nonblocking plan (its ``_Compiled``), and
    ``(sends, receives)`` packed: a copying plan's message of a payload and its trailer of at
    most ``IMMEDIATE`` bytes (a send: whose segments and the signature word are not one run)
    goes through a slot past the spare block — a send from it as one contiguous run, a
    receive into it and the spare block — every slot apart, copied into from its segments
    before the round is posted (a send) or out to them once it is in (a receive); none in a
    plan bound to the user's buffers.  And every receive of a plan with trailers has two
    blocks apart (a longer message of another call is cut short there, not written past)."""
    bad, counts = [], [0, 0]
    zero = comp.sig_at != comp.bound.nbytes  # (bound at the buffers' addresses: _Compiled(at=))
    nrecv = sum(len(r.recvs) for r in comp.bound.rounds)
    spare = comp.sig_at + 8 + 8 * nrecv + 8
    slots = spare + 16  # (8 bytes after the spare block)
    seen = []
    for k, (rnd, row) in enumerate(zip(comp.bound.rounds, comp.rounds)):
        recvs, sends, packs, unpacks = row[1], row[2], row[8], row[9]
        if comp.trailer and any(len(_blocks(m)) < 2 for m in recvs):
            bad.append((k, "a receive of one block", [_blocks(m) for m in recvs]))
        mine = [(a, a + n) for m in sends for a, n in _blocks(m) if a >= slots]
        mine += [(b[0][0], b[0][0] + b[0][1]) for b in map(_blocks, recvs)
                 if b[0][0] >= slots and b[1:] == [(spare, 8)]]
        seen += mine
        want_s = [lens.tolist() + [8] for _, offs, lens in rnd.sends
                  if int(lens.sum()) + 8 <= IMMEDIATE and
                  _runs(offs.tolist() + [comp.sig_at], lens.tolist() + [8]) > 1]
        want_r = [int(lens.sum()) + 8 for _, _, lens in rnd.recvs
                  if 8 < int(lens.sum()) + 8 <= IMMEDIATE]
        if zero:
            if mine or packs or unpacks:
                bad.append((k, "packed in a plan bound to the buffers"))
            continue
        if sorted(n for _, _, n in packs) != sorted(m for n in want_s for m in n) or \
                sum(n for _, _, n in unpacks) != sum(want_r) or \
                len(mine) != len(want_s) + len(want_r) or \
                any(not any(a <= x and x + n <= b for a, b in mine) for x, _, n in packs) or \
                any(not any(a <= x and x + n <= b for a, b in mine) for _, x, n in unpacks):
            bad.append((k, "packed", len(mine), len(want_s), len(want_r)))
        counts[0] += len(want_s)
        counts[1] += len(want_r)
    ends = sorted(seen)
    if any(b > c for (_, b), (c, _) in zip(ends, ends[1:])) or (ends and ends[-1][1] > comp.size):
        bad.append(("slots overlap or pass the store", ends[:4], comp.size))
    # (the bytes a start in C clears, nonblocking.Repeat's M_SIZE, reach the last slot's end)
    if not zero and comp.trailer and \
            comp.size != slots + _small_bytes(comp.bound, comp.bound.nbytes):
        bad.append(("store size", comp.size, slots, _small_bytes(comp.bound, comp.bound.nbytes)))
    return bad, counts


@pytest.mark.mpi
@pytest.mark.parametrize("net_i", [0, 1])
@pytest.mark.parametrize("n", _sample([1, IMMEDIATE // 8 - 1], 1))
def test_small_nonblocking_messages_travel_packed_and_match_mpi(net_i, n):
    """The nonblocking forms at pieces of 8 bytes and just under ``IMMEDIATE`` with the
    trailer, three calls each on the same buffers (the first agreed, the repeats started in
    C): equal to ``COMM_WORLD``'s blocking collectives, the padding untouched, and every plan
    they ran packs its small messages as :func:`_compiled_packed_errors` says; on more than one
    rank some sends and receives packed at 8 bytes a piece."""
    if cloop.load() is None:
        pytest.skip(f"no compiled loop: {cloop.reason()}")
    net = _net(net_i)
    bad, packed = [], np.zeros(2, dtype=np.int64)
    for name, (call, ref_call, ns, nr) in _icalls(n).items():
        before = set(net._nb._cache)
        bad += _three_calls(net, name, call, ref_call, ns, nr,
                            (name == "Igather" and RANK != SIZE - 1) or
                            (name == "Ireduce" and RANK != 0))
        for key, comp in net._nb._cache.items():
            if key not in before:
                wrong, both = _compiled_packed_errors(comp)
                bad += [(name,) + w for w in wrong]
                packed += both
    total = np.zeros(2, dtype=np.int64)
    WORLD.Allreduce(packed, total)
    if SIZE > 1 and n == 1 and not total.all():
        bad.append(("no small message packed", total.tolist()))
    assert _agree(not bad), bad


@pytest.mark.mpi
@pytest.mark.parametrize("net_i", [0, 1])
def test_a_long_message_of_another_call_is_cut_short_at_a_slot(net_i):
    """``Allreduce`` by reduce-scatter and all-gather (or the exchange) of one double (its messages packed) and of 2,048
    (16 KiB: a whole message where the ranks exchange payloads, below ``APART_EXCHANGE``, above
    Open MPI's eager limit), both called by every rank first; then rank 0 calls the small one while the others call
    the large one: a 16-KiB message lands where rank 0's 16-byte slot was due.  Every rank
    that receives fails in the call or its next, naming the message of another call or the
    one cut short; no buffer is written past (the padding); no rank is left waiting (the
    watchdog); the communicator is unusable after."""
    if cloop.load() is None:
        pytest.skip(f"no compiled loop: {cloop.reason()}")
    if SIZE < 2 or net_i >= len(NETS):
        pytest.skip(f"no network {net_i} at {SIZE} ranks")
    spec, q = NETS[net_i]
    # (one algorithm at both sizes, whose ranks exchange payloads: the same rounds and peers)
    alg = next(a for a in ("rsag", "exchange") if a in available(from_spec(spec)))
    net = dualmpi.Comm(WORLD, spec, nodes_per_rank=q, watchdog=60, algorithms={"allreduce": alg})
    if not net._engine.exchanges("allreduce", 0, net.variant, alg, combines=True):
        net.Free()
        pytest.skip(f"{spec}: its all-reduce exchanges no payload in a round")
    sizes = (1, 2048)
    bufs = [(_padded(n), _padded(n)) for n in sizes]
    for (_, send), (_, recv) in bufs:
        send[:] = RANK + 1
        net.Allreduce(send, recv, op=MPI.SUM)
    mine = 0 if RANK == 0 else 1
    errs = []
    for _ in range(2):
        try:
            net.Allreduce(bufs[mine][0][1], bufs[mine][1][1], op=MPI.SUM)
            errs.append(None)
        except DualmpiError as exc:
            errs.append(str(exc))
    net.Free()
    first = next((e for e in errs if e is not None), None)
    ok = first is not None and ("another call" in first or "failed in round" in first or
                                "unusable" in first)
    ok = ok and (errs[1] is None or "unusable" in errs[1] or errs[0] is None)
    ok = ok and all(np.all(whole[:PAD] == -1) and np.all(whole[-PAD:] == -1)
                    for pair in bufs for whole, _ in pair)
    assert _agree(ok), errs
