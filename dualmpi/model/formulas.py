"""The papers' cost formulas as coefficients of T = a*t_s + b*m*t_w + c*t_h (pure Python).

Every formula is returned as :class:`Coeffs` ``(ts, tw, th)``: the time of a collective
with blocks of ``m`` bytes is ``ts*t_s + tw*m*t_w + th*t_h`` (``t_s`` start-up per step,
``t_w`` seconds per byte, ``t_h`` seconds per hop).  The same triple is what
``dualmpi simulate`` reports as ``model`` for a schedule (``tw`` sums each step's
largest message in blocks, ``th`` each step's longest path in hops), so a formula and a
schedule can be compared number for number.

Two readings of the papers are offered:

* :func:`paper_formula` — the formula as printed (``variant="as-printed"``) or with the
  corrections recorded in docs/errata.md (``variant="corrected"``, erratum D3).  The
  papers leave ``t_h`` out of the three single-hop patterns (Table 2, rows 1-3), so their
  ``th`` is 0.
* :func:`cut_through_formula` — the corrected formula with one hop charged per step for
  the single-hop patterns (``th`` = number of steps), which is what the schedules count
  and what a cut-through network with a per-hop cost pays.  For the total exchange the
  papers already count every hop, so both readings agree there.

References
----------
Y. Li, S. Peng, W. Chu, "Efficient Collective Communications in Dual-cube", Sections 4-6
and Table 2.  Y. Li, S. Peng, W. Chu, "Efficient Communication in Metacube: A New
Interconnection Network", Section 3.4 (T_C, T_M, E_0 ... E_3).
"""

import math
from collections import namedtuple

from ..errors import DualmpiError
from ..topology import DualCube, Hypercube, MetaCube

__all__ = [
    "Coeffs",
    "FormulaError",
    "PATTERNS",
    "PATTERN_NAMES",
    "TABLE2_ROWS",
    "VARIANTS",
    "SINGLE_HOP",
    "paper_formula",
    "cut_through_formula",
    "lower_bound",
    "predict",
    "hypercube_formula",
    "dualcube_formula",
    "dualcube_stages",
    "metacube_alltoall",
    "metacube_extra_hops",
    "hypercube_alltoall",
    "total",
]

#: The four communication patterns of Table 2, by dualmpi's collective names.
PATTERNS = ("bcast", "scatter", "allgather", "alltoall")

#: The papers' names of the patterns.
PATTERN_NAMES = {
    "bcast": "one-to-all broadcast",
    "scatter": "one-to-all personalized",
    "allgather": "all-to-all broadcast",
    "alltoall": "all-to-all personalized (total exchange)",
}

#: Row labels of Table 2 of the dual-cube paper.
TABLE2_ROWS = {
    "bcast": "T_one-to-all-b",
    "scatter": "T_one-to-all-p",
    "allgather": "T_all-to-all-b",
    "alltoall": "T_all-to-all-p",
}

#: Patterns whose every message crosses one link (the papers leave t_h out of them).
SINGLE_HOP = ("bcast", "scatter", "allgather")

#: Readings of a formula: the printed text, or with docs/errata.md's corrections.
VARIANTS = ("as-printed", "corrected")


class FormulaError(DualmpiError, LookupError):
    """The papers state no formula for this pattern on this network."""


class Coeffs(namedtuple("Coeffs", "ts tw th")):
    """Coefficients ``(ts, tw, th)`` of ``T = ts*t_s + tw*m*t_w + th*t_h``.

    Examples
    --------
    >>> Coeffs.of({"ts": 6, "tw": 38, "th": 6})
    Coeffs(ts=6, tw=38, th=6)
    >>> Coeffs(6, 38, 6).as_dict()
    {'ts': 6, 'tw': 38, 'th': 6}
    """

    __slots__ = ()

    @classmethod
    def of(cls, value):
        """Return ``value`` (a Coeffs, a 3-sequence or a dict with ts, tw, th) as Coeffs."""
        if isinstance(value, dict):
            return cls(value["ts"], value["tw"], value["th"])
        return cls(*value)

    def as_dict(self):
        """Return ``{"ts": .., "tw": .., "th": ..}`` (the simulator's ``model`` layout)."""
        return {"ts": self.ts, "tw": self.tw, "th": self.th}


def total(*terms):
    """Return the coefficient-wise sum of several :class:`Coeffs` (stages of one algorithm).

    >>> total(Coeffs(1, 2, 0), Coeffs(3, 4, 5))
    Coeffs(ts=4, tw=6, th=5)
    """
    return Coeffs(*(sum(t[i] for t in terms) for i in range(3)))


def predict(coeffs, ts, tw, th, size):
    """Return the predicted time in seconds of a formula for blocks of ``size`` bytes.

    Parameters
    ----------
    coeffs : Coeffs, 3-sequence or dict
        Coefficients ``(ts, tw, th)``, e.g. a results row's ``model``.
    ts, tw, th : float or array_like
        Start-up time (s), time per byte (s/B) and time per hop (s).
    size : int, float or array_like
        Block size m in bytes (arrays broadcast).

    Returns
    -------
    float or ndarray
        ``a*ts + b*size*tw + c*th``.

    References
    ----------
    Dual-cube paper, Section 3: a message of length m over d links costs t_s + m t_w + d t_h.

    Examples
    --------
    >>> predict({"ts": 6, "tw": 38, "th": 6}, 1e-6, 1e-9, 1e-7, 1000)
    4.46e-05
    """
    a, b, c = Coeffs.of(coeffs)
    return a * ts + b * size * tw + c * th


def _exact(x):
    """Return ``x`` as an int when it is one (the papers' p-forms use sqrt and log)."""
    r = round(x)
    return int(r) if abs(x - r) < 1e-9 * max(1.0, abs(x)) else x


def _check_variant(variant):
    """Raise :class:`DualmpiError` unless ``variant`` is one of :data:`VARIANTS`."""
    if variant not in VARIANTS:
        raise DualmpiError(f"unknown formula variant {variant!r} (choose from {', '.join(VARIANTS)})")


def _check_pattern(collective):
    """Raise :class:`DualmpiError` unless ``collective`` is one of :data:`PATTERNS`."""
    if collective not in PATTERNS:
        raise DualmpiError(f"unknown collective {collective!r} (choose from {', '.join(PATTERNS)})")


def hypercube_formula(n, collective):
    """Return Table 2's hypercube column for the n-cube (p = 2^n).

    Parameters
    ----------
    n : int
        Dimension of the hypercube.
    collective : str
        One of :data:`PATTERNS`.

    Returns
    -------
    Coeffs
        bcast ``log p (t_s + m t_w)``; scatter and allgather ``log p t_s + (p-1) m t_w``;
        alltoall ``(p-1)(t_s + m t_w) + (p/2) log p t_h`` (= T_C of the metacube paper).

    References
    ----------
    Dual-cube paper, Table 2 (hypercube column); metacube paper, Section 3.4 (T_C).

    Examples
    --------
    >>> hypercube_formula(5, "scatter")
    Coeffs(ts=5, tw=31, th=0)
    """
    _check_pattern(collective)
    p = 2 ** n
    log_p = math.log2(p)
    if collective == "bcast":
        return Coeffs(_exact(log_p), _exact(log_p), 0)
    if collective in ("scatter", "allgather"):
        return Coeffs(_exact(log_p), p - 1, 0)
    return hypercube_alltoall(n)


def hypercube_alltoall(n):
    """Return T_C, the n-cube's total exchange: ``(p-1)(t_s + g t_w) + p (log p / 2) t_h``.

    Parameters
    ----------
    n : int
        Dimension of the hypercube.

    Returns
    -------
    Coeffs
        ``th`` = sum over i of ``i * C(n, i)`` (distance i to C(n, i) nodes) = ``p log p / 2``.

    References
    ----------
    Metacube paper, Section 3.4, T_C; dual-cube paper, Table 2 (row T_all-to-all-p).

    Examples
    --------
    >>> hypercube_alltoall(10)
    Coeffs(ts=1023, tw=1023, th=5120)
    """
    p = 2 ** n
    return Coeffs(p - 1, p - 1, _exact(p * math.log2(p) / 2))


def dualcube_formula(r, collective, variant="as-printed"):
    """Return Table 2's dual-cube column for F_r (p = 2^(2r-1) nodes).

    Parameters
    ----------
    r : int
        Links per node, ``r >= 2`` (erratum D7: the formulas assume it).
    collective : str
        One of :data:`PATTERNS`.
    variant : {"as-printed", "corrected"}
        ``corrected`` applies erratum D3: the one-to-all personalized t_w coefficient is
        ``p + sqrt(2p) - 2``, not ``p - 1``.

    Returns
    -------
    Coeffs
        bcast ``(1 + log p)(t_s + m t_w)``; scatter and allgather
        ``(1 + log p) t_s + (p - 1) m t_w``; alltoall
        ``(p - 1)(t_s + m t_w) + (p/2 (2 + log p) - sqrt(2p)) t_h``.

    References
    ----------
    Dual-cube paper, Sections 4, 5, 6.3 and Table 2; docs/errata.md D3, D7.

    Examples
    --------
    >>> dualcube_formula(3, "scatter")
    Coeffs(ts=6, tw=31, th=0)
    >>> dualcube_formula(3, "scatter", "corrected")
    Coeffs(ts=6, tw=38, th=0)
    >>> dualcube_formula(3, "alltoall")
    Coeffs(ts=31, tw=31, th=104)
    """
    _check_pattern(collective)
    _check_variant(variant)
    if r < 2:
        raise FormulaError(f"the dual-cube formulas assume r >= 2, got r={r} (errata D7)")
    p = 2 ** (2 * r - 1)
    log_p = math.log2(p)
    steps = _exact(1 + log_p)
    if collective == "bcast":
        return Coeffs(steps, steps, 0)
    if collective == "scatter":
        tw = _exact(p + math.sqrt(2 * p) - 2) if variant == "corrected" else p - 1
        return Coeffs(steps, tw, 0)
    if collective == "allgather":
        return Coeffs(steps, p - 1, 0)
    return Coeffs(p - 1, p - 1, _exact(p / 2 * (2 + log_p) - math.sqrt(2 * p)))


def dualcube_stages(r, collective, variant="as-printed"):
    """Return the per-stage terms the dual-cube paper adds up, as a list of Coeffs.

    Parameters
    ----------
    r : int
        Links per node, ``r >= 2``.
    collective : {"scatter", "allgather", "alltoall"}
        The patterns whose time the paper derives stage by stage.
    variant : {"as-printed", "corrected"}
        ``as-printed`` gives the printed sums (scatter: Section 4's two sums; alltoall:
        T_1, T_2, T_3 of Section 6.3 with T_2's misplaced parenthesis); ``corrected`` the
        stage costs of the algorithm as described (errata D3 and D4).

    Returns
    -------
    list of Coeffs
        scatter: [stage 1, stage 2]; allgather and alltoall: [T_1, T_2, T_3].

    References
    ----------
    Dual-cube paper, Section 4 (T_one-to-all-p), Section 5 (T_1-T_3), Section 6.3
    (T_1-T_3, g = (r-1) 2^(r-1) / 2); docs/errata.md D3, D4.

    Examples
    --------
    >>> total(*dualcube_stages(3, "scatter"))            # the printed sums: not p - 1 = 31
    Coeffs(ts=6, tw=35, th=0)
    >>> total(*dualcube_stages(3, "scatter", "corrected"))
    Coeffs(ts=6, tw=38, th=0)
    >>> [s.th for s in dualcube_stages(3, "alltoall", "corrected")]
    [4, 48, 52]
    """
    _check_variant(variant)
    h = 2 ** (r - 1)                      # nodes per cluster, clusters per class
    g = (r - 1) * h // 2                  # total distance inside one (r-1)-cube
    if collective == "scatter":
        if variant == "as-printed":
            return [Coeffs(r, sum(2 ** (r + i - 2) for i in range(1, r + 1)), 0),
                    Coeffs(r, sum(2 ** (i - 1) for i in range(1, r + 1)), 0)]
        stage1 = h * h + sum(2 ** (r - 1 - i) * (h + 1) for i in range(1, r))
        return [Coeffs(r, stage1, 0), Coeffs(r, 2 * h - 1, 0)]
    if collective == "allgather":
        return [Coeffs(r - 1, h - 1, 0), Coeffs(r, h * h, 0), Coeffs(1, h * h - h, 0)]
    if collective == "alltoall":
        t2_hops = (h * h + 2 * h) * g if variant == "as-printed" else h * h + 2 * h * g
        return [Coeffs(h - 1, h - 1, g),
                Coeffs(h * h, h * h, t2_hops),
                Coeffs(h * (h - 1), h * (h - 1), 2 * h * (h - 1) + (2 * h - 1) * g)]
    raise FormulaError(f"the dual-cube paper derives no stages for {collective!r}")


def metacube_extra_hops(m):
    """Return ``(E_0, E_1, E_2, E_3)``: MC(2, m)'s extra hops over the (4m+2)-cube per dest class.

    Parameters
    ----------
    m : int
        Cluster dimension of the quad-cube MC(2, m).

    Returns
    -------
    tuple of int
        Their sum is ``E = 5*2^(4m+1) - 2*2^(3m+1) - 3*2^(2m+1)``.

    References
    ----------
    Metacube paper, Section 3.4.

    Examples
    --------
    >>> metacube_extra_hops(2)
    (960, 480, 480, 288)
    """
    a = 2 ** m
    e0 = (a * (a - 1) + a * (a - 1)) * 2 + (a * (a - 1) ** 2 + a * (a ** 3 - a ** 2)) * 4
    e1 = (a * a * (a - 1) + a * a * (a - 1) + a * a * (a - 1) ** 2) * 2
    e3 = a * a * (a - 1) ** 2 * 2
    return (e0, e1, e1, e3)


def metacube_alltoall(m):
    """Return T_M, the total exchange on the quad-cube MC(2, m) (p = 2^(4m+2)).

    Parameters
    ----------
    m : int
        Cluster dimension.

    Returns
    -------
    Coeffs
        ``(p-1)(t_s + g t_w) + [p (log p / 2 + 5/2) - sqrt(2) p^(3/4) - 3 sqrt(p)] t_h``.

    References
    ----------
    Metacube paper, Section 3.4 ("For an MC(2, 2), T_M = 1023(t_s + g t_w) + 7328 t_h").

    Examples
    --------
    >>> metacube_alltoall(2)
    Coeffs(ts=1023, tw=1023, th=7328)
    """
    p = 2 ** (4 * m + 2)
    th = p * (math.log2(p) / 2 + 2.5) - math.sqrt(2) * p ** 0.75 - 3 * math.sqrt(p)
    return Coeffs(p - 1, p - 1, _exact(th))


def paper_formula(topo, collective, variant="as-printed"):
    """Return the papers' formula for ``collective`` on ``topo`` (single-hop rows: th = 0).

    Parameters
    ----------
    topo : Topology
        A hypercube, a dual-cube (r >= 2) or a metacube: MC(0, m) is the m-cube and
        MC(1, m) the dual-cube F_(m+1) (metacube paper, Section 2); for MC(2, m) the
        papers state only the total exchange (T_M).
    collective : str
        One of :data:`PATTERNS`.
    variant : {"as-printed", "corrected"}
        Whether to apply docs/errata.md's corrections (D3).

    Returns
    -------
    Coeffs
        The coefficients; ``th`` is 0 for bcast, scatter and allgather as in Table 2.

    Raises
    ------
    FormulaError
        When the papers state no formula (metacube MC(2, m) rows 1-3, MC(k >= 3, m)).

    References
    ----------
    Dual-cube paper, Table 2; metacube paper, Section 3.4.

    Examples
    --------
    >>> from dualmpi.topology import DualCube, MetaCube
    >>> paper_formula(DualCube(3), "bcast")
    Coeffs(ts=6, tw=6, th=0)
    >>> paper_formula(MetaCube(2, 1), "alltoall")
    Coeffs(ts=63, tw=63, th=296)
    """
    _check_pattern(collective)
    _check_variant(variant)
    if isinstance(topo, Hypercube):
        return hypercube_formula(topo.n, collective)
    if isinstance(topo, DualCube):
        return dualcube_formula(topo.r, collective, variant)
    if isinstance(topo, MetaCube):
        if topo.k == 0:
            return hypercube_formula(topo.m, collective)
        if topo.k == 1:
            return dualcube_formula(topo.m + 1, collective, variant)
        if topo.k == 2 and collective == "alltoall":
            return metacube_alltoall(topo.m)
        raise FormulaError(f"the papers state no cost for {collective} on {topo.spec} "
                           "(the metacube paper analyses the total exchange on MC(2, m) only)")
    raise FormulaError(f"the papers state no cost formulas for {topo.spec}")


def cut_through_formula(topo, collective, variant="corrected"):
    """Return the formula with one hop per step charged to the single-hop patterns.

    Parameters
    ----------
    topo : Topology
        As for :func:`paper_formula`.
    collective : str
        One of :data:`PATTERNS`.
    variant : {"as-printed", "corrected"}
        Default ``corrected``: the form a schedule's ``model`` should equal.

    Returns
    -------
    Coeffs
        :func:`paper_formula` with ``th = ts`` (every step crosses one link) for bcast,
        scatter and allgather; the total exchange is returned unchanged.

    References
    ----------
    Dual-cube paper, Section 3: a message over d links costs t_s + m t_w + d t_h.

    Examples
    --------
    >>> from dualmpi.topology import DualCube
    >>> cut_through_formula(DualCube(3), "scatter")
    Coeffs(ts=6, tw=38, th=6)
    """
    f = paper_formula(topo, collective, variant)
    return f._replace(th=f.ts) if collective in SINGLE_HOP else f


def lower_bound(topo, collective):
    """Return the lower bound the papers state for ``collective`` on any p-node network.

    Parameters
    ----------
    topo : Topology or int
        The network, or its number of nodes p.
    collective : str
        One of :data:`PATTERNS`.

    Returns
    -------
    Coeffs
        bcast ``(t_s + m t_w) log p``; scatter ``m (p-1) t_w``; allgather
        ``(p-1) m t_w``; alltoall ``(p-1) m t_w`` — not stated by the papers, it follows
        from Section 5's argument (every node receives (p-1) m bytes through one port).

    References
    ----------
    Dual-cube paper, Section 4 (broadcast, citing Kumar et al.; personalized) and
    Section 5 (all-to-all broadcast).

    Examples
    --------
    >>> lower_bound(32, "bcast")
    Coeffs(ts=5, tw=5, th=0)
    >>> lower_bound(32, "scatter")
    Coeffs(ts=0, tw=31, th=0)
    """
    _check_pattern(collective)
    p = topo if isinstance(topo, int) else topo.num_nodes
    if collective == "bcast":
        steps = math.ceil(math.log2(p)) if p > 1 else 0
        return Coeffs(steps, steps, 0)
    return Coeffs(0, p - 1, 0)
