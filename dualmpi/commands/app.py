"""``dualmpi app``: an application kernel on the emulated network, the hypercube and native MPI."""

import os

import numpy as np

from ..apps import KERNELS, cg, fft, sort, summa
from ..apps.record import DEFAULT_CLOCK, Recorder, call_sizes, merge_sends, model_time
from ..comm import Comm
from ..errors import DualmpiError, InputError
from ..topology import Hypercube
from .common import check_output_path, format_table, load_topology, topology_arg, write_json_atomic
from .run import check_runnable, metadata

__all__ = ["add_parser", "main", "default_size", "run_kernel", "APP_FORMAT", "BASE_SIZES"]

#: Format tag of the ``--json`` file.
APP_FORMAT = "dualmpi-app/1"

#: Default problem sizes, rounded up to a multiple of the ranks: the FFT's and SUMMA's N
#: (N x N matrices), the sort's total keys, the CG's grid side (an N x N Poisson grid).
BASE_SIZES = {"fft": 256, "sort": 1 << 16, "summa": 256, "cg": 64}

_MODULES = {"fft": fft, "sort": sort, "summa": summa, "cg": cg}


def add_parser(sub):
    """Register the ``app`` subcommand."""
    p = sub.add_parser(
        "app",
        help="an application kernel (fft, sort, summa, cg) on the network, the hypercube and "
        "native MPI (under mpiexec)",
        description="Run KERNEL through dualmpi.Comm on SPEC and, in the same job, on the "
        "hypercube with as many nodes (when that is a power of two) and on native MPI "
        "(plain COMM_WORLD), each result verified against numpy (and the CG against the same "
        "solver in one process). Kernels: fft (2-D FFT of an N x N complex array, transposes "
        "by Alltoall), sort (sample sort of N random 64-bit keys: Allgather, Alltoall, "
        "Alltoallv), summa (C = A B for N x N float64, a Bcast per block row), cg (conjugate "
        "gradient on the N x N 2-D Poisson grid: halo exchange along links, Allreduce for dot "
        "products). Prints per network the time (median over repeats of the slowest rank; the "
        "networks take turns within each repeat), "
        "link messages, bytes and hop rounds (dualmpi.Comm.stats), the model time of the "
        "communication (each call priced by its schedule at t_s = 2 us, t_w = 1 ns/B, "
        "t_h = 50 ns) and the ratios.",
        epilog="example: mpiexec -n 8 python -m mpi4py -m dualmpi app fft dualcube:r=2 --size 256",
    )
    p.add_argument("kernel", help=f"the kernel: {', '.join(KERNELS)}")
    p.add_argument("spec", type=topology_arg,
                   help="topology spec; one rank per node, or a divisor of the node count")
    p.add_argument("--size", default=None, metavar="N",
                   help="problem size N (fft, summa: N x N matrices; sort: N keys; cg: N x N "
                   "grid); a multiple of the ranks. Default: "
                   + ", ".join(f"{k} {v}" for k, v in BASE_SIZES.items())
                   + " (rounded up to a multiple of the ranks)")
    p.add_argument("--nodes-per-rank", type=int, default=None, metavar="Q",
                   help="nodes played by each rank (default nodes/ranks)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per network (default 5)")
    p.add_argument("--seed", type=int, default=0, help="seed of the input data (default 0)")
    p.add_argument("--json", metavar="FILE", help="write the results with their metadata as JSON")
    p.set_defaults(func=main)


def default_size(kernel, ranks):
    """Return the default N of ``kernel`` on ``ranks`` ranks (a multiple of ``ranks``).

    >>> default_size("fft", 8), default_size("cg", 48), default_size("sort", 1024)
    (256, 96, 1048576)
    """
    base = BASE_SIZES[kernel]
    if kernel == "sort":
        base = max(base, ranks * ranks)
    return -(-base // ranks) * ranks


def _parse_size(text, kernel, ranks):
    """Return N from ``--size`` (or the default), refused with one line when it does not fit."""
    if text is None:
        return default_size(kernel, ranks)
    from ..topology.spec import check_ascii_digits

    check_ascii_digits(text, "--size", InputError)
    if not text.strip().isdigit():
        raise InputError(f"bad --size {text!r}: a positive integer")
    n = int(text)
    try:
        _MODULES[kernel].check_size(n, ranks)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    limit = {"fft": 1 << 13, "summa": 1 << 13, "sort": 1 << 27, "cg": 1 << 11}[kernel]
    if n > limit:
        raise InputError(f"{kernel}: N = {n} is too large for this command (at most {limit})")
    return n


def _inputs(kernel, n, comm, seed):
    """Return ``(args, block)``: the kernel's arguments on this rank and its block index."""
    R, me = comm.Get_size(), comm.Get_rank()
    if kernel == "fft":
        return (fft.make_input(n, R, me, seed),), me
    if kernel == "sort":
        return (sort.make_input(n, R, me, seed),), me
    if kernel == "summa":
        return summa.make_input(n, R, me, seed), me
    part = cg.partition(comm)
    block = part.block(me)
    return (cg.make_rhs(n, R, block, seed), part), block


_CALLS = {"fft": fft.fft2, "sort": sort.sample_sort, "summa": summa.summa, "cg": cg.cg_solve}


def run_kernel(kernel, comms, world, n, repeats, seed=0):
    """Time ``kernel`` on every communicator of ``comms``, interleaved; same list on every rank.

    Each of ``comms`` (a :class:`dualmpi.Comm` over ``world``, or ``world`` itself) runs
    the kernel once untimed, then ``repeats`` rounds run it once on each in turn (A B C,
    A B C, ...), so a change of load hits them alike.  Returns, per communicator, the
    times per repeat (slowest rank), the last run's output and calls (with their sizes
    agreed over the ranks as the maximum), and, on a ``dualmpi.Comm``, the link
    messages, bytes and hop rounds of one run (``stats()`` summed over the ranks; rounds
    of the slowest rank).
    """
    from mpi4py import MPI

    inputs = [_inputs(kernel, n, comm, seed) for comm in comms]
    times = np.zeros((len(comms), repeats))
    outs, recs = [None] * len(comms), [None] * len(comms)
    for it in range(1 + repeats):
        for i, comm in enumerate(comms):
            if it == 1 and comm is not world:
                comm.reset_stats()
            recs[i] = Recorder(comm)
            world.Barrier()
            t0 = MPI.Wtime()
            outs[i] = _CALLS[kernel](recs[i], *inputs[i][0])
            t1 = MPI.Wtime()
            if it:
                times[i, it - 1] = t1 - t0
    world.Allreduce(MPI.IN_PLACE, times, op=MPI.MAX)
    results = []
    for i, comm in enumerate(comms):
        mine = merge_sends(recs[i].calls)
        counts = world.allgather(len(mine))
        if min(counts) != max(counts):  # pragma: no cover - a kernel whose ranks call differently
            raise DualmpiError(f"{kernel}: the ranks made {min(counts)} to {max(counts)} calls; "
                               "their sizes cannot be agreed")
        sizes = call_sizes(mine)
        world.Allreduce(MPI.IN_PLACE, sizes, op=MPI.MAX)
        calls = [(k, int(m), r) for (k, _, r), m in zip(mine, sizes)]
        res = {"times": times[i].tolist(), "time": float(np.median(times[i])), "output": outs[i],
               "block": inputs[i][1], "calls": calls, "messages": None, "bytes": None,
               "rounds": None}
        if comm is not world:
            st = comm.stats()
            tot = np.array([st["messages"], st["bytes"]], dtype=np.int64)
            world.Allreduce(MPI.IN_PLACE, tot, op=MPI.SUM)
            rounds = world.allreduce(st["rounds"], op=MPI.MAX)
            res.update(messages=int(tot[0]) // repeats, bytes=int(tot[1]) // repeats,
                       rounds=rounds // repeats)
        results.append(res)
    return results


def _verify(kernel, n, ranks, seed, gathered, native):
    """Return ``(ok, note)`` for one network's gathered outputs (rank 0), against numpy/serial."""
    if kernel == "cg":
        blocks = [x for _, (x, _, _) in sorted(gathered)]
        x = np.vstack(blocks)
        its = gathered[0][1][1]
        res = gathered[0][1][2]
        rhs = np.vstack([cg.make_rhs(n, ranks, i, seed) for i in range(ranks)])
        x0, it0, res0 = cg.cg_serial(rhs)
        zero = np.zeros(n)
        true = np.linalg.norm(cg.poisson_matvec(x, zero, zero) - rhs) / np.linalg.norm(rhs)
        ok = its == it0 and np.allclose(x, x0, rtol=1e-8, atol=1e-12) and true <= 1.01 * cg.TOL
        note = f"{its} iterations (serial {it0}), residual {true:.2e}"
        if native is not None:
            nits = native[0][1][1]
            nx = np.vstack([x for _, (x, _, _) in sorted(native)])
            same = its == nits and np.allclose(x, nx, rtol=1e-8, atol=1e-12)
            ok = ok and same
            note += ", = native to rounding" if same else ", DIFFERS from native"
        return bool(ok), note
    got = [o for _, o in sorted(gathered, key=lambda g: g[0])]
    if kernel == "sort":
        want = np.sort(np.concatenate([sort.make_input(n, ranks, r, seed) for r in range(ranks)]))
        ok = np.array_equal(np.concatenate(got), want)
        note = "sorted permutation" if ok else "NOT the sorted input"
    else:
        want = (fft.reference if kernel == "fft" else summa.reference)(n, ranks, seed)
        err = float(np.max(np.abs(np.vstack(got) - want)) / max(np.max(np.abs(want)), 1e-300))
        ok = err < 1e-10
        note = f"= {'numpy.fft.fft2' if kernel == 'fft' else 'A @ B'} (rel. err {err:.1e})"
    if native is not None:
        same = all(np.array_equal(a, b) for (_, a), (_, b) in zip(sorted(gathered, key=lambda g: g[0]),
                                                                  sorted(native, key=lambda g: g[0])))
        ok = ok and same
        note += ", = native bit for bit" if same else ", DIFFERS from native"
    return bool(ok), note


def _cores():
    """Return the cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def main(args):
    """Run the kernel on each network; exit 0 when every result is verified."""
    kernel = args.kernel
    if kernel not in KERNELS:
        raise InputError(f"unknown kernel {kernel!r}: {', '.join(KERNELS)}")
    topo = load_topology(args.spec)
    check_runnable(topo)
    if args.repeats < 1:
        raise InputError(f"--repeats must be at least 1, got {args.repeats}")
    if args.nodes_per_rank is not None and args.nodes_per_rank < 1:
        raise InputError(f"--nodes-per-rank must be at least 1, got {args.nodes_per_rank}")
    check_output_path(args.json)
    if kernel == "cg" and not hasattr(Comm, "Allreduce"):
        raise InputError("cg needs dualmpi.Comm.Allreduce, which this version of dualmpi "
                           "does not have yet")

    from mpi4py import MPI

    from ..comm import _nodes_per_rank

    world = MPI.COMM_WORLD
    R, rank0 = world.Get_size(), world.Get_rank() == 0
    q = _nodes_per_rank(topo, R, args.nodes_per_rank)
    n = _parse_size(args.size, kernel, R)
    p = topo.num_nodes
    networks = [("emulated", topo)]
    if p & (p - 1) == 0 and not isinstance(topo, Hypercube):
        networks.append(("hypercube", Hypercube(p.bit_length() - 1)))
    networks.append(("native", None))
    cores = _cores()
    if rank0:
        print(f"app {kernel} on {topo.spec}: N = {n}, {R} ranks x {q} node(s) per rank, "
              f"{cores} cores" + (f" (oversubscribed: {R} ranks on {cores} cores)"
                                  if R > cores else ""), flush=True)
    rows, gathered = [], {}
    if rank0:
        print("[" + ", ".join(label for label, _ in networks) + f"] running, interleaved, "
              f"{args.repeats} repeats", flush=True)
    comms = [world if net_topo is None else Comm(world, net_topo, q) for _, net_topo in networks]
    results = run_kernel(kernel, comms, world, n, args.repeats, args.seed)
    for comm in comms:
        if comm is not world:
            comm.Free()
    for (label, net_topo), res in zip(networks, results):
        gathered[label] = world.gather((res["block"], res["output"]), root=0)
        model = parts = None
        if net_topo is not None and rank0:
            model, parts = model_time(res["calls"], net_topo, q)
        kinds = sorted({k for k, _, _ in res["calls"]})
        rows.append({"network": label, "spec": "native MPI" if net_topo is None else net_topo.spec,
                     "time": res["time"], "times": res["times"], "messages": res["messages"],
                     "bytes": res["bytes"], "rounds": res["rounds"], "model_time": model,
                     "model_parts": parts, "calls": len(res["calls"]), "call_kinds": kinds})
    ok = True
    if rank0:
        for row in rows:
            native = None if row["network"] == "native" else gathered["native"]
            row["verified"], row["check"] = _verify(kernel, n, R, args.seed,
                                                    gathered[row["network"]], native)
            ok = ok and row["verified"]
        _ratios(rows)
        print()
        print(_table(rows, args.repeats))
        if args.json:
            meta = metadata(world, topo, args)
            meta.update(kernel=kernel, size=n, nodes_per_rank=q, cores=cores,
                        oversubscribed=R > cores, repeats=args.repeats,
                        model_clock=dict(DEFAULT_CLOCK), load_average=list(os.getloadavg()))
            write_json_atomic({"format": APP_FORMAT, "meta": meta, "rows": rows}, args.json)
            print(f"results written to {args.json}")
    ok = world.bcast(ok, root=0)
    return 0 if ok else 1


def _ratios(rows):
    """Add ``time_over_native`` and ``model_over_hypercube`` to the rows."""
    by = {r["network"]: r for r in rows}
    for r in rows:
        r["time_over_native"] = r["time"] / by["native"]["time"] if by["native"]["time"] else None
        hyp = by.get("hypercube")
        r["model_over_hypercube"] = (r["model_time"] / hyp["model_time"]
                                     if hyp and r["model_time"] and hyp["model_time"] else None)
        r["time_over_hypercube"] = r["time"] / hyp["time"] if hyp and hyp["time"] else None


def _table(rows, repeats):
    """Return the results table."""
    def num(v, fmt):
        return "-" if v is None else format(v, fmt)

    head = ("network", "verified", f"time ms (median of {repeats})", "messages", "bytes",
            "hop rounds", "model ms", "time/native", "time/hypercube", "model/hypercube", "check")
    body = [(r["spec"], "yes" if r["verified"] else "NO", f"{r['time'] * 1e3:.3f}",
             num(r["messages"], "d"), num(r["bytes"], "d"), num(r["rounds"], "d"),
             num(None if r["model_time"] is None else r["model_time"] * 1e3, ".4f"),
             num(r["time_over_native"], ".2f"), num(r["time_over_hypercube"], ".2f"),
             num(r["model_over_hypercube"], ".3f"), r["check"]) for r in rows]
    return format_table(body, header=head)
