"""Print the markdown table of ``benchmarks/engine.py`` results files (docs/performance.md).

    python benchmarks/table.py benchmarks/results/engine_*.json
    python benchmarks/table.py --gap benchmarks/results/engine_all_*.json

``--gap``: the gap to native MPI split in two (docs/performance.md, "Where the gap to native
MPI comes from"): ``native-schedule/native``, the network's schedule sent as plain MPI
messages over MPI's own algorithm (the network's part), and ``dualmpi/native-schedule``, the
emulator's; with the rounds of the schedule and ``dualmpi - native`` in microseconds, and
what the model says of the network's part: the schedule's steps and step bytes
(``Engine.cost``: the coefficients of t_s and t_w) over those of the algorithm MPI runs on as
many ranks (:data:`MPI_ALGORITHMS`), ``steps`` ratio / ``step bytes`` ratio (the first
dominates small blocks, the second large ones).  Where a repeated small v-variant sent its
count table in its plan's messages, ``floor-merged/floor`` (what the count table's agreement
costs: the merged plan against the call's plan alone, both in the smallest loop) and
``dualmpi/floor-merged`` (what the call adds to the plan it runs).
"""

import json
import sys


def fmt_us(seconds):
    """Return microseconds with 3 significant figures."""
    us = seconds * 1e6
    return f"{us:.3g}" if us < 1000 else f"{us:,.0f}"


#: The algorithm taken as MPI's for the model's reference (Open MPI's usual choice on p ranks at
#: small sizes): ``name: (steps(p), step bytes(p, m))`` for blocks of ``m`` bytes.
MPI_ALGORITHMS = {
    "bcast": (lambda p: _log2(p), lambda p, m: _log2(p) * m),                 # binomial tree
    "scatter": (lambda p: _log2(p), lambda p, m: (p - 1) * m),                # binomial tree
    "gather": (lambda p: _log2(p), lambda p, m: (p - 1) * m),                 # binomial tree
    "allgather": (lambda p: _log2(p), lambda p, m: (p - 1) * m),              # recursive doubling
    "alltoall": (lambda p: p - 1, lambda p, m: (p - 1) * m),                  # pairwise exchange
    "allreduce": (lambda p: _log2(p), lambda p, m: _log2(p) * m),             # recursive doubling
    "reduce": (lambda p: _log2(p), lambda p, m: _log2(p) * m),                # binomial tree
    "reduce_scatter_block": (lambda p: _log2(p), lambda p, m: (p - 1) * m),   # recursive halving
    "scan": (lambda p: p - 1, lambda p, m: (p - 1) * m),                      # linear chain
    "exscan": (lambda p: p - 1, lambda p, m: (p - 1) * m),                    # linear chain
    "barrier": (lambda p: _log2(p), lambda p, m: 0),                          # recursive doubling
}


def _log2(p):
    return max(1, (p - 1).bit_length())


def model_ratio(spec, coll, size):
    """Return ``(steps ratio, step-bytes ratio)`` of the network's schedule over MPI's algorithm."""
    from dualmpi.collectives.allreduce import choose, costs
    from dualmpi.engine.core import Engine
    from dualmpi.engine.local import LocalTransport
    from dualmpi.topology import from_spec

    topo = from_spec(spec)
    p = topo.num_nodes
    coll = coll.removesuffix("_changing").removesuffix("_alternating").removesuffix("_spec")
    coll = coll.removesuffix("_fresh").removesuffix("_views")
    if coll.startswith("i"):  # a nonblocking form: the blocking form's schedule
        coll = coll[1:]
    if coll.startswith("neighbor"):  # one message per link, no schedule to compare
        return float("nan"), float("nan")
    base = {"scatterv": "scatter", "gatherv": "gather", "allgatherv": "allgather",
            "alltoallv": "alltoall", "alltoallw": "alltoall",
            "reduce_scatter": "reduce_scatter_block"}.get(coll, coll)
    name = base
    if base == "allreduce":
        name = "allreduce-" + choose(size, costs(topo, 1))
    nbytes = 0 if base == "barrier" else size
    _, steps, step_bytes = Engine(topo, 1, LocalTransport()).cost(name, nbytes)
    f_steps, f_bytes = MPI_ALGORITHMS[base]
    mpi_bytes = f_bytes(p, nbytes)
    return steps / f_steps(p), (step_bytes / mpi_bytes if mpi_bytes else float("nan"))


def _model_cells(spec, coll, size):
    steps, step_bytes = model_ratio(spec, coll, size)
    # (NaN: no bytes, or no schedule)
    return ("—" if steps != steps else f"{steps:.2f}",
            "—" if step_bytes != step_bytes else f"{step_bytes:.2f}")


def _cell(r, key, fmt="{:.2f}"):
    """A row's ratio ``key`` formatted, or a dash where the row has none (no floor)."""
    return fmt.format(r[key]) if key in r else "—"


def _us(med, name):
    return fmt_us(med[name]) if name in med else "—"


def gap(paths):
    """Print, per file, the gap table (see the module's docstring)."""
    for path in paths:
        with open(path) as fh:
            data = json.load(fh)
        meta = data["meta"]
        load = "/".join(f"{x:.1f}" for x in meta["loadavg_start"][:1] + meta["loadavg_end"][:1])
        against = meta.get("against")
        print(f"\n**{meta['spec']}, {meta['ranks']} ranks** (`{path}`; load average {load} at "
              f"start/end, {meta['repeats']} interleaved repeats, medians)\n")
        head = ["collective", "block (B)", "rounds", "dualmpi (µs)", "floor (µs)",
                "native schedule (µs)", "native (µs)", "dualmpi − native (µs)", "dualmpi/floor",
                "emulator: dualmpi/native schedule", "network: native schedule/native",
                "model: steps / step bytes over MPI's", "dualmpi/native"]
        merged = any("floor-merged/floor" in r for r in data["rows"])
        if merged:
            head += ["count table: floor-merged/floor", "dualmpi/floor-merged"]
        if against:
            head += [f"dualmpi/{against}"]
        print("| " + " | ".join(head) + " |")
        print("|" + "|".join("---" if i < 1 else "---:" for i in range(len(head))) + "|")
        for r in data["rows"]:
            med = r["median"]
            schedule = med.get("native-schedule")
            cells = [r["collective"], f"{r['size']:,}", str(r.get("rounds", "—")),
                     fmt_us(med["dualmpi"]), _us(med, "floor"), _us(med, "native-schedule"),
                     fmt_us(med["native"]), f"{(med['dualmpi'] - med['native']) * 1e6:+.1f}",
                     _cell(r, "dualmpi/floor"),
                     "—" if schedule is None else f"{med['dualmpi'] / schedule:.2f}",
                     _cell(r, "native-schedule/native"),
                     "{} / {}".format(*_model_cells(meta["spec"], r["collective"], r["size"])),
                     f"{r['dualmpi/native']:.2f}"]
            if merged:
                cells += [f"{r['floor-merged/floor']:.2f}", f"{r['dualmpi/floor-merged']:.2f}"]\
                    if "floor-merged/floor" in r else ["—", "—"]
            if against:
                cells += [_cell(r, "dualmpi/against")]
            print("| " + " | ".join(cells) + " |")


def main(paths):
    if paths[:1] == ["--gap"]:
        gap(paths[1:])
        return
    for path in paths:
        with open(path) as fh:
            data = json.load(fh)
        meta = data["meta"]
        load = "/".join(f"{x:.1f}" for x in meta["loadavg_start"][:1] + meta["loadavg_end"][:1])
        print(f"\n**{meta['spec']}, {meta['ranks']} ranks** (`{path}`; load average {load} at "
              f"start/end, {meta['repeats']} interleaved repeats, medians)\n")
        before = meta.get("before") is not None
        neighbor = any("neighbor/floor" in r for r in data["rows"])
        python = any("python/floor" in r for r in data["rows"])
        rounds = any("dualmpi/floor-rounds" in r for r in data["rows"])
        head = ["collective", "block (B)", "pieces", "dualmpi (µs)", "floor (µs)", "native (µs)",
                "dualmpi/floor", "dualmpi/native"]
        if before:
            head += ["before/native", "speed-up vs before"]
        if neighbor:
            head += ["neighbour colls/floor"]
        if python:
            head += ["Python loop/floor"]
        if rounds:
            head += ["dualmpi/rounds alone"]
        print("| " + " | ".join(head) + " |")
        print("|" + "|".join("---" if i < 1 else "---:" for i in range(len(head))) + "|")
        for r in data["rows"]:
            med = r["median"]
            cells = [r["collective"], f"{r['size']:,}", str(r.get("packets", "—")),
                     fmt_us(med["dualmpi"]), _us(med, "floor"), fmt_us(med["native"]),
                     _cell(r, "dualmpi/floor"), f"{r['dualmpi/native']:.2f}"]
            if before:
                cells += [_cell(r, "before/native"), _cell(r, "before/dualmpi")]
            if neighbor:
                cells += [f"{r['neighbor/floor']:.2f}"]
            if python:
                cells += [f"{r['python/floor']:.2f}" if "python/floor" in r else "—"]
            if rounds:
                cells += [f"{r['dualmpi/floor-rounds']:.2f}" if "dualmpi/floor-rounds" in r
                          else "—"]
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
