"""MPI tests of the red team's findings (issue 23) that are about a call's arguments.

Each case gave wrong data, a traceback of another library or silence before; now the result is
MPI's or one clear ``dualmpi`` error on every rank.  Run with ``mpiexec -n N python -m mpi4py -m
pytest --with-mpi tests/mpi/test_redteam_mpi.py``.
"""

import array

import numpy as np
import pytest

import dualmpi
from dualmpi.errors import DualmpiError, InputError

MPI = pytest.importorskip("mpi4py.MPI")

WORLD = MPI.COMM_WORLD
SIZE = WORLD.Get_size()
RANK = WORLD.Get_rank()
SPECS = {1: "dualcube:r=1", 2: "dualcube:r=1", 4: "dualcube:r=2", 8: "dualcube:r=2",
         16: "hypercube:n=4", 32: "dualcube:r=3", 64: "metacube:k=2,m=1"}


def _agree(ok):
    return bool(WORLD.allreduce(int(bool(ok)), op=MPI.MIN))


@pytest.fixture(scope="module", params=[1, 2], ids=["one-node", "two-nodes"])
def net(request):
    spec = SPECS[SIZE] if request.param == 1 else {1: "dualcube:r=1", 2: "dualcube:r=2",
                                                   4: "dualcube:r=2", 8: "dualcube:r=3"}.get(SIZE)
    if spec is None:
        pytest.skip("no two-node network at this size")
    q = None if request.param == 1 else None
    made = dualmpi.Comm(WORLD, spec, nodes_per_rank=q)
    yield made
    made.Free()


@pytest.mark.mpi
def test_typed_buffer_protocol_objects_reduce_as_their_type(net):
    """Item 2: array('d') and array('i') combine as doubles and ints (they combined as bytes)."""
    a, b, ref = array.array("d", [20.0, 9.0]), array.array("d", [0, 0]), array.array("d", [0, 0])
    net.Allreduce(a, b)
    WORLD.Allreduce(a, ref)
    ai = array.array("i", [700 if RANK == 0 else 5, 0])
    bi, refi = array.array("i", [0, 0]), array.array("i", [0, 0])
    net.Allreduce(ai, bi, op=MPI.MAX)
    WORLD.Allreduce(ai, refi, op=MPI.MAX)
    assert _agree(list(b) == list(ref) and list(bi) == list(refi)), (b, bi)


def _errors(call):
    try:
        call()
        err = None
    except DualmpiError as exc:
        err = (type(exc).__name__, str(exc))
    return WORLD.allgather(err)


@pytest.mark.mpi
@pytest.mark.parametrize("case, words", [
    ("partial-element", "not a multiple of the datatype extent 8"),
    ("bcast-in-place", "MPI.IN_PLACE is not a buffer here"),
    ("alltoall-in-place-twice", "MPI.IN_PLACE is not a buffer here"),
    ("subtract", "numpy.subtract is not both commutative and associative"),
    ("op-null", "MPI.OP_NULL is not a reduction operation"),
    ("structured", "cannot map buffer format"),
])
def test_bad_arguments_are_one_dualmpi_error_everywhere(net, case, words):
    """Items 12 and 14: before, accepted silently, a numpy ValueError mid-collective or a raw MPI
    error; now an InputError with the cause on every rank, and the communicator still works."""
    calls = {
        "partial-element": lambda: net.Bcast([bytearray(12), MPI.DOUBLE], root=0),
        "bcast-in-place": lambda: net.Bcast(MPI.IN_PLACE, root=0),
        "alltoall-in-place-twice": lambda: net.Alltoall(MPI.IN_PLACE, MPI.IN_PLACE),
        "subtract": lambda: net.Allreduce(np.ones(2), np.zeros(2), op=np.subtract),
        "op-null": lambda: net.Allreduce(np.ones(2), np.zeros(2), op=MPI.OP_NULL),
        "structured": lambda: net.Allgather(np.zeros(1, [("a", "i8"), ("b", "f8")]),
                                            np.zeros(SIZE, [("a", "i8"), ("b", "f8")])),
    }
    errs = _errors(calls[case])
    ok = all(e is not None and e[0] in ("InputError", "ResourceError") for e in errs)
    ok = ok and any(words in e[1] for e in errs if e)
    x, y = np.arange(3.0), np.zeros(3)
    net.Allreduce(x, y)
    assert _agree(ok and np.allclose(y, np.arange(3.0) * SIZE)), errs


@pytest.mark.mpi(min_size=2)
def test_nine_doubles_do_not_split_mid_element(net):
    """Item 12: 9 doubles cannot be split over the ranks' pieces: refused, not cut mid-element."""
    if 9 % SIZE == 0:
        pytest.skip("9 doubles split evenly")
    errs = _errors(lambda: net.Allgather(np.zeros(1), np.zeros(9)))
    assert _agree(all(e is not None and "cannot infer the count" in e[1] for e in errs)), errs


@pytest.mark.mpi
def test_a_freed_communicator_says_so():
    """Item 14: a call after Free is a DualmpiError, not an AttributeError."""
    net = dualmpi.Comm(WORLD, SPECS[SIZE])
    net.Free()
    errs = _errors(lambda: net.Allreduce(np.ones(2), np.zeros(2)))
    assert _agree(all(e is not None and "freed" in e[1] for e in errs)), errs


@pytest.mark.mpi
@pytest.mark.parametrize("method", ["Allgather", "Iallgather"])
def test_the_memory_check_counts_the_receive_buffer(net, monkeypatch, method):
    """Item 11: the check counted the runner's store only, not the receive buffer's pages the
    call writes (measured peak 2.0x the estimate).  With memory that holds the store and half
    the receive buffer per rank, the call is refused on every rank with one line (it was
    accepted), and the communicator still works."""
    import dualmpi.resources

    n = (1 << 12) + 7  # a size no other test uses: its signature has not been agreed on
    send = np.full(n, RANK + 1, dtype=np.uint8)
    recv, ref = np.empty(n * SIZE, dtype=np.uint8), np.empty(n * SIZE, dtype=np.uint8)
    store = net._engine.store_bytes(RANK, "allgather", n, 0, net.variant,
                                    net.algorithms.get("allgather"), 1)
    avail = int((store + recv.nbytes // 2) * net._transport.host_ranks / 0.8)
    monkeypatch.setattr(dualmpi.resources, "available_memory", lambda: avail)
    if method == "Allgather":
        errs = _errors(lambda: net.Allgather(send, recv))
    else:
        errs = _errors(lambda: net.Iallgather(send, recv).Wait())
    monkeypatch.undo()
    ok = all(e is not None and e[0] == "ResourceError" and "\n" not in e[1] for e in errs)
    ok = ok and any("buffers need" in e[1] for e in errs if e)
    net.Allgather(send, recv)
    WORLD.Allgather(send, ref)
    assert _agree(ok and np.array_equal(recv, ref)), errs


#: Alltoallv arguments whose byte positions do not fit in int64 (item 14): case -> (send count,
#: send displacement, receive displacement (None: a correct one), words of dualmpi's error), the
#: same for every rank.  Before: the first three wrapped around to byte 0 and were accepted (the
#: wrong bytes sent or overwritten), the fourth was a builtins OverflowError on the rank.
OVERFLOWS = {
    "sdispls-times-extent": (1, 1 << 62, None, "needs bytes [36893488147419103232"),
    "rdispls-times-extent": (1, 0, 1 << 61, "needs bytes [18446744073709551616"),
    "uint64-sdispls": (1, np.uint64(1 << 63), None,
                       "displs 9223372036854775808 does not fit in a 64-bit integer"),
    "sdispls-beyond-int64": (1, 1 << 64, None,
                             "displs 18446744073709551616 does not fit in a 64-bit integer"),
    "counts-times-extent": (1 << 61, 0, None, "needs bytes [0, 18446744073709551616)"),
}


def _overflow_specs(case, bad):
    """Return the case's ``(sendbuf, recvbuf)`` specs; ``bad`` False: a correct call instead."""
    count, sdispl, rdispl, _ = OVERFLOWS[case]
    s, r = np.arange(4.0 * SIZE) + 10 * RANK, np.zeros(4 * SIZE)
    counts, sdispls, rdispls = [1] * SIZE, list(range(SIZE)), list(range(SIZE))
    if bad:
        counts = [count] * SIZE
        sdispls = np.full(SIZE, sdispl, type(sdispl)) if type(sdispl) is np.uint64 else \
            [sdispl] * SIZE
        rdispls = rdispls if rdispl is None else [rdispl] * SIZE
    return [s, (counts, sdispls), MPI.DOUBLE], [r, ([1] * SIZE, rdispls), MPI.DOUBLE]


@pytest.mark.mpi
@pytest.mark.parametrize("who", ["every rank", "the last rank"])
@pytest.mark.parametrize("case", list(OVERFLOWS))
def test_alltoallv_displacements_that_overflow_int64_are_refused(net, case, who):
    """Item 14: displacements (or counts) whose bytes do not fit in int64 are one InputError
    with the exact figures on every rank, not a wrap-around into the buffer nor an
    OverflowError; MPI.COMM_WORLD refuses them too (MPI_ERR_ARG, or OverflowError where the
    number does not fit in a C long); no hang, and the communicator still works."""
    bad = who == "every rank" or RANK == SIZE - 1
    send, recv = _overflow_specs(case, bad)
    errs = _errors(lambda: net.Alltoallv(send, recv))
    words = OVERFLOWS[case][3]
    mine = errs[SIZE - 1]
    ok = all(e is not None and e[0] == "InputError" and "\n" not in e[1] for e in errs)
    ok = ok and mine is not None and words in mine[1]
    if who == "every rank":  # MPI's own verdict on the same arguments (a local check)
        try:
            WORLD.Alltoallv(send, recv)
            mpi = None
        except (MPI.Exception, OverflowError) as exc:
            mpi = type(exc).__name__
        ok = ok and all(m is not None for m in WORLD.allgather(mpi))
    send, recv = _overflow_specs(case, False)
    net.Alltoallv(send, recv)
    ref = np.zeros_like(recv[0])
    WORLD.Alltoallv(send, [ref, recv[1], MPI.DOUBLE])
    assert _agree(ok and np.array_equal(recv[0], ref)), errs
