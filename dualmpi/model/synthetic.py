"""Synthetic bench results from known t_s, t_w, t_h: the fit's self-check (pure, no MPI).

The rows follow the ``dualmpi-bench/1`` format exactly, so ``dualmpi fit`` and
``dualmpi report`` can be tried, and tested, on data whose true parameters are known.
"""

import json
import os

import numpy as np

from ..simulator import simulate
from ..topology import from_spec
from .fit import DEFAULT_BOUNDARIES, regime_index
from .formulas import PATTERNS, predict
from .results import FORMAT

__all__ = ["DEFAULT_SIZES", "COLLECTIVE_SIZES", "synthetic_results", "write_synthetic"]

#: Ping-pong sizes: several per default regime (<= 4 KiB, <= 32 KiB, above).
DEFAULT_SIZES = (0, 8, 64, 512, 1024, 2048, 4096, 8192, 16384, 24576, 32768,
                 65536, 131072, 262144, 524288, 1048576)

#: Collective sizes of the synthetic runs.
COLLECTIVE_SIZES = (8, 1024, 4096, 16384, 65536, 262144, 1048576)


def _node_at(topo, d):
    """Return the smallest node at distance ``d`` from node 0 (None if there is none)."""
    for v in range(topo.num_nodes):
        if topo.distance(0, v) == d:
            return v
    return None


def _params_for(params, size, boundaries):
    """Return the ``(t_s, t_w, t_h)`` in force for ``size`` (one triple, or one per regime)."""
    if np.ndim(params) == 1:
        return tuple(params)
    return tuple(params[regime_index(size, boundaries)])


def _pingpong_times(t, rng, noise):
    """Return t_min, t_avg, t_max of a ping-pong whose uncontended time ``t`` is t_min (+ noise)."""
    best = t * (1.0 + noise * rng.standard_normal())
    return {"t_min": best, "t_avg": 1.05 * best, "t_max": 1.2 * best}


def _collective_times(t, rng, noise):
    """Return t_min, t_avg, t_max over ranks of a collective completed at ``t`` (+ noise)."""
    last = t * (1.0 + noise * rng.standard_normal())
    return {"t_min": 0.6 * last, "t_avg": 0.8 * last, "t_max": last}


def synthetic_results(spec, params, boundaries=DEFAULT_BOUNDARIES, switching="cut-through",
                      sizes=DEFAULT_SIZES, hops=(1, 2, 3), reps=5, noise=0.02, outliers=0,
                      seed=0, collectives=PATTERNS, collective_sizes=COLLECTIVE_SIZES):
    """Return a bench results dict generated from known link parameters.

    Parameters
    ----------
    spec : str
        Topology spec, e.g. ``"dualcube:r=2"``.
    params : (t_s, t_w, t_h) or sequence of them
        True parameters (seconds, seconds per byte, seconds per hop), one triple for all
        sizes or one per regime of ``boundaries``.
    boundaries : tuple of int
        Regime boundaries in bytes (used when ``params`` is per regime).
    switching : {"cut-through", "store-and-forward"}
        How the ping-pong times depend on the hops d: ``t_s + m t_w + d t_h`` or
        ``d (t_s + m t_w)``.  Collective times always follow their schedule's cut-through
        ``model`` coefficients.
    sizes, hops : sequences of int
        Ping-pong grid (hops larger than the diameter are skipped).
    reps : int
        Rows per (size, hops) point (node pairs / repetitions).  A ping-pong row's true time
        is its ``t_min`` (t_avg and t_max are 5 % and 20 % above), a collective's its ``t_max``
        (the last rank; t_avg and t_min are 80 % and 60 % of it): the defaults of the fit.
    noise : float
        Relative Gaussian noise of each time.
    outliers : int
        Ping-pong rows whose times are multiplied by 5 (chosen at random).
    seed : int
        Seed of the generator.
    collectives : sequence of str
        Collectives to include.
    collective_sizes : sequence of int
        Their sizes.

    Returns
    -------
    dict
        ``{"format": "dualmpi-bench/1", "meta": ..., "pingpong": [...], "collectives": [...]}``.

    References
    ----------
    Dual-cube paper, Section 3 (cut-through cost model).

    Examples
    --------
    >>> doc = synthetic_results("hypercube:n=3", (1e-6, 1e-9, 1e-7), reps=1, noise=0.0)
    >>> doc["collectives"][0]["model"], doc["collectives"][0]["t_max"] == 3e-6 + 3 * 8e-9 + 3e-7
    ({'ts': 3, 'tw': 3, 'th': 3}, True)
    """
    topo = from_spec(spec)
    rng = np.random.default_rng(seed)
    pingpong = []
    for d in hops:
        dst = _node_at(topo, d)
        if dst is None:
            continue
        for m in sizes:
            ts, tw, th = _params_for(params, m, boundaries)
            t = ts + m * tw + d * th if switching == "cut-through" else d * (ts + m * tw)
            for _ in range(reps):
                pingpong.append({"kind": "emulated", "src": 0, "dst": dst, "hops": d, "size": m,
                                 "iters": 100, "verified": True, **_pingpong_times(t, rng, noise)})
    for i in rng.choice(len(pingpong), size=min(outliers, len(pingpong)), replace=False):
        for key in ("t_min", "t_avg", "t_max"):
            pingpong[i][key] *= 5.0
    rows = []
    for coll in collectives:
        sim = simulate(topo, coll)
        for m in collective_sizes:
            t = float(predict(sim["model"], *_params_for(params, m, boundaries), m))
            rows.append({"collective": coll, "algorithm": sim["algorithm"], "size": m, "root": 0,
                         "verified": True, "rounds": sim["rounds"], "messages": sim["messages"],
                         "iters": 20, **_collective_times(t, rng, noise), "model": dict(sim["model"]),
                         "virtual_time": dict(sim["model"]), "native_t_avg": None})
    shape = dict(zip(("ts", "tw", "th"), params)) if np.ndim(params) == 1 else None
    meta = {"dualmpi": "synthetic", "spec": topo.spec, "nodes": topo.num_nodes,
            "ranks": topo.num_nodes, "mpi_library": "synthetic (dualmpi.model.synthetic)",
            "host": "synthetic", "params": {"seed": seed, "noise": noise, "outliers": outliers},
            "shape": shape, "switching": switching}
    return {"format": FORMAT, "meta": meta, "pingpong": pingpong, "collectives": rows}


def write_synthetic(path, spec, params, **kwargs):
    """Write :func:`synthetic_results` as JSON to ``path``; return the path."""
    doc = synthetic_results(spec, params, **kwargs)
    with open(os.fspath(path), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return path
