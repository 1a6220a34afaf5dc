"""Record the communication calls of a kernel and price them with the papers' cost model."""

import numpy as np

__all__ = ["Recorder", "model_time", "call_sizes", "merge_sends", "DEFAULT_CLOCK", "KINDS"]

#: Link parameters of the model time, those of ``dualmpi model`` and ``dualmpi simulate``:
#: t_s = 2 us, t_w = 1 ns/B, t_h = 50 ns.
DEFAULT_CLOCK = {"ts": 2e-6, "tw": 1e-9, "th": 5e-8}

#: The calls a :class:`Recorder` notes, as ``(kind, bytes, root)``.
KINDS = ("bcast", "allgather", "alltoall", "alltoallv", "allreduce", "send")


def _nbytes(buf):
    """Return the bytes of a numpy array or of the array of an mpi4py buffer spec."""
    if isinstance(buf, (list, tuple)):
        buf = buf[0]
    return int(np.asarray(buf).nbytes)


class Recorder:
    """A communicator that forwards every call to ``comm`` and notes its communication.

    ``comm`` is a :class:`dualmpi.Comm` or an ``mpi4py.MPI.Comm``; every attribute the
    recorder does not define is ``comm``'s.  Each call appends ``(kind, nbytes, root)``
    to :attr:`calls`, with ``nbytes`` the piece one rank contributes per destination
    (``Bcast``: the buffer; ``Allgather``: the send buffer; ``Alltoall``: one pair's
    piece; ``Alltoallv``: this rank's largest piece to another rank; ``Allreduce``: the
    vector; ``Send``/``Isend``: the message).  :func:`model_time` prices them.

    Examples
    --------
    >>> class Loop:                      # a one-rank communicator for the example
    ...     def Get_size(self): return 1
    ...     def Alltoall(self, s, r): r[...] = s
    >>> rec = Recorder(Loop())
    >>> a = np.arange(4.0); b = np.empty(4)
    >>> rec.Alltoall(a, b); rec.calls, rec.Get_size()
    ([('alltoall', 32, None)], 1)
    """

    def __init__(self, comm):
        self.comm = comm
        self.calls = []

    def __getattr__(self, name):
        return getattr(self.comm, name)

    def Bcast(self, buf, root=0):
        """Note and forward ``Bcast``."""
        self.calls.append(("bcast", _nbytes(buf), int(root)))
        return self.comm.Bcast(buf, root=root)

    def Allgather(self, sendbuf, recvbuf):
        """Note and forward ``Allgather``."""
        self.calls.append(("allgather", _nbytes(sendbuf), None))
        return self.comm.Allgather(sendbuf, recvbuf)

    def Alltoall(self, sendbuf, recvbuf):
        """Note and forward ``Alltoall``."""
        self.calls.append(("alltoall", _nbytes(sendbuf) // self.comm.Get_size(), None))
        return self.comm.Alltoall(sendbuf, recvbuf)

    def Alltoallv(self, sendbuf, recvbuf):
        """Note and forward ``Alltoallv([buf, (counts, displs)], [buf, (counts, displs)])``."""
        arr, (counts, _) = np.asarray(sendbuf[0]), sendbuf[1]
        counts = np.asarray(counts, dtype=np.int64).copy()
        me = self.comm.Get_rank()
        counts[me] = 0  # a rank's piece to itself crosses no link
        self.calls.append(("alltoallv", int(counts.max(initial=0)) * arr.itemsize, None))
        return self.comm.Alltoallv(sendbuf, recvbuf)

    def Allreduce(self, sendbuf, recvbuf, *args, **kwargs):
        """Note and forward ``Allreduce``."""
        self.calls.append(("allreduce", _nbytes(sendbuf), None))
        return self.comm.Allreduce(sendbuf, recvbuf, *args, **kwargs)

    def Send(self, buf, dest, tag=0):
        """Note and forward ``Send``."""
        self.calls.append(("send", _nbytes(buf), int(dest)))
        return self.comm.Send(buf, dest, tag)

    def Isend(self, buf, dest, tag=0):
        """Note and forward ``Isend``."""
        self.calls.append(("send", _nbytes(buf), int(dest)))
        return self.comm.Isend(buf, dest, tag)


def merge_sends(calls):
    """Return ``calls`` with each run of consecutive sends as one ``("send", largest, None)``.

    A halo exchange is one step whichever number of neighbours a rank has, so every
    rank has the same list (the ends of a path send one message, the others two).

    >>> merge_sends([("send", 8, 1), ("send", 16, 2), ("allreduce", 8, None), ("send", 8, 1)])
    [('send', 16, None), ('allreduce', 8, None), ('send', 8, None)]
    """
    out = []
    for kind, nbytes, root in calls:
        if kind == "send" and out and out[-1][0] == "send":
            out[-1] = ("send", max(out[-1][1], nbytes), None)
        else:
            out.append((kind, nbytes, None if kind == "send" else root))
    return out


def call_sizes(calls):
    """Return the ``nbytes`` of ``calls`` as an int64 array (to take their maximum over ranks).

    >>> call_sizes([("bcast", 8, 0), ("send", 16, 1)])
    array([ 8, 16])
    """
    return np.array([n for _, n, _ in calls], dtype=np.int64)


def _coefficients(topo, collective, root, cache):
    """Return the schedule's ``{ts, tw, th}`` from the simulator (cached per call site)."""
    key = (topo.spec, collective, root)
    if key not in cache:
        from ..simulator import simulate

        cache[key] = simulate(topo, collective, root)["model"]
    return cache[key]


def _allreduce_coefficients(topo, q, nbytes, cache):
    """Return ``(ts, tw, th)`` of an allreduce of ``nbytes`` as :class:`dualmpi.Comm` runs it.

    With the engine's reductions (:mod:`dualmpi.collectives.allreduce`): the algorithm
    its ``choose`` picks for the size, ``steps`` single-hop steps sending ``words``
    vectors.  Without them: the all-to-all broadcast pattern with a combine at every
    step (the dual-cube paper, Section 5): the allgather's steps and hops, the whole
    vector in every step.
    """
    try:
        from ..collectives.allreduce import choose, costs
    except ImportError:
        m = _coefficients(topo, "allgather", 0, cache)
        return m["ts"], m["ts"], m["th"]
    key = (topo.spec, "allreduce-costs", q)
    if key not in cache:
        cache[key] = costs(topo, q)
    steps, words = cache[key][choose(nbytes, cache[key])]
    return steps, words, steps


def model_time(calls, topo, q=1, clock=None, cache=None):
    """Return the model communication time of ``calls`` on ``topo`` and its parts per kind.

    Every collective call costs its schedule's ``ts*t_s + tw*m*t_w + th*t_h``
    (:func:`dualmpi.simulator.simulate`, the papers' formula at one block of ``m``
    bytes), where ``m`` is the node-level block: a rank's piece split over its
    ``q`` nodes (``Allgather``) or into ``q*q`` sub-blocks (``Alltoall(v)``), the whole
    buffer for ``Bcast`` (``Allreduce``: the algorithm the engine picks for the size,
    :func:`_allreduce_coefficients`).  ``Alltoallv`` also pays the all-gather
    of the counts that :meth:`dualmpi.Comm.Alltoallv` runs first (``2R + 2`` int64 per
    rank) and its exchange at the largest piece.  A run of consecutive ``send`` calls
    (one halo exchange) is one step over one link: ``t_s + m*t_w + t_h`` with its
    largest message (all-port: a node sends to its neighbours at once).

    Parameters
    ----------
    calls : list of (kind, nbytes, root)
        As noted by :class:`Recorder` (``nbytes`` agreed over ranks, e.g. the maximum).
    topo : Topology
        The network the calls ran on.
    q : int
        Nodes per rank.
    clock : dict, optional
        ``{"ts", "tw", "th"}`` seconds; default :data:`DEFAULT_CLOCK`.
    cache : dict, optional
        Coefficients of earlier calls (kept between runs on the same network).

    Returns
    -------
    (float, dict)
        The total in seconds and the seconds per kind.

    References
    ----------
    Y. Li, S. Peng, W. Chu, "Efficient Collective Communications in Dual-cube", Section 3
    (T = t_s + m t_w + d t_h) and Table 2.

    Examples
    --------
    >>> from dualmpi.topology import from_spec
    >>> t, parts = model_time([("bcast", 1000, 0), ("send", 800, 1), ("send", 800, 2)],
    ...                       from_spec("hypercube:n=3"))
    >>> round(t * 1e6, 3), sorted(parts)    # 3 steps of 1000 B (9.15 us), one of 800 B
    (12.0, ['bcast', 'send'])
    """
    c = dict(DEFAULT_CLOCK if clock is None else clock)
    cache = {} if cache is None else cache
    ranks = topo.num_nodes // q

    def cost(ts, tw, th, m):
        return ts * c["ts"] + tw * m * c["tw"] + th * c["th"]

    parts = {}
    sending = 0
    for i, (kind, nbytes, root) in enumerate(list(calls) + [("end", 0, None)]):
        if kind == "send":
            sending = max(sending, nbytes)
            continue
        if sending:
            parts["send"] = parts.get("send", 0.0) + cost(1, 1, 1, sending)
            sending = 0
        if kind == "end":
            break
        if kind == "bcast":
            t = cost(m=nbytes, **_coefficients(topo, "bcast", root * q, cache))
        elif kind == "allgather":
            t = cost(m=-(-nbytes // q), **_coefficients(topo, "allgather", 0, cache))
        elif kind == "alltoall":
            t = cost(m=-(-nbytes // (q * q)), **_coefficients(topo, "alltoall", 0, cache))
        elif kind == "alltoallv":
            counts = 8 * (2 * ranks + 2)
            t = (cost(m=-(-counts // q), **_coefficients(topo, "allgather", 0, cache))
                 + cost(m=-(-nbytes // (q * q)), **_coefficients(topo, "alltoall", 0, cache)))
        elif kind == "allreduce":
            ts, tw, th = _allreduce_coefficients(topo, q, nbytes, cache)
            t = cost(ts, tw, th, nbytes)
        else:
            raise ValueError(f"unknown call kind {kind!r} ({', '.join(KINDS)})")
        parts[kind] = parts.get(kind, 0.0) + t
    return sum(parts.values()), parts
