"""Dense matrix multiply C = A B with broadcasts: 1-D block-row SUMMA."""

import numpy as np

__all__ = ["summa", "make_input", "reference", "check_size"]


def check_size(n, ranks):
    """Raise ``ValueError`` unless ``n`` is a positive multiple of ``ranks``.

    >>> check_size(32, 8)
    """
    if n < 1 or n % ranks:
        raise ValueError(f"summa: N = {n} is not a positive multiple of the {ranks} ranks "
                         "(rows per rank)")


def make_input(n, ranks, rank, seed=0):
    """Return rank ``rank``'s block rows ``(A_r, B_r)`` of two random N x N float64 matrices.

    >>> [m.shape for m in make_input(8, 4, 3)]
    [(2, 8), (2, 8)]
    """
    b = n // ranks
    rng = np.random.default_rng([seed, rank, 1])
    return rng.standard_normal((b, n)), rng.standard_normal((b, n))


def reference(n, ranks, seed=0):
    """Return ``A @ B`` of the matrices :func:`make_input` distributes."""
    blocks = [make_input(n, ranks, r, seed) for r in range(ranks)]
    return np.vstack([a for a, _ in blocks]) @ np.vstack([b for _, b in blocks])


def summa(comm, a, b):
    """Return this rank's block row of ``C = A @ B`` (A, B and C distributed by block rows).

    Rank ``r`` holds block rows ``A_r`` and ``B_r`` (``nb = N / ranks`` rows each).  In
    step ``k`` rank ``k`` broadcasts ``B_k`` (``comm.Bcast(root=k)``) and every rank
    adds ``A_r[:, k-th column block] @ B_k``: ``ranks`` broadcasts of ``nb * N``
    float64, the products accumulated in the order ``k = 0, 1, ...`` on every network.

    Parameters
    ----------
    comm : dualmpi.Comm or mpi4py.MPI.Comm
        The ranks; ``Get_rank``, ``Get_size`` and ``Bcast`` are used.
    a, b : ndarray, shape (nb, N), float64
        This rank's block rows of A and B.

    Returns
    -------
    ndarray, shape (nb, N)
        This rank's block row of ``A @ B``.

    References
    ----------
    R. A. van de Geijn, J. Watts, "SUMMA: scalable universal matrix multiplication
    algorithm", Concurrency: Practice and Experience 9(4), 1997, Section 2 (here with a
    1 x P process grid, so only the row panels of B are broadcast).

    Examples
    --------
    >>> class One:
    ...     def Get_rank(self): return 0
    ...     def Get_size(self): return 1
    ...     def Bcast(self, buf, root=0): pass
    >>> a, b = make_input(4, 1, 0)
    >>> bool(np.allclose(summa(One(), a, b), a @ b))
    True
    """
    R, me = comm.Get_size(), comm.Get_rank()
    nb, n = a.shape
    check_size(n, R)
    if nb * R != n or b.shape != a.shape:
        raise ValueError(f"summa: A and B block rows must be {n // R} x {n}, got {a.shape} "
                         f"and {b.shape}")
    c = np.zeros((nb, n))
    panel = np.empty((nb, n))
    for k in range(R):
        if k == me:
            panel[...] = b
        comm.Bcast(panel, root=k)
        c += a[:, k * nb:(k + 1) * nb] @ panel
    return c
