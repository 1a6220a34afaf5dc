"""Bad input from user code on :class:`~dualmpi.executors.mpi.LinkComm` (issue 9).

Run with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi`` for N a power of two >= 2;
the network is the hypercube Q_n with 2**n = N.  Every test lets all ranks finish their
communication, catches the error it provokes, then the ranks agree on the verdict with an
allreduce before asserting.  Uncaught errors in a real job: ``tests/test_bad_input.py``.
"""

import numpy as np
import pytest

from dualmpi.errors import DualmpiError, LinkError
from dualmpi.topology import from_spec

MPI = pytest.importorskip("mpi4py.MPI")

TAG = 7


def _agree(ok, comm=None):
    """Return True when ``ok`` holds on every rank (collective)."""
    comm = comm or MPI.COMM_WORLD
    return bool(comm.allreduce(1 if ok else 0, op=MPI.MIN))


def _link():
    """Return a LinkComm on the hypercube with one node per rank (skip unless a power of two)."""
    from dualmpi.executors.mpi import LinkComm

    size = MPI.COMM_WORLD.Get_size()
    if size & (size - 1):
        pytest.skip("needs a power-of-two number of ranks")
    return LinkComm(MPI.COMM_WORLD, from_spec(f"hypercube:n={size.bit_length() - 1}"))


def _refused_peers(link):
    """Return peers a node must not talk to.

    A non-neighbour (from 4 ranks on), itself, one past the last node, and MPI's wildcards
    ANY_SOURCE and PROC_NULL (which MPI itself would accept).
    """
    me, topo = link.node, link.topo
    strangers = [v for v in range(topo.num_nodes) if v != me and not topo.is_link(me, v)]
    return strangers[:1] + [me, topo.num_nodes, MPI.ANY_SOURCE, MPI.PROC_NULL]


#: Every LinkComm operation that names a peer.
OPS = {
    "send": lambda link, peer: link.send(np.zeros(4, dtype=np.uint8), peer, TAG),
    "isend": lambda link, peer: link.isend(np.zeros(4, dtype=np.uint8), peer, TAG),
    "send_array": lambda link, peer: link.send_array(np.zeros(4), peer, TAG),
    "recv": lambda link, peer: link.recv(np.empty(4, dtype=np.uint8), peer, TAG),
    "irecv": lambda link, peer: link.irecv(np.empty(4, dtype=np.uint8), peer, TAG),
    "recv_array": lambda link, peer: link.recv_array(np.empty(4), peer, TAG),
}


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("op", list(OPS))
def test_non_neighbour_is_refused(op):
    """Each operation with a non-neighbour raises LinkError naming both nodes; nothing is sent."""
    link = _link()
    me, spec = link.node, link.topo.spec
    problems = []
    for peer in _refused_peers(link):
        try:
            OPS[op](link, peer)
            problems.append(f"{op} with node {peer}: not refused")
        except LinkError as exc:
            if f"node {me} and node {peer} are not neighbours in {spec}" not in str(exc):
                problems.append(f"{op} with node {peer}: unclear message {exc}")
        except Exception as exc:  # noqa: BLE001 - any other error is a finding; stay collective
            problems.append(f"{op} with node {peer}: {type(exc).__name__}: {exc}")
    sent = sum(link.link_messages.values())
    link.free()
    assert _agree(not problems and sent == 0), (problems, sent)


def _pair(sent, buf, words=None, raw=False):
    """One recv_array case: what the sender sends, the receive buffer, the error's words."""
    return {"sent": sent, "buf": buf, "words": words, "raw": raw}


#: name -> factory of a case; ``words`` None: the array must arrive intact.
ARRAYS = {
    "match": lambda: _pair(np.arange(12.0).reshape(3, 4), np.empty((3, 4))),
    "match-many-dims": lambda: _pair(np.arange(2.0).reshape((1,) * 39 + (2,)),
                                     np.empty((1,) * 39 + (2,))),
    "dtype": lambda: _pair(np.zeros(4), np.empty(4, dtype=np.int64), "mismatched buffers"),
    "dtype-same-bytes": lambda: _pair(np.zeros(8, dtype=np.float32), np.empty(4),
                                      "mismatched buffers"),
    "buffer-larger": lambda: _pair(np.zeros(4), np.empty(8), "mismatched buffers"),
    "buffer-too-small": lambda: _pair(np.zeros(8), np.empty(4), "receive buffer too small"),
    # 1 MiB: past the eager limit, the sender blocks until the receiver drains the data.
    "buffer-too-small-1MiB": lambda: _pair(np.zeros(1 << 17), np.empty(16),
                                           "receive buffer too small"),
    # the sender uses plain send (no header): recv_array must not misread the data as a header.
    "sender-without-header": lambda: _pair(np.zeros(64, dtype=np.uint8), np.empty(8), "", raw=True),
}


def _check_error(exc, case, me, partner):
    """Return the problems with the error a mismatched receive raised (empty list: clear)."""
    if not isinstance(exc, DualmpiError):
        return [f"{type(exc).__name__}: {exc}"]
    msg, sent, buf = str(exc), case["sent"], case["buf"]
    if case["raw"]:
        wanted = [f"node {me}", f"node {partner}"]
    else:
        wanted = [f"node {me}: {case['words']}", f"node {partner} sent {sent.dtype.str}",
                  f"{sent.nbytes} bytes", buf.dtype.str, f"{buf.nbytes} bytes"]
    return [f"{w!r} not in {msg!r}" for w in wanted if w not in msg]


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("name", list(ARRAYS))
def test_recv_array_checks_the_buffer(name):
    """Even node u sends to u+1: a mismatch is a clear DualmpiError on the receiver, the data is
    drained (a second array on the same link and tag arrives intact), the sender does not block."""
    link = _link()
    me = link.node
    partner = me ^ 1  # the dimension-1 neighbour
    case = ARRAYS[name]()
    follow = np.arange(5, dtype=np.int16)
    problems = []
    if me % 2 == 0:
        try:
            if case["raw"]:
                link.send(case["sent"], partner, TAG)
            else:
                link.send_array(case["sent"], partner, TAG)
            link.send_array(follow, partner, TAG)
        except Exception as exc:  # noqa: BLE001 - a finding; stay collective
            problems.append(f"sender: {type(exc).__name__}: {exc}")
    else:
        try:
            got = link.recv_array(case["buf"], partner, TAG)
            if case["words"] is not None:
                problems.append("mismatch accepted")
            elif not np.array_equal(got, case["sent"]) or got.shape != case["sent"].shape:
                problems.append("received data differs")
        except Exception as exc:  # noqa: BLE001 - checked below; stay collective
            if case["words"] is None:
                problems.append(f"{type(exc).__name__}: {exc}")
            else:
                problems += _check_error(exc, case, me, partner)
        try:
            after = link.recv_array(np.empty(5, dtype=np.int16), partner, TAG)
            if not np.array_equal(after, follow):
                problems.append("the next array on the link differs")
        except Exception as exc:  # noqa: BLE001 - the previous message was not drained
            problems.append(f"next array: {type(exc).__name__}: {exc}")
    link.free()
    assert _agree(not problems), problems
