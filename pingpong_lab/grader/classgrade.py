"""Grade a whole class at once: one worker per submission, one gradebook, one summary.

    python -m pingpong_lab.grader autograde --jobs 4     # or: make autograde JOBS=4

Each student's submission (every notebook in course/submitted/<student>/) is graded in a stage
of its own (stage.py: a scratch course with that submission and a gradebook without any
student), inside a sandbox that shows it nothing of the class course (sandbox.py), by one
Python process that runs nbgrader's autograde and generate_feedback (`python -m
pingpong_lab.grader.classgrade <stage> <student>`: nbgrader's start-up is paid once), in its
own process group, under a wall-clock deadline; when the deadline passes, the whole group
(kernel, engines, mpiexec) is ended and the submission is reported as failed. Then, in this
process, the stage's gradebook is read as data, checked and merged into the class gradebook
(gradebook.merge), and the graded notebooks and feedback are copied back. A submission whose
gradebook does not pass the checks, or that recorded no scores, is a failure: it is never an
empty row, and it changes nothing in the class gradebook. Up to `jobs` submissions run at once;
the class gradebook is copied aside before the first is graded (gradebook.backup).

A line per finished submission shows done/failed/remaining; at the end come the slowest
submissions and course/class-grading.csv, one row per student with a score per notebook.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .. import runtime
from ..mpi.processes import run_group
from . import blanks, gradebook, sandbox, stage

SUBMISSION_TIMEOUT_S = 1800.0  # one student's notebooks, all of them (grading mode: minutes)
# what the grading's processes inherit from ours, besides the variables set below
DROPPED_ENV = ("PINGPONG_LAB_EXCHANGE", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR",
               "MPLCONFIGDIR", "XDG_RUNTIME_DIR", "XDG_CACHE_HOME", "XDG_DATA_HOME")  # fmt: skip


@dataclass
class Outcome:
    """How one student's submission went: ok, failed (with why) or timed out."""

    student: str
    assignments: list[str]
    status: str = "ok"
    seconds: float = 0.0
    why: str = ""
    scores: dict = field(default_factory=dict)  # assignment -> (score, max_score)


# Every process of a submission (two kernels a notebook, engines, a check's ranks, bench.c's
# runs) is started with these. OpenBLAS would start a thread per core in each process that
# imports numpy: CPU time for nothing on small arrays when two submissions share the cores.
# UCX, the network layer of the PyPI MPICH, patches the memory calls of every library a
# process has loaded at MPI_Init, to keep its cache of registered memory for network cards
# valid: half of an MPI job's start-up CPU time here (2 ranks: 0.17 -> 0.08 s), paid by about
# 50 jobs a submission. Without the hooks UCX keeps no such cache, which grading never needs:
# every job runs on one machine, where MPICH moves messages through its own shared memory (and
# 04's TCP sweep through UCX registers none); latency and bandwidth there are the same.
# Measured on 4 full submissions at JOBS=2: 230-237 CPU-s -> 207-211 (docs/GRADING.md).
LIGHT_PROCESSES = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "UCX_MEM_EVENTS": "no"}


def default_jobs() -> int:
    """Parallel submissions by default: the cores this process may use."""
    from ..mpi.environment import cpu_count

    return max(1, cpu_count())


def grade_student(course: Path, student: str, out=sys.stderr) -> int:
    """nbgrader autograde, then generate_feedback, of every notebook of one student, in this
    process; the MPI engines lent to the student's notebooks are stopped in between. Returns
    the exit status (1 with the step and its error written to `out` when a step fails).

    The kernels and engines are confined by CrashTolerantExecute (the course folder read-only
    but for the student's autograded/ folder), so that only nbgrader writes the gradebook."""
    from nbgrader.apps import NbGraderAPI
    from traitlets.config.loader import load_pyconfig_files

    from .preprocessors import ENGINE_POOL

    config = load_pyconfig_files(["nbgrader_config.py"], str(course))
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


def _grade_in_group(course: Path, student: str, timeout: float, env: dict, wrap=()) -> None:
    cmd = [*wrap, sys.executable, "-m", "pingpong_lab.grader.classgrade", str(course), student]
    proc = run_group(cmd, timeout, env=env, cwd=course)
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise RuntimeError(f"grading exited with {proc.returncode}: {tail}")


_MERGE = threading.Lock()  # one writer of the class gradebook in this process


def grade_one(
    course: Path,
    student: str,
    assignments: list[str],
    timeout: float,
    isolate: bool = True,
    result: Path | None = None,
) -> Outcome:
    """Grade one student's submission in a stage of its own, then merge its checked scores
    into the class gradebook and copy back its graded notebooks and feedback; never raises.

    `result`: instead of merging, keep the stage's gradebook as this file (a Slurm array
    task's result, merged later by arraygrade with the same gradebook.merge)."""
    course = Path(course).resolve()
    runtime.write_bytecode()  # before the sandbox sees the package read-only
    outcome = Outcome(student, assignments)
    start = time.perf_counter()
    deadline = start + timeout  # the stage's set-up included
    with tempfile.TemporaryDirectory(prefix=f"pingpong-grade-{student}-") as tmp:
        work = Path(tmp)
        try:
            staged = stage.make(course, work, student, assignments)
            env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
            env.update(PINGPONG_LAB_GRADING="1", HOME=str(work / "home"))
            env.update(TMPDIR=str(work / "tmp"), PINGPONG_LAB_BUILD=str(work / "c-build"))
            env.update(LIGHT_PROCESSES)  # every kernel, engine and rank
            wrap = sandbox.grading_args(course, work) if isolate else []
            left = max(1.0, deadline - time.perf_counter())
            _grade_in_group(staged, student, left, env, wrap)
            if result is not None:
                gradebook.check_result(course / "gradebook.db", staged / "gradebook.db",
                                       student, assignments)  # fmt: skip
                gradebook.copy(staged / "gradebook.db", result)
            else:
                blank = blanks.unanswered(course, student, assignments)
                with _MERGE:
                    gradebook.merge(course / "gradebook.db", staged / "gradebook.db", student,
                                    assignments, blank)  # fmt: skip
            skipped = stage.bring_back(staged, course, student, assignments)
            if skipped:
                outcome.why = "not copied back: " + ", ".join(skipped[:5])
        except subprocess.TimeoutExpired:
            outcome.status, outcome.why = "timeout", f"over {timeout:.0f} s"
        except gradebook.ResultRefused as exc:
            outcome.status, outcome.why = "failed", f"scores refused: {exc}"
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
    problem = sandbox.problem()
    saved = gradebook.backup(course / "gradebook.db")
    print(f"the class gradebook was copied to {saved.relative_to(course)} first", flush=True)
    print(
        "each submission in a sandbox: its own stage and gradebook, no other student's files, "
        "no network, private processes, its code unable to write the scores"
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
    """Each outcome's scores, {assignment: (score, max_score)}, from the course gradebook; an
    outcome "ok" without a score for each of its assignments becomes a failure."""
    by_student: dict[str, dict] = {}
    for assignment, student, score, max_score in gradebook.scores(course):
        by_student.setdefault(student, {})[assignment] = (score, max_score)
    for outcome in outcomes:
        mine = by_student.get(outcome.student, {})
        outcome.scores = {a: mine[a] for a in outcome.assignments if a in mine}
        lost = [a for a in outcome.assignments if a not in mine]
        if outcome.status == "ok" and lost:
            outcome.status, outcome.why = "failed", f"no scores for {', '.join(lost)}"


SUMMARY_COLUMNS = ("student", "grading", "seconds", "total", "max_total", "status", "note")


def write_summary(
    path: Path, outcomes: list[Outcome], assignments: list[str], course: Path
) -> None:
    """One row per student: how grading went ("grading": ok, failed or timeout, its seconds and
    note), a score per notebook ("missing" where nothing was submitted), and the student's
    total, max_total and status as `nbgrader export` gives them from the course gradebook
    (export.rows: every assignment of the gradebook counts, late penalties included).

    Written to a temporary file and renamed, so a reader never sees half a table."""
    from nbgrader.api import Gradebook

    from . import export

    students = sorted(o.student for o in outcomes)
    with Gradebook("sqlite:///" + str(Path(course) / "gradebook.db")) as gb:
        known = {s.id for s in gb.students}
        _, table = export.rows(gb, students=[s for s in students if s in known])
        full = f"{sum(a.max_score for a in gb.assignments):g}"
    totals = {row["student_id"]: row for row in table}
    unknown = {"total": "0", "max_total": full, "status": export.FAILED}  # not in the gradebook
    header = [*SUMMARY_COLUMNS[:3], *assignments, *SUMMARY_COLUMNS[3:]]
    with runtime.atomic_file(path, "w") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        for o in sorted(outcomes, key=lambda o: o.student):
            got = [
                o.scores[a][0] if a in o.scores else "" if a in o.assignments else export.MISSING
                for a in assignments
            ]
            mine = totals.get(o.student, unknown)
            # a submission whose grading failed left no scores: the gradebook (and so nbgrader
            # export) cannot tell it from one never submitted; this table can
            status = mine["status"] if o.status == "ok" else export.FAILED
            w.writerow(
                [o.student, o.status, f"{o.seconds:.1f}", *got]
                + [mine["total"], mine["max_total"], status, o.why]
            )


def report_failures(failed: list[Outcome], out=sys.stdout) -> None:
    """One line per submission that was not graded: who, how it ended, why."""
    for o in failed:
        print(f"  {o.student}: {o.status} ({o.why})", file=out)


def report(outcomes: list[Outcome], wall_s: float, out=sys.stdout) -> None:
    """The end of the run: throughput, failures, the slowest submissions."""
    n = len(outcomes)
    failed = [o for o in outcomes if o.status != "ok"]
    print(
        f"graded {n} submission(s) in {wall_s:.0f} s ({60 * n / wall_s:.1f} per minute), "
        f"{len(failed)} failed",
        file=out,
    )
    report_failures(failed, out)
    slowest = sorted(outcomes, key=lambda o: -o.seconds)[:3]
    print("slowest: " + ", ".join(f"{o.student} {o.seconds:.0f} s" for o in slowest), file=out)


if __name__ == "__main__":  # one student, inside its sandbox (see grade_one)
    runtime.own_tools_on_path()
    runtime.without_iri_grammars()
    sys.exit(grade_student(Path(sys.argv[1]).resolve(), sys.argv[2]))
