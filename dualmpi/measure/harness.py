"""``dualmpi bench``: ping-pong chains and collectives on one grid, with baselines (MPI).

Results follow the ``dualmpi-bench/1`` format: ``meta``, ``pingpong`` rows (one-way
times over d-hop chains along real routes) and ``collectives`` rows (with the
schedule's model coefficients); ``dualmpi bench`` writes them as JSON and CSV.
"""

from ..collectives import build_schedule
from ..simulator import simulate_schedule
from .collective import run_collective
from .native_baseline import run_native
from .pingpong import chain, pingpong

__all__ = ["FORMAT", "DEFAULT_SIZES", "iters_for", "run_bench"]

FORMAT = "dualmpi-bench/1"

#: 0 and every power of two up to 1 MiB.
DEFAULT_SIZES = (0,) + tuple(1 << i for i in range(21))


def iters_for(size, shaped, scale=1.0):
    """Return (iterations, repetitions) for one size: fewer for big or shaped messages."""
    if shaped:
        return max(1, int(3 * scale)), 3
    base = 100 if size <= 8192 else 20 if size <= 131072 else 5
    return max(1, int(base * scale)), 5


def run_bench(world, topo, cfg, progress=print):
    """Run the whole grid; return the results dict (complete on rank 0)."""
    from ..comm import Comm

    opts = cfg.options
    net = Comm(world, topo, 1, watchdog=opts.watchdog, shape=opts.shape,
               packets=opts.packets if opts.switching == "cut-through" else 1)
    rank0 = world.Get_rank() == 0
    say = progress if rank0 else (lambda *a, **k: None)
    shape = cfg.options.shape
    rows_pp, rows_coll = [], []
    diameter = topo.formulas()["diameter"]
    hop_list = [d for d in cfg.hops if d <= diameter] if cfg.hops else range(1, diameter + 1)
    for d in hop_list:
        path = chain(topo, d)
        for size in cfg.pp_sizes:
            iters, reps = iters_for(size, shape is not None, cfg.scale)
            kinds = [None] + ([world] if cfg.baseline and shape is None else [])
            for raw in kinds:
                row = pingpong(net, path, size, iters, reps, raw=raw, shape=shape,
                               switching=cfg.options.switching, packets=cfg.options.packets)
                rows_pp.append(row)
                say(f"pingpong {row['kind']:8s} hops={d} size={size:>8} "
                    f"one-way {row['t_avg'] * 1e6:10.1f} us", flush=True)
    for coll in cfg.collectives:
        sched = build_schedule(coll, topo, cfg.root)
        model = simulate_schedule(sched)["model"]
        for size in cfg.coll_sizes:
            iters, _ = iters_for(size * max(1, topo.num_nodes // 8), shape is not None,
                                 cfg.scale / 5)
            row = run_collective(net, coll, size, cfg.root, iters, 1)
            row["model"] = model
            row["native_t_avg"] = None
            if cfg.baseline and shape is None:
                native = run_native(net, coll, size, cfg.root or 0, iters, 1)
                row["native_t_avg"] = native["native_t_avg"]
                row["native_verified"] = native["native_verified"]
            rows_coll.append(row)
            say(f"{coll:9s} size={size:>8} verified={row['verified']} "
                f"t_avg {row['t_avg'] * 1e6:10.1f} us", flush=True)
    net.Free()
    return {"format": FORMAT, "pingpong": rows_pp, "collectives": rows_coll}


def _flat(row, prefix=""):
    """Flatten nested dicts (``model.ts``) and lists for CSV."""
    out = {}
    for k, v in row.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        elif isinstance(v, list):
            out[prefix + k] = ";".join(map(str, v))
        else:
            out[prefix + k] = v
    return out
