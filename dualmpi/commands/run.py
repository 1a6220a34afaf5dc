"""``dualmpi run``: the papers' collectives as real message passing, one node per MPI rank."""

import json
import socket
import sys
from datetime import datetime, timezone

from .. import __version__
from ..collectives import COLLECTIVES, EXTRA_COLLECTIVES, build_schedule, paper_steps
from ..collectives.schedule import base_collective
from ..errors import InputError
from ..topology import ReducedHypercube
from ..executors.options import make_options
from ..simulator import simulate
from .common import add_fault_args, apply_faults, format_table, load_topology, topology_arg

__all__ = ["add_parser", "main", "parse_sizes", "check_runnable", "DEFAULT_SIZES",
           "MAX_RUN_NODES"]

DEFAULT_SIZES = (8, 1024, 65536)

#: Largest network `run`, `bench` and `soak` emulate (larger ones: `simulate` or `model`).
MAX_RUN_NODES = 1 << 16


def check_runnable(topo):
    """Raise :class:`InputError` for a network too large to emulate as message passing."""
    if topo.num_nodes > MAX_RUN_NODES:
        raise InputError(
            f"{topo.spec} has {topo.num_nodes:,} nodes: too large to emulate (at most "
            f"{MAX_RUN_NODES:,}); use `dualmpi simulate` or `dualmpi model` for it")


def add_parser(sub):
    """Register the ``run`` subcommand."""
    p = sub.add_parser(
        "run",
        help="run collectives as message passing, one node per MPI rank (under mpiexec)",
        description="Run the papers' collectives on SPEC with each MPI rank playing one node and "
        "sending only over the topology's links. Every received byte is verified; per collective "
        "and size it prints verified, rounds (paper vs measured), messages, link violations and "
        "the wall time min/avg/max over ranks (OSU method: warm-up, barrier outside the timer).",
        epilog="example: mpiexec -n 32 python -m mpi4py -m dualmpi run dualcube:r=3 "
        "--collective all --json out.json",
    )
    p.add_argument("spec", type=topology_arg,
                   help="topology spec; one rank per node, or a divisor of the node count")
    p.add_argument("--collective", default="all", choices=(*COLLECTIVES, *EXTRA_COLLECTIVES, "all"),
                   help="which collective to run (default: all)")
    p.add_argument("--root", default="0", help="root node of bcast and scatter (default 0)")
    p.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)),
                   help="comma-separated block sizes in bytes (default 8,1024,65536)")
    p.add_argument("--iters", type=int, default=None,
                   help="timed iterations per size (default: 20 up to 64 KiB, 5 above)")
    p.add_argument("--warmup", type=int, default=2, help="untimed warm-up iterations (default 2)")
    p.add_argument("--shape", metavar="ts=S,tw=S,th=S",
                   help="shape the links: wall-clock time then follows t_s + n*t_w per message and "
                   "t_h per forwarding hop (seconds, seconds per byte, seconds)")
    p.add_argument("--switching", default="store-and-forward",
                   choices=("store-and-forward", "cut-through"),
                   help="store-and-forward: whole messages per hop, one round per hop; "
                   "cut-through: routed messages cut into --packets packets that intermediate "
                   "nodes forward as they arrive (default store-and-forward)")
    p.add_argument("--packets", type=int, default=8,
                   help="packets per routed message under cut-through (default 8)")
    p.add_argument("--model", metavar="ts=S,tw=S,th=S",
                   help="parameters of the virtual model clock whose time is reported as "
                   "t_model (default: the --shape parameters)")
    p.add_argument("--watchdog", type=float, default=120.0, metavar="SECONDS",
                   help="abort the job when a node waits longer than this in one round, naming "
                   "the node, the round and the neighbour it waits for (default 120; 0: off)")
    p.add_argument("--inject-drop", metavar="ROUND:NODE",
                   help="testing aid: NODE skips its sends in ROUND (shows the watchdog at work)")
    p.add_argument("--nodes-per-rank", type=int, default=None,
                   help="play several nodes per rank (block mapping); default: one node per rank "
                   "when the job has one rank per node, else nodes/ranks")
    p.add_argument("--baseline", action="store_true",
                   help="also time the MPI library's native collective on the same ranks and "
                   "report the ratio emulated/native")
    p.add_argument("--json", metavar="FILE", help="write the results with their metadata as JSON")
    add_fault_args(p)
    p.set_defaults(func=main)


def parse_sizes(text):
    """Return the list of sizes in ``text`` or raise :class:`DualmpiError`."""
    sizes = []
    for item in str(text).split(","):
        item = item.strip()
        if not item.isdigit():
            raise InputError(f"bad message size {item!r}: sizes are non-negative integers (bytes)")
        sizes.append(int(item))
    return sizes


def _parse_root(text, topo):
    """Return the root node id or raise a clear error."""
    try:
        root = int(text, 0)
    except ValueError:
        raise InputError(f"bad root {text!r}: the root is an integer node id") from None
    return topo.check_node(root)


def _iters_for(size, iters):
    """Return the number of timed iterations for one size."""
    if iters is not None:
        if iters < 1:
            raise InputError("--iters must be at least 1")
        return iters
    return 20 if size <= 65536 else 5


def metadata(comm, topo, args):
    """Return the run's metadata: versions, MPI library, host, date and parameters."""
    from mpi4py import MPI
    import mpi4py
    import numpy

    return {
        "dualmpi": __version__,
        "spec": topo.spec,
        "nodes": topo.num_nodes,
        "ranks": comm.Get_size(),
        "mpi_library": MPI.Get_library_version().rstrip("\x00").strip().splitlines()[0],
        "mpi_version": "%d.%d" % MPI.Get_version(),
        "mpi4py": mpi4py.__version__,
        "numpy": numpy.__version__,
        "python": sys.version.split()[0],
        "host": socket.gethostname(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "argv": sys.argv,
        "params": {k: v for k, v in vars(args).items() if k != "func"},
        "faults": topo.describe_faults() if hasattr(topo, "describe_faults") else None,
    }


def main(args):
    """Run the requested collectives; return 0 when every one was verified, 1 otherwise."""
    topo = apply_faults(load_topology(args.spec), args)
    check_runnable(topo)
    sizes = parse_sizes(args.sizes)
    root = _parse_root(args.root, topo)
    if args.warmup < 0:
        raise InputError("--warmup must be non-negative")
    for size in sizes:
        _iters_for(size, args.iters)
    colls = COLLECTIVES if args.collective == "all" else (args.collective,)
    options = make_options(args.shape, args.switching, args.packets, args.model, args.watchdog,
                           args.inject_drop)
    if args.nodes_per_rank is not None and args.nodes_per_rank < 1:
        raise InputError(f"--nodes-per-rank must be at least 1, got {args.nodes_per_rank}")

    from mpi4py import MPI

    from ..executors.mpi import LinkComm, check_rank_count, run_schedule

    comm = MPI.COMM_WORLD
    multi = args.nodes_per_rank not in (None, 1) or comm.Get_size() != topo.num_nodes
    if multi:
        from ..executors.multi import BlockMap

        BlockMap(comm, topo, args.nodes_per_rank)  # a wrong rank count fails here, on every rank
    else:
        check_rank_count(comm, topo)
    # the schedules' coefficients for the JSON rows (replayed up to 4096 nodes)
    models = {c: simulate(topo, c, root)["model"] if topo.num_nodes <= 4096 else None
              for c in colls}
    if multi:
        return _main_multi(args, comm, topo, colls, models, sizes, root)
    schedules = {c: build_schedule(c, topo, root) for c in colls}
    link = LinkComm(comm, topo)
    rank0 = comm.Get_rank() == 0
    rows = []
    for coll in colls:
        for size in sizes:
            row = run_schedule(link, schedules[coll], size, _iters_for(size, args.iters),
                               args.warmup, options)
            row["paper_rounds"] = paper_steps(coll, topo)
            row["model"] = models[coll]
            if hasattr(topo, "describe_faults"):
                from ..collectives.faulttolerant import undeliverable

                cut = undeliverable(coll, topo, root)
                row["undeliverable"] = [list(pair) for pair in cut]
            if args.baseline:
                _add_baseline(row, comm, coll, size, root, _iters_for(size, args.iters), args.warmup)
            rows.append(row)
            if rank0:
                _progress(row)
    link.free()
    if rank0:
        print()
        print(_table(rows))
        if args.json:
            out = {"meta": metadata(comm, topo, args), "rows": rows}
            with open(args.json, "w") as fh:
                json.dump(out, fh, indent=2)
                fh.write("\n")
            print(f"results written to {args.json}")
    good = all(r["verified"] and r["link_violations"] == 0 and r.get("native_verified", True)
               for r in rows)
    return 0 if good else 1


def _main_multi(args, comm, topo, colls, models, sizes, root):
    """Run with several nodes per rank: schedules locally/aggregated; alltoall vectorised."""
    from ..executors.multi import BlockMap, run_alltoall_vector, run_schedule_multi

    if args.shape or args.switching != "store-and-forward" or args.baseline:
        raise InputError("--shape, --switching and --baseline need one node per rank")
    if hasattr(topo, "failed_links"):
        raise InputError("--fail-links/--fail-nodes/--fail-random need one node per rank")
    bmap = BlockMap(comm, topo, args.nodes_per_rank)
    rows = []
    for coll in colls:
        for size in sizes:
            iters = _iters_for(size, args.iters)
            if coll == "alltoall" and not isinstance(topo, ReducedHypercube):  # RH: emulated
                row = run_alltoall_vector(bmap, size, iters, args.warmup)
            else:
                sched = build_schedule(coll, topo, root)
                row = run_schedule_multi(bmap, sched, size, iters, args.warmup)
            row.update(paper_rounds=paper_steps(coll, topo), model=models[coll], virtual={},
                       root=root if coll in ("bcast", "scatter") else None)
            rows.append(row)
            if comm.Get_rank() == 0:
                _progress(row)
    if comm.Get_rank() == 0:
        print()
        print(_table(rows))
        if args.json:
            meta = metadata(comm, topo, args)
            meta["nodes_per_rank"] = bmap.q
            with open(args.json, "w") as fh:
                json.dump({"meta": meta, "rows": rows}, fh, indent=2)
                fh.write("\n")
            print(f"results written to {args.json}")
    return 0 if all(r["verified"] for r in rows) else 1


def _add_baseline(row, comm, coll, size, root, iters, warmup):
    """Time the native collective and add its figures and the emulated/native ratio to ``row``."""
    from ..executors.native_baseline import run_native

    native = run_native(comm, base_collective(coll), size, root, iters, warmup)
    row.update({k: v for k, v in native.items()
                if k.startswith("native_")})
    row["ratio"] = row["t_avg"] / row["native_t_avg"] if row["native_t_avg"] > 0 else None


def _progress(row):
    """Print one progress line on rank 0."""
    mark = "ok" if row["verified"] else "FAILED"
    model = row["virtual"].get("time")
    extra = "" if model is None else f" t_model={model * 1e6:.1f} us"
    print(f"[{row['collective']} size={row['size']}] {mark} "
          f"rounds {row['rounds']}/{row['paper_rounds']} t_avg={row['t_avg'] * 1e6:.1f} us{extra}",
          flush=True)


def _table(rows):
    """Return the results table."""
    head = ("collective", "size", "verified", "rounds paper/measured", "hop rounds", "messages",
            "link violations", "t_min us", "t_avg us", "t_max us")
    body = [
        (r["collective"], r["size"], "yes" if r["verified"] else "NO",
         f"{r['paper_rounds']}/{r['rounds']}", r["hop_rounds"], r["messages"],
         r["link_violations"], f"{r['t_min'] * 1e6:.1f}", f"{r['t_avg'] * 1e6:.1f}",
         f"{r['t_max'] * 1e6:.1f}")
        for r in rows
    ]
    if rows and "time" in rows[0]["virtual"]:
        head += ("t_model us",)
        body = [b + (f"{r['virtual']['time'] * 1e6:.1f}",) for b, r in zip(body, rows)]
    if rows and "native_t_avg" in rows[0]:
        head += ("native t_avg us", "emulated/native")
        body = [b + (f"{r['native_t_avg'] * 1e6:.1f}",
                     "-" if r["ratio"] is None else f"{r['ratio']:.2f}")
                for b, r in zip(body, rows)]
    return format_table(body, header=head)
