# Open MPI environment for dualmpi (and one numpy setting for oversubscribed hosts): the one place it lives.
# Sourced (never copied) by launch/test, launch/demo and CI: `. launch/ompi-env.sh`.
# Every value is a default; a variable already set in the environment wins.
# The OMPI_/PRTE_ variables are ignored by other MPIs (e.g. MPICH).

# Let mpiexec run as root (containers, CI runners); Open MPI refuses by default.
export OMPI_ALLOW_RUN_AS_ROOT="${OMPI_ALLOW_RUN_AS_ROOT:-1}"
# Second half of the root opt-in; Open MPI needs both variables.
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}"
# Allow more ranks than cores (32 or 64 network nodes on a 2-core machine).
export OMPI_MCA_rmaps_base_oversubscribe="${OMPI_MCA_rmaps_base_oversubscribe:-true}"
# The same for Open MPI 5's launcher (PRRTE), which reads its own mapping policy.
export PRTE_MCA_rmaps_default_mapping_policy="${PRTE_MCA_rmaps_default_mapping_policy:-:oversubscribe}"
# Waiting ranks yield the CPU instead of spinning, so oversubscribed ranks do not starve each other.
export OMPI_MCA_mpi_yield_when_idle="${OMPI_MCA_mpi_yield_when_idle:-true}"
# Leave out the libfabric byte-transfer layer: Open MPI 5.0's (the wheel's 5.0.11) sleeps 1 s
# in its close when it finds no fabric, so every process's MPI_Init took 1.1 s where it takes
# 0.1 s without it (shared memory and TCP stay; `ompi_info | grep btl` lists the others).
export OMPI_MCA_btl="${OMPI_MCA_btl:-^ofi}"
# Wall-clock limit in seconds for each whole mpiexec job (Open MPI and MPICH read it).
export MPIEXEC_TIMEOUT="${MPIEXEC_TIMEOUT:-600}"
# ... and for launch/test's tiers of 32 ranks and more, when larger: CPU-bound on a few cores,
# their time swings with the machine's load (5-10 min on 2 cores).
export MPIEXEC_TIMEOUT_MANY="${MPIEXEC_TIMEOUT_MANY:-900}"
# numpy asks the kernel for transparent huge pages on arrays of 4 MiB and more (madvise); the
# kernel's khugepaged then collapses those pages holding the process's memory-map lock, at
# nice 19. With more busy ranks than cores it gets almost no CPU while it holds the lock, and a
# rank that maps or unmaps memory (a large array, a thread's stack) waits behind it: a 32-rank
# CI tier stalled over 10 minutes that way (the kernel's hung-task report: "blocked on an
# rw-semaphore likely owned by task khugepaged"; docs/reliability.md). 0: no such request.
export NUMPY_MADVISE_HUGEPAGE="${NUMPY_MADVISE_HUGEPAGE:-0}"
