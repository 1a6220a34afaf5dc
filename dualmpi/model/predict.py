"""Predict the collectives from a two-rank calibration, before measuring them (pure: no MPI).

The experiment (``benchmarks/predict.py``, docs/user-guide.md, "Predict, then measure"):

1. **Calibrate** t_s, t_w and t_h from ping-pongs on two ranks, one per core, so no rank
   waits for a core: chains of d = 1, 2, ... hops that go back and forth over one link
   (:func:`dualmpi.measure.pingpong.bounce`), fitted per protocol regime by
   :func:`dualmpi.model.fit.fit_pingpong` (cut-through ``t_s + m t_w + d t_h`` and
   store-and-forward ``d (t_s + m t_w)``; the one with the smaller relative residuals
   is the calibration's ``switching``).
2. **Predict** every collective, size and network from that calibration alone
   (:func:`predict_collective`): ``formula``, the schedule's coefficients times the
   cut-through parameters (the papers' T), and ``clock``, the virtual clock replaying the
   schedule (:func:`dualmpi.model.clock.schedule_time`) with the better-fitting
   switching model, whose cut-through links share their bandwidth (docs/model.md,
   "Link sharing").
3. **Measure** them (``dualmpi run``) and compare (:func:`compare`): the relative error
   ``(predicted - measured) / measured`` of the median over calls of the slowest rank.

More ranks than usable cores (:func:`oversubscription`) make the measured wall times
include waiting for a core, which no link model describes: such runs are flagged
``oversubscribed`` and their errors are reported, never fitted.

References
----------
Y. Li, S. Peng, W. Chu, "Efficient Collective Communications in Dual-cube", Section 3
(communication model T = t_s + m t_w + d t_h) and Table 2 (the coefficients).
"""

import os

from ..collectives import build_schedule
from ..errors import DualmpiError
from ..model.clock import ClockParams
from .fit import DEFAULT_BOUNDARIES, fit_pingpong, quality_warnings, regime_index
from .formulas import predict as formula_time

__all__ = ["PREDICT_FORMAT", "usable_cores", "oversubscription", "calibrate", "regime_of",
           "predict_collective", "compare", "measured_rows", "check_document"]

#: The ``format`` of the experiment's JSON file (docs/results.md).
PREDICT_FORMAT = "dualmpi-predict/1"

_SWITCHING = ("cut-through", "store-and-forward")


def usable_cores():
    """Return the number of cores this process may run on (its affinity mask, else the CPUs).

    >>> usable_cores() >= 1
    True
    """
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def oversubscription(ranks, cores=None, load=None):
    """Return whether ``ranks`` MPI ranks on this machine oversubscribe its cores.

    Parameters
    ----------
    ranks : int
        Ranks of the job (all on this host).
    cores : int, optional
        Usable cores (default :func:`usable_cores`).
    load : float, optional
        The 1-minute load average just before the job started (other processes).

    Returns
    -------
    dict
        ``ranks``, ``cores``, ``ranks_per_core`` and ``oversubscribed`` (ranks > cores:
        ranks then take turns on the cores, and wall times include that waiting); with
        ``load`` also ``load`` and ``contended``: ranks + load > cores, the job shared its
        cores with other work even when it is not oversubscribed by itself.

    Examples
    --------
    >>> oversubscription(8, cores=2)
    {'ranks': 8, 'cores': 2, 'ranks_per_core': 4.0, 'oversubscribed': True}
    >>> oversubscription(2, cores=2)["oversubscribed"]
    False
    >>> oversubscription(2, cores=2, load=3.5)["contended"]
    True
    """
    cores = usable_cores() if cores is None else int(cores)
    if ranks < 1 or cores < 1:
        raise DualmpiError(f"bad rank or core count: {ranks} ranks, {cores} cores")
    out = {"ranks": int(ranks), "cores": cores, "ranks_per_core": ranks / cores,
           "oversubscribed": ranks > cores}
    if load is not None:
        out.update(load=float(load), contended=ranks + load > cores)
    return out


def calibrate(rows, boundaries=DEFAULT_BOUNDARIES, stat="t_min", resamples=200, seed=0):
    """Fit the link parameters to two-rank ping-pong ``rows``; return the calibration dict.

    Parameters
    ----------
    rows : list of dict
        Ping-pong rows (``size``, ``hops``, ``t_min``/``t_avg``/``t_max``), one kind.
    boundaries, stat, resamples, seed
        As :func:`dualmpi.model.fit.fit_pingpong`.

    Returns
    -------
    dict
        ``boundaries``, ``stat``, ``switching`` (the better-fitting model, None when no
        regime has two hop counts) and ``regimes``: per regime ``label``, ``sizes``,
        ``hops`` and per switching model ``params`` ({ts, tw, th}; th None where not
        identifiable or for store-and-forward), ``ci``, ``r2``, ``rms_rel`` and
        ``warnings`` (:func:`dualmpi.model.fit.quality_warnings`), or None when unfitted.

    Examples
    --------
    >>> rows = [{"size": m, "hops": d, "t_min": d * (3e-6 + m * 2e-10)}
    ...         for m in (8, 1024, 4096) for d in (1, 2, 3)]
    >>> cal = calibrate(rows, resamples=0)
    >>> cal["switching"], round(cal["regimes"][0]["store-and-forward"]["params"]["ts"] * 1e6, 6)
    ('store-and-forward', 3.0)
    """
    fit = fit_pingpong(rows, tuple(boundaries), stat, resamples, seed)
    regimes = []
    for reg in fit["regimes"]:
        out = {"label": reg["label"], "sizes": reg["sizes"], "hops": reg["hops"]}
        for model in _SWITCHING:
            res = reg["models"][model]
            out[model] = None if res is None else {
                "params": res["params"], "ci": res["ci"], "r2": res["r2"],
                "rms_rel": res["rms_rel"], "warnings": quality_warnings(res)}
        regimes.append(out)
    return {"boundaries": list(boundaries), "stat": stat,
            "switching": fit["switching"]["better"], "regimes": regimes}


def regime_of(cal, size):
    """Return the calibration's regime for blocks of ``size`` bytes.

    >>> cal = {"boundaries": [4096, 32768], "regimes": ["small", "medium", "large"]}
    >>> regime_of(cal, 1024), regime_of(cal, 65536)
    ('small', 'large')
    """
    return cal["regimes"][regime_index(size, tuple(cal["boundaries"]))]


def _clock_params(reg, switching):
    """Return :class:`ClockParams` of one regime's fit under ``switching``, or None."""
    fit = reg.get(switching)
    if fit is None:
        return None
    p = fit["params"]
    th = (p.get("th") or 0.0) if switching == "cut-through" else 0.0
    return ClockParams(p["ts"], p["tw"], th, switching=switching, contention="shared")


def predict_collective(topo, collective, size, cal, root=0, sim=None):
    """Return the predicted times of one collective from a calibration (see the module doc).

    Parameters
    ----------
    topo : Topology
        The network.
    collective : str
        ``bcast``, ``scatter``, ``allgather`` or ``alltoall``.
    size : int
        Block size m in bytes.
    cal : dict
        :func:`calibrate`'s result.
    root : int
        Root node of bcast and scatter.
    sim : dict, optional
        ``dualmpi.simulator.simulate(topo, collective, root)``, if already computed.

    Returns
    -------
    dict
        ``spec``, ``nodes``, ``collective``, ``size``, ``model`` (the schedule's
        coefficients), ``link_sharing`` (``max``, ``steps_shared``, ``steps``),
        ``formula`` (the coefficients times the regime's cut-through t_s, t_w, t_h; None
        if that regime is unfitted), ``clock`` (the virtual clock's time under
        ``clock_switching`` with the regime's parameters of that model, links sharing
        their bandwidth), ``clock_switching``, ``sharing_bound`` (cut-through only) and
        ``params`` (the parameters each prediction used).

    Examples
    --------
    >>> from dualmpi.topology import from_spec
    >>> rows = [{"size": m, "hops": d, "t_min": 2e-6 + m * 1e-9 + d * 5e-7}
    ...         for m in (8, 1024, 4096) for d in (1, 2, 3)]
    >>> p = predict_collective(from_spec("hypercube:n=3"), "bcast", 1024, calibrate(rows, resamples=0))
    >>> p["clock_switching"], round(p["formula"] * 1e6, 3), round(p["clock"] * 1e6, 3)
    ('cut-through', 10.572, 10.572)
    """
    from ..simulator import simulate, virtual_times

    if sim is None:
        sim = simulate(topo, collective, root)
    reg = regime_of(cal, size)
    ct = _clock_params(reg, "cut-through")
    switching = cal.get("switching") or "cut-through"
    clock = _clock_params(reg, switching)
    sharing = sim.get("link_sharing")
    out = {"spec": topo.spec, "nodes": topo.num_nodes, "collective": collective, "size": size,
           "model": sim["model"],
           "link_sharing": None if sharing is None else {
               "max": sharing["max"], "steps_shared": sharing["steps_shared"],
               "steps": len(sharing["per_step"])},
           "formula": None if ct is None else float(formula_time(sim["model"], ct.ts, ct.tw,
                                                                  ct.th, size)),
           "clock": None, "clock_switching": switching, "sharing_bound": None,
           "params": {"formula": None if ct is None else _as_dict(ct),
                      "clock": None if clock is None else _as_dict(clock)}}
    if clock is not None:
        v = virtual_times(sim, clock, size, build_schedule(collective, topo, root))
        out["clock"] = v["clock_time"]
        out["sharing_bound"] = v["sharing_bound"]
    return out


def _as_dict(params):
    """Return ``{ts, tw, th}`` of :class:`ClockParams`."""
    return {"ts": params.ts, "tw": params.tw, "th": params.th}


def measured_rows(run_rows):
    """Return ``{(collective, size): measurement}`` from ``dualmpi run`` rows.

    The measured time is ``t_med``, the median over calls of the slowest rank's time
    (``t_max``, the slowest rank's mean, for rows written before ``t_med``); ``spread``
    is the smallest and largest call.

    >>> measured_rows([{"collective": "bcast", "size": 8, "verified": True, "t_max": 2.0,
    ...                 "t_calls": [1.0, 3.0, 2.0], "t_med": 2.0}])[("bcast", 8)]["spread"]
    [1.0, 3.0]
    """
    out = {}
    for row in run_rows:
        calls = row.get("t_calls") or [row["t_max"]]
        out[(row["collective"], row["size"])] = {
            "measured": row.get("t_med", row["t_max"]), "spread": [min(calls), max(calls)],
            "calls": len(calls), "verified": bool(row["verified"])}
    return out


def compare(prediction, measurement):
    """Return ``prediction`` with the measurement and each prediction's relative error.

    >>> compare({"formula": 1.5, "clock": 2.0}, {"measured": 1.0, "spread": [0.9, 1.2]})["error"]
    {'formula': 0.5, 'clock': 1.0}
    """
    out = dict(prediction)
    out.update(measurement)
    t = measurement["measured"]
    out["error"] = {k: (None if prediction.get(k) is None or not t > 0
                        else (prediction[k] - t) / t) for k in ("formula", "clock")}
    return out


_TOP_KEYS = ("format", "meta", "calibration", "runs")
_RUN_KEYS = ("spec", "ranks", "oversubscribed", "rows")
_ROW_KEYS = ("collective", "size", "formula", "clock", "measured", "error")


def check_document(doc, name="results"):
    """Raise :class:`DualmpiError` unless ``doc`` is a ``dualmpi-predict/1`` document.

    >>> check_document({"format": "dualmpi-run/1"})
    Traceback (most recent call last):
    ...
    dualmpi.errors.DualmpiError: results: format 'dualmpi-run/1', expected 'dualmpi-predict/1'
    """
    if not isinstance(doc, dict) or doc.get("format") != PREDICT_FORMAT:
        got = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise DualmpiError(f"{name}: format {got!r}, expected {PREDICT_FORMAT!r}")
    for key in _TOP_KEYS:
        if key not in doc:
            raise DualmpiError(f"{name}: no {key!r}")
    for run in doc["runs"]:
        for key in _RUN_KEYS:
            if key not in run:
                raise DualmpiError(f"{name}: a run without {key!r}")
        for row in run["rows"]:
            missing = [k for k in _ROW_KEYS if k not in row]
            if missing:
                raise DualmpiError(f"{name}: {run['spec']} row without {', '.join(missing)}")
    return doc
