"""Distributed 2-D FFT of an N x N complex array, a block of rows per rank, transposed by Alltoall."""

import numpy as np

__all__ = ["fft2", "make_input", "reference", "check_size"]


def check_size(n, ranks):
    """Raise ``ValueError`` unless ``n`` is a positive multiple of ``ranks`` (rows per rank).

    >>> check_size(64, 8)
    >>> check_size(60, 8)
    Traceback (most recent call last):
    ...
    ValueError: fft: N = 60 is not a positive multiple of the 8 ranks (rows per rank)
    """
    if n < 1 or n % ranks:
        raise ValueError(f"fft: N = {n} is not a positive multiple of the {ranks} ranks "
                         "(rows per rank)")


def make_input(n, ranks, rank, seed=0):
    """Return rank ``rank``'s rows ``rank*b .. rank*b + b - 1`` of the test array (``b = n/ranks``).

    >>> make_input(8, 4, 1).shape, make_input(8, 4, 1).dtype
    ((2, 8), dtype('complex128'))
    """
    b = n // ranks
    rng = np.random.default_rng([seed, rank])
    return rng.standard_normal((b, n)) + 1j * rng.standard_normal((b, n))


def reference(n, ranks, seed=0):
    """Return ``numpy.fft.fft2`` of the whole array :func:`make_input` distributes."""
    return np.fft.fft2(np.vstack([make_input(n, ranks, r, seed) for r in range(ranks)]))


def _transpose(comm, rows, send, recv):
    """Return this rank's rows of the transpose of the row-distributed ``rows`` (one Alltoall)."""
    b, n = rows.shape
    R = n // b
    send[...] = rows.reshape(b, R, b).transpose(1, 0, 2)  # piece s: my rows, s's columns
    comm.Alltoall(send, recv)                              # recv[s, i, j] = M[s*b + i, r*b + j]
    return recv.transpose(2, 0, 1).reshape(b, n)           # row j: M[:, r*b + j]


def fft2(comm, rows, transpose_back=True):
    """Return this rank's rows of the 2-D FFT of a row-distributed N x N array.

    Rank ``r`` holds rows ``r*b .. r*b + b - 1`` (``b = N / ranks``).  The kernel
    transforms its rows, transposes the array with one ``comm.Alltoall`` (every pair
    of ranks exchanges a ``b x b`` block), transforms the rows again (the columns of
    the original) and, with ``transpose_back``, transposes back with a second
    ``Alltoall`` so the result has the input's layout.  Without it the result is
    rank ``r``'s rows of ``fft2(A).T`` (one exchange fewer).

    Parameters
    ----------
    comm : dualmpi.Comm or mpi4py.MPI.Comm
        The ranks; only ``Get_size`` and ``Alltoall`` are used.
    rows : ndarray, shape (b, N), complex
        This rank's rows.
    transpose_back : bool
        Return the input's layout (default) instead of the transposed one.

    Returns
    -------
    ndarray, shape (b, N), complex128
        Rows ``r*b ..`` of ``numpy.fft.fft2(A)`` (or of its transpose).

    References
    ----------
    C. Van Loan, *Computational Frameworks for the Fast Fourier Transform*, SIAM 1992,
    Section 3.3 (the transpose algorithm); the dual-cube paper's total exchange
    (Y. Li, S. Peng, W. Chu, "Efficient Collective Communications in Dual-cube",
    Section 6) moves the blocks on a dual-cube.

    Examples
    --------
    >>> class One:                       # one rank: the transpose is local
    ...     def Get_size(self): return 1
    ...     def Alltoall(self, s, r): r[...] = s
    >>> a = make_input(4, 1, 0)
    >>> bool(np.allclose(fft2(One(), a), np.fft.fft2(a)))
    True
    """
    R = comm.Get_size()
    b, n = rows.shape
    check_size(n, R)
    if b * R != n:
        raise ValueError(f"fft: {b} rows per rank on {R} ranks, but rows of length {n}")
    send = np.empty((R, b, b), dtype=np.complex128)
    recv = np.empty_like(send)
    t = np.fft.fft(_transpose(comm, np.fft.fft(rows, axis=1), send, recv), axis=1)
    return _transpose(comm, t, send, recv).copy() if transpose_back else t.copy()
