"""MPI tests of payloads sent apart from their trailers (``dualmpi.engine.mpi.APART``).

A message whose payload has ``APART`` bytes or more (``APART_SHARED`` with several nodes per
rank, ``APART_EXCHANGE`` in a reduction whose ranks exchange payloads in a round:
``apart_from``) travels as two messages, in the blocking plans and the nonblocking ones
alike: the payload alone, then its 8-byte trailer; the receiver starts the payload's receive
once the trailer is in and names the same call.  Results are compared with
``MPI.COMM_WORLD``'s on the same buffers (the bytes around them untouched), the split is
counted on the runner, and ranks that disagree on a message's length (another call: sizes
straddling that size) fail, named,
instead of receiving a longer message into a shorter buffer.  Run with ``mpiexec -n N python -m
mpi4py -m pytest --with-mpi tests/mpi/test_apart_mpi.py`` at N = 1, 2, 4, 8, 32.
"""

import numpy as np
import pytest

import dualmpi
from dualmpi.engine.mpi import APART, APART_EXCHANGE, MPIRunner, apart_from
from dualmpi.errors import DualmpiError

MPI = pytest.importorskip("mpi4py.MPI")

# the networks of the nonblocking tests (one node per rank, and several)
from test_icollectives_mpi import NETS, RANK, SIZE, WORLD, _agree  # noqa: E402

_OWN = {}


def _net(i):
    """This module's communicator on network ``i`` of :data:`NETS` (not the nonblocking tests'
    own, which a test of theirs may free)."""
    if i >= len(NETS):
        pytest.skip(f"no network {i} at {SIZE} ranks")
    spec, q = NETS[i]
    return _OWN[i] if i in _OWN else _OWN.setdefault(i, dualmpi.Comm(WORLD, spec,
                                                                     nodes_per_rank=q))

PAD = 3  # elements of -1 before and after every buffer, which no call may touch
#: From 32 ranks on (16 oversubscribed ranks a core) the default pass keeps one case of each
#: test; the others are marked slow.
BIG = SIZE >= 32


def _sample(values, keep, ids=None):
    """Return ``values`` as pytest params, those but ``keep`` marked slow from 32 ranks on."""
    return [pytest.param(v, marks=pytest.mark.slow if BIG and v != keep else (),
                         id=None if ids is None else ids[i]) for i, v in enumerate(values)]


def _padded(n):
    """Return ``(whole, inner)``: ``n`` doubles with :data:`PAD` of -1 on each side."""
    whole = np.full(n + 2 * PAD, -1.0)
    return whole, whole[PAD:PAD + n]


def _calls(n):
    """name -> call(comm, send, recv) and the (send, recv) lengths, pieces of ``n`` doubles."""
    return {
        "Bcast": (lambda c, s, r: c.Bcast(r, root=SIZE - 1), 0, n),
        "Allgather": (lambda c, s, r: c.Allgather(s, r), n, n * SIZE),
        "Alltoall": (lambda c, s, r: c.Alltoall(s, r), n * SIZE, n * SIZE),
        "Allreduce": (lambda c, s, r: c.Allreduce(s, r, op=MPI.SUM), n, n),
        "Reduce": (lambda c, s, r: c.Reduce(s, r, op=MPI.MAX, root=0), n, n),
        "Scatterv": (lambda c, s, r: c.Scatterv(
            [s, ([n] * SIZE, [(n + 1) * i for i in range(SIZE)]), MPI.DOUBLE], r, root=0),
            (n + 1) * SIZE, n),
    }


def _split_counts(run):
    """Return ``(requests, messages, payloads apart)`` of a blocking runner's plan (a payload
    of the runner's ``apart_limit`` bytes or more goes apart)."""
    msgs = apart = 0
    for rnd in run.bound.rounds:
        for _, _, lens in rnd.recvs + rnd.sends:
            msgs += 1
            apart += int(lens.sum()) >= run.apart_limit and run.apart_tag is not None
    return len(run._reqs), msgs, apart


@pytest.mark.mpi
@pytest.mark.parametrize("net_i", [0, 1])
@pytest.mark.parametrize("n", _sample([APART // 8 - 1, APART // 8, 4 * APART // 8 + 5],
                                      APART // 8))
def test_large_payloads_travel_apart_and_match_mpi(net_i, n):
    """Pieces just under, at and over ``APART`` bytes, three calls each on the same buffers
    with new contents: equal to ``COMM_WORLD``'s, the padding untouched, and the runner holds
    one request per message plus one per payload of ``apart_from(q)`` bytes or more (a receive
    started after its trailer, a send), from ``APART_EXCHANGE`` bytes in a reduction whose
    ranks exchange payloads in a round (``Allreduce``'s exchange, where some rank sends to and
    receives from one peer in a round of the plan it runs at that size:
    ``ArraySchedule.exchanges``; the rule is the whole plan's, so a rank that does not
    exchange has that limit too when another one does); ``Reduce``'s tree sends them apart from
    ``apart_from(q)``."""
    net = _net(net_i)
    bad = []
    exchange = (False, 0)  # (some round of this rank's Allreduce an exchange, its limit)
    for name, (call, ns, nr) in _calls(n).items():
        bad += _three_calls(net, name, call, call, ns, nr, name == "Reduce" and RANK != 0)
        run = net._last_runner
        if isinstance(run, MPIRunner):
            reqs, msgs, apart = _split_counts(run)
            if reqs != msgs + apart:
                bad.append((name, "requests", reqs, msgs, apart))
            if net.q == 1 and n * 8 >= APART and name in ("Allgather", "Alltoall", "Reduce") \
                    and SIZE > 1 and apart == 0:
                bad.append((name, "no payload apart", n))
            if name == "Allreduce":
                exchange = (_exchanges(run.bound), run.apart_limit)
            elif name != "Scatterv" and run.apart_limit != apart_from(net.q):
                bad.append((name, "apart from", run.apart_limit))
    if WORLD.allreduce(exchange[0], op=MPI.LOR) and \
            exchange[1] != apart_from(net.q, exchanges=True):
        bad.append(("Allreduce", "an exchange's payloads apart from", exchange[1]))
    assert _agree(not bad), bad


@pytest.mark.mpi
@pytest.mark.parametrize("form", ["blocking", "nonblocking"])
@pytest.mark.parametrize("n", _sample([APART_EXCHANGE // 8 - 1, APART_EXCHANGE // 8],
                                      APART_EXCHANGE // 8, ["under", "at"]))
@pytest.mark.parametrize("q", [1, 2], ids=["one-node-per-rank", "two-nodes-per-rank"])
def test_an_exchange_sends_payloads_apart_from_its_own_size(form, n, q):
    """A reduction whose ranks exchange payloads in a round (``Allreduce`` by recursive
    doubling on a hypercube, ``Reduce_scatter_block``) with pieces just under and at
    ``APART_EXCHANGE`` bytes (one node per rank and two: ``APART_SHARED``, the others' limit
    there, is no larger), blocking and nonblocking, three calls each on
    the same buffers with new contents: equal to ``COMM_WORLD``'s, the padding untouched, and
    in the plans that exchange every message whose payload has ``APART_EXCHANGE`` bytes or
    more goes apart from its trailer, every shorter one whole (a message of several pieces
    goes apart under that piece size; the blocking runner's requests, the nonblocking plans'
    late receives), and at that size some does."""
    if SIZE & (SIZE - 1):
        pytest.skip("recursive doubling: a hypercube")
    net = dualmpi.Comm(WORLD, f"hypercube:n={SIZE.bit_length() - 2 + q}", nodes_per_rank=q,
                       algorithms={"allreduce": "exchange"})
    blocking = form == "blocking"
    calls = {"Allreduce": (lambda c, s, r: c.Allreduce(s, r, op=MPI.SUM), n, n),
             "Reduce_scatter_block": (lambda c, s, r: c.Reduce_scatter_block(s, r, op=MPI.SUM),
                                      n * SIZE, n)}
    bad = []
    for name, (call, ns, nr) in calls.items():
        before = set(net._nb._cache)
        mine = call if blocking else (lambda c, s, r, call=call: _started(call, c, s, r))
        bad += _three_calls(net, name, mine, call, ns, nr)
        if blocking:
            run = net._last_runner
            bounds = [run.bound]
            reqs, msgs, apart = _split_counts(run)
            if reqs != msgs + apart or (SIZE > 1 and run.apart_limit != APART_EXCHANGE):
                bad.append((name, "requests", reqs, msgs, apart, run.apart_limit))
        else:
            new = [comp for key, comp in net._nb._cache.items() if key not in before]
            bounds = [comp.bound for comp in new]
            apart = sum(len(rnd[7]) for comp in new for rnd in comp.rounds)
        # (the messages due apart: the blocking runner counts sends and receives, the
        # nonblocking plans' late receives)
        due = sum(int(lens.sum()) >= APART_EXCHANGE for bound in bounds for rnd in bound.rounds
                  for _, _, lens in rnd.recvs + (rnd.sends if blocking else []))
        ex = any(_exchanges(bound) for bound in bounds)
        if ex and apart != due or \
                (SIZE > 1 and n * 8 >= APART_EXCHANGE and not due):
            bad.append((name, "apart", apart, due))
        if SIZE > 1 and not WORLD.allreduce(ex, op=MPI.LOR):
            bad.append((name, "no exchange"))
    net.Free()
    assert _agree(not bad), bad


def _exchanges(bound):
    """True when in some round of ``bound`` this rank sends to a peer it receives from."""
    return any({m[0] for m in rnd.sends} & {m[0] for m in rnd.recvs} for rnd in bound.rounds)


def _three_calls(net, name, call, ref_call, ns, nr, undefined=False):
    """Run ``call`` on ``net`` and ``ref_call`` on ``COMM_WORLD`` three times on the same padded
    buffers (``ns`` and ``nr`` doubles) with new contents; return what differs (the result,
    unless ``undefined`` on this rank, or the padding)."""
    bad = []
    s_whole, send = _padded(ns)
    m_whole, mine = _padded(nr)
    r_whole, ref = _padded(nr)
    for k in range(3):
        send[:] = np.arange(ns) * (RANK + 1) + k
        if name.endswith("bcast"):
            mine[:] = ref[:] = np.arange(nr) + k if RANK == SIZE - 1 else 0
        call(net, send, mine)
        ref_call(WORLD, send, ref)
        if not undefined and not np.array_equal(m_whole, r_whole):
            bad.append((name, k, np.flatnonzero(m_whole != r_whole)[:4].tolist()))
        if not np.all(s_whole[:PAD] == -1) or not np.all(s_whole[-PAD:] == -1):
            bad.append((name, k, "send padding"))
    return bad


def _icalls(n):
    """name -> (call, the blocking form for ``COMM_WORLD``, send and recv lengths): the
    nonblocking forms of :func:`_calls`' collectives, and ``Igather``."""
    out = {"I" + name[0].lower() + name[1:]: (
        lambda c, s, r, call=call: _started(call, c, s, r), call, ns, nr)
        for name, (call, ns, nr) in _calls(n).items()}
    out["Igather"] = (lambda c, s, r: c.Igather(s, r, root=SIZE - 1).Wait(),
                      lambda c, s, r: c.Gather(s, r, root=SIZE - 1), n, n * SIZE)
    return out


def _started(call, comm, send, recv):
    """The nonblocking form of blocking ``call`` on ``comm``, started and waited for."""
    class Nonblocking:  # (the blocking method's name with an I before it, then Wait)
        def __getattr__(self, name):
            method = getattr(comm, "I" + name[0].lower() + name[1:])
            return lambda *args, **kw: method(*args, **kw).Wait()
    call(Nonblocking(), send, recv)


@pytest.mark.mpi
@pytest.mark.parametrize("net_i", [0, 1])
@pytest.mark.parametrize("n", _sample([APART // 8 - 1, APART // 8, 4 * APART // 8 + 5],
                                      APART // 8))
def test_large_nonblocking_payloads_travel_apart_and_match_mpi(net_i, n):
    """The nonblocking forms, three calls each on the same buffers (the first agreed, the
    repeats started in C, bound to the buffers): equal to ``COMM_WORLD``'s blocking
    collectives, the padding untouched; with one node per rank the plans of a piece of
    ``APART`` bytes or more receive payloads apart from their trailers, those of a smaller
    piece none; ``Ireduce``'s root receives its large payloads apart, and no rank of
    ``Iallreduce`` where some rank exchanges payloads in a round below ``APART_EXCHANGE``
    bytes (:meth:`Engine.exchanges <dualmpi.engine.core.Engine.exchanges>`)."""
    net = _net(net_i)
    bad = []
    for name, (call, ref_call, ns, nr) in _icalls(n).items():
        before = set(net._nb._cache)
        bad += _three_calls(net, name, call, ref_call, ns, nr,
                            (name == "Igather" and RANK != SIZE - 1) or
                            (name == "Ireduce" and RANK != 0))
        new = [comp for key, comp in net._nb._cache.items() if key not in before]
        late = sum(len(rnd[7]) for comp in new for rnd in comp.rounds)
        exchange = WORLD.allreduce(any(_exchanges(comp.bound) for comp in new), op=MPI.LOR)
        # (a message carries one piece or more: on one link exactly one)
        if net.q == 1 and SIZE > 1 and name in ("Iallgather", "Ialltoall") and \
                (late == 0 if n * 8 >= APART else late > 0 and SIZE == 2):
            bad.append((name, "payloads apart", late, n))
        if name == "Iallreduce" and exchange and late and n * 8 < APART_EXCHANGE:
            bad.append((name, "an exchange's payloads apart", late))
        if name == "Ireduce" and RANK == 0 and SIZE > 1 and n * 8 >= apart_from(net.q) and \
                not late:
            bad.append((name, "no payload apart at the root", n))
    assert _agree(not bad), bad


@pytest.mark.mpi
@pytest.mark.parametrize("form", ["blocking", "nonblocking"])
def test_large_in_place_and_derived_datatype_payloads_apart_match_mpi(form):
    """Payloads of ``APART`` bytes or more apart from their trailers with ``MPI.IN_PLACE``
    (all-gather, total exchange, a reduction at its root, an all-reduce whose messages of
    ``APART_EXCHANGE`` bytes or more go apart, its plans exchanging payloads) and with a derived datatype (a broadcast,
    a reduction and that all-reduce of every other double): three calls each, equal to
    ``COMM_WORLD``'s on the same buffers, the gaps of the strided buffer and the padding
    untouched."""
    net = _net(0)
    n = APART // 8 + 1000
    run = (lambda call: call) if form == "blocking" else (lambda call: call.Wait())
    op = (lambda name: getattr(net, name)) if form == "blocking" else \
        (lambda name: getattr(net, "I" + name[0].lower() + name[1:]))
    vec = MPI.DOUBLE.Create_vector(n, 1, 2).Commit()
    big = 2 * APART_EXCHANGE // 8 + 200  # (halves of it over APART_EXCHANGE: reduce-scatter's)
    big_vec = MPI.DOUBLE.Create_vector(big, 1, 2).Commit()
    bad = []
    for k in range(3):
        for name in ("Allgather", "Alltoall"):
            mine_whole, mine = _padded(n * SIZE)
            ref_whole, ref = _padded(n * SIZE)
            mine[:] = ref[:] = np.arange(n * SIZE) * (RANK + 1) + k
            run(op(name)(MPI.IN_PLACE, mine))
            getattr(WORLD, name)(MPI.IN_PLACE, ref)
            if not np.array_equal(mine_whole, ref_whole):
                bad.append((name, k, np.flatnonzero(mine_whole != ref_whole)[:4].tolist()))
        mine_whole, mine = _padded(2 * n)
        ref_whole, ref = _padded(2 * n)
        if RANK == 0:
            mine[:] = ref[:] = np.arange(2 * n) + k
        run(op("Bcast")([mine, 1, vec], root=0))
        WORLD.Bcast([ref, 1, vec], root=0)
        if not np.array_equal(mine_whole, ref_whole):
            bad.append(("Bcast", k, np.flatnonzero(mine_whole != ref_whole)[:4].tolist()))
        # a reduction along a tree (its blocking form's payloads apart too) and an all-reduce
        # whose messages go apart from APART_EXCHANGE: in place (at the root), then on the
        # strided datatype, against MPI's on the strided elements packed (Open MPI refuses a
        # predefined operation on a derived datatype; dualmpi takes one made of a single
        # predefined type); a reduction's receive buffer is the root's alone
        for method, m, dtype in (("Reduce", n, vec), ("Allreduce", big, big_vec)):
            kw = {"root": 0} if method == "Reduce" else {}
            holds = method == "Allreduce" or RANK == 0  # (a result in the receive buffer)
            for name in (method + "-in-place", method + "-vector"):
                count = m if name.endswith("in-place") else 2 * m
                send = np.arange(count, dtype=np.float64) * (RANK + 1) + k
                mine_whole, mine = _padded(count)
                ref_whole, ref = _padded(count)
                if name.endswith("in-place"):
                    own = MPI.IN_PLACE if holds else send
                    if holds:
                        mine[:] = ref[:] = send
                    run(op(method)(own, mine, op=MPI.SUM, **kw))
                    getattr(WORLD, method)(own, ref, op=MPI.SUM, **kw)
                else:
                    run(op(method)([send, 1, dtype], [mine, 1, dtype], op=MPI.SUM, **kw))
                    packed = np.empty(m)
                    getattr(WORLD, method)(np.ascontiguousarray(send[::2]), packed, op=MPI.SUM,
                                           **kw)
                    ref[::2] = packed
                if (holds and not np.array_equal(mine_whole, ref_whole)) or \
                        not np.all(mine_whole[:PAD] == -1) or not np.all(mine_whole[-PAD:] == -1):
                    bad.append((name, k, np.flatnonzero(mine_whole != ref_whole)[:4].tolist()))
    vec.Free()
    big_vec.Free()
    assert _agree(not bad), bad

#: Sizes (in doubles, of ``apart_from(q)`` bytes ``a``) that straddle where payloads go apart.
STRADDLES = {"apart-where-whole": lambda a: (a // 8 - 4, a // 8 + 96),
             "whole-where-apart": lambda a: (a // 8 + 96, a // 8 - 4),
             "both-apart": lambda a: (2 * a // 8, a // 8 + 96)}


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("straddle", _sample(list(STRADDLES), "both-apart"))
@pytest.mark.parametrize("net_i", [0, pytest.param(1, id="several-nodes-per-rank")])
@pytest.mark.parametrize("name", ["Bcast", "Reduce", "Allreduce"])
def test_ranks_that_disagree_on_a_large_message_fail_named(straddle, net_i, name):
    """Two sizes every rank has called with before (so no argument check runs again), then
    rank 0 calls with the first while the others call with the second (``Bcast`` from rank 0;
    ``Reduce`` to it, whose tree's payloads go apart as well): a trailer sent alone lands where
    a whole message was due, a whole message where a lone trailer was due, or a trailer of
    another call comes before a payload's receive is started — every rank that receives fails
    in the call or its next (in ``Reduce`` at least the root; a rank that only sends may finish,
    as in MPI, whose sender learns nothing of a receive cut short), with the message of another
    call or of the cut-short message named, none writes past its buffers (the padding), no rank
    is left waiting, and the communicator is unusable after.  On one node per rank and on
    several (whose payloads go apart from a larger size: :func:`apart_from`); ``Allreduce``
    (where every rank sends and receives) straddles the size its plan's payloads go apart
    from, ``APART_EXCHANGE`` where its ranks exchange payloads in a round."""
    if net_i >= len(NETS) or (net_i and NETS[net_i][1] == 1):
        pytest.skip(f"no such network at {SIZE} ranks")
    spec, q = NETS[net_i]
    net = dualmpi.Comm(WORLD, spec, nodes_per_rank=q, watchdog=60)
    limit = apart_from(q)
    if name == "Allreduce":  # (the algorithm of the larger size; the other's may differ)
        nbytes = max(STRADDLES[straddle](apart_from(q, exchanges=True))) * 8
        limit = apart_from(q, net._engine.exchanges(
            "allreduce", 0, net.variant, net._allreduce_algorithm(nbytes), combines=True))
    sizes = STRADDLES[straddle](limit)
    bufs = [(_padded(n), _padded(n)) for n in sizes]  # (send, recv) of each size, padded

    def call(k):
        (_, send), (_, recv) = bufs[k]
        if name == "Bcast":
            net.Bcast(recv, root=0)
        elif name == "Reduce":
            net.Reduce(send, recv, op=MPI.SUM, root=0)
        else:
            net.Allreduce(send, recv, op=MPI.SUM)

    for k, ((_, send), (_, recv)) in enumerate(bufs):
        send[:] = recv[:] = np.arange(recv.size) if RANK == 0 else 0
        call(k)
    mine = 0 if RANK == 0 else 1
    errs = []
    for _ in range(2):
        try:
            call(mine)
            errs.append(None)
        except DualmpiError as exc:
            errs.append(str(exc))
    net.Free()
    first = next((e for e in errs if e is not None), None)
    if first is None:
        ok = name == "Reduce" and RANK != 0
    else:
        ok = "another call" in first or "failed in round" in first
    ok = ok and (errs[1] is None or "unusable" in errs[1] or errs[0] is None)
    ok = ok and all(np.all(whole[:PAD] == -1) and np.all(whole[-PAD:] == -1)
                    for pair in bufs for whole, _ in pair)
    assert _agree(ok), errs
