"""Run tests/exec_programs/calls.py's ``main`` on a ``dualmpi.Comm`` and print its summed stats()
as JSON on rank 0 (what ``dualmpi exec``'s report of calls.py must say).

Usage: mpiexec -n R python calls_on_net.py SPEC Q
"""
import json
import runpy
import sys
from pathlib import Path

from mpi4py import MPI

import dualmpi

calls = runpy.run_path(str(Path(__file__).with_name("calls.py")), run_name="calls")
net = dualmpi.Comm(MPI.COMM_WORLD, sys.argv[1], nodes_per_rank=int(sys.argv[2]))
net.gather(calls["main"](net), root=0)  # as calls.py does under __main__
stats = net.stats()
everyone = MPI.COMM_WORLD.gather(stats, root=0)
if MPI.COMM_WORLD.rank == 0:
    links = {}
    for st in everyone:
        for (u, v), (m, n) in st["links"].items():
            m0, n0 = links.get((u, v), (0, 0))
            links[(u, v)] = (m0 + m, n0 + n)
    print(json.dumps({"messages": sum(s["messages"] for s in everyone),
                      "bytes": sum(s["bytes"] for s in everyone),
                      "rounds": max(s["rounds"] for s in everyone),
                      "steps": max(s["steps"] for s in everyone),
                      "links": sorted([u, v, m, n] for (u, v), (m, n) in links.items()),
                      "per_rank": [{k: s[k] for k in ("steps", "step_bytes", "rounds",
                                                      "p2p_messages", "p2p_bytes", "p2p_hops")}
                                   for s in everyone]}))
net.Free()
