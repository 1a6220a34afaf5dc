"""MPI tests of the timing harness: every ping-pong and collective row is verified."""

import pytest

from dualmpi.commands.options import make_options
from dualmpi.topology import from_spec

MPI = pytest.importorskip("mpi4py.MPI")


def _cfg(options, baseline=True):
    from dualmpi.commands.bench import BenchConfig

    return BenchConfig([0, 64, 5000], [0, 64], [], ("bcast", "alltoall"), 0, baseline,
                       options, 0.05)


@pytest.mark.mpi(min_size=8)
@pytest.mark.parametrize("switching", ["store-and-forward", "cut-through"])
def test_bench_grid_verified(switching):
    from dualmpi.measure.harness import run_bench

    world = MPI.COMM_WORLD
    if world.Get_size() != 8:
        pytest.skip("the bench grid is checked at 8 ranks")
    topo = from_spec("dualcube:r=2")
    res = run_bench(world, topo, _cfg(make_options(None, switching, 3)), progress=lambda *a, **k: None)
    pp, coll = res["pingpong"], res["collectives"]
    hops = sorted({r["hops"] for r in pp})
    ok = (res["format"] == "dualmpi-bench/1"
          and hops == list(range(1, topo.formulas()["diameter"] + 1))
          and all(r["verified"] and r["t_min"] <= r["t_avg"] <= r["t_max"] for r in pp)
          and {r["kind"] for r in pp} == {"emulated", "raw"}
          and len(coll) == 4 and all(r["verified"] and r["model"]["ts"] > 0 for r in coll)
          and all(r["native_t_avg"] is not None for r in coll))
    assert bool(world.allreduce(1 if ok else 0, op=MPI.MIN)), (hops, coll)


@pytest.mark.mpi(min_size=2)
def test_shaped_pingpong_follows_the_shape():
    """One shaped hop takes at least t_s + n t_w + t_h (sleep-based, never shorter)."""
    from dualmpi import Comm
    from dualmpi.measure.pingpong import chain, pingpong

    world = MPI.COMM_WORLD
    if world.Get_size() != 2:
        pytest.skip("checked on the 2-node dual-cube")
    topo = from_spec("dualcube:r=1")
    opts = make_options("ts=2e-3,tw=1e-8,th=1e-3", "cut-through", 2)
    net = Comm(world, topo)
    row = pingpong(net, chain(topo, 1), 100000, 2, reps=1, warmup=1, shape=opts.shape,
                   switching="cut-through", packets=2)
    net.Free()
    floor = 2e-3 + 100000 * 1e-8 + 1e-3
    ok = row["verified"] and row["t_min"] >= floor
    assert bool(world.allreduce(1 if ok else 0, op=MPI.MIN)), row
