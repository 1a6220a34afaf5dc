"""The one path every collective call of ``dualmpi.Comm`` takes: read, agree, plan, run.

``dualmpi.Comm``'s methods are a few lines each; they hand a reader of their arguments
(:mod:`dualmpi.arguments`) to :func:`collective` (blocking) or :func:`icollective`
(nonblocking, returning a :class:`dualmpi.Request`), as ``mpi4py.util.pkl5``'s methods
hand off to module functions.  Both:

1. read the arguments as mpi4py does — a rank's own mistake is an
   :class:`~dualmpi.errors.InputError` that every rank hears of;
2. agree: a fixed-count call compares its signature (collective, root, sizes,
   datatype, operation) over the ranks in the control plane — the first time a
   blocking call's signature is seen, or on every nonblocking call (a nonblocking
   control-plane reduction the request waits for); a v-variant's ranks exchange their
   counts over the links (one row each, all-gathered), which every forwarding node needs
   anyway, and reach the same verdict from the same table — a repeated small call while
   its plan runs (speculatively, :func:`_vector_call`);
3. plan: the engine's plan for the collective's description
   (:mod:`dualmpi.collectives.registry`), sizes and root, refused before allocating when
   it would not fit in the host's memory;
4. run it over the links, and unpack what derived datatypes received.
"""

import functools
import weakref
import zlib
from collections import OrderedDict

import numpy as np

from .collectives import registry
from .engine import mpi as engine_mpi, recall
from .engine.nonblocking import Repeat
from .errors import DualmpiError, InputError
from .request import Request
from .resources import ResourceError

__all__ = ["collective", "icollective", "agree", "verdict", "with_op", "memory_problem", "Tally",
           "no_match", "template_of", "same"]

#: Width of the argument-check vector: code, six signature fields, memory flag, problem flag.
WIDTH = 9


def _mpi():
    from mpi4py import MPI

    return MPI


def with_op(comm, call, op, name):
    """Resolve a reduction's ``op`` for ``call``; its code joins what the ranks agree on."""
    from .ops import resolve

    if comm._faulty:
        raise InputError(f"{name}: reductions do not run on a network with faults")
    MPI = _mpi()
    if call.name == "barrier":
        op = MPI.BOR  # nothing is combined: the blocks are empty
    call.op = resolve(MPI.SUM if op is None else op, call.dtype, name, MPI)
    if call.vector is None:
        call.sig = call.sig + (call.op[1],)
        call.fields = call.fields + ("operation",)
    else:
        call.vector["op"] = call.op[1]
    return call


def _read(read):
    """Return ``(call, problem)``: the call, or this rank's own mistake (the error to raise)."""
    try:
        return read(), None
    except InputError as exc:
        return None, exc


def _raise(problem):
    """Raise this rank's own mistake: the reader's error itself, or one made of a message."""
    raise problem if isinstance(problem, BaseException) else InputError(problem)


def _salt(method, sig=()):
    """Return the int a call adds to its messages' signature: its method and agreed signature."""
    return zlib.crc32(repr((method, tuple(sig))).encode())


def _engine_name(comm, desc, call):
    """Return the engine's name of the call (``allreduce-<algorithm>`` for the allreduce)."""
    if desc.name == "allreduce":
        return "allreduce-" + comm._allreduce_algorithm(call.nbytes)
    return desc.name


def collective(comm, method, read, args=None, arrays=(), exchanged=False):
    """Read, agree on, plan and run one blocking call of ``method`` (an MPI method name).

    ``args``/``arrays``: the call's argument objects and arrays, for the
    communicator's memory of a repeated call (``Comm._remember``); ``exchanged``: a
    v-variant's remembered call exchanged the count table and found it changed
    (:func:`_vector_call`).
    """
    if comm._engine is None:
        raise DualmpiError(f"{method}: the communicator was freed")
    comm._transport.alarm.check()
    desc = registry.by_mpi(method)
    if desc.counts != "fixed":
        _vector_call(comm, method, desc, read, args, exchanged)
        return
    call, problem = _read(read)
    name = None if call is None else _engine_name(comm, desc, call)
    agree(comm, method, call.sig if call else (), problem,
          lambda: comm._store_bytes(name, call.root, call.nbytes, call.itemsize,
                                    _written(call), _binds_first(comm, desc, call, name, args)),
          call.fields if call else ())
    call.pack()
    packed = any(m.packed for m in call.sends + call.recvs)
    salt = _salt(method, call.sig)
    # the buffer arguments, whose objects a runner bound to their memory is kept for (a
    # broadcast's one; not its root)
    objs = None if packed or not args or not arrays else \
        (arrays[0][0], arrays[1][0] if len(arrays) > 1 else None)
    if not packed and _ran_once(comm, name, call, salt):
        call.unpack()
        return
    run = comm._runner(name, call.root, call.nbytes, call.send, call.recv, objs, salt,
                       call.itemsize, call.op)
    if args is not None and not packed:
        comm._remember(method, args, arrays, run, call.send, call.recv)
    try:
        run.run(call.send, call.recv)
    finally:
        if getattr(run, "transient", False):
            comm._engine.release(run)
    if getattr(run, "addresses", None) is not None:
        run.buffers = None  # (bound at the addresses: it holds no array between calls)
    call.unpack()


def _ran_once(comm, name, call, salt):
    """Run a fixed-count call of a size the engine has no runner for without making one
    (:meth:`Engine.once <dualmpi.engine.core.Engine.once>`, which declines a size it was asked
    for lately: a call that comes back makes its runner, and is remembered, the second time);
    True when it ran.  Not from :data:`ZERO_COPY_ABOVE` bytes, where a repeat binds its runner
    to the buffers (:meth:`Comm._runner <dualmpi.Comm._runner>`)."""
    if call.nbytes >= ZERO_COPY_ABOVE:
        return False
    key = (name, call.root, call.nbytes, salt,
           None if call.op is None else (call.op[0], call.itemsize))
    kept = comm._fast.get(key)
    if kept is not None and not kept.ended:
        return False
    engine, algorithm = comm._engine, comm.algorithms.get(name)
    packets = None if comm.packets == "auto" else comm.packets
    plan = (comm.rank, name, call.nbytes, call.root, comm.variant, algorithm)
    sizes = {"itemsize": call.itemsize, "op": call.op, "salt": salt, "packets": packets}
    if engine.runner(*plan, build=False, **sizes) is not None or \
            not engine.once(*plan, send=call.send, recv=call.recv, **sizes):
        return False
    comm._last_runner = Unmade(engine, plan, sizes)
    return True


class Unmade:
    """A runner not made: ``make()`` makes it (:meth:`Engine.runner
    <dualmpi.engine.core.Engine.runner>` with ``args`` and ``kwargs``), for a call that ran
    without one (``dualmpi.Comm._last_runner``)."""

    __slots__ = ("engine", "args", "kwargs")

    def __init__(self, engine, args, kwargs):
        self.engine, self.args, self.kwargs = engine, args, kwargs

    def make(self):
        """Return the runner (made, or the engine's cached one)."""
        return self.engine.runner(*self.args, **self.kwargs)


def _binds_first(comm, desc, call, name, args):
    """True when a fixed-count call on new buffers runs on a runner bound to them.

    What :meth:`Comm._runner <dualmpi.Comm._runner>` decides (for the memory estimate, before
    the call): one node per rank, no option, no packing, pieces of at least
    :data:`ZERO_COPY_ABOVE`, buffers apart (:func:`_apart`), and :func:`_worth_binding`.
    """
    return (comm._zero_copy and args is not None
            and not any(m.packed for m in call.sends + call.recvs)
            and call.nbytes >= ZERO_COPY_ABOVE
            and _apart(comm, name, call.nbytes, call.root, call.send, call.recv, call.itemsize)
            and _worth_binding(comm, name, call.nbytes, call.send, call.recv))


def _written(call):
    """Bytes of the user's receive buffer a call writes (pages it may make resident)."""
    if call.recv is None or call.recv is call.send:
        return 0
    return int(call.recv.nbytes)


# -- the argument check -------------------------------------------------------------------------
def _check_vector(comm, name, sig, problem, short):
    """Return this rank's argument-check vector (see :func:`agree`)."""
    method, _, part = name.partition(" ")
    flat = np.zeros(WIDTH, dtype=np.int64)
    flat[0] = 2 * comm._codes[method] + (1 if part else 0)
    if problem is None:
        flat[1:1 + len(sig)] = sig
    flat[-2] = comm.rank + 1 if short else 0
    flat[-1] = comm.rank + 1 if problem else 0
    return flat


def verdict(name, hi, lo, fields, problem=None, short=None):
    """Raise the error every rank raises alike for the elementwise max ``hi`` and min ``lo``.

    ``problem``/``short``: this rank's own mistake and memory shortage (their texts are
    its message; the other ranks name it).
    """
    method = name.partition(" ")[0]
    if problem:
        _raise(problem)
    if hi[-1]:
        raise InputError(f"{method}: arguments rejected on rank {int(hi[-1]) - 1} (see its "
                         "message)")
    if hi[0] != lo[0]:
        raise InputError(f"{method}: the ranks called different collectives")
    for i, field in enumerate(fields):
        if hi[i + 1] != lo[i + 1]:
            raise InputError(f"{method}: ranks disagree on the {field} "
                             f"(from {int(lo[i + 1])} to {int(hi[i + 1])})")
    if np.any(hi[1:-2] != lo[1:-2]):
        raise InputError(f"{method}: ranks disagree on the arguments")
    if short:
        raise ResourceError(short)
    if hi[-2]:
        raise ResourceError(f"{method}: the plan's buffers would not fit in the memory of "
                            f"rank {int(hi[-2]) - 1}'s host (see its message)")


def agree(comm, name, sig, problem, need=None, fields=()):
    """Check that every rank called ``name`` alike; raise the same error on every rank.

    ``sig`` (at most 6 ints, named by ``fields``) is what every rank of a correct
    program has in common.  Done the first time a signature is seen (all ranks of a
    correct program see signatures in the same order); later calls with a known
    signature skip it.  A rank that must check — its signature is new to it, or its
    arguments are bad — while the others skip is heard by them on the alarm line
    (:mod:`dualmpi.engine.alarm`): every rank raises, none waits for the watchdog.
    ``need()`` estimates the bytes the call's plan will allocate on
    this rank; when that many per rank of this host would not fit in its memory the
    call is refused on every rank (:class:`~dualmpi.resources.ResourceError`) before
    allocating.  ``name`` may be a method followed by a word (``"Gatherv counts"``: the
    v-variants' count exchange), which is agreed on separately.
    """
    key = (name, sig)
    if problem is None and key in comm._agreed:
        return
    if comm._engine is None:
        raise DualmpiError(f"{name}: the communicator was freed")
    short = None
    if problem is None and need is not None:
        try:
            short = memory_problem(comm, name, need())
        except DualmpiError as exc:  # the plan cannot be built: every rank hears of it
            problem = str(exc)
    flat = _check_vector(comm, name, sig, problem, short)
    try:
        hi, lo = comm._transport.alarm.agree(flat, f"the {name} argument check")
    except DualmpiError:
        if problem:  # this rank's own mistake is its message, whatever the others ran
            _raise(problem)
        raise
    verdict(name, hi, lo, fields, problem, short)
    comm._agreed.add(key)


def memory_problem(comm, name, need):
    """Return why ``need`` bytes per rank do not fit in this host's memory, or None."""
    from .resources import available_memory, format_bytes

    ranks = comm._transport.host_ranks
    avail = available_memory()
    if need * ranks <= 0.8 * avail:
        return None
    who = f"{ranks} ranks x {format_bytes(need)}" if ranks > 1 else format_bytes(need)
    return (f"{name}: the plan's buffers need {who} on this host, which has "
            f"{format_bytes(avail)} available")


def check_memory(comm, method, kind, sizes, root, itemsize, budgets):
    """Refuse, on every rank, a v-variant whose plan would not fit in memory.

    The sizes are the same on every rank (agreed over the links), so the ranks check
    sizes they have not run before together: one control-plane reduction.  It also
    agrees on the largest plan of any rank (slots and rows), once per collective and root;
    from then on a table whose plan surely fits every rank (:func:`_store_bound`, within
    the smallest of the ranks' ``budgets``, the table's :data:`_BUDGET` column) skips the
    reduction: every rank decides alike from the same table.
    """
    key = zlib.crc32(repr((kind, root, itemsize)).encode() + np.asarray(sizes).tobytes())
    if key in comm._v_checked:
        return
    shape = comm._v_shapes.get((kind, root))
    if shape is not None and _store_bound(comm, shape, sizes) <= 1 << int(np.min(budgets)):
        return
    slots = rows = 0
    try:
        short = memory_problem(comm, method, comm._engine.store_bytes(
            comm.rank, kind, sizes, root, comm.variant, None, itemsize))
        plan = comm._engine.rank_plan(comm.rank, kind, root, comm.variant)
        slots, rows = plan.num_slots, plan.num_rows
    except DualmpiError as exc:  # the plan cannot be built: the others must hear of it
        short = exc
    flag = np.array([comm.rank + 1 if short else 0, slots, rows], dtype=np.int64)
    out = np.zeros_like(flag)
    comm._transport.allreduce(flag, out, _mpi().MAX, f"the {method} memory check")
    if isinstance(short, DualmpiError):
        raise short
    if short:
        raise ResourceError(short)
    if out[0]:
        raise ResourceError(f"{method}: the plan's buffers would not fit in the memory of rank "
                            f"{int(out[0]) - 1}'s host (see its message)")
    comm._v_shapes[(kind, root)] = (int(out[1]), int(out[2]))
    if len(comm._v_checked) > 4096:
        comm._v_checked.clear()
    comm._v_checked.add(key)


def _store_bound(comm, shape, sizes):
    """Return bytes no rank's store exceeds for block sizes ``sizes``: ``shape`` is the
    largest plan's ``(slots, rows)`` over the ranks, each slot counted at the largest
    block (a node's block is a piece of a rank's) and every row's segments at 64 bytes a
    piece (:meth:`Engine.store_bytes <dualmpi.engine.core.Engine.store_bytes>`).

    >>> class Comm: _engine = type("E", (), {"max_packets": 16})()
    >>> _store_bound(Comm(), (6, 4), [100, 300, 200])
    5896
    """
    slots, rows = shape
    sizes = np.asarray(sizes)
    biggest = int(sizes.max()) if sizes.size else 0
    return slots * biggest + 64 * rows * max(1, comm._engine.max_packets)


# -- the v-variants' count table --------------------------------------------------------------
#: Columns of a v-variant's row after the counts' (see :func:`_vector_call`): the rank can
#: run the method's next call speculatively; the rank ran this call's plan on its buffers
#: beside the exchange (a speculative call); the rank's memory budget (:func:`_budget`);
#: where a pair variant's matrix row starts.
_CAN, _RAN, _BUDGET, _HEAD = 8, 9, 10, 11

def _table_width(comm, desc):
    """Columns of a v-variant's count table (a pair variant carries a row of the matrix)."""
    return _HEAD + (2 * comm.size if desc.counts == "pair" else 0)


def _row(comm, method, desc, call, problem):
    """Return this rank's row of the count table and its (possibly new) problem."""
    row = np.zeros(_table_width(comm, desc), dtype=np.int64)
    row[0] = comm._codes[method]
    if call is not None and problem is None:
        try:
            _fill_row(comm, desc.name, call, call.vector, row)
        except InputError as exc:
            problem = exc
        row[_CAN] = _can_speculate(comm, call)
        row[_BUDGET] = _budget(comm)
    row[1] = 1 if problem else 0
    return row, problem


def _budget(comm):
    """Return this rank's memory budget for a plan as a power of two: ``b`` such that
    ``2**b`` bytes per rank of its host fit in 80 % of the memory available now (0: none
    known).

    In the count table's :data:`_BUDGET` column, so that every rank can tell alike that a
    plan fits every rank (:func:`check_memory`).  A power of two that moves down at once
    when the memory falls below it, and up only when twice as much came on top (kept in
    ``comm._budget``): a call repeated with the same counts makes the same row while the
    memory moves about, even around a power of two.

    >>> import dualmpi.resources as res
    >>> class Comm:
    ...     _budget, _transport = None, type("T", (), {"host_ranks": 2})()
    >>> comm, real = Comm(), res.available_memory
    >>> def budgets(*avail):
    ...     out = []
    ...     for a in avail:
    ...         res.available_memory = lambda: a
    ...         out.append(_budget(comm))
    ...     return out
    >>> # per rank: 2, 2.4, 1.6, 2 and 8.4 GiB, then 410 bytes
    >>> budgets(5 << 30, 6 << 30, 4 << 30, 5 << 30, 21 << 30, 1 << 10)
    [31, 31, 30, 30, 33, 8]
    >>> res.available_memory = real
    """
    from .resources import available_memory

    per_rank = 0.8 * available_memory() / max(1, comm._transport.host_ranks)
    now = max(0, int(per_rank).bit_length() - 1)
    if comm._budget is None or now < comm._budget or now > comm._budget + 1:
        comm._budget = now
    return comm._budget


def _copy(a):
    return None if a is None else np.array(a)


def _repeated(a):
    """A copy of a row or table as a repeat of its call sends it (every ``_RAN`` 1)."""
    out = a.copy()
    out[..., _RAN] = 1
    return out


def _can_speculate(comm, call):
    """1 when this rank can run the method's next call speculatively (see :func:`_vector_call`).

    Its plan then runs in one C call (the compiled loop, no option that needs the Python
    loop, a reduction MPI's own operation on a predefined type, no derived datatype
    packed), merged with the count table's (one node per rank:
    :func:`dualmpi.engine.plan.merge`) — on the store, or zero-copy from the call's second
    repeat when the rank moves :data:`ZERO_COPY_ABOVE` bytes or more — and the call has a
    runner to keep: the rank moves less than twice :data:`ZERO_COPY_FIRST` bytes (above, a
    call on new buffers runs on a runner of its own, released after it).
    """
    engine = comm._engine
    if comm._transport.cloop is None or engine.options.get("verify") or \
            engine.options.get("shape") is not None or engine.q != 1:
        return 0
    if call.op is not None and engine_mpi._mpi_op(call.op[2]) is None:
        return 0
    if any(m.packed for m in call.sends + call.recvs):
        return 0
    return int(_moved(call.send, call.recv) < 2 * ZERO_COPY_FIRST)


class _Speculation:
    """A v-variant method's last plan (``comm._v_last``: a call that does not :meth:`fits` it
    says the next call should not speculate), and, when the last table said every rank can
    (its ``_CAN`` column), the plan its next call runs speculatively on every rank
    (``comm._v_spec``).

    ``params`` are the engine runner's arguments of the method's last plan, ``row`` the row
    this rank sent for it and ``seen`` the table it was made for (every ``_RAN`` 1).  A rank
    whose call is not the remembered one runs the plan all the same, beside the table's
    exchange (:meth:`run`): on its new buffers when its row and displacements are those of
    the plan (new buffer objects, the same counts: ``_RAN`` 1, and when every rank did so the
    call is done), else on the runner's store alone with its new row's ``_RAN`` 0 (new
    counts, or a rank's mistake): every rank then sees the table change and runs the call
    again from it.
    """

    __slots__ = ("params", "row", "seen")

    def __init__(self, params, row, seen):
        self.params, self.row, self.seen = params, row, seen

    def fits(self, comm, desc, call, row):
        """True when ``call`` (its ``row``) runs on the plan: the same row (but ``_CAN``),
        displacements and item size."""
        name, nbytes, root, sdispls, rdispls, itemsize, op, salt = self.params
        if call is None or call.itemsize != itemsize or row.size != self.row.size:
            return False
        mine = _repeated(row)
        mine[_CAN] = self.row[_CAN]
        if not np.array_equal(mine, self.row):
            return False
        return all(a is None and b is None or a is not None and b is not None and
                   np.array_equal(a, b)
                   for a, b in zip(_displs(comm, desc, call, root), (sdispls, rdispls)))

    def run(self, comm, method, row, table, buffers=(None, None)):
        """Exchange ``row`` into ``table`` while the plan runs on ``buffers`` (``(send,
        recv)``; none: on its store alone)."""
        name, nbytes, root, sdispls, rdispls, itemsize, op, salt = self.params
        counts = comm._runner("allgather", 0, row.nbytes, salt=_salt(method + " counts"))
        run = comm._engine.runner(comm.rank, name, nbytes, root, comm.variant, sdispls=sdispls,
                                  rdispls=rdispls, packets=1, itemsize=itemsize, op=op,
                                  salt=salt)
        both = engine_mpi.pair(counts, (row.view(np.uint8), table.view(np.uint8).reshape(-1)),
                               run, buffers)
        if both is None:  # pragma: no cover - _can_speculate promised a compiled plan
            raise DualmpiError(f"{method}: the speculative call cannot run on this rank")
        comm._last_runner = run
        both()


def _vector_call(comm, method, desc, read, args, exchanged=False):
    """Read, agree on the sizes of, plan and run one blocking v-variant call.

    Every rank contributes one row — its own counts, a checksum of the counts it
    expects from the others, its type signature, an error flag — and an allgather over
    the links gives every rank the same table, from which every rank reaches the same
    verdict and, for the ranks that forward, every block's size.

    A call whose arguments are those of the method's previous call (:class:`_VectorMemo`:
    the same buffer arrays, counts and displacements of the same values) sends the row it
    sent then; when the table that comes back is the same bytes too, the call runs the
    previous call's plan on the same buffers: two C calls, no reading, no verdict, no
    lookup.  The table is exchanged on every call, so a rank whose counts changed is heard
    by all.  Once such a call runs on its final plan, the comparison, the table's exchange
    and the plan's run are one C call (``comm._m<method>``, a ``VRecall`` of
    :mod:`dualmpi.engine.recall`); ``exchanged``: that call exchanged the table and found it
    changed, so the table is in ``comm._v_memo[method].table``.

    Speculative: when the last table said every rank can (``_CAN``: a plan that runs in one
    C call, :func:`_can_speculate`), every rank's next call of the method runs the last plan
    with the table's exchange, the two plans merged into one, the table carried in the plan's
    messages where they share a link and round (:func:`dualmpi.engine.mpi.pair`;
    :class:`_Speculation` for a rank whose arguments are not the remembered ones); when the
    table comes back as the plan's, the call is done in the rounds of one, else every rank
    runs it again from the new table (docs/performance.md, "Speculative repeats").
    """
    memo = comm._v_memo.get(method)
    spec = comm._v_spec.get(method)
    template = None
    older = None
    if not exchanged and args is not None and comm._v_older.get(method) and \
            not (memo is not None and same(memo.template, tuple(args))):
        older = _older(comm, method, tuple(args), spec)
        memo = older or memo
    if memo is not None and memo.made is not None and not exchanged and args is not None \
            and memo.lease.live and same(memo.template, tuple(args)):
        memo = _made(comm, method, memo)  # the call ran once: its runner now
    # (a rank that speculates must, as every rank does: a memo without the pair is no match)
    if exchanged or (memo is not None and args is not None and
                     memo.lease.live and same(memo.template, tuple(args))
                     and _ready(comm, method, memo, spec)):
        template = memo.template
        if not exchanged:
            (memo.pair or memo.exchange)()
            if older is not None:  # (its row as first sent, :func:`_older`; from now on a
                memo.row[_CAN] = memo.can  # repeat says what the rank can, as a memo's does)
        if not exchanged and memo.table.tobytes() == memo.seen:
            if memo.pair is not None:  # the plan ran beside the exchange: the call is done
                comm._last_runner = memo.run
                if memo.remake is not None:  # repeated: from the next call on, zero-copy
                    _zero_copy(comm, method, memo)
                return
            if memo.data is None:  # the first call ran on a runner of its own: bind one now
                _zero_copy(comm, method, memo)
                memo = comm._v_memo[method]
            if memo.data is not None:
                comm._last_runner = memo.run
                memo.data()
                if memo.remake is not None:  # repeated: from the next call on, zero-copy
                    _zero_copy(comm, method, memo)
                else:
                    _install(comm, method, memo)
                return
        call, problem, row, table = memo.call, None, memo.row, memo.table.copy()
        can = memo.can
    else:
        if args is not None:
            template = template_of(args)
        call, problem = _read(read)
        row, problem = _row(comm, method, desc, call, problem)
        can = row[_CAN]
        table = np.zeros((comm.size, row.size), dtype=np.int64)
        last = comm._v_last.get(method)  # (``spec`` when there is one)
        fits = last is not None and problem is None and last.fits(comm, desc, call, row)
        if last is not None and not fits:
            # not the last call's counts: the next call does not speculate either (a program
            # whose counts change every call would run every plan twice)
            row[_CAN] = 0
        if spec is not None and fits:
            # new buffers for the same plan: run it on them beside the exchange
            row[_RAN] = 1
            call.pack()
            spec.run(comm, method, row, table, (call.send, call.recv))
            call.unpack()
            if table.tobytes() == spec.seen:
                if template is not None:  # remembered too: a program may alternate buffers
                    prev = comm._v_memo.get(method)
                    _memorize(comm, method, template, args, call, row, table, comm._last_runner,
                              True, can, spec.params[:5])
                    _keep_older(comm, method, prev)
                return
        elif spec is not None:  # every rank runs the last plan beside the exchange: this one
            spec.run(comm, method, row, table)  # on its store alone
        else:
            agree(comm, method + " counts", (row.size,), None)
            comm._runner("allgather", 0, row.nbytes, salt=_salt(method + " counts")).run(
                row.view(np.uint8), table.view(np.uint8).reshape(-1))
    prev = comm._v_memo.get(method)
    _forget(comm, method)
    comm._v_spec.pop(method, None)
    nbytes, root, sdispls, rdispls = _table_sizes(comm, method, desc, call, table, problem)
    check_memory(comm, method, desc.name, nbytes, root, call.itemsize, table[:, _BUDGET])
    call.pack()
    packed = any(m.packed for m in call.sends + call.recvs)
    zero = comm._zero_copy and call.op is None and not packed and \
        not _overlap(call.send, call.recv)
    # new buffers, big enough that binding costs less than the copies: a runner of this call's
    # own, bound to them (released after the call; a repeat binds one to keep, below)
    first = zero and _worth_binding(comm, desc.name, nbytes, call.send, call.recv,
                                    2 * ZERO_COPY_FIRST)
    engine, plan = comm._engine, (comm.rank, desc.name, nbytes, root, comm.variant)
    sizes = {"sdispls": sdispls, "rdispls": rdispls, "itemsize": call.itemsize, "op": call.op,
             "salt": _salt(method)}
    # sizes the cache has no runner for (a new count table): the plan run once, no runner made
    # (:meth:`Engine.once <dualmpi.engine.core.Engine.once>`); a repeat of the call makes one
    run = None if first else engine.runner(*plan, packets=1, build=False, **sizes)
    ran = run
    if run is None and not first and \
            engine.once(*plan, send=call.send, recv=call.recv, **sizes):
        ran = comm._last_runner = Unmade(engine, plan, dict(sizes, packets=1))
    else:
        run = engine.runner(*plan, packets=1, buffers=(call.send, call.recv) if first else None,
                            cache=not first, **sizes)
        run.transient = first
        ran = comm._last_runner = run
        try:
            run.run(call.send, call.recv)
        finally:
            if first:
                engine.release(run)
    call.unpack()
    speculate = bool(table[:, _CAN].all())
    last = comm._v_last[method] = _Speculation(
        (desc.name, nbytes, root, _copy(sdispls), _copy(rdispls), call.itemsize, call.op,
         _salt(method)), _repeated(row), _repeated(table).tobytes())
    if speculate:
        comm._v_spec[method] = last
    if template is not None and not packed and \
            (run is None or getattr(run, "bind_call", None) is not None):
        _memorize(comm, method, template, args, call, row, table, None if first else run,
                  speculate, can, (desc.name, nbytes, root, sdispls, rdispls),
                  once=run is None and not first)
        comm._last_runner = ran  # the call's, not its count table's
    _keep_older(comm, method, prev)


def _memorize(comm, method, template, args, call, row, table, run, speculate, can, params,
              once=False):
    """Remember a v-variant call (not packed) whose plan ``run`` (None: a runner of its own)
    ran for the table ``table`` as the method's last (:class:`_VectorMemo`, :func:`_install`);
    ``once``: the plan ran without a runner (:meth:`Engine.once
    <dualmpi.engine.core.Engine.once>`), its first repeat makes one (:func:`_made`).

    A repeat of the call fits its plan: its row says whether the rank ``can`` speculate (the
    table then differs from this one where a rank said not, and is agreed afresh).  ``params``
    (the plan's name, sizes, root and displacements) let a repeat bind the plan to the
    buffers when the rank moves :data:`ZERO_COPY_ABOVE` bytes or more and the buffers are
    apart (a reduction, ``Reduce_scatter``, too: the first block combined into each of its
    own is received where the result goes, as a fixed-count reduction's is:
    :func:`~dualmpi.engine.plan.received_seeds`).
    """
    bind = comm._zero_copy and not _overlap(call.send, call.recv)
    row[_CAN] = can
    counts = comm._runner("allgather", 0, row.nbytes, salt=_salt(method + " counts"))
    memo = _VectorMemo(template, args, call, row, table, counts, run,
                       comm._engine.lease(counts, run), speculate)
    if bind and _moved(call.send, call.recv) >= ZERO_COPY_ABOVE:
        memo.remake = params + (call.itemsize, _salt(method))
    if once:
        memo.made = (params + (call.itemsize, _salt(method)), speculate)
    _install(comm, method, memo)


#: Calls repeated with the same buffers run zero-copy from pieces of this many bytes (a
#: fixed-count call, :meth:`dualmpi.Comm._runner`) or from this many bytes moved by the rank (a
#: remembered v-variant call, :func:`_zero_copy`, its count table merged into the zero-copy
#: plan when it speculates); below it the copies cost less than looking the buffers up.  The
#: size from which payloads travel apart from their trailers too
#: (:data:`dualmpi.engine.mpi.APART`, Open MPI's shared-memory eager limit): a payload of
#: the user's buffer sent alone is copied once, by its receiver (docs/performance.md).
ZERO_COPY_ABOVE = 1 << 12


#: A call whose buffers are new to it runs zero-copy when the rank moves this many bytes (its
#: send and receive buffers together; a v-variant twice as many): a runner bound to them for
#: that call alone, which costs a millisecond or more to make, less than copying this much in
#: and out (docs/performance.md, ``benchmarks/new_buffers.py``).
ZERO_COPY_FIRST = 1 << 25


def _worth_binding(comm, collective, nbytes, send, recv, least=None):
    """True when a call on new buffers is worth a runner bound to them for that call alone.

    When the rank moves at least ``least`` bytes (default :data:`ZERO_COPY_FIRST`; the
    v-variants pass twice that: their plans take longer to bind), but for a streamed total
    exchange.  What the rank forwards or combines goes through the engine's spare store
    (:meth:`Engine.runner <dualmpi.engine.core.Engine.runner>` with ``cache=False``), whose
    pages are warm from the second such call.  The caller checks the rest (one node per
    rank, no option, no packing, buffers apart).
    """
    if _moved(send, recv) < (ZERO_COPY_FIRST if least is None else least):
        return False
    return not comm._engine.streams(collective, nbytes)


def _moved(send, recv):
    """Bytes of a call's send and receive buffers (byte arrays, or None)."""
    return (0 if send is None else send.size) + (0 if recv is None else recv.size)


def _overlap(a, b):
    """True when two buffers may share memory (they cannot be bound separately)."""
    return a is not None and b is not None and np.may_share_memory(a, b)


def _apart(comm, collective, nbytes, root, send, recv, itemsize):
    """True when a call's buffers can be bound: apart, or in place where the plan allows it.

    In place (``MPI.IN_PLACE``, or a reduction's send buffer at the receive buffer's address)
    the send buffer lies in the receive buffer: the call's own piece of an ``Allgather``, the
    whole receive buffer of an ``Allreduce``.  It can be bound where every block the rank
    starts with is one it delivers at the same address (:meth:`Engine.in_place
    <dualmpi.engine.core.Engine.in_place>`, decided once per call shape).
    """
    if not _overlap(send, recv):
        return True
    shift = send.ctypes.data - recv.ctypes.data
    if shift < 0 or shift + send.size > recv.size:
        return False
    key = (collective, nbytes, root, itemsize, shift)
    ok = comm._in_place.get(key)
    if ok is None:
        if len(comm._in_place) > 256:
            comm._in_place.clear()
        ok = comm._in_place[key] = comm._engine.in_place(
            comm.rank, collective, nbytes, root, comm.variant, comm.algorithms.get(collective),
            itemsize, shift)
    return ok


def _zero_copy(comm, method, memo):
    """Make ``memo`` (a v-variant call just repeated) run zero-copy from its next repeat.

    Its plan is bound again to the call's very buffers (one node per rank: the engine's
    zero-copy runner, :meth:`Engine.runner <dualmpi.engine.core.Engine.runner>` with
    ``buffers``): no copy in or out but the rank's own block (a reduction's blocks: into
    where they are combined).  Local only (no
    message), so every rank may do it or not; a new memo replaces the old one, its count
    table's allgather bound again after the new plan (which may have evicted it).  A memo
    that speculates keeps doing so: the zero-copy plan merged with the table's
    (:func:`dualmpi.engine.mpi.pair`) sends the bytes the store's merged plan sends, so its
    messages match those of a rank whose call runs on the store (:class:`_Speculation`).
    """
    name, nbytes, root, sdispls, rdispls, itemsize, salt = memo.remake
    memo.remake = None
    call = memo.call
    try:
        run = comm._engine.runner(comm.rank, name, nbytes, root, comm.variant, sdispls=sdispls,
                                  rdispls=rdispls, packets=1, itemsize=itemsize, op=call.op,
                                  salt=salt, buffers=(call.send, call.recv))
        run.pinned = memo.args
        counts = comm._runner("allgather", 0, memo.row.nbytes, salt=_salt(method + " counts"))
        comm._last_runner = run
    except (DualmpiError, ResourceError, MemoryError):
        # the call itself is done on every rank: this one keeps copying, and its next call
        # (the memory's lease ended, or not) is read afresh or repeated as before
        _install(comm, method, memo)
        return
    table = np.frombuffer(memo.seen, dtype=np.int64).reshape(memo.table.shape)
    memo = _VectorMemo(memo.template, memo.args, call, memo.row, table, counts, run,
                       comm._engine.lease(counts, run), memo.pair is not None)
    memo.ready(memo.speculate)  # bound now: the call repeats
    _install(comm, method, memo)


def _made(comm, method, memo):
    """Return the memo of a call first run without a runner (:func:`_memorize` with ``once``),
    now repeated: the same call with its plan's runner made (cached, copying through its
    store), as if the first call had made it; None when the runner cannot be made (the call
    is then read afresh).  Local only: every rank may do it or not."""
    (name, nbytes, root, sdispls, rdispls, itemsize, salt), speculate = memo.made
    call = memo.call
    try:
        run = comm._engine.runner(comm.rank, name, nbytes, root, comm.variant, sdispls=sdispls,
                                  rdispls=rdispls, packets=1, itemsize=itemsize, op=call.op,
                                  salt=salt)
        counts = comm._runner("allgather", 0, memo.row.nbytes, salt=_salt(method + " counts"))
    except (DualmpiError, ResourceError, MemoryError):
        _forget(comm, method)
        return None
    table = np.frombuffer(memo.seen, dtype=np.int64).reshape(memo.table.shape)
    new = _VectorMemo(memo.template, memo.args, call, memo.row, table, counts, run,
                      comm._engine.lease(counts, run), speculate)
    new.can, new.remake = memo.can, memo.remake
    _install(comm, method, new)
    return new


def _install(comm, method, memo):
    """Make ``memo`` the remembered call of ``method``, matched in C where it can be.

    ``comm._m<method>`` becomes a ``VRecall`` (:mod:`dualmpi.engine.recall`) once the memo
    runs its final plan (bound, nothing left to bind again); until then, and without the
    extension, the Python path of :func:`_vector_call` compares and runs it.
    """
    comm._v_memo[method] = memo
    module = recall.load()
    # (a memo without the pair when the method speculates: the Python path runs the call
    # beside the table as every rank does, :class:`_Speculation`)
    if memo.data is None or memo.remake is not None or module is None or \
            (method in comm._v_spec) != (memo.pair is not None) or \
            not isinstance(memo.exchange, module.Recall) or \
            not isinstance(memo.data, module.Recall) or \
            not (memo.pair is None or isinstance(memo.pair, module.Recall)):
        setattr(comm, "_m" + method, no_match)
        return
    setattr(comm, "_m" + method, module.VRecall(
        memo.template, memo.lease, 0, memo.exchange, memo.table, memo.seen, memo.data,
        memo.pair))


def _forget(comm, method):
    """Drop the remembered call of ``method`` (:func:`_install`)."""
    comm._v_memo.pop(method, None)
    setattr(comm, "_m" + method, no_match)


#: Older calls of a v-variant method remembered besides its last (:func:`_older`): a program
#: that alternates between calls (two transposes, two sets of buffers) repeats each.
OLDER = 3


def _keep_older(comm, method, memo):
    """Keep ``memo``, no longer the method's last call, among its older ones (:func:`_older`,
    the newest first, one per template; at most :data:`OLDER`): not one that repeats the last
    call, nor one holding more than ``dualmpi.comm.REMEMBERED_BYTES`` of buffers that it has
    not repeated yet (it would keep them alive)."""
    from .comm import REMEMBERED_BYTES

    last = comm._v_memo.get(method)
    if memo is None or last is not None and same(memo.template, tuple(last.args)):
        return
    held = sum(b.nbytes for b in (memo.call.send, memo.call.recv) if b is not None)
    if not memo.bound and held > REMEMBERED_BYTES and \
            (last is None or not _arrays(memo.template) <= _arrays(last.template)):
        return  # (memory the last call holds anyway keeps nothing more alive)
    keep = [o for o in comm._v_older.get(method, ()) if o.lease.live and
            not same(o.template, tuple(memo.args)) and
            not (last is not None and same(o.template, tuple(last.args)))]
    comm._v_older[method] = [memo] + keep[:OLDER - 1]


def _arrays(template):
    """The ids of the memory owners of the arrays a template holds (:func:`template_of`):
    the array at the end of each one's chain of bases, or the object it views."""
    out = set()
    for entry in template:
        for e in (entry[2] if entry[0] == SEQ else ()) + (entry,):
            if e[0] == ARRAY:
                a = e[1]
                while isinstance(a.base, np.ndarray):
                    a = a.base
                out.add(id(a if a.base is None else a.base))
    return out


def _older(comm, method, args, spec):
    """Make the method's older call whose arguments ``args`` repeat its remembered call
    (``comm._v_memo``) and return it, or return None.

    Every rank decides what it runs from the count table alone, as for the last call: such a
    call sends the row it sent then (its ``_CAN`` as then) and, when the table comes back as
    the table it was made for, runs that table's plan — on every rank the plan of that
    table.  While the method speculates, every rank runs the last plan beside the table, so
    only an older call whose table is the last plan's (``seen``) may run, beside the table
    too; while it does not, only one that does not speculate.
    """
    for memo in comm._v_older[method]:
        if not memo.lease.live or not same(memo.template, args):
            continue
        if spec is None and memo.speculate or \
                spec is not None and (not memo.speculate or memo.seen != spec.seen):
            return None
        comm._v_older[method] = [o for o in comm._v_older[method] if o is not memo]
        prev = comm._v_memo.get(method)
        seen = np.frombuffer(memo.seen, dtype=np.int64).reshape(memo.table.shape)
        memo.row[_CAN] = seen[comm.rank, _CAN]
        _install(comm, method, memo)
        _keep_older(comm, method, prev)
        return memo
    return None


def no_match(*args):
    """No call remembered (``Comm._m<Name>``): the Python path reads the arguments."""
    return False


def no_start(*args):
    """No repeat of a fixed-count nonblocking call remembered (``Comm._mI<name>``, else the
    matcher :func:`_install_start` makes): the Python path (:func:`icollective`) starts it."""
    return None


def fixed_nonblocking():
    """Return the names of the fixed-count nonblocking methods (``Ibcast``, ...), whose repeats
    :func:`_install_start` matches in C."""
    descs = [registry.get(n) for n in registry.names()]
    return tuple("I" + d.mpi[0].lower() + d.mpi[1:] for d in descs
                 if d.mpi and d.counts == "fixed")


def vector_nonblocking():
    """Return the names of the nonblocking v-variant methods (``Iscatterv``, ...), whose
    repeats :func:`_install_vstart` matches in C."""
    descs = [registry.get(n) for n in registry.names()]
    return tuple("I" + d.mpi[0].lower() + d.mpi[1:] for d in descs
                 if d.mpi and d.counts != "fixed")


def _install_vstart(comm, imethod, method, memo):
    """Make ``comm._m<imethod>`` start a repeat of ``memo``'s v-variant call: ``Recall.start``
    compares the arguments with the memo's template in C, as :func:`icollective` does, and
    returns the request ``VStart`` starts in C (a :class:`_Chain` on the memo's count table,
    its part restarted by ``Progress.crestart``), or None: another call of the memo holds its
    table, it is no longer the method's memo, or the part's start declined (the Python path,
    :func:`icollective`, then)."""
    module = recall.load()
    if module is None or comm._nb is None or comm._nb.crestart is None or \
            memo.counts_repeat is None:
        setattr(comm, "_m" + imethod, no_start)
        return
    # (the communicator weakly: it holds the matcher, which the collector cannot look into)
    setattr(comm, "_m" + imethod, module.Recall.start(
        module.VStart(comm._nb.crestart, _Chain, _IMemo, weakref.ref(comm), method,
                      registry.by_mpi(method)), memo,
        imethod, comm._transport.alarm, memo.template, memo.lease, 0))


def _install_start(comm, imethod, memo):
    """Make ``comm._m<imethod>`` start a repeat of ``memo``'s call in C: ``Recall.start``
    (:mod:`dualmpi.engine.recall`) compares the arguments with the memo's template as
    :func:`icollective` does (the engine's cache unchanged, the alarm not raised) and returns
    the request ``Progress.crestart`` starts, or None (the Python path then)."""
    module = recall.load()
    start = comm._nb.crestart if comm._nb is not None else None
    if module is None or start is None or memo.repeat is None or memo.repeat.c is None:
        setattr(comm, "_m" + imethod, no_start)
        return
    setattr(comm, "_m" + imethod, module.Recall.start(
        start, memo.repeat, imethod, comm._transport.alarm, memo.template, memo.lease, 0,
        memo.shape, memo.shaped))


def _shaped_repeat(memo, args):
    """Return the repeat of ``memo``'s fixed-count call for ``args`` on other arrays of its
    shape (:func:`shape_template_of`; two arrays apart), or None.

    Made once per tuple of the arrays' addresses (:meth:`Repeat.rebased
    <dualmpi.engine.nonblocking.Repeat.rebased>`: its copies in and out at those addresses;
    the last :data:`SHAPED` kept in ``memo.shaped``, where the C matcher of the method finds
    them: ``Recall.start``).  A program that passes a new view of the same memory every call
    (``a[i:j]``) starts every call after the first from C; one whose arrays are new memory
    every time makes a repeat each call, in Python, still far less than reading the call
    afresh and agreeing on it.  The ranks agreed on the call's signature, which arrays of the
    same dtype and shape do not change (a rank whose arguments differ otherwise misses the
    match, is read afresh and agrees, as for any call).
    """
    if memo.shape is None or memo.repeat is None or not same(memo.shape, args):
        return None
    arrays = shaped_arrays(memo.shape, args)
    if len(arrays) == 2 and _overlap(arrays[0], arrays[1]):
        return None
    key = tuple(a.ctypes.data for a in arrays)
    repeat = memo.shaped.get(key)
    if repeat is None:
        repeat = memo.repeat.rebased(memo.arrays, arrays)
        if repeat is None:
            return None
        if len(memo.shaped) >= SHAPED:
            del memo.shaped[next(iter(memo.shaped))]
        memo.shaped[key] = repeat
    return repeat


class _VectorMemo:
    """A v-variant call remembered for the next call of its method (see :func:`_vector_call`).

    ``template`` is what the arguments were (:func:`template_of`; the memo holds ``args``, so
    no id is reused).  ``exchange()`` sends ``row`` into ``table`` (the count table's
    allgather, bound to them); ``data()`` runs the call's plan bound to its buffers; ``seen``
    is the table the plan was made for, as a repeat of it sends it (every ``_RAN`` 1);
    ``pair()``, when the method runs speculatively (``speculate``), does both at once
    (:func:`dualmpi.engine.mpi.pair`).  The three are bound on the first repeat
    (:meth:`ready`): a program whose calls change every time binds nothing.
    """

    __slots__ = ("template", "args", "call", "row", "table", "seen", "exchange", "run", "data",
                 "lease", "remake", "pair", "counts", "speculate", "bound", "can", "made")

    def __init__(self, template, args, call, row, table, counts, run, lease, speculate=False):
        #: ends when the engine drops ``counts`` or ``run`` (:meth:`Engine.lease
        #: <dualmpi.engine.core.Engine.lease>`), and with it the memory of the call
        self.template, self.args, self.call, self.row, self.lease = template, args, call, row, \
            lease
        #: the engine runner's arguments, to bind the plan to the buffers (:func:`_zero_copy`)
        self.remake = None
        #: a call run without a runner: its runner's arguments and whether the table said
        #: speculate, for its first repeat to make the runner (:func:`_made`)
        self.made = None
        row[_RAN] = 1  # a repeat runs the plan on its buffers (or the table is not ``seen``)
        #: what the rank can (``_CAN``: :func:`_can_speculate`), which a repeat's row says
        self.can = int(row[_CAN])
        self.table, self.seen, self.run = np.zeros_like(table), _repeated(table).tobytes(), run
        self.counts, self.speculate = counts, speculate and run is not None
        self.exchange = self.data = self.pair = None
        self.bound = False

    def ready(self, speculating):
        """Bind the calls (the first time); True when the memo runs as every rank's call then
        does: beside the table's exchange when the method is ``speculating``."""
        if not self.bound:
            self.bound = True
            out = (self.row.view(np.uint8), self.table.view(np.uint8).reshape(-1))
            self.exchange = self.counts.bind_call(*out)
            call, run = self.call, self.run
            #: None when the call ran on a runner of its own (``run`` None): the repeat binds
            self.data = None if run is None else run.bind_call(call.send, call.recv)
            self.pair = engine_mpi.pair(self.counts, out, run, (call.send, call.recv)) \
                if self.speculate else None
        return speculating == (self.pair is not None)


def _ready(comm, method, memo, spec):
    """True when ``memo``, whose arguments the call repeats, runs it (:meth:`_VectorMemo.ready`);
    bound for the first time, it is installed to be matched in C from the next call on."""
    first = not memo.bound
    ok = memo.ready(spec is not None)
    if first and ok:
        _install(comm, method, memo)
    return ok


class _NotRemembered(Exception):
    """An argument :func:`template_of` cannot compare."""


#: The kinds of a template's entries (dualmpi/engine/recall.c says how each is compared).
SAME, ARRAY, INT, INTS, SEQ, VALUES, HANDLE, SHAPE = range(8)
#: Repeats of a nonblocking call on other arrays of its shape kept at once, by the arrays'
#: addresses (:func:`_shaped_repeat`).
SHAPED = 8


def template_of(args):
    """Return a template of a v-variant call's arguments (see :func:`same`), or None.

    The two buffer arguments' arrays (an array, or the first item of a buffer spec) are
    kept by identity with their dtype, shape, strides and writability; counts and
    displacements by value (ints, lists and tuples of them, integer arrays); a root by
    value; datatypes and ops by identity and handle (one freed since differs); ``None``,
    ``MPI.IN_PLACE``, ``MPI.BOTTOM`` and a numpy ufunc given as the operation (``np.add``)
    by identity.  An argument of any other kind: None (the call is not remembered).

    >>> import numpy as np
    >>> a, counts = np.zeros(4), [2, 2]
    >>> t = template_of(([a, counts], 0))
    >>> same(t, ([a, counts], 0)), same(t, ([a, [2, 3]], 0)), same(t, ([a.copy(), counts], 0))
    (True, False, False)
    >>> t = template_of((a, a, counts, np.add))
    >>> same(t, (a, a, counts, np.add)), same(t, (a, a, counts, np.multiply))
    (True, False)
    """
    try:
        out = []
        for i, a in enumerate(args):
            t = type(a)
            if i < 2 and t is np.ndarray:
                out.append(_array_entry(a))
            elif i < 2 and (t is list or t is tuple):
                out.append((SEQ, t, tuple(_array_entry(v) if j == 0 and type(v) is np.ndarray
                                          else _value_entry(v) for j, v in enumerate(a))))
            else:
                out.append(_value_entry(a))
        return tuple(out)
    except _NotRemembered:
        return None


def _array_entry(x):
    return (ARRAY, x, x.dtype, x.shape, x.strides, bool(x.flags.writeable))


def shape_template_of(template, written=None):
    """Return the template of calls like ``template``'s on other arrays of the same shape, or
    None: each array entry (:func:`template_of`: the buffer arguments' arrays, bare or first in
    a buffer spec) compared by dtype, shape and strides instead of identity, and writable when
    the call writes it (``SHAPE``); the other entries as they are.  ``written`` (a bool per
    buffer argument, or None: each array as writable as it is) says which arguments the call
    writes.  None when the arrays are not C-contiguous, more than two, none, or share bytes
    (mpi4py reads a send buffer at the receive buffer's address as in place).

    >>> import numpy as np
    >>> a, b = np.zeros(4), np.zeros(8)
    >>> t = shape_template_of(template_of((a, [b, 8, None])))
    >>> same(t, (np.ones(4), [np.ones(8), 8, None])), same(t, (np.ones(5), [b, 8, None]))
    (True, False)
    >>> [x.size for x in shaped_arrays(t, (a, [b, 8, None]))]
    [4, 8]
    >>> ro = np.ones(4)
    >>> ro.flags.writeable = False
    >>> same(t, (ro, [b, 8, None])), same(shape_template_of(template_of((a, b)), (False, True)),
    ...                                    (ro, b))
    (False, True)
    """
    found = []
    try:
        out = tuple(_shape_entry(e, i, written, found) for i, e in enumerate(template))
    except _NotRemembered:
        return None
    if not 0 < len(found) <= 2 or (len(found) == 2 and np.may_share_memory(*found)):
        return None
    return out


def _shape_entry(e, i, written, found):
    """:func:`shape_template_of`'s entry for template entry ``e`` of argument ``i``, its
    array appended to ``found`` (a function of the module, not a closure that refers to
    itself: that cycle would keep the call's arrays alive until the garbage collector ran)."""
    if e[0] == ARRAY:
        if not e[1].flags.c_contiguous:
            raise _NotRemembered
        found.append(e[1])
        w = e[5] if written is None or i >= len(written) else bool(written[i])
        return (SHAPE,) + e[2:5] + (w,)
    if e[0] == SEQ:
        return (SEQ, e[1], tuple(_shape_entry(x, i, written, found) for x in e[2]))
    return e


def shaped_arrays(template, args):
    """Return the arrays of ``args`` that ``template``'s ``SHAPE`` entries stand for, in order
    (:func:`shape_template_of`; ``args`` already found :func:`same`)."""
    out = []
    for t, x in zip(template, args):
        if t[0] == SHAPE:
            out.append(x)
        elif t[0] == SEQ and t[2] and t[2][0][0] == SHAPE:
            out.append(x[0])
    return out


_REMEMBERED_OBJECTS = None
_INT64 = (-(1 << 63), (1 << 63) - 1)


def _value_entry(v):
    """The template entry of counts, displacements, a root, a datatype or an op."""
    global _REMEMBERED_OBJECTS
    t = type(v)
    if v is None:
        return (SAME, None)
    if t is int:
        if not _INT64[0] <= v <= _INT64[1]:
            raise _NotRemembered
        return (INT, v)
    if t is list or t is tuple:
        if all(type(e) is int for e in v):
            try:
                return (INTS, t, np.array(v, dtype=np.int64).tobytes())
            except OverflowError:
                raise _NotRemembered from None
        return (SEQ, t, tuple(_value_entry(e) for e in v))
    if t is np.ndarray:
        if v.dtype.kind not in "iu" or not v.flags.c_contiguous:
            raise _NotRemembered
        return (VALUES, v.dtype, v.shape, v.tobytes())
    if _REMEMBERED_OBJECTS is None:
        MPI = _mpi()
        _REMEMBERED_OBJECTS = ((MPI.Datatype, MPI.Op), (MPI.IN_PLACE, MPI.BOTTOM))
    if isinstance(v, _REMEMBERED_OBJECTS[0]):
        return (HANDLE, v, v.handle)
    if any(v is x for x in _REMEMBERED_OBJECTS[1]) or t is np.ufunc:
        return (SAME, v)
    raise _NotRemembered


def same(template, args):
    """True when ``args`` (a tuple) are what ``template`` (:func:`template_of`) was made of.

    In C where the extension is built (:mod:`dualmpi.engine.recall`), else
    :func:`_same_python`: both compare alike (``tests/test_recall.py``).
    """
    return (_SAME or _same_of())(template, args)


_SAME = None


def _same_of():
    """Return :func:`same`'s comparison: the extension's, else :func:`_same_python` (kept)."""
    global _SAME
    module = recall.load()
    _SAME = _same_python if module is None else module.same
    return _SAME


def _same_python(template, args):
    """:func:`same` in Python."""
    return len(template) == len(args) and all(_entry_same(t, a) for t, a in zip(template, args))


def _entry_same(t, x):
    kind = t[0]
    if kind == SAME:
        return x is t[1]
    if kind == ARRAY:
        return (x is t[1] and x.dtype is t[2] and x.shape == t[3] and x.strides == t[4]
                and bool(x.flags.writeable) == t[5])
    if kind == SHAPE:
        return (type(x) is np.ndarray and x.dtype is t[1] and x.shape == t[2]
                and x.strides == t[3] and (x.flags.writeable or not t[4]))
    if kind == INT:
        return type(x) is int and x == t[1]
    if kind == INTS:
        return type(x) is t[1] and all(type(e) is int for e in x) and \
            len(x) * 8 == len(t[2]) and list(x) == np.frombuffer(t[2], np.int64).tolist()
    if kind == SEQ:
        return type(x) is t[1] and len(x) == len(t[2]) and \
            all(_entry_same(e, y) for e, y in zip(t[2], list(x)))
    if kind == VALUES:
        return (type(x) is np.ndarray and np.dtype(x.dtype) == t[1] and x.flags.c_contiguous
                and x.shape == t[2] and x.tobytes() == t[3])
    if kind == HANDLE:
        return x is t[1] and x.handle == t[2]
    raise ValueError(f"no template kind {kind}")


def _table_sizes(comm, method, desc, call, table, problem):
    """Return a v-variant's ``(sizes, root, sdispls, rdispls)`` from its count table."""
    if problem is None:
        # the verdict is a function of the table (and, for Reduce_scatter, of the send buffer's
        # size): a repeated call whose table is the same bytes reuses it
        key = (method, table.tobytes(), call.send.size if desc.name == "reduce_scatter" else 0)
        known = comm._v_verdicts.get(method)
        if known is not None and known[0] == key:
            sizes, root = known[1]
        else:
            sizes, root, _, _ = table_verdict(comm, method, desc, call, table, problem)
            sizes.flags.writeable = False
            comm._v_verdicts[method] = (key, (sizes, root))
        return sizes, root, *_displs(comm, desc, call, root)
    return table_verdict(comm, method, desc, call, table, problem)


def _displs(comm, desc, call, root):
    """This rank's ``(sdispls, rdispls)`` of a v-variant (see :func:`table_verdict`)."""
    kind, v = desc.name, call.vector
    if kind == "reduce_scatter":
        return None, None
    if kind in ("scatterv", "gatherv", "allgatherv"):
        return (v["sdispls"] if kind == "scatterv" and comm.rank == root else None,
                v.get("rdispls") if kind != "scatterv" else None)
    return v["sdispls"], v["rdispls"]


def _fill_row(comm, kind, call, v, row):
    """Fill this rank's row of the count table (see :func:`_vector_call`)."""
    from .arguments import crc

    R = comm.size
    row[2] = call.root
    row[3] = v.get("typesig", 0)
    row[4] = v.get("op", 0)
    if kind == "scatterv":
        row[5] = v["recv"] if v["recv"] is not None else int(v["send"][comm.rank])
        row[6] = crc(v["send"]) if v["send"] is not None else 0
    elif kind in ("gatherv", "allgatherv"):
        row[5] = v["send"]
        row[6] = crc(v["recv"]) if v["recv"] is not None else 0
    elif kind == "reduce_scatter":
        row[5] = v["recv"]
        row[6] = crc(v["counts"]) if v["counts"] is not None else -1
        row[7] = v["item"]
    else:
        row[5] = crc(v["recv"])
        row[6] = crc(np.asarray(v.get("recvsigs", [v["typesig"]] * R)))
        row[_HEAD:_HEAD + R] = v["send"]
        row[_HEAD + R:_HEAD + 2 * R] = v.get("sendsigs", [v["typesig"]] * R)


def table_verdict(comm, method, desc, call, table, problem=None):
    """Check a v-variant's count table alike on every rank; return the engine's sizes.

    Returns ``(sizes, root, sdispls, rdispls)``: the per-rank byte counts (or the
    pair matrix) and this rank's byte displacements.
    """
    from .arguments import crc, crc_columns

    if problem:
        _raise(problem)
    bad = np.flatnonzero(table[:, 1])
    if bad.size:
        raise InputError(f"{method}: arguments rejected on rank {int(bad[0])} (see its message)")
    if np.any(table[:, 0] != table[0, 0]):
        raise InputError(f"{method}: the ranks called different collectives")
    roots = table[:, 2]
    if np.any(roots != roots[0]):
        raise InputError(f"{method}: ranks disagree on the root (from {int(roots.min())} "
                         f"to {int(roots.max())})")
    kind, v, root, R = desc.name, call.vector, call.root, comm.size
    sigs = table[:, 3]
    if np.any(table[:, 4] != table[0, 4]):
        raise InputError(f"{method}: ranks disagree on the operation")
    if kind == "reduce_scatter":
        given = table[:, 6][table[:, 6] >= 0]
        if given.size and np.any(given != given[0]):
            raise InputError(f"{method}: ranks disagree on recvcounts")
        counts = table[:, 5] * 1
        if given.size and crc(counts) != given[0]:
            raise InputError(f"{method}: a rank's recvbuf does not hold its recvcounts entry")
        if np.any(table[:, 7] != table[0, 7]) or np.any(sigs != sigs[0]):
            raise InputError(f"{method}: ranks disagree on the datatype")
        total = int(counts.sum())
        if call.send.size != total:
            item = max(1, v["item"])
            raise InputError(f"{method}: sendbuf has {call.send.size // item} elements, the "
                             f"ranks' recvcounts add up to {total // item}")
        return counts, 0, None, None
    if kind in ("scatterv", "gatherv", "allgatherv"):
        counts = table[:, 5] * 1
        checks = table[:, 6] if kind == "allgatherv" else table[root, 6:7]
        if np.any(checks != crc(counts)):
            side = {"scatterv": "the root's sendcounts and the ranks' recvbufs",
                    "gatherv": "the ranks' sendbufs and the root's recvcounts",
                    "allgatherv": "the ranks' sendbufs and recvcounts"}[kind]
            raise InputError(f"{method}: {side} disagree (counts {counts.tolist()} bytes)")
        if np.any(sigs[counts > 0] != sigs[counts > 0][:1]):
            raise InputError(f"{method}: ranks disagree on the datatype")
        return (counts, root, *_displs(comm, desc, call, root))
    matrix = table[:, _HEAD:_HEAD + R]
    sends = table[:, _HEAD + R:_HEAD + 2 * R]
    for b, (got, sig, want, want_sig) in enumerate(zip(
            crc_columns(matrix), crc_columns(sends), table[:, 5].tolist(), table[:, 6].tolist())):
        if got != want:
            raise InputError(f"{method}: rank {b}'s recvcounts do not match what the ranks "
                             f"send it (bytes {matrix[:, b].tolist()})")
        if sig != want_sig:
            raise InputError(f"{method}: the datatypes rank {b} receives do not match those "
                             "the ranks send it")
    return (matrix, 0, *_displs(comm, desc, call, 0))


# -- nonblocking --------------------------------------------------------------------------------
def icollective(comm, imethod, method, read, args=None):
    """Start one nonblocking call of ``method`` (``imethod`` names it); return its Request.

    The call's plan runs as a request of the communicator's
    :class:`~dualmpi.engine.nonblocking.Progress`: the argument check first (a
    nonblocking control-plane reduction, so starting never waits for another rank; on a
    repeat of arguments agreed before, rank 0 says so and every other rank compares its
    own with rank 0's), then the rounds, advanced by every test or wait of any request.
    A v-variant first runs its count table as a request of its own (an allgather over
    the links) and starts the data's when the table is in.

    ``args``: the call's argument objects (as the blocking method's).  A call made with
    the objects of the method's last call (:func:`same`; not packed) is not read again
    (:class:`_IMemo`): a fixed-count call starts with the last call's plan, argument
    vector and memory estimate, as a blocking call repeated with a known signature skips
    its check (:func:`agree`); a v-variant sends the last call's row, and runs the last
    call's plan when the count table comes back as that call's.
    """
    if comm._engine is None:
        raise DualmpiError(f"{imethod}: the communicator was freed")
    memo = comm._i_memo.get(imethod) if args is not None else None
    repeat = None if memo is None else memo.repeat
    if memo is not None and (not memo.lease.live or not same(memo.template, args)):
        # other arrays of the memo's shape: a repeat of its for their addresses
        repeat = _shaped_repeat(memo, args) if memo.lease.live else None
        if repeat is None:
            memo = None
    if repeat is not None and comm._transport.alarm.broken is None:
        # a repeat of a fixed-count call: started by one C call (Progress.crestart, its request
        # made there too, else Progress.restart), else below
        progress = comm._nb
        req = NotImplemented if progress.crestart is None else \
            progress.crestart(repeat, imethod)
        if req is NotImplemented:
            preq = progress.restart(repeat, imethod)
            if preq is not None:
                if repeat is not memo.repeat:  # (the new arrays: held as the request is)
                    preq.keep = tuple(args)
                return Request.from_plan(progress, preq)
        elif req is not None:
            if repeat is not memo.repeat:
                req._plan.keep = tuple(args)
            return req
    if memo is not None and repeat is not memo.repeat:  # (a repeat for other arrays that
        memo = None  # Python must start: the call read afresh)
    if memo is not None and memo.counts_repeat is not None and \
            comm._transport.alarm.broken is None:
        # a v-variant's repeat: its count table's request restarted in C (_Chain, t None)
        progress = comm._progress()
        return Request.from_plan(progress, _Chain(comm, progress, imethod, method,
                                                  registry.by_mpi(method), memo.call, None,
                                                  None, memo))
    # a call number, and a notice to the others (a rank that makes this call blocking hears it)
    t = comm._transport.alarm.nonblocking(imethod)
    desc = registry.by_mpi(method)
    progress = comm._progress()
    if memo is not None and desc.counts == "fixed":
        return Request.from_plan(progress, progress.start(
            memo.bound, agree=memo.flat, check=memo.check, signature=memo.sig, what=imethod,
            call=t, **memo.start))
    if memo is not None:  # a v-variant's: its call and row (the table still exchanged)
        return Request.from_plan(progress, _Chain(comm, progress, imethod, method, desc,
                                                  memo.call, None, t, memo))
    call, problem = _read(read)
    if desc.counts != "fixed":
        chain = _Chain(comm, progress, imethod, method, desc, call, problem, t)
        if args is not None and problem is None and chain.problem is None and \
                not any(m.packed for m in call.sends + call.recvs):
            template = template_of(args)
            if template is not None:
                memo = comm._i_memo[imethod] = _IMemo(template, args, None, None, None, None,
                                                      None, comm._engine.lease(), call,
                                                      chain.row)
                memo.counts = chain.setup
                memo.count_table(comm, imethod)
                chain.remember(memo)  # (its table may have come already: the plan made)
                _install_vstart(comm, imethod, method, memo)
        return Request.from_plan(progress, chain)
    name = short = None
    if call is not None:
        name = _engine_name(comm, desc, call)
        try:
            short = memory_problem(comm, imethod, comm._store_bytes(name, call.root, call.nbytes,
                                                                    call.itemsize, _written(call)))
        except DualmpiError as exc:
            problem = exc
    fields = call.fields if call is not None else ()
    flat = _check_vector(comm, method, call.sig if call else (), problem, short)

    def check(hi, lo):
        verdict(imethod, hi, lo, fields, problem, short)

    if problem or short:  # this rank cannot run the call: it still joins the agreement
        bound, sig, start = None, None, {}
    else:
        call.pack()
        # the blocking call's algorithm (Comm._runner): the same messages
        algorithm = None if desc.combines else comm.algorithms.get(name)
        bound, sig = comm._engine.bind(comm.rank, name, call.nbytes, call.root, comm.variant,
                                       algorithm, itemsize=call.itemsize,
                                       combines=desc.combines, salt=_salt(imethod, call.sig),
                                       packets=None if comm.packets == "auto" else comm.packets)
        packed = any(m.packed for m in call.sends + call.recvs)
        start = dict(send=call.send, recv=call.recv,
                     finish=_counted(comm, bound, name, call.nbytes, call.root, algorithm,
                                     call.itemsize, call.unpack if packed else None),
                     combine=None if call.op is None else call.op[2],
                     exchanges=comm._engine.exchanges(name, call.root, comm.variant,
                                                      algorithm, desc.combines))
        template = None if args is None or packed else template_of(args)
        if template is not None:
            memo = comm._i_memo[imethod] = _IMemo(template, args, bound, flat, check, sig, start,
                                                  comm._engine.lease())
            if sig is not None:
                zero = None
                # bound to the buffers too (as the blocking Comm._runner), when both stores fit
                # (a rank that copies matches one that does not: the same messages)
                if comm._zero_copy and call.nbytes >= ZERO_COPY_ABOVE and \
                        not _overlap(call.send, call.recv) and memory_problem(
                            comm, imethod, comm._store_bytes(
                                name, call.root, call.nbytes, call.itemsize, _written(call)) +
                            comm._store_bytes(name, call.root, call.nbytes, call.itemsize,
                                              zero_copy=True)) is None:
                    zero = comm._engine.bind_buffers(bound, comm.rank, name, call.nbytes,
                                                     call.root, comm.variant, algorithm,
                                                     call.itemsize, call.send, call.recv)
                memo.repeat = Repeat(bound, flat, check, sig, zero=zero, **start)
                memo.shape = shape_template_of(template)
                if memo.shape is not None:
                    memo.arrays = shaped_arrays(memo.shape, args)
            _install_start(comm, imethod, memo)
    preq = progress.start(bound, agree=flat, check=check,
                          signature=sig, what=imethod, call=t, **start)
    return Request.from_plan(progress, preq)


class _IMemo:
    """The last call of a nonblocking method (:func:`icollective`): its arguments'
    ``template`` (and the ``args``, held so their ids stay theirs) and its ``lease``
    (:meth:`Engine.lease <dualmpi.engine.core.Engine.lease>` of no runner: its plans are the
    engine's bound plans, data no cache eviction frees); of a fixed-count call its
    ``bound`` plan, argument ``flat`` vector and its ``check``, call signature ``sig`` and
    the :meth:`Progress.start <dualmpi.engine.nonblocking.Progress.start>` arguments of
    its buffers, and the ``repeat`` (:class:`~dualmpi.engine.nonblocking.Repeat`) a repeat
    of it starts with in C; of a v-variant its read ``call`` and count-table ``row``, and once a
    call has run (:class:`_Chain`) the ``table`` it was planned for and the ``data``
    arguments of :meth:`Progress.start <dualmpi.engine.nonblocking.Progress.start>` for
    that table, and the ``counts`` its count-table requests start with
    (:func:`_counts_setup`)."""

    __slots__ = ("template", "args", "bound", "flat", "check", "sig", "start", "lease", "call",
                 "row", "table", "data", "repeat", "counts", "counts_repeat", "table_buf",
                 "table_busy", "sink", "data_repeat", "counts_what", "shape", "arrays",
                 "shaped")

    def __init__(self, template, args, bound, flat, check, sig, start, lease, call=None,
                 row=None):
        self.template, self.args, self.bound, self.flat = template, args, bound, flat
        self.check, self.sig, self.start, self.lease = check, sig, start, lease
        self.call, self.row, self.table, self.data = call, row, None, None
        self.repeat = self.counts = self.counts_repeat = self.table_buf = None
        self.table_busy, self.sink, self.data_repeat = False, [None], None
        self.counts_what = None
        #: a fixed-count call's template for other arrays of its shape
        #: (:func:`shape_template_of`), its own arrays then, and its repeats for other arrays
        #: by their addresses (:func:`_shaped_repeat`)
        self.shape, self.arrays, self.shaped = None, (), {}

    def count_table(self, comm, imethod):
        """Make :attr:`counts_repeat`, the :class:`~dualmpi.engine.nonblocking.Repeat` a
        v-variant's count-table request restarts with (:class:`_Chain`): the row it sends,
        the table :attr:`table_buf` it fills, its ``finish`` the running call's (``sink``)."""
        ring, flat, bound, sig, check, cost = self.counts
        self.counts_what = f"{imethod} (its counts)"
        self.table_buf = np.zeros((comm.size, self.row.size), dtype=np.int64)
        tick = comm._nb_tally.adder(bound, *cost)
        module = recall.load()
        restart = comm._nb.crestart if comm._nb is not None else None
        # (with the extension, the running call's data started in C when its table is the
        # memo's: recall.c's VSizes)
        finish = functools.partial(_tick_then_sink, tick, self.sink) \
            if module is None or restart is None else \
            module.VSizes(tick, self.sink, restart, _Chain, _IMemo)
        self.counts_repeat = Repeat(
            bound, flat, check, sig, send=self.row.view(np.uint8),
            recv=self.table_buf.view(np.uint8).reshape(-1), finish=finish)


def _tick_then_sink(tick, sink):
    """The ``finish`` of a v-variant's count-table repeat (:meth:`_IMemo.count_table`) without
    the extension (with it: ``recall.c``'s ``VSizes``): count the call (``tick``,
    :meth:`Tally.adder`), then the running call's (``sink[0]``) — one Python frame."""
    tick()
    return sink[0]()


class _Chain:
    """A nonblocking v-variant: its count table's request, then its data's (one request to the user).

    Quacks like a :class:`~dualmpi.engine.nonblocking.PlanRequest` for
    :class:`dualmpi.Request` and the progress engine: ``done``, ``what``, ``seq``,
    ``progress``, ``outcome()`` and ``waiting()``; ``current`` is the request it runs now.
    A repeat not given its call number (``t`` None) restarts the table's request in C
    (:meth:`Progress.restart <dualmpi.engine.nonblocking.Progress.restart>` of the memo's
    ``counts_repeat``, on the memo's table: ``owns`` while it reads it), else starts it in
    Python, taking the call number then.  A repeat matched in C is made and started there too
    (``recall.c``'s ``VStart``, :func:`_install_vstart`: the slots written as a repeat's are
    here, the memo's table owned), and waited for there part by part (``WaitMethod``).
    """

    __slots__ = ("comm", "progress", "what", "method", "desc", "call", "error", "data", "memo",
                 "problem", "row", "setup", "data_seq", "owns", "counts", "table", "seq", "made")

    def __init__(self, comm, progress, imethod, method, desc, call, problem, t, memo=None):
        self.comm, self.progress, self.what = comm, progress, imethod
        self.method, self.desc, self.call = method, desc, call
        self.error, self.data, self.memo, self.made = None, None, memo, None
        if memo is not None:  # a repeat: the row the call sent then
            row, self.problem = memo.row, None
        else:
            row, self.problem = _row(comm, method, desc, call, problem)
        self.row = row
        ring = comm.algorithms.get("allgather")  # the blocking table's (Comm._runner)
        setup = memo.counts if memo is not None else None
        if setup is None or setup[0] != ring:  # (a repeat's: made by its first call)
            setup = self.setup = _counts_setup(comm, imethod, method, row, ring)
            if memo is not None:
                memo.counts, memo.counts_repeat = setup, None
        else:
            self.setup = setup
        # a repeat not given its call number yet (t None) restarts its counts' request in C
        self._begin(comm, progress, imethod,
                    memo.counts_repeat if memo is not None and t is None else None, t)

    def _begin(self, comm, progress, imethod, repeat, t):
        """Take the data's number, then start the count table's request: ``repeat`` (the memo's
        ``counts_repeat``) restarts it in C (:meth:`Progress.part
        <dualmpi.engine.nonblocking.Progress.part>`, the call number and notices taken there)
        on the memo's table, unless another call of the memo holds that table or the start in
        C declines; else Python starts it on a table of its own, taking call number ``t``
        (None: now)."""
        memo = self.memo
        _, flat, bound, sig, check, cost = self.setup
        # the data's tag, taken now (before the counts' request, which may finish at once):
        # the ranks' counts arrive in other orders
        self.data_seq = progress.reserve()
        self.owns = repeat is not None and not memo.table_busy
        self.counts = None
        if self.owns:
            memo.table_busy, memo.sink[0] = True, self._sizes
            self.table = memo.table_buf
            self.counts = progress.part(repeat, memo.counts_what)
        else:
            self.table = np.zeros((comm.size, self.row.size), dtype=np.int64)
        if self.counts is None:
            if t is None:  # (a call number, and a notice to the others: as icollective's)
                t = comm._transport.alarm.nonblocking(imethod)
            self.counts = progress.start(bound, send=self.row.view(np.uint8),
                                         recv=self.table.view(np.uint8).reshape(-1),
                                         agree=flat, check=check,
                                         finish=_count_then(comm._nb_tally, bound, cost,
                                                            self._sizes),
                                         signature=sig, what=f"{imethod} (its counts)", call=t)
        self.seq = self.counts.seq

    def _sizes(self):
        """The table is in: check it, then start the data's request (errors kept, not raised)."""
        try:
            comm, call, desc, memo = self.comm, self.call, self.desc, self.memo
            table = self.table.tobytes()
            if self.owns:  # (the memo's table is free again, read: the next call may take it)
                memo.table_busy, memo.sink[0], self.owns = False, None, False
                if memo.table != table:  # (read below)
                    self.table = self.table.copy()
            if memo is not None and memo.table == table:  # the table the memo's plan is for
                # (started in C when it can: Progress.restart of the memo's plain Repeat)
                rep = memo.data_repeat
                self.data = None if rep is None else \
                    self.progress.part(rep, self.what, self.data_seq)
                if self.data is None:
                    self.data = self.progress.start(*memo.data[0], seq=self.data_seq,
                                                    **memo.data[1])
                return
            nbytes, root, sdispls, rdispls = table_verdict(comm, self.method, desc, call,
                                                           self.table, self.problem)
            call.pack()
            bound, sig = comm._engine.bind(comm.rank, desc.name, nbytes, root, comm.variant,
                                           sdispls=sdispls, rdispls=rdispls,
                                           itemsize=call.itemsize, combines=desc.combines,
                                           salt=_salt(self.what))
            packed = any(m.packed for m in call.sends + call.recvs)
            finish = _counted(comm, bound, desc.name, nbytes, root, None, call.itemsize,
                              call.unpack if packed else None)
            start = dict(send=call.send, recv=call.recv,
                         combine=None if call.op is None else call.op[2], finish=finish,
                         signature=sig, what=self.what,
                         exchanges=comm._engine.exchanges(desc.name, root, comm.variant,
                                                          combines=desc.combines))
            self.made = (table, bound, sig, start, None if packed else
                         (nbytes, root, sdispls, rdispls))
            memo = comm._i_memo.get(self.what)
            if memo is not None and memo.call is call:  # (this call's, or a repeat's)
                self.remember(memo)
            self.data = self.progress.start(bound, seq=self.data_seq, **start)
        except (InputError, DualmpiError) as exc:
            self.error = exc

    def remember(self, memo):
        """Give ``memo`` (of this call) the data's plan made for the table this call got (its
        repeats with that table start it in C: ``memo.data_repeat``, zero-copy where
        :func:`_zero_bound` binds it); nothing when the plan is not made yet or failed.  Called
        when the plan is made, and by :func:`icollective` after it makes the memo of a first
        call whose table came at once (the plan made before the memo)."""
        if self.made is None or self.error is not None:
            return
        table, bound, sig, start, sizes = self.made
        comm, call = self.comm, self.call
        memo.table, memo.data = table, ((bound,), start)
        memo.data_repeat = None if sig is None else Repeat(
            bound, np.zeros(0, np.int64), None, sig, send=call.send, recv=call.recv,
            combine=start["combine"], finish=start["finish"], plain=True,
            exchanges=start["exchanges"],
            zero=None if sizes is None else _zero_bound(comm, self.what, self.desc, call, bound,
                                                        *sizes))

    @property
    def done(self):
        """True once the call has finished, well or not."""
        if self.error is not None or (self.counts.done and self.counts.error is not None):
            return True
        return self.data is not None and self.data.done

    def outcome(self):
        """Return the result (None) or raise the error of a finished call."""
        if self.error is not None:
            raise self.error
        self.counts.outcome()
        return self.data.outcome()

    @property
    def current(self):
        """The request the call runs now: its data's once started, else its count table's."""
        return self.data if self.data is not None else self.counts

    def waiting(self):
        """What the call waits for (for the watchdog): its current request's."""
        return self.current.waiting()


def _zero_bound(comm, imethod, desc, call, bound, nbytes, root, sdispls, rdispls):
    """Return the plan ``bound`` of a nonblocking v-variant's data rebound to the call's
    buffers (:meth:`Engine.bind_buffers <dualmpi.engine.core.Engine.bind_buffers>`: its
    repeats then run zero-copy, as a fixed-count call's do, :func:`icollective`), or None.

    As the blocking v-variants (:func:`_memorize`): one node per rank, no option that needs
    the store, buffers apart, the rank moving :data:`ZERO_COPY_ABOVE` bytes or more, and the
    bound plan's store fitting in memory beside the copying one.  Local only: a rank bound to
    its buffers sends the messages of one that copies.
    """
    if not comm._zero_copy or _overlap(call.send, call.recv) or \
            _moved(call.send, call.recv) < ZERO_COPY_ABOVE:
        return None
    need = comm._engine.store_bytes(comm.rank, desc.name, nbytes, root, comm.variant, None,
                                    call.itemsize, zero_copy=True)
    if memory_problem(comm, imethod, need) is not None:
        return None
    return comm._engine.bind_buffers(bound, comm.rank, desc.name, nbytes, root, comm.variant,
                                     None, call.itemsize, call.send, call.recv,
                                     sdispls=sdispls, rdispls=rdispls)


def _counts_setup(comm, imethod, method, row, ring):
    """Return what a v-variant's count-table request starts with: ``(ring, flat, bound, sig,
    check, cost)`` — the allgather algorithm it was made for, the argument vector, the bound
    plan and its signature, the verdict and the plan's cost (kept by a repeat: ``_IMemo.counts``)."""
    flat = _check_vector(comm, method + " counts", (row.size,), None, None)
    bound, sig = comm._engine.bind(comm.rank, "allgather", row.nbytes, 0, comm.variant, ring,
                                   salt=_salt(method + " counts"))
    cost = comm._engine.cost("allgather", row.nbytes, 0, comm.variant, ring, 1)

    def check(hi, lo):
        verdict(imethod, hi, lo, ())

    return ring, flat, bound, sig, check, cost


# -- what the nonblocking calls sent (stats) -----------------------------------------------------
def _counted(comm, bound, name, nbytes, root, algorithm, itemsize, finish):
    """Return the ``finish`` of a nonblocking call's request: count the call in ``comm``'s
    :class:`Tally` (as the blocking runner counts its calls), then run ``finish`` (None:
    nothing to unpack, the count alone)."""
    cost = comm._engine.cost(name, nbytes, root, comm.variant, algorithm, itemsize)
    return _count_then(comm._nb_tally, bound, cost, finish)


def _count_then(tally, bound, cost, finish):
    """Return a ``finish`` that counts a call of ``bound`` (``cost``: its rounds, steps and step
    bytes) in ``tally``, then runs ``finish`` (None: the count alone)."""
    if finish is None:  # (no Python frame of its own: Tally.adder)
        return tally.adder(bound, *cost)

    def counted():
        tally.add(bound, *cost)
        return finish()

    return counted


class Tally:
    """What a communicator's completed nonblocking collectives sent, counted as the blocking
    runners count theirs (:meth:`dualmpi.Comm.stats`).

    A call that completes (its request's plan ran to the end, every message sent and
    received) adds its bound plan's per-link messages and bytes, one collective, and its
    schedule's hop rounds, steps and step bytes (:meth:`Engine.cost
    <dualmpi.engine.core.Engine.cost>`).  Per plan the counts are kept as a call count (the
    plan's small link arrays held); past :data:`KEEP` plans the oldest are folded into
    per-link totals.

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> plan = NS(link_src=np.array([0]), link_dst=np.array([1]),
    ...           link_messages=np.array([2]), link_bytes=np.array([64]))
    >>> t = Tally(); t.add(plan, 3, 3, 96); t.add(plan, 3, 3, 96)
    >>> t.counts()
    ({(0, 1): (4, 128)}, {'collectives': 2, 'rounds': 6, 'steps': 6, 'step_bytes': 192})
    """

    #: Plans counted one by one before the oldest are folded into totals.
    KEEP = 256

    def __init__(self):
        self._plans = OrderedDict()
        self._links = {}
        self._totals = dict.fromkeys(("collectives", "rounds", "steps", "step_bytes"), 0)

    def add(self, bound, rounds, steps, step_bytes):
        """Count one completed call of ``bound`` (a :class:`~dualmpi.engine.plan.BoundPlan`)."""
        key = id(bound.link_src)  # held below: the id is not reused while counted
        entry = self._plans.get(key)
        if entry is None:
            entry = self._plans[key] = [bound.link_src, bound.link_dst, bound.link_messages,
                                        bound.link_bytes, 0, rounds, steps, step_bytes]
            while len(self._plans) > self.KEEP:
                self._fold(self._plans.popitem(last=False)[1])
        entry[4] += 1

    def adder(self, bound, rounds, steps, step_bytes):
        """Return a callable of no argument that counts one completed call of ``bound`` as
        :meth:`add` does: ``recall.c``'s ``Tick`` (no Python frame) when the extension is
        loaded, else a :func:`functools.partial` of :meth:`add`.

        >>> from types import SimpleNamespace as NS
        >>> plan = NS(link_src=np.array([0]), link_dst=np.array([1]),
        ...           link_messages=np.array([2]), link_bytes=np.array([64]))
        >>> t = Tally(); tick = t.adder(plan, 3, 3, 96); tick(); tick()
        >>> t.counts()[0]
        {(0, 1): (4, 128)}
        """
        add = functools.partial(self.add, bound, rounds, steps, step_bytes)
        ext = recall.load()
        if ext is None:
            return add
        return ext.Tick(self._plans, id(bound.link_src), add)

    def _fold(self, entry):
        src, dst, msgs, nbytes, calls, rounds, steps, step_bytes = entry
        links = self._links
        for s, d, m, n in zip(src.tolist(), dst.tolist(), msgs.tolist(), nbytes.tolist()):
            m0, n0 = links.get((s, d), (0, 0))
            links[(s, d)] = (m0 + m * calls, n0 + n * calls)
        totals = self._totals
        totals["collectives"] += calls
        totals["rounds"] += rounds * calls
        totals["steps"] += steps * calls
        totals["step_bytes"] += step_bytes * calls

    def counts(self):
        """Return ``(links, totals)``: ``{(u, v): (messages, bytes)}`` and ``{"collectives",
        "rounds", "steps", "step_bytes"}`` of every call counted so far."""
        keep = self._links, self._totals
        self._links, self._totals = dict(keep[0]), dict(keep[1])
        try:
            for entry in self._plans.values():
                self._fold(entry)
            return self._links, self._totals
        finally:
            self._links, self._totals = keep
