"""Grade a whole class at once: one worker per submission, one gradebook, one summary.

    python -m pingpong_lab.grader.build autograde --jobs 4     # or: make autograde JOBS=4

Each student's submission (every notebook in course/submitted/<student>/) is graded by its own
nbgrader autograde and generate_feedback, both in one Python process (`python -m
pingpong_lab.grader.classgrade <course> <student>`: nbgrader's start-up is paid once), in its own
process group with its own temporary directory, under a wall-clock deadline; when the deadline
passes, the whole group (kernel, engines, mpiexec) is ended and the submission is reported as
failed, never half-recorded. Up to `jobs` submissions run at once. They share the one SQLite
gradebook: SQLite lets one writer in at a time and the others wait (the course config gives the
gradebook a busy timeout), and each nbgrader run only writes its own student's rows, so nothing
is lost or mixed. A line per finished submission shows done/failed/remaining; at the end come
the slowest submissions and course/grades.csv, one row per student with a score per notebook.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..mpi.processes import run_group

SUBMISSION_TIMEOUT_S = 1800.0  # one student's notebooks, all of them (grading mode: minutes)
REPO = Path(__file__).resolve().parents[2]  # the course's code, notebooks and C kernels


def sandbox_problem() -> str | None:
    """Why grading cannot be sandboxed here, or None when bubblewrap works."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap is not installed (`make sandbox` installs it as root)"
    probe = subprocess.run(
        [bwrap, "--dev-bind", "/", "/", "--unshare-net", "--unshare-pid", "true"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        return f"bubblewrap cannot start here ({probe.stderr.strip()[:120]})"
    return None


def sandbox(course: Path, student: str) -> list[str]:
    """bubblewrap arguments that isolate one student's grading.

    Inside: no network (a private loopback only, which the engines and MPI use), a private
    process tree (everything in it ends with the grader), private /tmp and /dev/shm, the
    repository and the course's sources and submissions read-only, and of autograded/ and
    feedback/ only this student's folders writable (and the gradebook: nbgrader records the
    scores from inside).
    """
    course = course.resolve()
    args = [shutil.which("bwrap") or "bwrap", "--dev-bind", "/", "/", "--proc", "/proc"]
    # a private /dev/shm too: MPI names its shared-memory segments after process ids, which
    # repeat between sandboxes (each has its own), so shared segments would collide
    args += ["--tmpfs", "/tmp", "--tmpfs", "/dev/shm"]
    args += ["--unshare-net", "--unshare-pid", "--die-with-parent"]
    args += ["--ro-bind", str(REPO), str(REPO), "--bind", str(course), str(course)]
    mine = [course / "autograded" / student, course / "feedback" / student]
    for folder in mine:
        folder.mkdir(parents=True, exist_ok=True)
    for part in ("source", "submitted", "nbgrader_config.py", "autograded", "feedback"):
        if (course / part).exists():
            args += ["--ro-bind", str(course / part), str(course / part)]
    for folder in mine:
        args += ["--bind", str(folder), str(folder)]
    return args


@dataclass
class Outcome:
    """How one student's submission went: ok, failed (with why) or timed out."""

    student: str
    assignments: list[str]
    status: str = "ok"
    seconds: float = 0.0
    why: str = ""
    scores: dict = field(default_factory=dict)  # assignment -> (score, max_score)


def default_jobs() -> int:
    """Parallel submissions by default: the cores this process may use."""
    from ..mpi.environment import cpu_count

    return max(1, cpu_count())


def grade_student(course: Path, student: str, out=sys.stderr, gradebook=None) -> int:
    """nbgrader autograde, then generate_feedback, of every notebook of one student, in this
    process; the MPI engines lent to the student's notebooks are stopped in between. Returns
    the exit status (1 with the step and its error written to `out` when a step fails).
    `gradebook`: an SQLite file to record the scores in instead of the course's."""
    from nbgrader.apps import NbGraderAPI
    from traitlets.config.loader import load_pyconfig_files

    from .preprocessors import ENGINE_POOL

    config = load_pyconfig_files(["nbgrader_config.py"], str(course))
    if gradebook is not None:
        config.CourseDirectory.db_url = f"sqlite:///{Path(gradebook).resolve()}"
    api = NbGraderAPI(config=config)
    steps = {
        "autograde": lambda: api.autograde("*", student, force=True, create=True),
        "generate_feedback": lambda: api.generate_feedback("*", student, force=True),
    }
    for step, run in steps.items():
        try:
            result = run()
        finally:
            ENGINE_POOL.close()
        if not result["success"]:
            problems = [ln for ln in result.get("log", "").splitlines() if "ERROR" in ln]
            why = (result.get("error") or "").strip().splitlines()[-1:] + problems[-2:]
            print(f"nbgrader {step} failed: " + " | ".join(why), file=out)
            return 1
    return 0


def _grade_in_group(
    course: Path, student: str, timeout: float, env: dict, wrap=(), gradebook=None
) -> None:
    cmd = [*wrap, sys.executable, "-m", "pingpong_lab.grader.classgrade", str(course), student]
    if gradebook is not None:
        cmd.append(str(Path(gradebook).resolve()))
    proc = run_group(cmd, timeout, env=env, cwd=course)
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise RuntimeError(f"grading exited with {proc.returncode}: {tail}")


def grade_one(
    course: Path,
    student: str,
    assignments: list[str],
    timeout: float,
    isolate: bool = True,
    gradebook: Path | None = None,
) -> Outcome:
    """Autograde and write feedback for one student's submission; never raises.

    `gradebook`: record the scores in this SQLite file instead of the course's (a Slurm array
    task's own gradebook, merged later by arraygrade)."""
    outcome = Outcome(student, assignments)
    start = time.perf_counter()
    deadline = start + timeout  # sandbox set-up included
    wrap = sandbox(course, student) if isolate else []
    with tempfile.TemporaryDirectory(prefix=f"pingpong-grade-{student}-") as tmp:
        env = {**os.environ, "PINGPONG_LAB_GRADING": "1"}
        env["PINGPONG_LAB_BUILD"] = str(Path(tmp) / "c-build")  # the student's C, built here
        if not wrap:
            env["TMPDIR"] = tmp
        try:
            left = max(1.0, deadline - time.perf_counter())
            _grade_in_group(course, student, left, env, wrap, gradebook)
        except subprocess.TimeoutExpired:
            outcome.status, outcome.why = "timeout", f"over {timeout:.0f} s"
        except (RuntimeError, OSError) as exc:
            outcome.status, outcome.why = "failed", str(exc)
    outcome.seconds = time.perf_counter() - start
    return outcome


class Progress:
    """One line per finished submission: done, failed, remaining, elapsed."""

    def __init__(self, total: int, out=sys.stdout):
        self.total, self.out = total, out
        self.done = self.failed = 0
        self.start = time.perf_counter()
        self.lock = threading.Lock()

    def finished(self, outcome: Outcome) -> None:
        with self.lock:
            self.done += 1
            self.failed += outcome.status != "ok"
            width = 20
            filled = round(width * self.done / self.total)
            bar = "#" * filled + "." * (width - filled)
            note = "" if outcome.status == "ok" else f" {outcome.status.upper()}: {outcome.why}"
            print(
                f"[{bar}] {self.done}/{self.total} done, {self.failed} failed, "
                f"{self.total - self.done} left, {time.perf_counter() - self.start:.0f} s | "
                f"{outcome.student} {outcome.seconds:.0f} s{note}",
                file=self.out,
                flush=True,
            )


def grade_class(
    course: Path, todo: dict[str, list[str]], jobs: int, timeout: float = SUBMISSION_TIMEOUT_S
) -> list[Outcome]:
    """Grade every student in `todo` ({student: [assignment, ...]}), `jobs` at a time, each in
    a sandbox when bubblewrap works here (and saying so when it does not)."""
    problem = sandbox_problem()
    print(
        "each submission in a sandbox: no network, private processes and /tmp, course files "
        "read-only"
        if problem is None
        else f"not isolated: {problem}",
        flush=True,
    )
    progress = Progress(len(todo))

    def work(item):
        outcome = grade_one(course, item[0], item[1], timeout, isolate=problem is None)
        progress.finished(outcome)
        return outcome

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        outcomes = list(pool.map(work, sorted(todo.items())))
    attach_scores(course, outcomes)
    return outcomes


def attach_scores(course: Path, outcomes: list[Outcome]) -> None:
    """Each outcome's scores, {assignment: (score, max_score)}, from the course gradebook."""
    from .build import scores

    by_student: dict[str, dict] = {}
    for assignment, student, score, max_score in scores(course):
        by_student.setdefault(student, {})[assignment] = (score, max_score)
    for outcome in outcomes:
        outcome.scores = by_student.get(outcome.student, {})


def write_summary(path: Path, outcomes: list[Outcome], assignments: list[str]) -> None:
    """One row per student: status, seconds, a score per notebook, total and maximum.

    Written to a temporary file and renamed, so a reader never sees half a table."""
    header = ["student", "status", "seconds", *assignments, "total", "max_total", "note"]
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        for o in sorted(outcomes, key=lambda o: o.student):
            got = [o.scores.get(a, ("", ""))[0] for a in assignments]
            total = sum(s for s, _ in o.scores.values())
            max_total = sum(m for _, m in o.scores.values())
            w.writerow([o.student, o.status, f"{o.seconds:.1f}", *got, total, max_total, o.why])
    tmp.replace(path)


def report(outcomes: list[Outcome], wall_s: float, out=sys.stdout) -> None:
    """The end of the run: throughput, failures, the slowest submissions."""
    n = len(outcomes)
    failed = [o for o in outcomes if o.status != "ok"]
    print(
        f"graded {n} submission(s) in {wall_s:.0f} s ({60 * n / wall_s:.1f} per minute), "
        f"{len(failed)} failed",
        file=out,
    )
    for o in failed:
        print(f"  {o.student}: {o.status} ({o.why})", file=out)
    slowest = sorted(outcomes, key=lambda o: -o.seconds)[:3]
    print("slowest: " + ", ".join(f"{o.student} {o.seconds:.0f} s" for o in slowest), file=out)


if __name__ == "__main__":  # one student, inside its sandbox (see grade_one)
    book = sys.argv[3] if len(sys.argv) > 3 else None
    sys.exit(grade_student(Path(sys.argv[1]).resolve(), sys.argv[2], gradebook=book))
