"""The one-offs: what the bench measures once, after the rounds: NetPIPE as a peer, a full
sweep and the course's own costs (nbgrader)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ...data import results
from ...mpi import environment
from ...mpi.ckernels import KERNELS_DIR
from .. import netpipe
from .peers import (
    FULL_SWEEP,
    JOB_TIMEOUT_S,
    KIB,
    LAUNCH_SIZES,
    PP_BLOCKING,
    QUICK_SWEEP,
    parse_pp_table,
)
from .settings import Settings, log, run_checked

FULL_SWEEP_CSV = "full_sweep_c_blocking.csv"


def debian_pp_blocking(out: Path) -> Path:
    """pp_blocking compiled with Debian's mpicc (the MPI that NetPIPE's build uses)."""
    build = (out / "build-debian-mpich").resolve()
    mpicc = shutil.which(netpipe.DEBIAN_MPICC)
    if mpicc is None:
        raise RuntimeError(f"{netpipe.DEBIAN_MPICC} not installed (Debian: libmpich-dev)")
    target = build / "pp_blocking"
    run_checked(["make", "-s", "-C", str(KERNELS_DIR), f"MPICC={mpicc}", f"BUILD={build}", target])
    return target


def _netpipe_vs_ours(s: Settings, kind: str, hi: int) -> dict:
    """NetPIPE up to `hi` bytes, then our C kernel on the same MPI ("mpi") or over TCP."""
    from ...mpi.settings import TRANSPORTS

    peer = netpipe.run_mpi if kind == "mpi" else netpipe.run_tcp
    got = {"netpipe": peer(hi, s.out / f"netpipe_{kind}.out")}
    if kind == "mpi":  # our C kernel built against the same (Debian's) MPICH
        exe = debian_pp_blocking(s.out)
        cmd = [shutil.which(netpipe.DEBIAN_MPIEXEC), "-n", "2", str(exe)]
        got["mpi_version"] = netpipe.debian_mpich_version()
        env = None
    else:  # our C kernel over TCP loopback, the pip MPICH forced off shared memory
        cmd = [environment.mpiexec(), "-n", "2", str(PP_BLOCKING)]
        env = {**os.environ, **TRANSPORTS["tcp"]}
    cmd += ["-m", f"8:{hi}", "-i", "200" if s.quick else "1000", "-x", "50"]
    got["ours"] = parse_pp_table(run_checked(cmd, env=env).stdout)
    return got


def netpipe_peers(s: Settings, raw: dict) -> None:
    """NetPIPE (Debian's builds) as peers, once: MPI vs our C kernel on the same MPI, TCP
    vs our C kernel over TCP. Missing tools leave a reason instead of numbers."""
    hi = 64 * KIB if s.quick else LAUNCH_SIZES[-1]
    rec: dict = {"max_bytes": hi}
    raw["netpipe"] = rec
    for kind in ("mpi", "tcp"):
        why = netpipe.missing(kind)
        if why:
            rec[kind] = {"missing": why}
            continue
        log(f"NetPIPE {kind} (Debian's build) up to {hi} B")
        try:
            rec[kind] = _netpipe_vs_ours(s, kind, hi)
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            rec[kind] = {"missing": f"failed: {exc}"}


def full_sweep(s: Settings, raw: dict) -> None:
    """Time a whole `pingpong-lab sweep` of the C kernel, as a student would run it."""
    lo, hi = QUICK_SWEEP if s.quick else FULL_SWEEP
    cmd = [sys.executable, "-m", "pingpong_lab", "sweep", "--np", str(s.np)]
    cmd += ["--kernel", "c", "--mode", "blocking", "--min-bytes", str(lo)]
    cmd += ["--max-bytes", str(hi), "--out", str(s.out / FULL_SWEEP_CSV)]
    if s.quick:
        cmd += ["--target-time", "0.01"]
    log(f"timing a full sweep {lo} B .. {hi} B at the default precision")
    t0 = time.perf_counter()
    run_checked(cmd, timeout=JOB_TIMEOUT_S * 2)
    raw["full_sweep_s"] = time.perf_counter() - t0
    raw["full_sweep_range"] = [lo, hi]


def sweep_note(s: Settings) -> str:
    """How many sizes reached the +/-2% median CI in the timed full sweep."""
    try:
        rows, _ = results.read_results(s.out / FULL_SWEEP_CSV)
    except OSError:
        return "no CSV"
    met = sum(r.get("stop_reason") == "ci" for r in rows)
    how = "quick: 0.01 s first round" if s.quick else "+/-2% CI or 1 s per size"
    return f"{how}; CI met at {met} of {len(rows)} sizes (mpiexec)"


def course_costs(s: Settings, raw: dict) -> None:
    """Grading one submission, executing every notebook (grading mode) and grading a class:
    real nbgrader, minutes, so not with --quick."""
    if s.quick:
        return
    from ...grader import build, classgrade

    course = KERNELS_DIR.parent / "course"
    log("autograding the solutions as one submission (real nbgrader)")
    raw["autograde"] = build.time_grading(course)
    log("executing every solution notebook in grading mode")
    raw["notebook_s"] = build.time_notebooks(course)
    jobs = sorted({1, classgrade.default_jobs()})
    log(f"grading a class of {s.class_size} at JOBS={' and '.join(map(str, jobs))}")
    raw["class_grading"] = build.time_class_grading(course, s.class_size, jobs)
