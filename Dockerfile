# dualmpi in a container: the same install as on a fresh machine (README, "Two commands"), the
# Open MPI settings of launch/ompi-env.sh as ENV lines, a non-root user, and the main job as the
# default command.
#   docker build -t dualmpi .
#   docker run --rm dualmpi                    # the main job: bash launch/demo
#   docker run --rm dualmpi bash launch/test   # every test (the multi-host test skips: no root)
FROM python:3.11-slim

# launch/ompi-env.sh, one ENV line per variable (tests/test_container.py checks they match).
ENV OMPI_ALLOW_RUN_AS_ROOT=1 \
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    OMPI_MCA_rmaps_base_oversubscribe=true \
    PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe \
    OMPI_MCA_mpi_yield_when_idle=true \
    OMPI_MCA_btl=^ofi \
    MPIEXEC_TIMEOUT=600 \
    MPIEXEC_TIMEOUT_MANY=900 \
    NUMPY_MADVISE_HUGEPAGE=0

# A C compiler for the engine's compiled round loop and the one-link lane (built on first use
# with the wheel's mpicc, the image's Python headers for the lane; without one the rounds and
# one-hop messages run in Python: docs/performance.md, docs/p2p.md).
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 1000 dualmpi
USER dualmpi
WORKDIR /home/dualmpi/dualmpi
COPY --chown=dualmpi:dualmpi . .

# The install: .venv with dualmpi[mpi,test], editable, exactly as README's commands do it.
RUN bash launch/setup

CMD ["bash", "launch/demo"]
