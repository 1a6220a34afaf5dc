"""Parallel sample sort of 64-bit keys: samples all-gathered, buckets exchanged with Alltoallv."""

import numpy as np

__all__ = ["sample_sort", "splitters", "buckets", "make_input", "check_size"]


def check_size(n, ranks):
    """Raise ``ValueError`` unless each rank holds at least ``ranks`` of the ``n`` keys, evenly.

    >>> check_size(64, 8)
    >>> check_size(12, 8)
    Traceback (most recent call last):
    ...
    ValueError: sort: N = 12 keys do not split into 8 ranks x at least 8 keys
    """
    if n < ranks * ranks or n % ranks:
        raise ValueError(f"sort: N = {n} keys do not split into {ranks} ranks x at least "
                         f"{ranks} keys")


def make_input(n, ranks, rank, seed=0):
    """Return rank ``rank``'s ``n / ranks`` random uint64 keys (any 64-bit value).

    >>> make_input(16, 4, 0).dtype, make_input(16, 4, 0).size
    (dtype('uint64'), 4)
    """
    rng = np.random.default_rng([seed, rank, 2])
    return rng.integers(0, 2**64, size=n // ranks, dtype=np.uint64)


def splitters(samples, ranks):
    """Return the ``ranks - 1`` splitters: every ``s``-th of the sorted ``ranks * s`` samples.

    >>> splitters(np.array([9, 1, 5, 3, 7, 2], dtype=np.uint64), 3)
    array([3, 7], dtype=uint64)
    """
    s = samples.size // ranks
    return np.sort(samples)[s * np.arange(1, ranks)]


def buckets(local, cuts):
    """Return the counts and displacements of the sorted ``local`` keys per destination.

    Destination ``d`` gets the keys in ``(cuts[d-1], cuts[d]]`` (keys equal to a splitter
    go to the lower bucket).

    >>> buckets(np.array([1, 3, 3, 8], dtype=np.uint64), np.array([3, 5], dtype=np.uint64))
    (array([3, 0, 1]), array([0, 3, 3]))
    """
    ends = np.searchsorted(local, cuts, side="right")
    edges = np.concatenate([[0], ends, [local.size]]).astype(np.int64)
    return np.diff(edges), edges[:-1]


def sample_sort(comm, keys):
    """Return this rank's part of the globally sorted keys of all ranks.

    Regular sampling (PSRS): sort locally, take ``R`` evenly spaced samples, all-gather
    them (``comm.Allgather``), pick ``R - 1`` splitters, exchange the bucket sizes
    (``comm.Alltoall``) and the buckets (``comm.Alltoallv``), and merge.  Rank ``r``'s
    result holds keys no smaller than rank ``r - 1``'s, so the concatenation in rank
    order is the sorted input; no rank receives more than about ``2 N / R`` keys.

    Parameters
    ----------
    comm : dualmpi.Comm or mpi4py.MPI.Comm
        The ranks: ``Get_rank``, ``Get_size``, ``Allgather``, ``Alltoall``, ``Alltoallv``.
    keys : ndarray of uint64
        This rank's keys; the same count (at least ``R``) on every rank.

    Returns
    -------
    ndarray of uint64
        This rank's sorted bucket.

    References
    ----------
    H. Shi, J. Schaeffer, "Parallel sorting by regular sampling", J. Parallel Distrib.
    Comput. 14(4), 1992, Section 2.

    Examples
    --------
    >>> class One:
    ...     def Get_rank(self): return 0
    ...     def Get_size(self): return 1
    ...     def Allgather(self, s, r): r[...] = s
    ...     def Alltoall(self, s, r): r[...] = s
    ...     def Alltoallv(self, s, r): r[0][...] = s[0]
    >>> sample_sort(One(), np.array([5, 1, 4], dtype=np.uint64))
    array([1, 4, 5], dtype=uint64)
    """
    R = comm.Get_size()
    local = np.sort(np.asarray(keys, dtype=np.uint64))
    n = local.size
    if n < R:
        raise ValueError(f"sort: {n} keys per rank, fewer than the {R} ranks")
    mine = local[(np.arange(1, R + 1) * n) // (R + 1)]
    every = np.empty(R * R, dtype=np.uint64)
    comm.Allgather(mine, every)
    scounts, sdispls = buckets(local, splitters(every, R))
    rcounts = np.empty(R, dtype=np.int64)
    comm.Alltoall(scounts, rcounts)
    rdispls = np.concatenate([[0], np.cumsum(rcounts)[:-1]]).astype(np.int64)
    out = np.empty(int(rcounts.sum()), dtype=np.uint64)
    comm.Alltoallv([local, (scounts, sdispls)], [out, (rcounts, rdispls)])
    out.sort()
    return out
