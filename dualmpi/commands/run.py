"""``dualmpi run``: the papers' collectives as real message passing, one node per MPI rank."""

import socket
import sys
from datetime import datetime, timezone

from .. import __version__
from ..collectives import COLLECTIVES, build_schedule, paper_steps
from ..collectives.registry import get
from ..errors import InputError
from ..measure.collective import run_collective, runnable
from ..resources import TIME_LIMIT_S, require_time
from ..simulator import simulate, virtual_times
from .common import (add_fault_args, agreed_memory, apply_faults, check_output_path, format_table,
                     load_topology, topology_arg, write_json_atomic)
from .options import make_options

__all__ = ["add_parser", "main", "parse_sizes", "check_runnable", "open_comm", "format_sharing",
           "row_passed", "check_duration", "estimate_memory", "DEFAULT_SIZES", "MAX_RUN_NODES"]

DEFAULT_SIZES = (8, 1024, 65536)

#: Largest network `run`, `bench` and `soak` emulate (larger ones: `simulate` or `model`).
MAX_RUN_NODES = 1 << 16

#: Seconds a call takes at the very least (a barrier and a collective between processes); the
#: pure check before MPI refuses iteration counts that even at this pace exceed --time-limit.
CALL_FLOOR_S = 1e-6
#: A size with more calls than this is timed on a few calls first (:func:`check_duration`).
PROBE_ABOVE = 100
#: Calls timed by :func:`check_duration` (after one untimed call).
PROBE_CALLS = 10
#: Bytes each rank keeps per timed call (the times, the row's ``t_calls``, rank 0's JSON text).
RECORD_BYTES = 160


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
        help="run collectives as message passing, one node (or a block) per MPI rank (under mpiexec)",
        description="Run the papers' collectives on SPEC through dualmpi.Comm: each MPI rank plays "
        "one node (or a block of nodes) and sends only over the topology's links. The buffers are "
        "filled with a verifiable pattern and every received byte is checked after the call; per "
        "collective and size it prints verified, rounds (paper vs measured), messages, link "
        "violations, link sharing (per step, the most messages of the step on one directed "
        "link; docs/model.md, 'Link sharing') and the wall time min/avg/max over ranks (OSU "
        "method: warm-up, barrier outside the timer). With --model the virtual clock's time "
        "is reported as t_model; under cut-through its links share their bandwidth, as in "
        "`dualmpi simulate`, and t_paper is the paper's formula T for comparison.",
        epilog="example: mpiexec -n 32 python -m mpi4py -m dualmpi run dualcube:r=3 "
        "--collective all --json out.json",
    )
    p.add_argument("spec", type=topology_arg,
                   help="topology spec; one rank per node, or a divisor of the node count")
    p.add_argument("--collective", default="all", choices=(*runnable(), "all"),
                   help="which collective to run (default: all, the papers' four: "
                   f"{', '.join(COLLECTIVES)})")
    p.add_argument("--root", default="0",
                   help="root node of the rooted collectives (bcast, scatter, gather; default 0)")
    p.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)),
                   help="comma-separated block sizes in bytes (default 8,1024,65536)")
    p.add_argument("--iters", type=int, default=None,
                   help="timed iterations per size (default: 20 up to 64 KiB, 5 above)")
    p.add_argument("--warmup", type=int, default=2, help="untimed warm-up iterations (default 2)")
    p.add_argument("--shape", metavar="ts=S,tw=S,th=S",
                   help="shape the links: wall-clock time then follows t_s + n*t_w per message and "
                   "t_h per forwarding hop (seconds, seconds per byte, seconds)")
    p.add_argument("--switching", default=None,
                   choices=("store-and-forward", "cut-through"),
                   help="store-and-forward: whole messages per hop, one round per hop; "
                   "cut-through: routed messages cut into --packets packets that intermediate "
                   "nodes forward as they arrive (default: store-and-forward, but broadcast and "
                   "scatter blocks above 256 KiB pipelined in 256 KiB pieces where a rank "
                   "forwards them)")
    p.add_argument("--packets", type=int, default=None,
                   help="pieces per message under cut-through (default: 8; without --switching "
                   "the engine pipelines broadcast and scatter blocks above 256 KiB in 256 KiB "
                   "pieces where a rank forwards them)")
    p.add_argument("--model", metavar="ts=S,tw=S,th=S",
                   help="parameters of the virtual model clock whose time is reported as "
                   "t_model (default: the --shape parameters); with --switching cut-through "
                   "messages sharing a link share its bandwidth, and t_paper (the formula) "
                   "is shown beside it")
    p.add_argument("--watchdog", type=float, default=120.0, metavar="SECONDS",
                   help="abort the job when a node waits longer than this in one round, naming "
                   "the node, the round and the neighbour it waits for (default 120; 0: off)")
    p.add_argument("--time-limit", type=float, default=TIME_LIMIT_S, metavar="SECONDS",
                   help="refuse a size whose calls (warm-up, timed, baseline) would take longer "
                   "than this, estimated from 10 timed calls when there are more than "
                   f"{PROBE_ABOVE} (default {TIME_LIMIT_S:g}; 0: no limit)")
    p.add_argument("--inject-drop", metavar="ROUND:NODE",
                   help="testing aid: NODE skips its sends in ROUND (shows the watchdog at work)")
    p.add_argument("--nodes-per-rank", type=int, default=None,
                   help="play several nodes per rank (block mapping); default: nodes/ranks")
    p.add_argument("--verify", action="store_true",
                   help="also carry a CRC-32 with every message and count checksum failures")
    p.add_argument("--baseline", action="store_true",
                   help="also time the MPI library's native collective on the same ranks and "
                   "report the ratio emulated/native")
    p.add_argument("--json", metavar="FILE", help="write the results with their metadata as JSON")
    add_fault_args(p)
    p.set_defaults(func=main)


def parse_sizes(text):
    """Return the list of sizes in ``text`` or raise :class:`DualmpiError`."""
    from ..topology.spec import check_ascii_digits

    sizes = []
    for item in str(text).split(","):
        item = item.strip()
        check_ascii_digits(item, "message size", InputError)
        if not item.isdigit():
            raise InputError(f"bad message size {item!r}: sizes are non-negative integers (bytes)")
        sizes.append(int(item))
    return sizes


def _parse_root(text, topo):
    """Return the root node id or raise a clear error."""
    from ..topology.spec import check_ascii_digits

    check_ascii_digits(text, "root", InputError)
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
    base = load_topology(args.spec)
    check_runnable(base)  # before the faults: --fail-random lists every link
    topo = apply_faults(base, args)
    sizes = parse_sizes(args.sizes)
    root = _parse_root(args.root, topo)
    if args.warmup < 0:
        raise InputError("--warmup must be non-negative")
    for size in sizes:
        _iters_for(size, args.iters)
    colls = COLLECTIVES if args.collective == "all" else (args.collective,)
    limit = _time_limit(args.time_limit)
    calls = _calls(colls, sizes, args)
    require_time(calls * CALL_FLOOR_S, f"run: {calls:,} calls at {CALL_FLOOR_S * 1e6:g} us or more "
                 "each", limit or float("inf"), hint="use fewer --iters (or raise --time-limit)")
    switching = args.switching or "store-and-forward"
    options = make_options(args.shape, switching, args.packets or 8, args.model, args.watchdog,
                           args.inject_drop)
    if args.nodes_per_rank is not None and args.nodes_per_rank < 1:
        raise InputError(f"--nodes-per-rank must be at least 1, got {args.nodes_per_rank}")
    check_output_path(args.json)

    from mpi4py import MPI

    from ..comm import _nodes_per_rank

    world = MPI.COMM_WORLD
    q = _nodes_per_rank(topo, world.Get_size(), args.nodes_per_rank)  # every rank alike
    if root % q:
        raise InputError(f"--root {root}: with {q} nodes per rank the root must be the first "
                         f"node of a rank (a multiple of {q})")
    if options.drop is not None:
        topo.check_node(options.drop[1])
        rounds = max(build_schedule(c, topo, root).num_rounds for c in colls)
        if not 0 <= options.drop[0] < rounds:
            raise InputError(f"--inject-drop {args.inject_drop}: no such round (the schedules "
                             f"have rounds 0..{rounds - 1})")
    if "ring-allreduce" in colls and q != 1:
        raise InputError("ring-allreduce needs one node per rank")
    estimate_memory(colls, sizes, world.Get_size(), q,
                    sum(_iters_for(size, args.iters) for size in sizes) * len(colls),
                    agreed_memory(world))  # (every rank the same verdict and line)
    # the schedules' coefficients and link sharing for the rows (replayed up to 4096 nodes)
    sims = {c: simulate(topo, c, root) if topo.num_nodes <= 4096 else None for c in colls}
    rank0 = world.Get_rank() == 0
    rows = []
    nets = {}
    for coll in colls:
        net = nets.get(get(coll).runs_as)
        if net is None:
            net = nets[get(coll).runs_as] = open_comm(world, topo, q, args, options, coll)
        for size in sizes:
            if rank0:
                print(f"[{coll} size={size}] running", flush=True)
            calls = (args.warmup + _iters_for(size, args.iters)) * (2 if args.baseline else 1)
            check_duration(net, coll, size, root // q, calls, limit,
                           (lambda text: print(text, flush=True)) if rank0 else None)
            row = run_collective(net, coll, size, root // q, _iters_for(size, args.iters),
                                 args.warmup)
            row["paper_rounds"] = paper_steps(coll, topo)
            sim = sims[coll]
            row["model"] = None if sim is None else sim["model"]
            row["link_sharing"] = None if sim is None else sim["link_sharing"]
            row["virtual"] = _virtual(topo, coll, root, size, options, sim) if rank0 else {}
            if hasattr(topo, "describe_faults"):
                from ..collectives.faulttolerant import undeliverable

                cut = undeliverable(get(coll).layout, topo, root)
                row["undeliverable"] = [list(pair) for pair in cut]
            if args.baseline:
                _add_baseline(row, net, coll, size, root // q, _iters_for(size, args.iters),
                              args.warmup)
            rows.append(row)
            if rank0:
                _progress(row)
    for net in nets.values():
        net.Free()
    if rank0:
        print()
        print(_table(rows))
        if args.json:
            meta = metadata(world, topo, args)
            meta["nodes_per_rank"] = q
            from ..model.results import RUN_FORMAT

            write_json_atomic({"format": RUN_FORMAT, "meta": meta, "rows": rows}, args.json)
            print(f"results written to {args.json}")
    return 0 if all(map(row_passed, rows)) else 1


def row_passed(row):
    """Return True when a row counts as passed (exit code 0): verified, no message counted on
    a pair of nodes that is not a link, the native baseline verified, nothing undeliverable."""
    return bool(row["verified"] and not row["link_violations"]
                and row.get("native_verified", True) and not row.get("undeliverable"))


def _time_limit(value):
    """Return ``--time-limit`` in seconds (0: no limit) or raise :class:`InputError`."""
    if not value >= 0:  # also refuses nan
        raise InputError(f"--time-limit must be 0 (no limit) or a number of seconds, got {value}")
    return value


def _calls(colls, sizes, args):
    """Return the calls the run makes: warm-up and timed, twice with ``--baseline``."""
    per = sum(args.warmup + _iters_for(size, args.iters) for size in sizes) * len(colls)
    return per * (2 if args.baseline else 1)


def check_duration(net, coll, size, root, calls, limit, say=None):
    """Refuse, on every rank alike, a size whose ``calls`` would take longer than ``limit`` s.

    With more than :data:`PROBE_ABOVE` calls, :data:`PROBE_CALLS` calls after an untimed
    one give the pace: their median (the slowest rank's time per call) plus a barrier's
    (medians, so that one slow call of a fresh plan does not count ten times), as each
    timed call has a barrier.  The estimate is announced through ``say`` when it
    exceeds 10 s.  ``limit`` 0: no limit.  Raises
    :class:`~dualmpi.resources.ResourceError` on every rank.
    """
    import numpy as np
    from mpi4py import MPI

    from ..resources import format_seconds

    if not limit or calls <= PROBE_ABOVE:
        return
    probe = run_collective(net, coll, size, root, PROBE_CALLS, 1)  # t_calls: alike on every rank
    net._control_barrier()  # the ranks leave run_collective at different times
    waits = []
    for _ in range(PROBE_CALLS):
        start = MPI.Wtime()
        net._control_barrier()
        waits.append(MPI.Wtime() - start)
    barrier = np.zeros(1)
    net._control_allreduce(np.array([np.median(waits)]), barrier, MPI.MAX)
    pace = probe["t_med"] + float(barrier[0])
    seconds = calls * pace
    require_time(seconds, f"run {coll} size={size}: {calls:,} calls at {format_seconds(pace)} each",
                 limit,
                 hint="use fewer --iters (or raise --time-limit)")
    if say is not None and seconds > 10:
        say(f"[{coll} size={size}] {calls:,} calls: estimated {format_seconds(seconds)}")


def estimate_memory(colls, sizes, ranks, q, timed=0, available=None):
    """Refuse (on every rank alike) sizes whose buffers would not fit in this machine's memory.

    ``sizes`` are node-level blocks.  Per rank, from each collective's layout: the user's
    send buffer, its receive buffer and the bytes to check it against, and the engine's
    store (twice the larger buffer, for every node of the rank when the blocks are meant
    for all: each node holds its copy), all ranks sharing the machine; and
    :data:`RECORD_BYTES` for each of the ``timed`` calls of the whole run.  A rank's
    buffers are the same whatever ``q`` (its nodes split its pieces), so the layout is
    laid out for one node per rank.  ``available``: the bytes available (default: this
    rank's own reading; :func:`~dualmpi.commands.common.agreed_memory` gives every rank
    the same, so every rank prints the same line).

    >>> estimate_memory(["alltoall"], [1 << 26], 32, 1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dualmpi.resources.ResourceError: 32 ranks x buffers and store of the largest size needs 320 GiB...
    """
    from ..collectives.schedule import ALL
    from ..engine.layout import Layout, pieces_per_rank
    from ..resources import require_memory

    worst = 0
    for coll in colls:
        kind = get(coll).layout
        for size in sizes:
            lay = Layout(kind, ranks, 1, size * pieces_per_rank(kind, q), 0)
            for rank in {0, ranks - 1}:  # the root and another rank
                ends, copies = [], 1
                for _, origin, target, offset in (lay.inputs(rank), lay.outputs(rank)):
                    ends.append(int((offset + lay.size(origin, target)).max()) if offset.size
                                else 0)
                    copies = q if (target == ALL).any() else copies
                send, recv = ends
                store = copies * 2 * max(send, recv)
                worst = max(worst, send + 2 * recv + store)
    require_memory((worst + timed * RECORD_BYTES) * ranks,
                   f"{ranks} ranks x buffers and store of the largest size"
                   + (f" and the times of {timed:,} calls" if timed * RECORD_BYTES > worst else ""),
                   available)


def open_comm(world, topo, q, args, options, collective=None):
    """Return the :class:`dualmpi.Comm` the CLI's options describe.

    ``collective`` another one's algorithm (``runs_as``, e.g. ``ring-allgather``): the
    communicator runs that one with it.
    """
    from ..comm import Comm

    shape = options.shape
    packets = "auto"
    if args.switching == "cut-through":
        packets = options.packets
    elif args.switching == "store-and-forward":
        packets = 1
    # ring-allreduce is Allreduce (uint8, MPI.SUM: bytes added modulo 256) on the ring
    runs_as = get(collective).runs_as if collective else None
    algorithms = None if runs_as is None else {runs_as[0]: runs_as[1]}
    return Comm(world, topo, q, watchdog=options.watchdog, verify=getattr(args, "verify", False),
                shape=shape, packets=packets, algorithms=algorithms, drop=options.drop)


def _virtual(topo, coll, root, size, options, sim=None):
    """Return the virtual clocks' coefficients (and predicted time) from the schedule, or {}.

    With a model clock (``--model`` or ``--shape``) ``model_clock`` holds what
    ``dualmpi simulate --json`` reports as ``virtual`` for the same parameters
    (:func:`dualmpi.simulator.virtual_times`): the paper's formula time, the step bound
    with link sharing and this clock's time, whose cut-through links share their
    bandwidth (``ClockParams.contention``, "shared" unless set otherwise).
    """
    if topo.num_nodes > (256 if get(coll).layout == "alltoall" else 4096):
        return {}
    from ..engine.virtual import replay_clocks

    clock = options.model_clock
    out = replay_clocks(build_schedule(coll, topo, root), size, clock)
    if clock is not None and sim is not None:
        mine = {"time": out["time"], "contention_delay": out["contention_delay"][-1],
                "delayed_hops": out["delayed_hops"][-1]}
        out["model_clock"] = virtual_times(sim, clock, size, clock_result=mine)
    return out


def format_sharing(sharing):
    """Return a row's link sharing as table text: the most messages on one link, in how many steps.

    >>> format_sharing({"per_step": [1, 2, 2], "max": 2, "steps_shared": 2, "shared_messages": 8})
    '2 (2/3 steps)'
    >>> format_sharing({"per_step": [1, 1], "max": 1, "steps_shared": 0, "shared_messages": 0})
    '1 (0/2 steps)'
    >>> format_sharing(None)
    '-'
    """
    if not sharing:
        return "-"
    return f"{sharing['max']} ({sharing['steps_shared']}/{len(sharing['per_step'])} steps)"


def _add_baseline(row, net, coll, size, root, iters, warmup):
    """Time the native collective and add its figures and the emulated/native ratio to ``row``."""
    from ..measure.native_baseline import run_native

    native = run_native(net, coll, size, root, iters, warmup)
    row.update({k: v for k, v in native.items()
                if k.startswith("native_")})
    row["ratio"] = row["t_avg"] / row["native_t_avg"] if row["native_t_avg"] > 0 else None


def _progress(row):
    """Print one progress line on rank 0."""
    mark = "ok" if row["verified"] else "FAILED"
    model = row["virtual"].get("time")
    extra = "" if model is None else f" t_model={model * 1e6:.1f} us"
    paper = row["virtual"].get("model_clock", {}).get("paper_time")
    if paper:
        extra += f" (paper's T {paper * 1e6:.1f} us)"
    sharing = row.get("link_sharing")
    if sharing:
        extra += (f" link sharing max {sharing['max']} in {sharing['steps_shared']}/"
                  f"{len(sharing['per_step'])} steps, {sharing['shared_messages']} link uses shared")
    print(f"[{row['collective']} size={row['size']}] {mark} "
          f"rounds {row['rounds']}/{row['paper_rounds']} t_avg={row['t_avg'] * 1e6:.1f} us{extra}",
          flush=True)


def _table(rows):
    """Return the results table."""
    head = ("collective", "size", "verified", "delivered/expected", "rounds paper/measured",
            "hop rounds", "messages", "link violations", "link sharing", "t_min us", "t_avg us",
            "t_max us")
    body = [
        (r["collective"], r["size"], "yes" if r["verified"] and not r.get("undeliverable")
         else "NO", f"{r['delivered']}/{r['expected']}"
         + (f" ({len(r['undeliverable'])} undeliverable)" if r.get("undeliverable") else ""),
         f"{r['paper_rounds']}/{r['rounds']}", r["hop_rounds"], r["messages"],
         "-" if r["link_violations"] is None else r["link_violations"],
         format_sharing(r.get("link_sharing")),
         f"{r['t_min'] * 1e6:.1f}", f"{r['t_avg'] * 1e6:.1f}",
         f"{r['t_max'] * 1e6:.1f}")
        for r in rows
    ]
    if rows and "time" in rows[0]["virtual"]:
        head += ("t_model us",)
        body = [b + (f"{r['virtual']['time'] * 1e6:.1f}",) for b, r in zip(body, rows)]
        papers = [r["virtual"].get("model_clock", {}).get("paper_time") for r in rows]
        if any(t is not None for t in papers):
            head += ("t_paper us",)
            body = [b + ("-" if t is None else f"{t * 1e6:.1f}",) for b, t in zip(body, papers)]
    if rows and "native_t_avg" in rows[0]:
        head += ("native t_avg us", "emulated/native")
        body = [b + (f"{r['native_t_avg'] * 1e6:.1f}",
                     "-" if r["ratio"] is None else f"{r['ratio']:.2f}")
                for b, r in zip(body, rows)]
    return format_table(body, header=head)
