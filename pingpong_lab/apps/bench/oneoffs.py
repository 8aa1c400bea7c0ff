"""The one-offs: what the bench measures once, after the rounds: the same C kernel on another
MPICH build (Debian's), a full sweep and the course's own costs (nbgrader)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from ...data import results
from ...mpi import environment
from ...mpi.ckernels import KERNELS_DIR
from ...mpi.processes import run_group
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


DEBIAN_MPIEXEC = "mpiexec.mpich"  # Debian's MPICH launcher and compiler wrapper
DEBIAN_MPICC = "mpicc.mpich"
DEBIAN_PACKAGES = "mpich, libmpich-dev"
BUILD_RUNS = 3  # each build runs this often, alternately


def debian_mpich_missing() -> str:
    """Why Debian's MPICH cannot run here, or "" when it can."""
    absent = [t for t in (DEBIAN_MPIEXEC, DEBIAN_MPICC) if shutil.which(t) is None]
    return f"{', '.join(absent)} not installed (Debian: {DEBIAN_PACKAGES})" if absent else ""


def debian_mpich_version() -> str:
    """The version of Debian's MPICH library, or "" when unknown."""
    try:
        proc = run_group(["dpkg-query", "-W", "-f", "${Version}", "libmpich12"], timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def debian_pp_blocking(out: Path) -> Path:
    """pp_blocking compiled with Debian's mpicc."""
    build = (out / "build-debian-mpich").resolve()
    target = build / "pp_blocking"
    mpicc = shutil.which(DEBIAN_MPICC)
    run_checked(["make", "-s", "-C", str(KERNELS_DIR), f"MPICC={mpicc}", f"BUILD={build}", target])
    return target


def mpi_builds(s: Settings, raw: dict) -> None:
    """The same C kernel with the same arguments on Debian's MPICH and on the PyPI wheel's, run
    alternately BUILD_RUNS times each: what the MPI build alone changes. Without Debian's MPICH
    the record says why."""
    hi = 64 * KIB if s.quick else LAUNCH_SIZES[-1]
    rec: dict = {"max_bytes": hi}
    raw["mpi_builds"] = rec
    why = debian_mpich_missing()
    if why:
        rec["missing"] = why
        return
    log(f"the C kernel on Debian's MPICH and on the PyPI wheel's, up to {hi} B")
    args = ["-m", f"8:{hi}", "-i", "200" if s.quick else "1000", "-x", "50"]
    try:
        builds = {
            "debian": [shutil.which(DEBIAN_MPIEXEC), "-n", "2", str(debian_pp_blocking(s.out))],
            "pypi": [environment.mpiexec(), "-n", "2", str(PP_BLOCKING)],
        }
        for _ in range(BUILD_RUNS):
            for name, cmd in builds.items():
                rec.setdefault(name, []).append(parse_pp_table(run_checked(cmd + args).stdout))
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        raw["mpi_builds"] = {"max_bytes": hi, "missing": f"failed: {exc}"}
        return
    rec["debian_version"] = debian_mpich_version()


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
