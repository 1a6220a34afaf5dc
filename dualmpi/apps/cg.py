"""Conjugate gradient on the 2-D Poisson equation, grid rows in blocks along a path of links."""

from dataclasses import dataclass

import numpy as np

__all__ = ["Partition", "partition", "cg_solve", "cg_serial", "poisson_matvec", "make_rhs",
           "check_size", "TOL"]

#: Relative residual at which the solver stops.
TOL = 1e-8


def check_size(n, ranks):
    """Raise ``ValueError`` unless the ``n x n`` grid splits into ``ranks`` blocks of rows.

    >>> check_size(32, 8)
    """
    if n < 1 or n % ranks:
        raise ValueError(f"cg: N = {n} grid rows do not split evenly over the {ranks} ranks")


@dataclass(frozen=True)
class Partition:
    """Which block of grid rows each rank holds and how neighbouring blocks exchange halos.

    ``path[i]`` is the rank holding block ``i``; ``halo`` is ``"p2p"`` (``Isend``/
    ``Irecv`` between consecutive ranks of the path, which are linked) or ``"alltoallv"``
    (one ``Alltoallv`` in which each rank sends its two edge rows).
    """

    path: tuple
    halo: str

    def block(self, rank):
        """Return the block index of ``rank``."""
        return self.path.index(rank)


def partition(comm, halo="auto"):
    """Return the :class:`Partition` for ``comm``.

    On a :class:`dualmpi.Comm` with one node per rank whose network has a Hamiltonian
    cycle (:func:`dualmpi.collectives.ring.default_cycle`: dual-cube, hypercube, RH),
    the blocks follow the cycle, so the halo partners are neighbours and the halo goes
    point to point.  Otherwise (metacube, CCC, several nodes per rank) the blocks follow
    the rank order and the halo goes by ``Alltoallv``.  A plain MPI communicator takes
    rank order and point to point.  ``halo="alltoallv"`` forces the collective halo.

    >>> class Plain:
    ...     def Get_size(self): return 4
    >>> partition(Plain())
    Partition(path=(0, 1, 2, 3), halo='p2p')
    """
    R = comm.Get_size()
    if halo not in ("auto", "p2p", "alltoallv"):
        raise ValueError(f"cg: bad halo {halo!r}: auto, p2p or alltoallv")
    from ..topology import Topology

    path, mode = tuple(range(R)), "p2p"
    topo = getattr(comm, "topology", None)  # mpi4py's Comm.topology is an int
    if isinstance(topo, Topology):
        from ..collectives.ring import default_cycle
        from ..errors import DualmpiError

        q = comm.q
        try:
            path = tuple(default_cycle(topo)) if q == 1 else path
            mode = "p2p" if q == 1 else "alltoallv"
        except DualmpiError:
            mode = "alltoallv"
    if halo == "alltoallv":
        mode = "alltoallv"
    elif halo == "p2p" and mode != "p2p":
        raise ValueError("cg: no path of links through the ranks for a point-to-point halo")
    return Partition(path, mode)


def make_rhs(n, ranks, block, seed=0):
    """Return block ``block`` (``n / ranks`` grid rows of ``n`` points) of the right-hand side.

    >>> make_rhs(8, 4, 0).shape
    (2, 8)
    """
    rng = np.random.default_rng([seed, block, 3])
    return rng.random((n // ranks, n))


def poisson_matvec(x, above, below):
    """Return ``A x`` for the 5-point Laplacian (``4 u_ij`` minus the four neighbours).

    ``x`` is a block of grid rows; ``above`` and ``below`` are the rows just outside
    it (zeros at the boundary: Dirichlet).

    >>> x = np.ones((2, 3)); z = np.zeros(3)
    >>> poisson_matvec(x, z, z)
    array([[2., 1., 2.],
           [2., 1., 2.]])
    """
    y = 4.0 * x
    y[:, 1:] -= x[:, :-1]
    y[:, :-1] -= x[:, 1:]
    y[1:] -= x[:-1]
    y[:-1] -= x[1:]
    y[0] -= above
    y[-1] -= below
    return y


def _halo(comm, part, x, above, below, sbuf, rbuf):
    """Fill ``above`` and ``below`` with the neighbouring blocks' edge rows (zeros at the ends)."""
    me, R = comm.Get_rank(), comm.Get_size()
    i = part.block(me)
    up = part.path[i - 1] if i > 0 else None
    down = part.path[i + 1] if i < R - 1 else None
    n = x.shape[1]
    if part.halo == "p2p":
        reqs = []
        if up is not None:
            reqs += [comm.Irecv(above, up), comm.Isend(x[0], up)]
        if down is not None:
            reqs += [comm.Irecv(below, down), comm.Isend(x[-1], down)]
        for req in reqs:
            req.Wait()
    else:
        scounts = np.zeros(R, dtype=np.int64)
        sdispls = np.zeros(R, dtype=np.int64)
        for peer, row in ((up, 0), (down, 1)):
            if peer is not None:
                scounts[peer], sdispls[peer] = n, row * n
        sbuf[:n], sbuf[n:] = x[0], x[-1]
        comm.Alltoallv([sbuf, (scounts, sdispls)], [rbuf, (scounts, sdispls)])
        above[...] = rbuf[:n] if up is not None else 0.0
        below[...] = rbuf[n:] if down is not None else 0.0
    if up is None:
        above[...] = 0.0
    if down is None:
        below[...] = 0.0


def _dot(comm, a, b, send, recv):
    """Return the global dot product of ``a`` and ``b`` (one ``Allreduce`` of one float64)."""
    send[0] = np.dot(a.ravel(), b.ravel())
    comm.Allreduce(send, recv)
    return float(recv[0])


def _cg(dot, matvec, rhs, tol, maxiter):
    """Run CG on local blocks with the given global ``dot`` and ``matvec``."""
    x = np.zeros_like(rhs)
    r = rhs.copy()
    p = r.copy()
    rr = dot(r, r)
    stop = tol * tol * rr
    it = 0
    while rr > stop and it < maxiter:
        ap = matvec(p)
        alpha = rr / dot(p, ap)
        x += alpha * p
        r -= alpha * ap
        rr_new = dot(r, r)
        p *= rr_new / rr
        p += r
        rr = rr_new
        it += 1
    return x, it, float(np.sqrt(rr))


def cg_solve(comm, rhs, part=None, tol=TOL, maxiter=None):
    """Solve ``A x = rhs`` for the distributed 2-D Poisson matrix by conjugate gradient.

    Rank ``part.path[i]`` holds block ``i`` of ``n / R`` grid rows.  Each iteration
    exchanges the edge rows with the neighbouring blocks (:class:`Partition`: point to
    point along links, or one ``Alltoallv``) and computes two dot products with
    ``comm.Allreduce`` of one float64.  It stops when ``||r|| <= tol ||rhs||`` or
    after ``maxiter`` iterations (default ``n * n``).

    Parameters
    ----------
    comm : dualmpi.Comm or mpi4py.MPI.Comm
        The ranks.
    rhs : ndarray, shape (n / R, n)
        This rank's block of the right-hand side.
    part : Partition, optional
        Default :func:`partition` of ``comm``.
    tol : float
        Relative residual to reach.
    maxiter : int, optional
        Iteration limit.

    Returns
    -------
    (ndarray, int, float)
        This rank's block of ``x``, the iterations run and the final residual norm.

    References
    ----------
    M. R. Hestenes, E. Stiefel, "Methods of conjugate gradients for solving linear
    systems", J. Res. Nat. Bur. Standards 49(6), 1952; the ring (Hamiltonian cycle) of
    the dual-cube: C. Wu, J. Wu, "On Self-Similarity and Hamiltonicity of Dual-Cubes",
    Section 4.

    Examples
    --------
    >>> class One:
    ...     def Get_rank(self): return 0
    ...     def Get_size(self): return 1
    ...     def Allreduce(self, s, r): r[...] = s
    >>> b = make_rhs(6, 1, 0)
    >>> x, it, res = cg_solve(One(), b)
    >>> it == cg_serial(b)[1], bool(res <= 1e-8 * np.linalg.norm(b))
    (True, True)
    """
    R = comm.Get_size()
    nb, n = rhs.shape
    check_size(n, R)
    part = partition(comm) if part is None else part
    above, below = np.zeros(n), np.zeros(n)
    sbuf, rbuf = np.empty(2 * n), np.empty(2 * n)
    send, recv = np.zeros(1), np.zeros(1)

    def matvec(v):
        _halo(comm, part, v, above, below, sbuf, rbuf)
        return poisson_matvec(v, above, below)

    return _cg(lambda a, b: _dot(comm, a, b, send, recv), matvec, rhs, tol,
               n * n if maxiter is None else maxiter)


def cg_serial(rhs, tol=TOL, maxiter=None):
    """Return ``(x, iterations, residual)`` of the same CG on the whole grid in one process.

    >>> x, it, res = cg_serial(make_rhs(8, 1, 0))
    >>> it > 0, x.shape
    (True, (8, 8))
    """
    n = rhs.shape[1]
    zero = np.zeros(n)
    return _cg(lambda a, b: float(np.dot(a.ravel(), b.ravel())),
               lambda v: poisson_matvec(v, zero, zero), rhs, tol,
               n * n if maxiter is None else maxiter)
