"""Overlap and progress: who moves a message while a rank computes, measured arm by arm.

A non-blocking call returns at once, but the message still has to be moved by somebody's CPU,
and an MPI library without a progress thread moves it only while some rank is inside an MPI
call. Each trial of `overlap_job` (2 fresh ranks):

1. both ranks meet at a barrier and start their clocks;
2. the *computing* rank (the receiver or the sender, `SIDES`) does a fixed amount of work
   (`COMPUTE_S` of a Python loop, calibrated on that rank before the trials) and its part of
   the message, in one of three ways (`STRATEGIES`):
   - ``blocking``: the blocking call first (Recv or Send), then the work;
   - ``Wait only``: the non-blocking call (Irecv or Isend), the work, then Wait;
   - ``Test``: the same, with MPI's Test called after each slice of the work (every
     ~`SLICE_S`), so the library gets a chance to move the message during the work;
3. the *peer* makes the matching blocking call at once;
4. each rank stops its clock when its part is done; the receiver checks the payload.

For each case the job reports medians over the trials: the computing rank's time beyond the
same work without a message (its *exposed* communication; control trials interleaved with the
real ones, each trial paired with its control), the time at which the peer was done, and for
the Test strategy the number of Test calls until the message was complete. An eager message
(`EAGER_BYTES`) is copied into MPI's shared memory by the send and goes through whatever the
receiver does; a rendezvous one (`RENDEZVOUS_BYTES` and 4 times that) waits for both sides,
and then what decides is who does the copy. `ARMS` runs every case with MPICH's defaults
(single copy, CMA, on), with CMA off (`eager.CMA`: the message goes through the shared-memory
cells) and with MPICH's progress thread (`ASYNC_PROGRESS`), so that the notebook says only what
the arms show (05's Part F, and its written answer G3).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from .. import runtime
from ..mpi import jobs
from ..mpi.processes import run_group
from . import eager

EAGER_BYTES = 4 << 10
RENDEZVOUS_BYTES = 1 << 20
SIZES = (EAGER_BYTES, RENDEZVOUS_BYTES, 4 * RENDEZVOUS_BYTES)
SIDES = ("receiver computes", "sender computes")
STRATEGIES = ("blocking", "Wait only", "Test")
COMPUTE_S = 3e-3
SLICE_S = 20e-6
REPS = 25
WARMUP = 3
JOB_DEADLINE_S = 120.0
ASYNC_PROGRESS = "MPIR_CVAR_ASYNC_PROGRESS"  # a progress thread in every rank
ARMS = {
    "MPICH's defaults (CMA on)": {},
    "single copy (CMA) off": {eager.CMA: 0},
    "progress thread (CMA on)": {ASYNC_PROGRESS: 1},
}


def _loop(n: int) -> int:
    """The work: n turns of a loop that the interpreter cannot skip."""
    x = 0
    for i in range(n):
        x ^= i
    return x


def _slice_turns(slice_s: float) -> int:
    """Loop turns that take about slice_s on this rank (the best of 5 timings of a trial)."""
    trial = 20000
    best = min(_timed(_loop, trial) for _ in range(5))
    return max(1, round(trial * slice_s / best))


def _timed(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def _trial(comm, MPI, buf, computing: bool, receiving: bool, strategy, slices, turns):  # noqa: N803
    """One trial on this rank: (seconds from the barrier to the end of its part, the Test calls
    until the message was done: 0 without Test calls, -1 when Wait had to finish it)."""
    peer = 1 - comm.Get_rank()
    comm.Barrier()
    t0 = MPI.Wtime()
    if not computing:  # the peer: its blocking call at once
        (comm.Recv if receiving else comm.Send)(buf, peer, 0)
        return MPI.Wtime() - t0, 0
    if strategy == "blocking":
        (comm.Recv if receiving else comm.Send)(buf, peer, 0)
        for _ in range(slices):
            _loop(turns)
        return MPI.Wtime() - t0, 0
    req = (comm.Irecv if receiving else comm.Isend)(buf, peer, 0)
    tests, done = 0, strategy != "Test"
    for _ in range(slices):
        _loop(turns)
        if not done:
            tests += 1
            done = req.Test()
    req.Wait()
    return MPI.Wtime() - t0, tests if done else -1


def _work_alone(comm, MPI, computing: bool, slices, turns) -> float:  # noqa: N803
    """The control trial: the same barrier and work, no message (seconds; the peer's is 0)."""
    comm.Barrier()
    t0 = MPI.Wtime()
    if computing:
        for _ in range(slices):
            _loop(turns)
    return MPI.Wtime() - t0


def _tests_median(counts) -> float:
    """The median number of Test calls until the message was done; inf when in most trials
    the work ended first (Wait finished the message)."""
    a = np.array([np.inf if c < 0 else c for c in counts], dtype=float)
    return float(np.median(a))


@jobs.job
def overlap_job(spec: dict, comm) -> int:
    """Every case of the experiment on 2 ranks; rank 0 writes the cases' medians (see module)."""
    from mpi4py import MPI

    rank = comm.Get_rank()
    turns = _slice_turns(float(spec["slice_s"]))
    slices = max(1, round(float(spec["compute_s"]) / float(spec["slice_s"])))
    rows = []
    for nbytes in spec["sizes"]:
        buf = np.empty(int(nbytes), np.uint8)
        for side in spec["sides"]:
            sender_computes = side == "sender computes"
            receiving = rank == 1
            computing = (rank == 0) == sender_computes
            for strategy in spec["strategies"]:
                mine, control, tests, bad = [], [], [], 0
                for k in range(-int(spec["warmup"]), int(spec["reps"])):
                    if not receiving:
                        buf.fill(k % 251)
                    t, n = _trial(comm, MPI, buf, computing, receiving, strategy, slices, turns)
                    if receiving and not np.all(buf == k % 251):  # outside the clock
                        bad += 1
                    c = _work_alone(comm, MPI, computing, slices, turns)  # the control, interleaved
                    if k >= 0:
                        mine.append(t)
                        control.append(c)
                        tests.append(n)
                paired = float(np.median(np.subtract(mine, control)))  # each trial - its control
                both = comm.gather((computing, mine, control, paired, tests, bad), root=0)
                if rank == 0:
                    busy, work, exposed, n = next((m, w, e, n) for c, m, w, e, n, _ in both if c)
                    idle = next(m for c, m, *_ in both if not c)
                    rows.append({
                        "nbytes": int(nbytes), "side": side, "strategy": strategy,
                        "computing_s": float(np.median(busy)), "work_s": float(np.median(work)),
                        "exposed_s": exposed, "peer_done_s": float(np.median(idle)),
                        "corrupt": sum(b for *_, b in both),
                        "tests_until_done": _tests_median(n) if strategy == "Test" else None,
                        "samples_s": {"computing": busy, "control": work, "peer": idle},
                    })  # fmt: skip
    if rank == 0:
        result = {"rows": rows}
        runtime.atomic_write(Path(spec["out"]), json.dumps(result))
    return 0


def _environment(settings: dict | None) -> dict:
    """The job's environment: eager.environment for the single-copy settings, and MPICH's
    progress thread (ASYNC_PROGRESS) only where the arm asks for it."""
    settings = dict(settings or {})
    thread = settings.pop(ASYNC_PROGRESS, None)
    env = eager.environment(settings)
    env.pop(ASYNC_PROGRESS, None)
    if thread is not None:
        env[ASYNC_PROGRESS] = str(int(thread))
    return env


def measure(settings: dict | None = None, sizes=SIZES, reps: int = REPS,
            compute_s: float = COMPUTE_S, timeout: float = JOB_DEADLINE_S) -> dict:  # fmt: skip
    """Run every case on 2 fresh ranks under one arm's MPI settings (eager.environment).

    Returns {"reps", "settings", "rows": [{nbytes, side, strategy, computing_s, work_s,
    exposed_s, peer_done_s, corrupt, tests_until_done, samples_s}]}: medians in seconds of the
    computing rank's time, of its control trials (the same work without a message,
    interleaved), of their paired differences, and of the peer's time; corrupt counts the
    trials whose payload arrived wrong; samples_s keeps every trial's time ("computing",
    "control", "peer"). RuntimeError when
    the job fails or passes its deadline (the job is ended whole), with MPI's last lines.
    """
    sizes = [int(n) for n in sizes]
    if not sizes or min(sizes) < 1:
        raise ValueError(f"sizes must be positive byte counts, got {sizes}")
    if int(reps) < 1 or not compute_s > 0:
        raise ValueError(f"reps must be at least 1 and compute_s positive, got {reps}, {compute_s}")
    with tempfile.TemporaryDirectory(prefix="pp-overlap-") as tmp:
        out = Path(tmp, "overlap.json")
        spec = {
            "sizes": sizes, "sides": list(SIDES), "strategies": list(STRATEGIES),
            "reps": int(reps), "warmup": WARMUP, "compute_s": float(compute_s),
            "slice_s": SLICE_S, "out": str(out),
        }  # fmt: skip
        try:
            command = jobs.command(overlap_job, spec, 2)
            proc = run_group(command, timeout, env=_environment(settings))
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"the overlap job did not end within {timeout:g} s") from None
        if proc.returncode != 0 or not out.is_file():
            said = (proc.stderr.strip().splitlines() or ["nothing"])[-1]
            chosen = ", ".join(f"{k}={v}" for k, v in (settings or {}).items()) or "defaults"
            raise RuntimeError(
                f"the overlap job failed with {chosen} (exit {proc.returncode}); MPI said: {said}"
            )
        result = json.loads(out.read_text())
    result["settings"] = dict(settings or {})
    result["reps"] = int(reps)
    return result


def measure_arms(arms=None, **kwargs) -> dict:
    """{arm name: measure(settings)} for every arm of `arms` (default ARMS); an arm this MPI
    refuses is {"error": why}."""
    results = {}
    for name, settings in (ARMS if arms is None else arms).items():
        try:
            results[name] = measure(settings, **kwargs)
        except (ValueError, RuntimeError) as error:
            results[name] = {"settings": settings, "error": str(error).strip().splitlines()[-1]}
    return results


def _tests_text(row: dict) -> str:
    """'' (no Test calls), the Test calls until the message was done, or that Wait did it."""
    n = row.get("tests_until_done")
    if n is None:
        return ""
    return f"{n:g}" if np.isfinite(n) else "not within the work"


def table(results: dict) -> str:
    """The arms' cases as aligned text: the computing rank's exposed time, when the peer was
    done, and (Test strategy) the Test calls until the message was complete."""
    from ..analysis.formatting import format_bytes

    lines = []
    for name, arm in results.items():
        lines.append(f"{name}:")
        if "error" in arm:
            lines.append(f"  not measured here ({arm['error']})")
            continue
        work = np.median([r["work_s"] for r in arm["rows"]])
        lines.append(f"  work alone {work * 1e3:.2f} ms (the control trials); medians of "
                     f"{arm['reps']} trials")  # fmt: skip
        lines.append(f"  {'size':>7}  {'who computes':<18} {'strategy':<10} "
                     f"{'exposed':>10} {'peer done at':>13}  Test calls until done")  # fmt: skip
        for r in arm["rows"]:
            flag = "  PAYLOAD WRONG" if r["corrupt"] else ""
            lines.append(
                f"  {format_bytes(r['nbytes']):>7}  {r['side']:<18} {r['strategy']:<10} "
                f"{r['exposed_s'] * 1e6:8.0f} us {r['peer_done_s'] * 1e6:10.0f} us  "
                f"{_tests_text(r)}{flag}"
            )
    return "\n".join(lines)


def case(results: dict, arm: str, nbytes: int, side: str, strategy: str) -> dict:
    """The row of one case of one arm (KeyError when it was not measured)."""
    for r in results[arm]["rows"]:
        if (r["nbytes"], r["side"], r["strategy"]) == (int(nbytes), side, strategy):
            return r
    raise KeyError((arm, nbytes, side, strategy))
