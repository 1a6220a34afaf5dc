"""Bad input from user code on :class:`dualmpi.Comm`'s point-to-point calls (issue 9, 13).

Run with ``mpiexec -n N python -m mpi4py -m pytest --with-mpi`` for N a power of two >= 2;
the network is the hypercube Q_n with 2**n = N.  Every test lets all ranks finish their
communication, catches the error it provokes, then the ranks agree on the verdict with an
allreduce before asserting.  Uncaught errors in a real job: ``tests/test_bad_input.py``.
"""

import numpy as np
import pytest

from dualmpi.topology import from_spec

MPI = pytest.importorskip("mpi4py.MPI")

TAG = 7


def _agree(ok, comm=None):
    """Return True when ``ok`` holds on every rank (collective)."""
    comm = comm or MPI.COMM_WORLD
    return bool(comm.allreduce(1 if ok else 0, op=MPI.MIN))


def _net():
    """Return a Comm on the hypercube with one node per rank (skip unless a power of two)."""
    from dualmpi import Comm

    size = MPI.COMM_WORLD.Get_size()
    if size & (size - 1) or size < 2:
        pytest.skip("needs a power-of-two number of ranks, at least 2")
    return Comm(MPI.COMM_WORLD, from_spec(f"hypercube:n={size.bit_length() - 1}"))


def _bad_peers(net):
    """Return peers no call may name: one past the last rank, a negative rank other than
    MPI's wildcards, and (for a send) ``MPI.ANY_SOURCE``.  Non-neighbours and the rank itself
    are reached by routing since issue 24 (``tests/mpi/test_p2p_routed_mpi.py``)."""
    return [net.Get_size(), -7]


#: Every point-to-point call that names a peer.
OPS = {
    "Send": lambda net, peer: net.Send(np.zeros(4, dtype=np.uint8), peer, TAG),
    "Isend": lambda net, peer: net.Isend(np.zeros(4), peer, TAG),
    "Recv": lambda net, peer: net.Recv(np.empty(4, dtype=np.uint8), peer, TAG),
    "Irecv": lambda net, peer: net.Irecv(np.empty(4), peer, TAG),
}


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("op", list(OPS))
def test_a_bad_peer_is_refused(op):
    """Each call naming a rank the communicator does not have raises one clear error (an
    MPI.Exception of class ERR_RANK, as MPI itself gives); nothing is sent.  A send to
    ``MPI.ANY_SOURCE`` is refused too; ``MPI.PROC_NULL`` completes at once, as in MPI."""
    net = _net()
    problems = []
    peers = _bad_peers(net) + ([MPI.ANY_SOURCE] if "send" in op.lower() else [])
    for peer in peers:
        try:
            OPS[op](net, peer)
            problems.append(f"{op} with rank {peer}: not refused")
        except MPI.Exception as exc:
            if exc.Get_error_class() != MPI.ERR_RANK or "bad" not in str(exc):
                problems.append(f"{op} with rank {peer}: unclear error {exc}")
        except Exception as exc:  # noqa: BLE001 - any other error is a finding; stay collective
            problems.append(f"{op} with rank {peer}: {type(exc).__name__}: {exc}")
    req = OPS[op](net, MPI.PROC_NULL)
    if req is not None:
        req.Wait()
    sent = net.stats()["messages"]
    net.Free()
    assert _agree(not problems and sent == 0), (problems, sent)


@pytest.mark.mpi(min_size=2)
def test_neighbours_exchange_and_are_counted():
    """Send/Recv with the dimension-1 neighbour arrive intact and count on that link."""
    net = _net()
    me = net.Get_rank()
    partner = me ^ 1
    out = np.arange(6, dtype=np.float64) + me
    got = np.empty(6)
    req = net.Irecv(got, partner, TAG)
    net.Send(out, partner, TAG)
    req.Wait()
    links = net.stats()["links"]
    net.Free()
    ok = np.array_equal(got, np.arange(6.0) + partner) and links == {(me, partner): (1, 48)}
    assert _agree(ok), links


@pytest.mark.mpi
def test_the_ranks_agree_on_the_memory_available(monkeypatch):
    """Each rank reads another figure (as two reads of a busy machine do): every rank gets the
    least, so a refused request is the same line on every rank (``dualmpi run``, ``soak``)."""
    from dualmpi import resources
    from dualmpi.commands.common import agreed_memory

    rank = MPI.COMM_WORLD.Get_rank()
    monkeypatch.setattr(resources, "available_memory", lambda: (rank + 3) << 30)
    assert _agree(agreed_memory(MPI.COMM_WORLD) == 3 << 30)
