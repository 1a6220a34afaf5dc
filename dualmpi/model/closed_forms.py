"""Every collective's coefficients in closed form, for networks no machine can enumerate (pure).

The papers' formulas (:mod:`dualmpi.model.formulas`) cover the hypercube and the dual-cube
(Table 2, with erratum D3 and one hop per single-hop step) and the total exchange on the
quad-cube MC(2, m) (T_M).  For the rest of the metacube family this module gives closed forms
of dualmpi's own schedules, each checked number for number against
``dualmpi.simulator.simulate(topo, collective)["model"]`` in ``tests/test_model_cli.py``:

* bcast, scatter, allgather on MC(k, m) (the Gray-walk dimension sequence of
  :mod:`dualmpi.collectives.dimorder`): ``R = log2 p + 2^k - 1`` rounds of one hop each;
  bcast sends one block per round, allgather ``p - 1`` blocks in all, scatter
  :func:`metacube_scatter_messages` per round;
* alltoall on MC(k, m): ``p - 1`` steps of one block; every source's message of a step has
  the same length (node renaming), so the hops add up to the total distance from one
  node, ``avg_distance * p`` (exact for k <= 3; no formula for k >= 4).

References
----------
Y. Li, S. Peng, W. Chu, "Efficient Collective Communications in Dual-cube", Table 2;
"Efficient Communication in Metacube", Sections 2 and 3.4; docs/algorithms.md (Metacube);
docs/model.md (Closed forms for any size).
"""

from math import prod

from ..errors import DualmpiError
from ..topology import DualCube, Hypercube, MetaCube
from .formulas import PATTERNS, Coeffs, FormulaError, cut_through_formula, metacube_alltoall

__all__ = [
    "NOT_DERIVED",
    "metacube_rounds",
    "metacube_scatter_messages",
    "metacube_scatter_tw",
    "metacube_alltoall_hops",
    "metacube_formula",
    "network_formula",
    "twin_hypercube",
]

#: What a coefficient without a verified closed form is shown as.
NOT_DERIVED = "n/a (not derived)"


def metacube_rounds(k, m):
    """Return the rounds of bcast, scatter and allgather on MC(k, m): ``log2 p + 2^k - 1``.

    Parameters
    ----------
    k, m : int
        Class-cube and cluster dimensions; ``p = 2^(m 2^k + k)``.

    Returns
    -------
    int
        ``k`` class rounds, ``m`` cluster rounds, then ``2^k - 1`` times a cross round and
        ``m`` cluster rounds: ``(m + 1) 2^k + k - 1``.

    References
    ----------
    docs/algorithms.md, Metacube (dualmpi's broadcast, the paper has none);
    :func:`dualmpi.collectives.dimorder.gray_walk_dims`.

    Examples
    --------
    >>> metacube_rounds(1, 2), metacube_rounds(2, 2), metacube_rounds(3, 3)
    (6, 13, 34)
    """
    return (m + 1) * (1 << k) + k - 1


def _spread(mask, big_m):
    """Return the product of ``1 + M^(2^b)`` over the one bits ``b`` of ``mask``."""
    return prod(1 + big_m ** (1 << b) for b in range(mask.bit_length()) if mask >> b & 1)


def metacube_scatter_messages(k, m):
    """Return the largest message of each scatter round on MC(k, m), in blocks.

    Parameters
    ----------
    k, m : int
        Class-cube and cluster dimensions (M = 2^m, K = 2^k, p = K M^K).

    Returns
    -------
    list of int
        One entry per round (:func:`metacube_rounds` of them): the k class rounds
        ``p/2, ..., p/K``; the first cluster phase ``Y_K/2, ..., Y_K/M``; then for
        r = K-1 down to 1 (segments left) the cross round ``X_r`` and the cluster phase
        ``Y_r/2, ..., Y_r/M``, with ``Y_r = M * prod_(b in r-1) (1 + M^(2^b))`` and
        ``X_r = M^(2^v) * prod_(b in r - 2^v) (1 + M^(2^b))``, v the lowest one bit of r
        (``b in x``: the one bits of x).

    References
    ----------
    Read off the greedy scatter tree of :func:`dualmpi.collectives.dimorder.gray_walk_dims`
    and checked round by round against the schedules (tests/test_model_cli.py).

    Examples
    --------
    >>> metacube_scatter_messages(1, 2)          # the dual-cube F_3: p + sqrt(2p) - 2 = 38
    [16, 10, 5, 4, 2, 1]
    >>> metacube_scatter_messages(2, 1)
    [32, 16, 15, 10, 5, 4, 3, 2, 1]
    """
    big_k, big_m = 1 << k, 1 << m
    p = big_k * big_m ** big_k
    halves = [big_m >> i for i in range(1, m + 1)]  # M/2, ..., 1
    out = [p >> i for i in range(1, k + 1)]
    out += [_spread(big_k - 1, big_m) * h for h in halves]
    for r in reversed(range(1, big_k)):
        low = r & -r
        out.append(big_m ** low * _spread(r - low, big_m))
        out += [_spread(r - 1, big_m) * h for h in halves]
    return out


def metacube_scatter_tw(k, m):
    """Return the scatter's t_w coefficient on MC(k, m) (sum of the rounds' largest messages).

    Parameters
    ----------
    k, m : int
        Class-cube and cluster dimensions (M = 2^m, K = 2^k, p = K M^K).

    Returns
    -------
    int
        ``p - M^K + sum_(v<k) M^(2^v) prod_(v<b<k) (2 + M^(2^b))
        + (M - 1) prod_(b<k) (2 + M^(2^b))``: the sum of :func:`metacube_scatter_messages`.
        k = 0 gives ``p - 1`` (hypercube) and k = 1 ``p + sqrt(2p) - 2`` (dual-cube, D3).

    References
    ----------
    docs/model.md, Closed forms for any size.

    Examples
    --------
    >>> metacube_scatter_tw(1, 2), metacube_scatter_tw(2, 2), metacube_scatter_tw(3, 3)
    (38, 1180, 138803384)
    """
    big_k, big_m = 1 << k, 1 << m
    p = big_k * big_m ** big_k
    cross = sum(big_m ** (1 << v) * prod(2 + big_m ** (1 << b) for b in range(v + 1, k))
                for v in range(k))
    return p - big_m ** big_k + cross + (big_m - 1) * prod(2 + big_m ** (1 << b) for b in range(k))


def metacube_alltoall_hops(topo):
    """Return the total exchange's t_h coefficient on MC(k, m): total distance from one node.

    Parameters
    ----------
    topo : MetaCube
        The network.

    Returns
    -------
    int or None
        ``avg_distance * p`` from :meth:`MetaCube.formulas` (exact: p is a power of two);
        None for k >= 4, where no formula for the average distance exists.

    References
    ----------
    Metacube paper, Section 3.4 (T_M for k = 2); docs/algorithms.md (every route shortest,
    every source's message of a step equally long).

    Examples
    --------
    >>> metacube_alltoall_hops(MetaCube(2, 2)), metacube_alltoall_hops(MetaCube(3, 1))
    (7328, 19108)
    """
    avg = topo.formulas()["avg_distance"]
    return None if avg is None else round(avg * topo.num_nodes)


def metacube_formula(topo, collective):
    """Return dualmpi's closed form for ``collective`` on the metacube ``topo``.

    Parameters
    ----------
    topo : MetaCube
        MC(k, m), any k and m.
    collective : str
        One of bcast, scatter, allgather, alltoall.

    Returns
    -------
    Coeffs
        ``(ts, tw, th)``; for alltoall with k >= 4 ``th`` is None (not derived).

    References
    ----------
    docs/algorithms.md (Metacube); docs/model.md (Closed forms for any size).

    Examples
    --------
    >>> metacube_formula(MetaCube(3, 1), "allgather")
    Coeffs(ts=18, tw=2047, th=18)
    >>> metacube_formula(MetaCube(4, 1), "alltoall")
    Coeffs(ts=1048575, tw=1048575, th=None)
    """
    _check_pattern(collective)
    k, m, p = topo.k, topo.m, topo.num_nodes
    rounds = metacube_rounds(k, m)
    if collective == "bcast":
        return Coeffs(rounds, rounds, rounds)
    if collective == "scatter":
        return Coeffs(rounds, metacube_scatter_tw(k, m), rounds)
    if collective == "allgather":
        return Coeffs(rounds, p - 1, rounds)
    return Coeffs(p - 1, p - 1, metacube_alltoall_hops(topo))


def network_formula(topo, collective):
    """Return ``(Coeffs, source)``: the verified closed form for ``collective`` on ``topo``.

    Parameters
    ----------
    topo : Hypercube, DualCube or MetaCube
        The network.
    collective : str
        One of bcast, scatter, allgather, alltoall.

    Returns
    -------
    tuple
        The coefficients (a None entry is not derived) and where they come from.

    Raises
    ------
    DualmpiError
        For other topology families, and for the dual-cube F_1 (errata D7).

    References
    ----------
    Dual-cube paper, Table 2 (errata D3, one hop per single-hop step); metacube paper,
    Section 3.4 (T_M); :func:`metacube_formula` for the rest.

    Examples
    --------
    >>> network_formula(DualCube(3), "scatter")
    (Coeffs(ts=6, tw=38, th=6), 'Table 2 corrected (D3)')
    >>> network_formula(MetaCube(2, 2), "bcast")
    (Coeffs(ts=13, tw=13, th=13), 'dualmpi: Gray walk, log2 p + 2^k - 1 rounds')
    """
    _check_pattern(collective)
    if isinstance(topo, Hypercube):
        return cut_through_formula(topo, collective), _PAPER_SOURCE["hypercube"]
    if isinstance(topo, DualCube):
        try:
            return cut_through_formula(topo, collective), _PAPER_SOURCE["dualcube"]
        except FormulaError as exc:
            raise DualmpiError(str(exc)) from None
    if not isinstance(topo, MetaCube):
        raise DualmpiError(f"no closed forms for {topo.spec}: dualmpi model covers hypercube, "
                           "dualcube and metacube specs (dualmpi simulate runs the others)")
    if topo.k <= 1:  # MC(0, m) = Q_m, MC(1, m) = F_(m+1): Table 2 applies
        return cut_through_formula(topo, collective), _PAPER_SOURCE[topo.k]
    if collective == "alltoall" and topo.k == 2:
        return metacube_alltoall(topo.m), "T_M (metacube paper 3.4)"
    if collective == "alltoall" and topo.k >= 4:
        return metacube_formula(topo, collective), "dualmpi: Algorithm 1; hops not derived (k >= 4)"
    return metacube_formula(topo, collective), _DERIVED_SOURCE[collective]


#: Where the papers' formulas come from, per network.
_PAPER_SOURCE = {
    "hypercube": "Table 2 (T_C)",
    "dualcube": "Table 2 corrected (D3)",
    0: "Table 2 (MC(0, m) = Q_m)",
    1: "Table 2 corrected (MC(1, m) = F_(m+1))",
}

#: Where dualmpi's own closed forms come from, per collective.
_DERIVED_SOURCE = {
    "bcast": "dualmpi: Gray walk, log2 p + 2^k - 1 rounds",
    "scatter": "dualmpi: Gray-walk scatter tree",
    "allgather": "dualmpi: reversed Gray walk, p - 1 blocks",
    "alltoall": "dualmpi: Algorithm 1, hops = avg distance * p",
}


def twin_hypercube(topo):
    """Return the hypercube with as many nodes as ``topo`` (a power of two).

    Examples
    --------
    >>> twin_hypercube(MetaCube(3, 3)).spec
    'hypercube:n=27'
    """
    p = topo.num_nodes
    if p & (p - 1):
        raise DualmpiError(f"{topo.spec} has {p} nodes, not a power of two: no hypercube twin")
    return Hypercube(p.bit_length() - 1)


def _check_pattern(collective):
    """Raise :class:`DualmpiError` unless ``collective`` is one of the papers' four patterns."""
    if collective not in PATTERNS:
        raise DualmpiError(f"unknown collective {collective!r} (choose from {', '.join(PATTERNS)})")
