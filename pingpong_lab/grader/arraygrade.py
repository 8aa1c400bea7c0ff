"""Grade a class as a Slurm job array: one array task per submission, then one merge.

    python -m pingpong_lab.grader array-count --course course     # how many tasks
    python -m pingpong_lab.grader array-task 3 --course course    # array task 3
    python -m pingpong_lab.grader array-merge --course course     # after all tasks

slurm/grade-class.sh submits the tasks (slurm/grade-task.sbatch, `--array=0-<count-1>`) and the
merge (slurm/grade-merge.sbatch) as a job that depends on them.

A task grades its student exactly as `make autograde` does (classgrade.grade_one: a stage of
its own, its own gradebook, the sandbox), but does not merge: it leaves the stage's checked
gradebook in course/gradebooks/<student>.db and how it went in course/gradebooks/<student>.json.
Why: SQLite's locking is unreliable on cluster file systems (NFS, Lustre), so many nodes
writing course/gradebook.db at once could corrupt it or lose scores. The merge, a single
process, copies the class gradebook aside (gradebook.backup), checks each task's gradebook
again and merges it with gradebook.merge, the one merge path of both, and writes
course/class-grading.csv with classgrade's summary writer. A task that died without a result
shows as failed in class-grading.csv, with the reason.

Task i grades the i-th student of course/submitted/ in sorted order, so the tasks and the merge
agree without a list being passed around; do not add submissions between submit and merge.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

from .. import runtime
from . import blanks, build, classgrade, gradebook, sandbox

FOLDER = "gradebooks"


def task_files(course: Path, student: str) -> tuple[Path, Path]:
    """(gradebook, outcome JSON) of the array task that grades `student`."""
    folder = Path(course) / FOLDER
    return folder / f"{student}.db", folder / f"{student}.json"


def todo(course: Path) -> list[tuple[str, list[str]]]:
    """[(student, [assignment, ...])] in task order (sorted by student)."""
    students, _ = build.students_to_grade(course, out=sys.stderr)
    return sorted(students.items())


def run_task(course: Path, index: int, timeout: float = classgrade.SUBMISSION_TIMEOUT_S) -> int:
    """Grade the index-th student into their own gradebook; 0 when graded, 1 otherwise."""
    course = Path(course).resolve()
    students = todo(course)
    if not 0 <= index < len(students):
        raise IndexError(
            f"array task {index}: there are {len(students)} submission(s), tasks 0.."
            f"{len(students) - 1} (was the array submitted with --array=0-<count-1>?)"
        )
    student, names = students[index]
    book, result = task_files(course, student)
    result.unlink(missing_ok=True)
    book.unlink(missing_ok=True)
    problem = sandbox.problem()
    isolation = "in a sandbox" if problem is None else f"not isolated: {problem}"
    print(f"grading {student} ({', '.join(names)}), {isolation}", flush=True)
    outcome = classgrade.grade_one(
        course, student, names, timeout, isolate=problem is None, result=book
    )
    record = {
        "student": student,
        "assignments": names,
        "status": outcome.status,
        "seconds": outcome.seconds,
        "why": outcome.why,
    }
    runtime.atomic_write(result, json.dumps(record, indent=1) + "\n")
    print(f"{student}: {outcome.status} in {outcome.seconds:.0f} s {outcome.why}".rstrip())
    return 0 if outcome.status == "ok" else 1


def merge(course: Path, out=sys.stdout) -> int:
    """Merge every task gradebook into course/gradebook.db; write course/class-grading.csv.

    0 when every submission was graded and merged, 1 otherwise (class-grading.csv says which)."""
    course = Path(course).resolve()
    master = course / "gradebook.db"
    if not master.is_file():
        raise FileNotFoundError(f"{master} does not exist: release the course first")
    students, graded = build.students_to_grade(course, out=out)
    saved = gradebook.backup(master)
    print(f"the class gradebook was copied to {saved.relative_to(course)} first", file=out)
    outcomes = []
    for student, names in sorted(students.items()):
        book, result = task_files(course, student)
        outcome = classgrade.Outcome(student, names)
        if not result.is_file() or not book.is_file():
            outcome.status = "failed"
            outcome.why = "its array task left no result (see that task's Slurm output)"
        else:
            record = json.loads(result.read_text())
            outcome.status, outcome.why = record["status"], record["why"]
            outcome.seconds = float(record["seconds"])
            try:
                if outcome.status == "ok":
                    blank = blanks.unanswered(course, student, names)
                    gradebook.merge(master, book, student, names, blank)
            except (gradebook.ResultRefused, sqlite3.Error) as exc:
                outcome.status, outcome.why = "failed", f"merge: {exc}"
        outcomes.append(outcome)
    classgrade.attach_scores(course, outcomes)
    classgrade.write_summary(course / "class-grading.csv", outcomes, graded, course)
    failed = [o for o in outcomes if o.status != "ok"]
    print(
        f"merged {len(outcomes) - len(failed)} of {len(outcomes)} submission(s) into "
        f"{master.name}; per-student scores in {course.name}/class-grading.csv",
        file=out,
    )
    classgrade.report_failures(failed, out)
    return 1 if failed else 0
