"""What runs on MPI ranks for the course's checks (and the learner's engines): the engine side.

Each function here runs on every rank, either in a check's own fresh `mpiexec` job
(`fresh_ranks_job`, started by grading.fresh_ranks.on_fresh_ranks) or on the learner's engines
(`cluster.run`), and returns what its rank saw as plain data. The module imports only what the
ranks need (numpy, mpi4py, the course's C loader), so a check's fresh ranks start quickly; the
verdicts are computed elsewhere (grading.engine_checks, grading.ctiming) from what they return.
"""

from __future__ import annotations

import ctypes
import hashlib
import hmac
import importlib
import json
from pathlib import Path

import numpy as np

from ..engines.shipping import unship
from ..mpi import jobs

TIMING_FUNCTION = "time_pingpong_c"  # notebook 02's C timing loop
MAX_CALLS = 512  # PP_GRADED_MAX: the calls kernels_c/grading/pp_graded.h records

_MARK = "_pingpong_lab_fresh_work"
DONE_TAG = 32000  # the course's own tag: a learner rank tells the partner it has finished


def work(function):
    """Mark an engine-side function `function(*packages, *args) -> dict` (JSON) that a fresh
    job may run on each of its ranks."""
    setattr(function, _MARK, True)
    return function


def _on_engine(package, nbytes):
    """Engine side: the learner's function, COMM_WORLD, this rank, the payload's base pattern
    and zeroed send and receive buffers of nbytes."""
    from mpi4py import MPI

    from ..mpi import payload

    comm = MPI.COMM_WORLD
    zeros = np.zeros(nbytes, np.uint8), np.zeros(nbytes, np.uint8)
    return unship(package), comm, comm.Get_rank(), payload.base(nbytes), *zeros


@work
def pingpong(package, nbytes, iters):
    """Engine side: run a learner's fn(comm, sendbuf, recvbuf) `iters` times, check the echo."""
    from ..mpi import payload

    fn, comm, rank, base, sendbuf, recvbuf = _on_engine(package, nbytes)
    corrupt, detail = 0, None
    comm.Barrier()
    for i in range(iters):
        if rank == 0:
            payload.fill(sendbuf, base, i)
            recvbuf[:] = 0
        fn(comm, sendbuf, recvbuf)
        if rank == 0 and not payload.matches(recvbuf, base, i):
            corrupt += 1
            if detail is None:  # only on failure: a message-sized temporary is fine here
                expected = np.empty_like(base)
                payload.fill(expected, base, i)
                bad = np.flatnonzero(recvbuf != expected)
                j = int(bad[0])
                detail = (
                    f"in round trip {i + 1}, {bad.size} of {nbytes} bytes differ, the first at "
                    f"byte {j}: expected {int(expected[j]):#04x}, received {int(recvbuf[j]):#04x}"
                    + (
                        " (recvbuf is still all zeros: no echo arrived in it)"
                        if not recvbuf.any()
                        else ""
                    )
                )
    comm.Barrier()
    return {"rank": rank, "corrupt": corrupt, "detail": detail}


@work
def safe_exchange(package, nbytes):
    """Engine side: ranks 0 and 1 swap patterned buffers with a learner's fn(comm, sendbuf,
    recvbuf); every rank calls it. Returns what arrived, as {rank, ok, detail}."""
    from ..mpi import payload

    fn, comm, rank, base, sendbuf, recvbuf = _on_engine(package, nbytes)
    if rank < 2:
        payload.fill(sendbuf, base, 1 + rank)  # each rank's own pattern
    comm.Barrier()
    fn(comm, sendbuf, recvbuf)
    ok, detail = True, None
    if rank < 2 and nbytes:
        expected = np.empty_like(base)
        payload.fill(expected, base, 2 - rank)  # the partner's pattern
        bad = np.flatnonzero(recvbuf != expected)
        if bad.size:
            ok = False
            detail = (
                f"rank {rank}'s recvbuf holds {bad.size} of {nbytes} bytes that rank {1 - rank} "
                "did not send"
                + (" (still all zeros: nothing arrived in it)" if not recvbuf.any() else "")
            )
    comm.Barrier()
    return {"rank": rank, "ok": ok, "detail": detail}


@work
def c_pingpong(lib, function, nbytes, iters, instrumented):
    """Engine side: call `int function(comm, sendbuf, recvbuf, nbytes)` iters times."""
    from mpi4py import MPI

    from ..mpi import ckernels, payload

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    base = payload.base(nbytes)
    sendbuf = np.zeros(max(nbytes, 1), np.uint8)
    recvbuf = np.zeros(max(nbytes, 1), np.uint8)
    handle = ckernels.load(lib)
    if instrumented:
        handle.pp_graded_reset()
    corrupt, codes = 0, []
    comm.Barrier()
    for i in range(iters):
        if rank == 0:
            payload.fill(sendbuf[:nbytes], base, i)
            recvbuf[:] = 0
        rc = ckernels.call_c(
            lib,
            function,
            comm,
            sendbuf.ctypes.data_as(ctypes.c_void_p),
            recvbuf.ctypes.data_as(ctypes.c_void_p),
            ctypes.c_int(nbytes),
        )
        codes.append(int(rc))
        if rc != 0:
            break
        if rank == 0 and not payload.matches(recvbuf[:nbytes], base, i):
            corrupt += 1
    result = {"rank": rank, "corrupt": corrupt, "codes": codes}
    if instrumented:
        out = (ctypes.c_int * (4 * 64))()
        n = handle.pp_graded_calls(out, 64)
        result["calls"] = [tuple(out[4 * k : 4 * k + 4]) for k in range(min(n, 64))]
        constants = (ctypes.c_int * 3)()
        handle.pp_graded_constants(constants)
        result["constants"] = list(constants)
    return result


# -- the course's partner rank: one side of every message is the course's own ------------------
_KEYS: dict = {}


def _partner_key(path: str) -> bytes:
    """The key the judge gave this job's partner rank, read once and removed before any
    learner's code is loaded (the learner's ranks wait at a Barrier until then); the process
    is made non-dumpable first, so that a process of the same user (a learner's rank) can
    neither trace it nor read its memory."""
    if path not in _KEYS:
        from ..runtime import not_dumpable

        not_dumpable()
        file = Path(path)
        _KEYS[path] = file.read_bytes()
        file.unlink()
    return _KEYS[path]


def signed(report: dict, key: bytes) -> dict:
    """{"report": report, "mac": HMAC-SHA256 of its JSON}: what a partner rank hands the judge
    (a learner's rank can overwrite the file, not forge the MAC)."""
    text = json.dumps(report, sort_keys=True)
    return {"report": report, "mac": hmac.new(key, text.encode(), hashlib.sha256).hexdigest()}


def _partner_side(comm, partner, nbytes, iters, ping_tag, pong_tag) -> dict:
    """The partner's side of `iters` round trips with the learner's rank 1 - partner: as rank
    1 it echoes whatever rank 0 sends (replying with pong_tag, or the tag it came with) and
    checks it against the course's payload; as rank 0 it sends random bytes of its own with
    ping_tag (an echo that was never received cannot be made up) and takes the echo, with any
    tag, checked against them. A DONE_TAG message from the learner's rank (its function
    returned early, or failed) ends the round trips."""
    from mpi4py import MPI

    from ..mpi import payload

    other = 1 - partner
    base, status = payload.base(nbytes), MPI.Status()
    rng = np.random.default_rng()  # what it sends as rank 0: bytes no other process can predict
    sent = None
    report = {"partner": partner, "nbytes": nbytes, "iters": iters, "intact": 0,
              "tags": [], "detail": None, "stopped": None}  # fmt: skip
    pending = None

    def take(i):
        comm.Probe(source=other, tag=MPI.ANY_TAG, status=status)
        if status.Get_tag() == DONE_TAG:
            done = np.zeros(2, np.int64)
            comm.Recv(done, source=other, tag=DONE_TAG)
            report["stopped"] = {"calls": int(done[0]), "rc": int(done[1]), "at": i}
            return None
        count = status.Get_count(MPI.BYTE)
        buf = np.zeros(max(count, 1), np.uint8)
        comm.Recv([buf, count, MPI.BYTE], source=other, tag=status.Get_tag())
        report["tags"].append(status.Get_tag())
        buf = buf[:count]
        expected = payload.matches(buf, base, i) if sent is None else np.array_equal(buf, sent)
        if count == nbytes and expected:
            report["intact"] += 1
        elif report["detail"] is None:
            report["detail"] = (
                f"round trip {i + 1}: {count} bytes arrived where {nbytes} were sent"
                if count != nbytes
                else f"round trip {i + 1}: the bytes that arrived are not the payload"
            )
        return buf

    for i in range(iters):
        if partner == 1:
            buf = take(i)
            if buf is None:
                break
            tag = pong_tag if pong_tag is not None else status.Get_tag()
            comm.Send([buf, buf.size, MPI.BYTE], dest=0, tag=tag)
        else:
            sent = rng.integers(0, 256, nbytes, dtype=np.uint8)
            pending = comm.Isend([sent, nbytes, MPI.BYTE], dest=1, tag=ping_tag)
            if take(i) is None:
                break
            pending.Wait()
            pending = None
    if report["stopped"] is None:  # the learner's rank says it has finished
        done = np.zeros(2, np.int64)
        comm.Recv(done, source=other, tag=DONE_TAG)
        if int(done[1]) != 0:
            report["stopped"] = {"calls": int(done[0]), "rc": int(done[1]), "at": iters}
    report["end_job"] = pending is not None  # a send nobody will receive: end the job
    return report


@work
def c_pingpong_partner(lib, function, nbytes, iters, partner, ping_tag, pong_tag, key_path):
    """Engine side: the learner's C ping-pong `int function(comm, sendbuf, recvbuf, nbytes)`
    on every rank but `partner`, which is the course's own (it never loads the learner's
    library): its account of every message, signed with the judge's key, is what the judge
    decides on. The learner's ranks tell it when they are done (calls made, first return
    code that was not 0)."""
    from mpi4py import MPI

    from ..mpi import ckernels, payload

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    key = _partner_key(key_path) if rank == partner else None
    comm.Barrier()  # the key is gone before any learner's code is loaded
    if rank == partner:
        report = _partner_side(comm, partner, int(nbytes), int(iters), ping_tag, pong_tag)
        return {"rank": rank, **signed(report, key), "end_job": report["end_job"]}
    base = payload.base(nbytes)
    sendbuf = np.zeros(max(nbytes, 1), np.uint8)
    recvbuf = np.zeros(max(nbytes, 1), np.uint8)
    calls, rc = 0, 0
    for i in range(iters):
        if rank == 0:
            payload.fill(sendbuf[:nbytes], base, i)
        rc = int(ckernels.call_c(
            lib, function, comm,
            sendbuf.ctypes.data_as(ctypes.c_void_p),
            recvbuf.ctypes.data_as(ctypes.c_void_p),
            ctypes.c_int(nbytes),
        ))  # fmt: skip
        calls += 1
        if rc != 0:
            break
    if rank == 1 - partner:
        comm.Send(np.array([calls, rc], np.int64), dest=partner, tag=DONE_TAG)
    return {"rank": rank, "calls": calls, "rc": rc}


def _timing_partner_side(comm, nbytes, reps, warmup, pong_tag) -> dict:
    """The partner's side of a learner's timing loop (time_pingpong_c) on rank 0: it echoes
    the warm-up round trips, meets it at its Barrier, echoes the timed ones reading MPI_Wtime
    as each arrives, and takes part in its Allreduce (with 0). The time between two arrivals
    is a whole round trip as the course's rank saw it."""
    from mpi4py import MPI

    status = MPI.Status()
    report = {"nbytes": nbytes, "reps": reps, "arrivals": [], "stopped": None}

    def echoed() -> bool:
        comm.Probe(source=0, tag=MPI.ANY_TAG, status=status)
        if status.Get_tag() == DONE_TAG:
            done = np.zeros(2, np.int64)
            comm.Recv(done, source=0, tag=DONE_TAG)
            report["stopped"] = {"calls": int(done[0]), "rc": int(done[1])}
            return False
        count = status.Get_count(MPI.BYTE)
        buf = np.zeros(max(count, 1), np.uint8)
        comm.Recv([buf, count, MPI.BYTE], source=0, tag=status.Get_tag())
        arrived = MPI.Wtime()
        tag = pong_tag if pong_tag is not None else status.Get_tag()
        comm.Send([buf, count, MPI.BYTE], dest=0, tag=tag)
        report["arrivals"].append(arrived)
        return True

    if not all(echoed() for _ in range(warmup)):
        return report
    report["arrivals"].clear()  # the warm-up is not timed
    comm.Barrier()
    if not all(echoed() for _ in range(reps)):
        return report
    comm.Allreduce(np.zeros(1), np.zeros(1), op=MPI.MAX)
    done = np.zeros(2, np.int64)
    comm.Recv(done, source=0, tag=DONE_TAG)
    if int(done[1]) != 0:
        report["stopped"] = {"calls": int(done[0]), "rc": int(done[1])}
    return report


@work
def c_timing_partner(lib, nbytes, reps, warmup, pong_tag, key_path):
    """Engine side: the learner's time_pingpong_c on rank 0 against the course's rank 1 (see
    _timing_partner_side), whose report is signed; rank 0 returns its own samples."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    key = _partner_key(key_path) if rank == 1 else None
    comm.Barrier()  # the key is gone before any learner's code is loaded
    if rank == 1:
        report = _timing_partner_side(comm, int(nbytes), int(reps), int(warmup), pong_tag)
        return {"rank": rank, **signed(report, key)}
    result = c_timing(lib, nbytes, reps, warmup, False, synchronise=False)
    comm.Send(np.array([1, result["rc"]], np.int64), dest=1, tag=DONE_TAG)
    return result


def pickle_pingpong(package, obj, iters):
    """Engine side: rank 0's object after a learner's fn(comm, obj), `iters` times."""
    from mpi4py import MPI

    fn = unship(package)
    comm = MPI.COMM_WORLD
    back = None
    for _ in range(iters):
        back = fn(comm, obj if comm.Get_rank() == 0 else None)
    return back


@work
def student_sweep(time_pkg, reps_pkg, pp_pkg, sizes, target_s, calibration_reps):
    """Engine side: a learner's time_pingpong (and choose_reps, when given) at each size;
    this rank's rows {nbytes, reps, t_s}."""
    from mpi4py import MPI

    from ..mpi import buffers, measure

    time_pingpong = unship(time_pkg)
    choose_reps = unship(reps_pkg) if reps_pkg is not None else None
    pingpong = unship(pp_pkg)
    comm = MPI.COMM_WORLD
    rows = []
    for nbytes in sizes:
        sendbuf, recvbuf = buffers.aligned(nbytes), buffers.aligned(nbytes)
        t_cal = time_pingpong(comm, pingpong, sendbuf, recvbuf, calibration_reps, 2)
        if choose_reps is not None:
            reps = choose_reps(comm, 2 * t_cal * calibration_reps, calibration_reps, target_s)
        else:
            reps = max(10, int(target_s / max(2 * t_cal, 1e-9)))
        warmup = measure.warmup_for(reps)
        t = time_pingpong(comm, pingpong, sendbuf, recvbuf, reps, warmup)
        rows.append({"nbytes": int(nbytes), "reps": int(reps), "t_s": float(t)})
    return rows


@work
def pair_loop(loop_pkg, exchange_pkg, nbytes, iters, warmup=5):
    """Engine side: a pair-timing loop(comm, exchange, sendbuf, recvbuf, iters, warmup) with
    exchange(comm, sendbuf, recvbuf), on random bytes; this rank's samples (None for NaN), the
    loop's wall time and whether the echo came back intact (ranks of the bottom half)."""
    from mpi4py import MPI

    loop, exchange = unship(loop_pkg), unship(exchange_pkg)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    send = np.random.default_rng(rank).integers(0, 256, int(nbytes), dtype=np.uint8)
    recv = np.zeros(int(nbytes), np.uint8)
    t0 = MPI.Wtime()
    samples = np.asarray(loop(comm, exchange, send, recv, int(iters), int(warmup)), dtype=float)
    wall = MPI.Wtime() - t0
    intact = rank >= size // 2 or bool(np.array_equal(send, recv))
    values = [None if not np.isfinite(x) else float(x) for x in samples.ravel()]
    return {"rank": rank, "samples": values, "shape": list(samples.shape), "wall": wall,
            "intact": intact}  # fmt: skip


@work
def pickle_echo(package, obj, iters):
    """Engine side: rank 0's object after fn(comm, obj) `iters` times, as JSON data (a value
    that is not JSON is described, never compared here)."""
    back = pickle_pingpong(package, obj, iters)
    try:
        return {"echoed": json.loads(json.dumps(back))}
    except (TypeError, ValueError):
        return {"echoed": None, "not_data": f"a {type(back).__name__}"}


@work
def c_timing(lib, nbytes, reps, warmup, instrumented, keep_samples=True, synchronise=True):
    """Engine side: one call of the learner's time_pingpong_c; this rank's results
    (synchronise: a Barrier of every rank first)."""
    from mpi4py import MPI

    from ..mpi import buffers, ckernels

    comm = MPI.COMM_WORLD
    sendbuf, recvbuf = buffers.aligned(max(nbytes, 1)), buffers.aligned(max(nbytes, 1))
    samples = np.full(max(reps, 1), np.nan)
    one_way = ctypes.c_double(np.nan)
    handle = ckernels.load(lib)
    if instrumented:
        handle.pp_graded_reset()
    if synchronise:
        comm.Barrier()
    rc = ckernels.call_c(
        lib,
        TIMING_FUNCTION,
        comm,
        sendbuf.ctypes.data_as(ctypes.c_void_p),
        recvbuf.ctypes.data_as(ctypes.c_void_p),
        ctypes.c_int(nbytes),
        ctypes.c_int(reps),
        ctypes.c_int(warmup),
        samples.ctypes.data_as(ctypes.POINTER(ctypes.c_double)),
        ctypes.byref(one_way),
    )
    result = {"rank": comm.Get_rank(), "rc": int(rc), "one_way": float(one_way.value)}
    if keep_samples:
        result["samples"] = samples[:reps].tolist()
    if instrumented:
        out = (ctypes.c_int * (4 * MAX_CALLS))()
        n = handle.pp_graded_calls(out, MAX_CALLS)
        result["ncalls"] = int(n)
        result["calls"] = [tuple(out[4 * k : 4 * k + 4]) for k in range(min(n, MAX_CALLS))]
    return result


@work
def course_c_median(nbytes, reps):
    """Engine side: the course's blocking C kernel at nbytes, `reps` round trips; rank 0's
    median one-way time (seconds) as measure.sweep_rows reports it."""
    from ..mpi import measure
    from ..mpi.settings import SweepSettings

    settings = SweepSettings(kind="c", mode="blocking", sizes=[int(nbytes)], reps=int(reps))
    out = measure.sweep_rows(settings)
    return {"t_median_s": None if out is None else float(out[0][0].t_median_s)}


HALO_GROUPS = ("all ranks", "all but the last rank", "each rank alone")


def halo_owned(rank: int, width: int) -> int:
    """How many cells rank `rank` owns in the halo check: never fewer than `width`, and not the
    same on every rank (an offset computed from another rank's length shows)."""
    return int(width) + 1 + rank % 3


def halo_cells(rank: int, width: int) -> np.ndarray:
    """The values of rank `rank`'s owned cells: 1000 * (rank + 1) + the cell's index, so that a
    value says whose cell it is."""
    return 1000.0 * (rank + 1) + np.arange(halo_owned(rank, width))


def _halo_region(u, lo, hi, want, name, rank) -> str | None:
    got = u[lo:hi]
    if np.array_equal(got, want):
        return None
    j = int(np.flatnonzero(got != want)[0])
    return (f"rank {rank}'s {name} u[{lo}:{hi if hi else ''}] hold {got.tolist()[:6]}, expected "
            f"{want.tolist()[:6]} (first difference at u[{lo + j if lo >= 0 else len(u) + lo + j}]"
            ")")  # fmt: skip


@work
def halo(package, width, group, keep=False):
    """Engine side: a learner's fn(comm, u, width), a 1-D halo exchange, on the ranks of
    `group` (HALO_GROUPS: COMM_WORLD, a communicator of all but the last rank, COMM_SELF).

    Each rank's u holds `width` ghost cells on each side (-1 before the call) around the cells
    it owns (halo_cells). Afterwards a rank's left ghosts must hold its left neighbour's last
    `width` owned cells, its right ghosts its right neighbour's first `width`; the outer ghosts
    of the first and last rank and every owned cell stay as they were. Returns {rank, ok,
    detail} (detail names the first region that is wrong), with keep=True also the rank's u
    before and after the call (lists)."""
    from mpi4py import MPI

    fn, world = unship(package), MPI.COMM_WORLD
    wrank, wsize = world.Get_rank(), world.Get_size()
    if group not in HALO_GROUPS:
        raise ValueError(f"unknown group {group!r}")
    comm = world
    if group == HALO_GROUPS[1]:
        comm = world.Split(0 if wrank < wsize - 1 else MPI.UNDEFINED, wrank)
    elif group == HALO_GROUPS[2]:
        comm = MPI.COMM_SELF
    result = {"rank": wrank, "ok": True, "detail": None}
    if comm != MPI.COMM_NULL:
        rank, size, w = comm.Get_rank(), comm.Get_size(), int(width)
        u = np.full(halo_owned(rank, w) + 2 * w, -1.0)
        u[w:-w] = halo_cells(rank, w)
        expected = u.copy()
        if rank > 0:
            expected[:w] = halo_cells(rank - 1, w)[-w:]
        if rank < size - 1:
            expected[-w:] = halo_cells(rank + 1, w)[:w]
        before = u.copy()
        comm.Barrier()
        fn(comm, u, w)
        if keep:
            result.update(before=before.tolist(), after=u.tolist())
        for lo, hi, name in ((0, w, "left ghost cells"), (w, -w, "owned cells"),
                             (-w, None, "right ghost cells")):  # fmt: skip
            wrong = _halo_region(u, lo, hi, expected[lo:hi], name, rank)
            if wrong:
                result.update(ok=False, detail=wrong + (
                    " (-1: nothing arrived there)" if "ghost" in name and
                    np.all(u[lo:hi] == -1) else ""))  # fmt: skip
                break
        comm.Barrier()
        if comm not in (world, MPI.COMM_SELF):
            comm.Free()
    world.Barrier()
    return result


@jobs.job
def fresh_ranks_job(spec: dict, comm) -> int:
    """The "fresh ranks" job (every rank): each run of a marked work, one JSON file per rank;
    an error is written as data and ends the whole job (the other ranks may be waiting)."""
    from ..engines.shipping import unpacked

    module, _, name = spec["work"].partition(":")
    function = getattr(importlib.import_module(module), name, None)
    if not getattr(function, _MARK, False):
        raise ValueError(f"{spec['work']!r} is not work for fresh ranks")
    out, rank = Path(spec["out_dir"]), comm.Get_rank()
    try:
        packages = [unpacked(Path(p).read_bytes()) for p in spec["packages"]]
        for i, args in enumerate(spec["runs"]):
            result = function(*packages, *args)
            (out / f"run{i:04d}.rank{rank:05d}.json").write_text(json.dumps(result))
            if isinstance(result, dict) and result.get("end_job"):
                comm.Abort(0)  # a message nobody will take: the rest of the job cannot run
    except Exception as exc:  # the learner's code: say what it raised, then end every rank
        error = {"rank": rank, "type": type(exc).__name__, "message": str(exc)}
        (out / f"error.rank{rank:05d}.json").write_text(json.dumps(error))
        comm.Abort(1)
    return 0
