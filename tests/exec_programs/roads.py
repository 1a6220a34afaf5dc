"""Every road around ``MPI.COMM_WORLD``'s methods, one per run: ``roads.py ROAD [LIB]``.

Under ``dualmpi exec`` each must stop with one line naming the call; plain mpi4py runs them all
(but ``ctypes-world`` and ``c-library``, which need a second rank to match, and ``spawn``).
Prints ``survived ROAD`` when the road's call returned.
"""
import sys

import numpy as np
from mpi4py import MPI

road = sys.argv[1]
comm = MPI.COMM_WORLD
buf = np.zeros(4)
if road == "intracomm":          # a new Python object over MPI.COMM_WORLD's handle
    MPI.Intracomm(comm).Allreduce(buf.copy(), buf)
elif road == "subclass":         # a program's own subclass of MPI.Intracomm
    class Mine(MPI.Intracomm):
        pass
    Mine(comm).Bcast(buf, root=0)
elif road == "pkl5":             # mpi4py.util.pkl5 wraps the world
    from mpi4py.util import pkl5
    wrapped = pkl5.Intracomm(comm)
    if comm.rank == 0:
        wrapped.send("x", dest=1)
    else:
        wrapped.recv(source=0)
elif road == "unbound":          # MPI.Comm's method called on the stand-in directly
    MPI.Comm.Barrier(comm)
elif road == "fromhandle":       # a communicator rebuilt from the integer handle
    MPI.Comm.fromhandle(comm.handle).Barrier()
elif road == "window":           # one-sided communication
    MPI.Win.Create(buf, comm=comm).Free()
elif road == "allocate":
    MPI.Win.Allocate(64, comm=comm).Free()
elif road == "file":             # MPI-IO
    MPI.File.Open(comm, sys.argv[2], MPI.MODE_CREATE | MPI.MODE_WRONLY).Close()
elif road == "group":            # a communicator from a group of the world's processes
    MPI.Intracomm.Create_from_group(comm.Get_group()).Free()
elif road == "intercomm":        # an intercommunicator bridged by the world
    MPI.COMM_SELF.Create_intercomm(0, comm, 1 - comm.rank, 7).Free()
elif road == "split":            # derived communicators (not carried yet)
    comm.Split(comm.rank % 2).Free()
elif road == "cart":
    comm.Create_cart([comm.size]).Free()
elif road == "spawn":            # new processes joined to the program's
    MPI.COMM_SELF.Spawn(sys.executable, ["-c", "pass"], 1)
elif road == "ctypes-world":     # ctypes calling libmpi on the stand-in's handle
    import ctypes
    libc = ctypes.CDLL(None)
    libc.MPI_Barrier.argtypes = [ctypes.c_void_p]
    libc.MPI_Barrier(MPI._handleof(comm))
elif road == "c-library":        # C code calling MPI on MPI_COMM_WORLD (argv[2]: the library)
    import ctypes
    ctypes.CDLL(sys.argv[2]).poke_world()
else:
    raise SystemExit(f"unknown road {road}")
print(f"survived {road}", flush=True)
