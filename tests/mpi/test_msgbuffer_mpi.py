"""dualmpi.msgbuffer at several ranks against MPI.COMM_WORLD's collectives on the same specs.

For each spec pair the MPI collective runs on the user's buffers (the reference); then the
specs are read with msgbuffer, the packed bytes move by ``Alltoallv`` on plain bytes (the
blocks msgbuffer computed, nothing else), and ``unpack()`` writes them.  Both receive buffers
start as the same sentinel, so gaps left untouched by MPI must stay untouched here.  The
send and receive sides must also compute equal type signatures for every block.  Every rank
communicates in every test, then the ranks agree on the verdict.  Run at 2 and 8 ranks
(``min_size=2``: Open MPI's one-rank Alltoallw, coll/self, scales byte displacements by the
extent).  DLPack buffers and ``MPI.BOTTOM`` specs (datatypes at absolute addresses) also go
through ``dualmpi.Comm`` (the first network of :data:`collective_cases.NETWORKS` for the job
size), against MPI.COMM_WORLD on copies.
"""

import gc

import numpy as np
import pytest
from collective_cases import free_networks  # noqa: F401 - frees the module's communicators
from collective_cases import network
from dlpack_producer import Producer, live_exports

MPI = pytest.importorskip("mpi4py.MPI")
mb = pytest.importorskip("dualmpi.msgbuffer")

WORLD = MPI.COMM_WORLD
SIZE = WORLD.Get_size()
RANK = WORLD.Get_rank()
ROOT = SIZE - 1
SENTINEL = 0x5A

pytestmark = pytest.mark.mpi(min_size=2)


def _agree(ok):
    """True when ``ok`` holds on every rank (collective)."""
    return bool(WORLD.allreduce(1 if ok else 0, op=MPI.MIN))


def _build(fn):
    """Run ``fn`` on every rank; fail on every rank together if it raised on any."""
    try:
        result, problem = fn(), ""
    except Exception as exc:  # noqa: BLE001 - reported below, on every rank
        result, problem = None, f"rank {RANK}: {type(exc).__name__}: {exc}"
    problems = [p for p in WORLD.allgather(problem) if p]
    if problems:
        pytest.fail("; ".join(problems))
    return result


def _move(sdata, scounts, sdispls, rdata, rcounts, rdispls):
    """Move packed bytes between ranks (the test's stand-in for the network)."""
    WORLD.Alltoallv([sdata, (np.asarray(scounts), np.asarray(sdispls)), MPI.BYTE],
                    [rdata, (np.asarray(rcounts), np.asarray(rdispls)), MPI.BYTE])


def _src(nbytes, salt=0):
    return ((np.arange(nbytes) * 7 + 31 * RANK + salt) % 251).astype(np.uint8)


def _pairs():
    """(name, send datatype, send count, recv datatype, recv count): equal signatures."""
    INT, DOUBLE = MPI.INT, MPI.DOUBLE
    s_pair = MPI.Datatype.Create_struct([1, 1], [0, 8], [INT, DOUBLE])
    r_pair = MPI.Datatype.Create_struct([1, 1], [12, 24], [INT, DOUBLE]).Create_resized(4, 40)
    quad = MPI.Datatype.Create_struct([1, 1, 1, 1], [0, 8, 16, 24], [INT, DOUBLE, INT, DOUBLE])
    return [
        ("int_to_int", INT, 3, INT, 3),
        ("vector_to_indexed_block", INT.Create_vector(3, 1, 2), 1,
         INT.Create_indexed_block(1, [0, 2, 4]), 1),
        ("ints_to_gapped", INT, 2, INT.Create_resized(0, 12), 2),
        ("subarray_to_contiguous", INT.Create_subarray([4, 5], [2, 3], [1, 1]), 1,
         INT.Create_contiguous(6), 1),
        ("struct_pair_to_resized_struct", s_pair, 2, r_pair, 2),
        ("two_pairs_to_one_quad", s_pair, 2, quad, 1),
        ("hvector_to_hindexed", DOUBLE.Create_hvector(2, 1, 24), 1,
         DOUBLE.Create_hindexed([1, 1], [16, 0]), 1),
        # a dense run that starts 8 bytes after each element's origin (true_lb 8): a view
        ("shifted_dense", INT.Create_hindexed([2], [8]), 1, INT.Create_contiguous(2), 1),
        ("contiguous_to_shifted_dense", INT.Create_contiguous(2), 1,
         INT.Create_hindexed([2], [8]), 1),
    ]


def _committed(t):
    return t if t.is_predefined else t.Commit()


PAIRS = [(name, _committed(st), sc, _committed(rt), rc) for name, st, sc, rt, rc in _pairs()]
IDS = [p[0] for p in PAIRS]


def _need(dt, count, blocks, extra=0):
    """Bytes a buffer needs for ``count * blocks`` elements plus ``extra`` extents."""
    n = count * blocks + extra
    return max(dt.extent, 1) * n + max(dt.true_extent, 0) + 64


def _check(ok, message):
    assert _agree(ok), message


@pytest.mark.parametrize("name,st,sc,rt,rc", PAIRS, ids=IDS)
def test_alltoall_counts_are_per_block(name, st, sc, rt, rc):
    sbuf = _src(_need(st, sc, SIZE))
    rref = np.full(_need(rt, rc, SIZE), SENTINEL, np.uint8)
    rmine = rref.copy()
    WORLD.Alltoall([sbuf, sc, st], [rref, rc, rt])
    ms, mr = _build(lambda: (mb.simple([sbuf, sc, st], blocks=SIZE, role="send",
                                       what="Alltoall sendbuf"),
                             mb.simple([rmine, rc, rt], blocks=SIZE, role="recv",
                                       what="Alltoall recvbuf")))
    ms.pack()
    b = ms.nbytes
    _move(ms.data, [b] * SIZE, [i * b for i in range(SIZE)],
          mr.data, [mr.nbytes] * SIZE, [i * mr.nbytes for i in range(SIZE)])
    mr.unpack()
    same = rmine.tobytes() == rref.tobytes()
    sigs = WORLD.allgather((ms.typesig, mr.typesig))
    _check(ms.count == sc and mr.count == rc and ms.nbytes == mr.nbytes,
           f"{name}: counts per block or bytes disagree")
    _check(all(s == r == sigs[0][0] for s, r in sigs), f"{name}: type signatures differ")
    _check(same, f"{name}: unpacked bytes differ from MPI_Alltoall's")


def test_alltoall_inferred_count():
    sbuf = np.arange(3 * SIZE, dtype=np.int32) + 100 * RANK
    rref = np.zeros(3 * SIZE, np.int32)
    WORLD.Alltoall(sbuf, rref)
    rmine = np.zeros_like(rref)
    ms, mr = _build(lambda: (mb.simple(sbuf, blocks=SIZE, role="send"),
                             mb.simple(rmine, blocks=SIZE, role="recv")))
    _move(ms.pack(), [12] * SIZE, [12 * i for i in range(SIZE)],
          mr.data, [12] * SIZE, [12 * i for i in range(SIZE)])
    mr.unpack()
    _check(ms.count == 3 and not ms.packed and np.array_equal(rmine, rref),
           "inferred Alltoall count is not per block")


@pytest.mark.parametrize("name,st,sc,rt,rc", PAIRS, ids=IDS)
def test_scatter_and_gather(name, st, sc, rt, rc):
    # Scatter: the root's sendbuf covers SIZE blocks
    sbuf = _src(_need(st, sc, SIZE), salt=5)
    rref = np.full(_need(rt, rc, 1), SENTINEL, np.uint8)
    rmine = rref.copy()
    WORLD.Scatter([sbuf, sc, st] if RANK == ROOT else None, [rref, rc, rt], root=ROOT)
    ms, mr = _build(lambda: (
        mb.simple([sbuf, sc, st], blocks=SIZE, role="send") if RANK == ROOT else None,
        mb.simple([rmine, rc, rt], role="recv")))
    if RANK == ROOT:
        ms.pack()
        scounts, sdispls = [ms.nbytes] * SIZE, [i * ms.nbytes for i in range(SIZE)]
        sdata = ms.data
    else:
        scounts, sdispls, sdata = [0] * SIZE, [0] * SIZE, np.zeros(0, np.uint8)
    rcounts = [mr.nbytes if i == ROOT else 0 for i in range(SIZE)]
    _move(sdata, scounts, sdispls, mr.data, rcounts, [0] * SIZE)
    mr.unpack()
    scatter_ok = rmine.tobytes() == rref.tobytes()
    # Gather: the root's recvbuf covers SIZE blocks (roles swapped: send rt, receive st)
    gsend = _src(_need(rt, rc, 1), salt=9)
    gref = np.full(_need(st, sc, SIZE), SENTINEL, np.uint8)
    gmine = gref.copy()
    WORLD.Gather([gsend, rc, rt], [gref, sc, st] if RANK == ROOT else None, root=ROOT)
    gs, gr = _build(lambda: (
        mb.simple([gsend, rc, rt], role="send"),
        mb.simple([gmine, sc, st], blocks=SIZE, role="recv") if RANK == ROOT else None))
    gs.pack()
    scounts = [gs.nbytes if i == ROOT else 0 for i in range(SIZE)]
    if RANK == ROOT:
        rcounts, rdispls, rdata = [gr.nbytes] * SIZE, [i * gr.nbytes for i in range(SIZE)], \
            gr.data
    else:
        rcounts, rdispls, rdata = [0] * SIZE, [0] * SIZE, np.zeros(0, np.uint8)
    _move(gs.data, scounts, [0] * SIZE, rdata, rcounts, rdispls)
    if RANK == ROOT:
        gr.unpack()
    gather_ok = gmine.tobytes() == gref.tobytes()
    _check(scatter_ok, f"{name}: Scatter result differs from MPI's")
    _check(gather_ok, f"{name}: Gather result differs from MPI's")


def _vcounts(i, j):
    """Elements rank ``i`` sends rank ``j`` (zero for some pairs)."""
    return (i + 2 * j) % 3


@pytest.mark.parametrize("name,st,sc,rt,rc", PAIRS, ids=IDS)
def test_alltoallv_with_gaps(name, st, sc, rt, rc):
    if sc != rc:
        pytest.skip("one send element must match one receive element")
    scounts = np.array([_vcounts(RANK, j) for j in range(SIZE)], np.int64)
    rcounts = np.array([_vcounts(i, RANK) for i in range(SIZE)], np.int64)
    sdispls = np.concatenate([[0], np.cumsum(scounts + 1)[:-1]])  # one extent gap each
    rdispls = np.concatenate([[0], np.cumsum(rcounts + 2)[:-1]])[::-1].copy()  # reversed
    sbuf = _src(_need(st, int(scounts.sum()) + SIZE, 1), salt=3)
    rref = np.full(_need(rt, int(rcounts.sum()) + 2 * SIZE, 1), SENTINEL, np.uint8)
    rmine = rref.copy()
    WORLD.Alltoallv([sbuf, (scounts, sdispls), st], [rref, (rcounts, rdispls), rt])
    vs, vr = _build(lambda: (
        mb.vector([sbuf, (scounts, sdispls), st], SIZE, role="send", what="Alltoallv sendbuf"),
        mb.vector([rmine, rcounts, rdispls, rt], SIZE, role="recv",
                  what="Alltoallv recvbuf")))
    vs.pack()
    _move(vs.data, vs.byte_counts, vs.byte_displs, vr.data, vr.byte_counts, vr.byte_displs)
    vr.unpack()
    same = rmine.tobytes() == rref.tobytes()
    sent = WORLD.alltoall([vs.block_typesig(j) for j in range(SIZE)])
    sigs_ok = all(sent[i] == vr.block_typesig(i) for i in range(SIZE))
    _check(sigs_ok, f"{name}: Alltoallv block signatures differ between sender and receiver")
    _check(same, f"{name}: Alltoallv result differs from MPI's")


@pytest.mark.parametrize("form", ["int_count", "int_displ_stride", "inferred"])
def test_alltoallv_short_forms(form):
    sbuf = np.arange(4 * SIZE, dtype=np.int32) + 1000 * RANK
    spec = {"int_count": [sbuf, 3],
            "int_displ_stride": [sbuf, (2, 4), MPI.INT],
            "inferred": sbuf}[form]
    rref = np.full(4 * SIZE, -1, np.int32)
    rspec_counts = {"int_count": 3, "int_displ_stride": 2, "inferred": 4}[form]
    WORLD.Alltoallv(spec, [rref, rspec_counts])
    rmine = np.full_like(rref, -1)
    vs, vr = _build(lambda: (mb.vector(spec, SIZE, role="send"),
                             mb.vector([rmine, rspec_counts], SIZE, role="recv")))
    _move(vs.pack(), vs.byte_counts, vs.byte_displs, vr.data, vr.byte_counts, vr.byte_displs)
    vr.unpack()
    _check(np.array_equal(rmine, rref), f"{form}: Alltoallv short form differs from MPI's")


def test_scatterv_gatherv():
    _, st, _, rt, _ = PAIRS[1]  # vector(3,1,2) -> indexed_block(1, [0,2,4])
    counts = np.array([1 + i % 2 for i in range(SIZE)], np.int64)
    displs = np.concatenate([[0], np.cumsum(counts + 1)[:-1]])
    sbuf = _src(_need(st, int(counts.sum()) + SIZE, 1), salt=11)
    mine_n = int(counts[RANK])
    rref = np.full(_need(rt, mine_n, 1), SENTINEL, np.uint8)
    rmine = rref.copy()
    sspec = [sbuf, (counts, displs), st]
    WORLD.Scatterv(sspec if RANK == ROOT else None, [rref, mine_n, rt], root=ROOT)
    vs, mr = _build(lambda: (mb.vector(sspec, SIZE, role="send") if RANK == ROOT else None,
                             mb.simple([rmine, mine_n, rt], role="recv")))
    if RANK == ROOT:
        _move(vs.pack(), vs.byte_counts, vs.byte_displs, mr.data,
              [mr.nbytes if i == ROOT else 0 for i in range(SIZE)], [0] * SIZE)
    else:
        _move(np.zeros(0, np.uint8), [0] * SIZE, [0] * SIZE, mr.data,
              [mr.nbytes if i == ROOT else 0 for i in range(SIZE)], [0] * SIZE)
    mr.unpack()
    scatter_ok = rmine.tobytes() == rref.tobytes()
    gref = np.full(sbuf.size, SENTINEL, np.uint8)
    gmine = gref.copy()
    rspec = [gmine, (counts, displs), st]
    WORLD.Gatherv([rref, mine_n, rt], [gref, (counts, displs), st] if RANK == ROOT else None,
                  root=ROOT)
    gs, vr = _build(lambda: (mb.simple([rref, mine_n, rt], role="send"),
                             mb.vector(rspec, SIZE, role="recv") if RANK == ROOT else None))
    scounts = [gs.nbytes if i == ROOT else 0 for i in range(SIZE)]
    if RANK == ROOT:
        _move(gs.pack(), scounts, [0] * SIZE, vr.data, vr.byte_counts, vr.byte_displs)
        vr.unpack()
    else:
        _move(gs.pack(), scounts, [0] * SIZE, np.zeros(0, np.uint8), [0] * SIZE, [0] * SIZE)
    gather_ok = gmine.tobytes() == gref.tobytes()
    _check(scatter_ok, "Scatterv result differs from MPI's")
    _check(gather_ok, "Gatherv result differs from MPI's")


@pytest.mark.parametrize("shift", range(len(PAIRS)))
def test_alltoallw_per_rank_datatypes(shift):
    kinds = [pair[1:] for pair in PAIRS]
    slot = 512

    def pick(i, j):  # every pair of datatypes appears at every job size
        return kinds[(i + j + shift) % len(kinds)]

    stypes = [pick(RANK, j)[0] for j in range(SIZE)]
    scounts = [pick(RANK, j)[1] for j in range(SIZE)]
    sdispls = [j * slot + 8 * ((RANK + j) % 3) for j in range(SIZE)]  # bytes, unaligned
    rtypes = [pick(i, RANK)[2] for i in range(SIZE)]
    rcounts = [pick(i, RANK)[3] for i in range(SIZE)]
    rdispls = [(SIZE - 1 - i) * slot + 4 for i in range(SIZE)]
    sbuf = _src(SIZE * slot, salt=17)
    rref = np.full(SIZE * slot, SENTINEL, np.uint8)
    rmine = rref.copy()
    sspec = [sbuf, (scounts, sdispls), stypes]
    WORLD.Alltoallw(sspec, [rref, (rcounts, rdispls), rtypes])
    ws, wr = _build(lambda: (
        mb.wvector(sspec, SIZE, role="send", what="Alltoallw sendbuf"),
        mb.wvector([rmine, rcounts, rdispls, rtypes], SIZE, role="recv",
                   what="Alltoallw recvbuf")))
    ws.pack()
    _move(ws.data, ws.byte_counts, ws.byte_displs, wr.data, wr.byte_counts, wr.byte_displs)
    wr.unpack()
    same = rmine.tobytes() == rref.tobytes()
    sent = WORLD.alltoall([ws.block_typesig(j) for j in range(SIZE)])
    _check(all(sent[i] == wr.block_typesig(i) for i in range(SIZE)),
           "Alltoallw block signatures differ between sender and receiver")
    _check(same, "Alltoallw result differs from MPI's")


# ---------------------------------------------------------------------------------------------
# DLPack buffers (numpy's 1.x producer, the 0.x and 1.x ctypes producer of
# tests/dlpack_producer.py) through dualmpi.Comm, against MPI.COMM_WORLD on numpy copies


class DLPackOnly:
    """numpy's DLPack 1.x export, without the buffer protocol."""

    def __init__(self, arr):
        self._arr = arr

    def __dlpack__(self, **kwargs):
        return self._arr.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._arr.__dlpack_device__()


#: The DLPack producers; from 32 ranks on the default pass takes numpy's (the producers are read
#: by the same code at every rank count; each call costs seconds at 32 ranks on 2 cores).
DLPACK_KINDS = [pytest.param(kind, marks=pytest.mark.slow if SIZE >= 32 and kind != "numpy"
                             else ()) for kind in ("numpy", "v0", "v1")]


def _shapes(*shapes):
    """The layouts of a DLPack test; from 32 ranks the C-ordered one alone (the others with
    --slow): a layout is read alike at every rank count, and each call costs seconds there."""
    return [pytest.param(s, marks=pytest.mark.slow if SIZE >= 32 and s != "c" else ())
            for s in shapes]


def _dlpack(arr, kind):
    return DLPackOnly(arr) if kind == "numpy" else Producer(arr, int(kind[1]))


def _layout(shape, n, seed):
    """A rank-distinct int32 array: ``c`` (rows of n), ``fortran``, ``0d`` or ``empty``."""
    values = (np.arange(max(n, 1) * SIZE, dtype=np.int32) * 3 + 1000 * seed)
    if shape == "0d":
        return np.array(values[0])
    if shape == "empty":
        return np.zeros((0, SIZE), np.int32)
    grid = values[:n * SIZE].reshape(SIZE, n)
    return np.asfortranarray(grid.T) if shape == "fortran" else grid.copy()


def _run(call):
    """Run a collective on every rank; a failure on any rank fails the test on every rank."""
    _build(call)
    if live_exports():  # released by reference counting, else by the collector (a cycle); a
        gc.collect()    # full collection every test costs 1.5 s at 8 ranks late in the MPI tier
    _check(live_exports() == 0, "a DLPack export was not released")


@pytest.mark.parametrize("kind", DLPACK_KINDS)
@pytest.mark.parametrize("shape", _shapes("c", "fortran", "0d", "empty"))
def test_dlpack_bcast(kind, shape):
    mine = _layout(shape, 3, RANK)
    ref = mine.copy(order="K")
    WORLD.Bcast(ref, root=ROOT)
    _run(lambda: network(0).Bcast(_dlpack(mine, kind), root=ROOT))
    _check(mine.tobytes(order="A") == ref.tobytes(order="A") and mine.flags.f_contiguous
           == ref.flags.f_contiguous, f"{kind} {shape}: Bcast differs from MPI's")


@pytest.mark.parametrize("kind", DLPACK_KINDS)
@pytest.mark.parametrize("shape", _shapes("c", "fortran", "empty"))
def test_dlpack_alltoall(kind, shape):
    send = _layout(shape, 2, RANK)
    mine = np.full_like(send, -1)
    ref = mine.copy(order="K")
    WORLD.Alltoall(send.copy(order="K"), ref)
    _run(lambda: network(0).Alltoall(_dlpack(send, kind), _dlpack(mine, kind)))
    _check(mine.tobytes(order="A") == ref.tobytes(order="A"),
           f"{kind} {shape}: Alltoall differs from MPI's")


@pytest.mark.parametrize("kind", DLPACK_KINDS)
def test_dlpack_typed_specs(kind):
    """``[producer, count, datatype]`` and ``[producer, (counts, displs), datatype]``."""
    send = _layout("c", 4, RANK)
    mine = np.full_like(send, -1)
    ref = mine.copy()
    WORLD.Alltoall([send, 3, MPI.INT], [ref, 3, MPI.INT])
    _run(lambda: network(0).Alltoall([_dlpack(send, kind), 3, MPI.INT],
                                     [_dlpack(mine, kind), 3, MPI.INT]))
    counts, displs = [2] * SIZE, [4 * i + 1 for i in range(SIZE)]
    vmine = np.full_like(send, -1)
    vref = vmine.copy()
    WORLD.Alltoallv([send, (counts, displs), MPI.INT], [vref, (counts, displs), MPI.INT])
    _run(lambda: network(0).Alltoallv([_dlpack(send, kind), (counts, displs), MPI.INT],
                                      [_dlpack(vmine, kind), (counts, displs), MPI.INT]))
    _check(np.array_equal(mine, ref) and np.array_equal(vmine, vref),
           f"{kind}: typed DLPack specs differ from MPI's")


# ---------------------------------------------------------------------------------------------
# MPI.BOTTOM: datatypes holding absolute addresses (mpi4py's testAlltoallwBottom), read by
# msgbuffer and moved as bytes, and through dualmpi.Comm, against MPI.COMM_WORLD on the same
# BOTTOM specs over copies


def _absolute(buf, disp, dt, n=1):
    """``n`` elements of ``dt`` at byte ``disp`` of ``buf``, at absolute addresses."""
    return MPI.Datatype.Create_struct([n], [MPI.Get_address(buf) + disp], [dt]).Commit()


def _free(types):
    for t in types:
        t.Free()


@pytest.mark.parametrize("n", [1, 3])
def test_bottom_alltoallw_as_mpi4py_tests_it(n):
    """testAlltoallwBottom: one struct per rank at the block's absolute address."""
    sbuf = np.arange(SIZE * n, dtype=np.int32) + 100 * RANK
    bufs = {k: np.full(SIZE * n, -1, np.int32) for k in ("ref", "msg", "net")}
    step = 4 * n
    stypes = [_absolute(sbuf, j * step, MPI.INT, n) for j in range(SIZE)]
    rtypes = {k: [_absolute(b, i * step, MPI.INT, n) for i in range(SIZE)]
              for k, b in bufs.items()}
    ones, zeros = [1] * SIZE, [0] * SIZE
    sspec = (MPI.BOTTOM, (ones, zeros), stypes)
    WORLD.Alltoallw(sspec, (MPI.BOTTOM, (ones, zeros), rtypes["ref"]))
    ws, wr = _build(lambda: (mb.wvector(sspec, SIZE, role="send"),
                             mb.wvector([MPI.BOTTOM, ones, zeros, rtypes["msg"]], SIZE,
                                        role="recv")))
    _move(ws.pack(), ws.byte_counts, ws.byte_displs, wr.data, wr.byte_counts, wr.byte_displs)
    wr.unpack()
    _build(lambda: network(0).Alltoallw(sspec, (MPI.BOTTOM, (ones, zeros), rtypes["net"])))
    _free(stypes + rtypes["ref"] + rtypes["msg"] + rtypes["net"])
    want = np.repeat(np.arange(SIZE) * 100, n) + np.tile(np.arange(n) + RANK * n, SIZE)
    _check(np.array_equal(bufs["ref"], want), "MPI's own Alltoallw at MPI.BOTTOM (the test)")
    _check(np.array_equal(bufs["msg"], bufs["ref"]), "msgbuffer at MPI.BOTTOM differs")
    _check(np.array_equal(bufs["net"], bufs["ref"]), "dualmpi.Comm at MPI.BOTTOM differs")


@pytest.mark.parametrize("shift", range(len(PAIRS)))
def test_bottom_alltoallw_derived_datatypes(shift):
    """Every pair of derived datatypes, gaps included, at absolute addresses."""
    kinds = [pair[1:] for pair in PAIRS]
    slot = 512

    def pick(i, j):
        return kinds[(i + j + shift) % len(kinds)]

    sbuf = _src(SIZE * slot, salt=23)
    bufs = {k: np.full(SIZE * slot, SENTINEL, np.uint8) for k in ("ref", "msg", "net")}
    stypes = [_absolute(sbuf, j * slot + 8 * ((RANK + j) % 3), pick(RANK, j)[0],
                        pick(RANK, j)[1]) for j in range(SIZE)]
    rtypes = {k: [_absolute(b, (SIZE - 1 - i) * slot + 4, pick(i, RANK)[2], pick(i, RANK)[3])
                  for i in range(SIZE)] for k, b in bufs.items()}
    ones, zeros = [1] * SIZE, [0] * SIZE
    sspec = [MPI.BOTTOM, (ones, zeros), stypes]
    WORLD.Alltoallw(sspec, [MPI.BOTTOM, (ones, zeros), rtypes["ref"]])
    ws, wr = _build(lambda: (mb.wvector(sspec, SIZE, role="send"),
                             mb.wvector([MPI.BOTTOM, (ones, zeros), rtypes["msg"]], SIZE,
                                        role="recv")))
    _move(ws.pack(), ws.byte_counts, ws.byte_displs, wr.data, wr.byte_counts, wr.byte_displs)
    wr.unpack()
    _build(lambda: network(0).Alltoallw(sspec, [MPI.BOTTOM, (ones, zeros), rtypes["net"]]))
    _free(stypes + rtypes["ref"] + rtypes["msg"] + rtypes["net"])
    _check(np.count_nonzero(bufs["ref"] != SENTINEL) > 0, "MPI moved nothing")
    _check(bufs["msg"].tobytes() == bufs["ref"].tobytes(), "msgbuffer at MPI.BOTTOM differs")
    _check(bufs["net"].tobytes() == bufs["ref"].tobytes(), "dualmpi.Comm at MPI.BOTTOM differs")


@pytest.mark.parametrize("name", ["bcast", "alltoall", "alltoallv"])
def test_bottom_simple_and_vector_through_dualmpi(name):
    """``[MPI.BOTTOM, count(s), datatype at an absolute address]`` in Bcast (every other int
    of the buffer), Alltoall and Alltoallv (element k of the spec is element k of the
    buffer)."""
    sbuf = np.arange(4 * SIZE, dtype=np.int32) + 1000 * RANK
    ref, mine = np.full_like(sbuf, -1), np.full_like(sbuf, -1)
    every_other = MPI.INT.Create_vector(2, 1, 2).Commit()
    if name == "bcast":
        ref[:], mine[:] = sbuf, sbuf
        rt, mt = _absolute(ref, 4, every_other), _absolute(mine, 4, every_other)
        types = [rt, mt]
        WORLD.Bcast([MPI.BOTTOM, 1, rt], root=ROOT)
        _build(lambda: network(0).Bcast([MPI.BOTTOM, 1, mt], root=ROOT))
    else:
        st, rt, mt = (_absolute(b, 0, MPI.INT) for b in (sbuf, ref, mine))
        types = [st, rt, mt]
        if name == "alltoall":
            WORLD.Alltoall([MPI.BOTTOM, 3, st], [MPI.BOTTOM, 3, rt])
            _build(lambda: network(0).Alltoall([MPI.BOTTOM, 3, st], [MPI.BOTTOM, 3, mt]))
        else:
            scounts = [1 + (RANK + j) % 3 for j in range(SIZE)]
            rcounts = [1 + (i + RANK) % 3 for i in range(SIZE)]
            displs = [4 * j for j in range(SIZE)]
            WORLD.Alltoallv([MPI.BOTTOM, (scounts, displs), st],
                            [MPI.BOTTOM, (rcounts, displs), rt])
            _build(lambda: network(0).Alltoallv([MPI.BOTTOM, (scounts, displs), st],
                                                [MPI.BOTTOM, (rcounts, displs), mt]))
    _free(types + [every_other])
    _check((ref != -1).any() and not np.array_equal(ref, sbuf) or name == "bcast",
           f"{name}: MPI moved nothing")
    _check(np.array_equal(mine, ref), f"{name} at MPI.BOTTOM through dualmpi.Comm differs")
