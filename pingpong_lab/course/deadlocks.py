"""Breaking a ping-pong on purpose, safely: each experiment is a short mpiexec job of 2 ranks.

    head-to-head  both ranks Send first, then Recv, at growing sizes: small messages pass
                  (MPI buffers them: the eager protocol), the first size that needs the
                  receiver to be ready (rendezvous) hangs
    ssend         the same with MPI_Ssend, which always waits for the matching receive
    tag           rank 0 sends with tag 1, rank 1 waits for tag 2
    truncate      rank 0 sends 100 bytes, rank 1 receives into a 10-byte buffer

A rank that has not finished a step within `stuck_after_s` seconds reports where it stands and
ends its process; mpiexec then ends the other rank, and the whole job is killed at a deadline
in any case (mpi.processes.run_group), so nothing is left running. The job is `experiment_job`
(a job of mpi.jobs).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from .. import runtime
from ..mpi import binding, jobs
from ..mpi.processes import run_group

EXPERIMENTS = ("head-to-head", "ssend", "tag", "truncate")
SIZES = tuple(8 << k for k in range(18))  # 8 B .. 1 MiB
TRUNCATE_SEND, TRUNCATE_RECV = 100, 10
STUCK_AFTER_S = 2.0  # a step of a few microseconds that has not ended after this is stuck
JOB_DEADLINE_S = 60.0
# MPICH's ranks poll without pause while they wait; a deadlocked rank then burns a core until
# its watchdog gives up. With this, a waiting rank sleeps between polls: the verdicts are the
# same (the sizes that go through depend on the protocol, not on how a rank waits) and the
# 3 deadlocks of notebook 01 cost 2.3 s of CPU time instead of 4.6 s. Other MPIs ignore it.
WAIT_QUIETLY = {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1"}


def _report(out_dir: str, rank: int, result: dict) -> None:
    runtime.atomic_write(Path(out_dir, f"rank{rank}.json"), json.dumps(result))


class _Watchdog:
    """Ends this rank with a report when a step is not done within `seconds`."""

    def __init__(self, out_dir, rank, result, seconds):
        self.out_dir, self.rank, self.result, self.seconds = out_dir, rank, result, seconds
        self.timer = None

    def arm(self, step: int) -> None:
        self.timer = threading.Timer(self.seconds, self._stuck, args=(step,))
        self.timer.daemon = True
        self.timer.start()

    def disarm(self) -> None:
        self.timer.cancel()

    def _stuck(self, step: int) -> None:
        _report(self.out_dir, self.rank, {**self.result, "stuck_at": step})
        os._exit(3)


@jobs.job
def experiment_job(spec: dict, comm) -> int:
    """The "break-it" job (each of 2 ranks): run one experiment, write rank<r>.json."""
    from mpi4py import MPI

    rank, peer = comm.Get_rank(), 1 - comm.Get_rank()
    kind, out_dir = spec["experiment"], spec["out_dir"]
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    result = {"rank": rank, "completed": [], "stuck_at": None, "error": None, "cpus": allowed}
    dog = _Watchdog(out_dir, rank, result, float(spec["stuck_after_s"]))
    if kind in ("head-to-head", "ssend"):
        send = comm.Ssend if kind == "ssend" else comm.Send
        for nbytes in spec["sizes"]:
            out, back = np.full(nbytes, rank, np.uint8), np.empty(nbytes, np.uint8)
            dog.arm(nbytes)
            send(out, dest=peer, tag=0)
            comm.Recv(back, source=peer, tag=0)
            dog.disarm()
            result["completed"].append(nbytes)
    elif kind == "tag":
        buf = np.zeros(8, np.uint8)
        dog.arm(8)
        if rank == 0:
            comm.Send(buf, dest=1, tag=1)
            comm.Recv(buf, source=1, tag=1)
        else:
            comm.Recv(buf, source=0, tag=2)
            comm.Send(buf, dest=0, tag=2)
        dog.disarm()
        result["completed"].append(8)
    elif kind == "truncate":
        dog.arm(TRUNCATE_SEND)
        if rank == 0:
            comm.Send(np.arange(TRUNCATE_SEND, dtype=np.uint8), dest=1, tag=0)
        else:
            try:
                comm.Recv(np.zeros(TRUNCATE_RECV, np.uint8), source=0, tag=0)
            except MPI.Exception as exc:
                name = MPI.Get_error_string(MPI.Get_error_class(exc.Get_error_code())).strip()
                detail = exc.Get_error_string().strip().splitlines()[-1].split("): ", 1)[-1]
                result["error"] = name if detail == name else f"{name}: {detail}"
        dog.disarm()
        result["completed"].append(TRUNCATE_SEND)
    else:
        raise ValueError(f"unknown experiment {kind!r}; known: {', '.join(EXPERIMENTS)}")
    _report(out_dir, rank, result)
    return 0


def run(
    experiment: str,
    sizes=SIZES,
    stuck_after_s: float = STUCK_AFTER_S,
    timeout: float = JOB_DEADLINE_S,
    env: dict | None = None,
    bind=None,
) -> dict:
    """Run one experiment on 2 fresh ranks (with environment `env` when given, pinned by
    placement `bind` when given: mpi/binding.py); what happened.

    Returns {experiment, completed: sizes both ranks finished, stuck_at: the first size that
    hung (None if none), error: what MPI reported (None if nothing), cpus: the CPUs each rank that
    reported could run on (by rank), seconds}.
    """
    if experiment not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {experiment!r}; known: {', '.join(EXPERIMENTS)}")
    sizes = [int(s) for s in sizes]
    if not sizes or min(sizes) < 1 or sizes != sorted(sizes):
        raise ValueError(f"sizes must be ascending positive byte counts, got {sizes}")
    if stuck_after_s <= 0:
        raise ValueError(f"stuck_after_s must be positive seconds, got {stuck_after_s!r}")
    cpus = None if bind is None else binding.cpus_for(bind, 2)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pp-break-") as out_dir:
        spec = {
            "experiment": experiment,
            "sizes": sizes,
            "stuck_after_s": float(stuck_after_s),
            "out_dir": out_dir,
            "cpus": cpus,
        }
        try:
            env = {**os.environ, **WAIT_QUIETLY, **(env or {})}
            proc = run_group(jobs.command(experiment_job, spec, 2), timeout, env=env)
        except subprocess.TimeoutExpired:
            proc = None
        reports = [json.loads(p.read_text()) for p in sorted(Path(out_dir).glob("rank*.json"))]
    if not reports:
        why = "it passed its deadline" if proc is None else f"exit {proc.returncode}"
        tail = "" if proc is None else "\n".join(proc.stderr.strip().splitlines()[-6:])
        raise RuntimeError(f"the {experiment} job reported nothing ({why}):\n{tail}")
    stuck = [r["stuck_at"] for r in reports if r["stuck_at"] is not None]
    completed = set(reports[0]["completed"]).intersection(*(r["completed"] for r in reports))
    return {
        "experiment": experiment,
        "completed": sorted(completed),
        "stuck_at": min(stuck) if stuck else None,
        "error": next((r["error"] for r in reports if r["error"]), None),
        "cpus": [r["cpus"] for r in sorted(reports, key=lambda r: r["rank"])],
        "seconds": time.perf_counter() - start,
    }


def first_deadlock(result: dict) -> int:
    """The first size that hung, or -1 when every size went through (as 01_deadlock stores it)."""
    return -1 if result["stuck_at"] is None else int(result["stuck_at"])
