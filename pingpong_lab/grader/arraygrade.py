"""Grade a class as a Slurm job array: one array task per submission, then one merge.

    python -m pingpong_lab.grader.arraygrade count --course course       # how many tasks
    python -m pingpong_lab.grader.arraygrade task 3 --course course      # array task 3
    python -m pingpong_lab.grader.arraygrade merge --course course       # after all tasks

slurm/grade-class.sh submits the tasks (slurm/grade-task.sbatch, `--array=0-<count-1>`) and the
merge (slurm/grade-merge.sbatch) as a job that depends on them.

Why per-task gradebooks: SQLite's locking is unreliable on cluster file systems (NFS, Lustre),
so many nodes writing course/gradebook.db at once can corrupt it or lose scores. Each task
instead copies the released gradebook (the assignments and their cells) to
course/gradebooks/<student>.db, grades its student there with classgrade.grade_one, and writes
how it went to course/gradebooks/<student>.json. The merge, a single process, copies each
student's rows into course/gradebook.db in one transaction per student (a regraded student's
old rows are replaced) and writes course/grades.csv with classgrade's summary writer. A task
that died without a result shows as failed in grades.csv, with the reason.

Task i grades the i-th student of course/submitted/ in sorted order, so the tasks and the merge
agree without a list being passed around; do not add submissions between submit and merge.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from pathlib import Path

from . import build, classgrade

FOLDER = "gradebooks"

# a student's grades (and, alike, comments) in the attached task gradebook `task`
_OF_STUDENT = (
    "WHERE notebook_id IN (SELECT n.id FROM task.submitted_notebook n JOIN "
    "task.submitted_assignment a ON n.assignment_id = a.id WHERE a.student_id = :s)"
)
GRADE_ROWS = "SELECT * FROM task.grade " + _OF_STUDENT

# The rows of one student, table by table, in an order that respects the foreign keys; each
# query selects them from the attached task gradebook `task`.
STUDENT_ROWS = (
    ("student", "SELECT * FROM task.student WHERE id = :s"),
    ("submitted_assignment", "SELECT * FROM task.submitted_assignment WHERE student_id = :s"),
    (
        "submitted_notebook",
        "SELECT * FROM task.submitted_notebook WHERE assignment_id IN "
        "(SELECT id FROM task.submitted_assignment WHERE student_id = :s)",
    ),
    ("grade", GRADE_ROWS),
    ("comment", "SELECT * FROM task.comment " + _OF_STUDENT),
)


class MergeError(RuntimeError):
    """A task gradebook cannot be merged (graded against another release, say)."""


def task_files(course: Path, student: str) -> tuple[Path, Path]:
    """(gradebook, outcome JSON) of the array task that grades `student`."""
    folder = Path(course) / FOLDER
    return folder / f"{student}.db", folder / f"{student}.json"


def todo(course: Path) -> list[tuple[str, list[str]]]:
    """[(student, [assignment, ...])] in task order (sorted by student)."""
    students, _ = build.students_to_grade(course, out=sys.stderr)
    return sorted(students.items())


def copy_gradebook(source: Path, target: Path) -> None:
    """A consistent copy of an SQLite gradebook (sqlite3's backup), written whole or not at all."""
    if not source.is_file():
        raise FileNotFoundError(
            f"{source} does not exist: release the course first (`make release` or "
            "`nbgrader generate_assignment`), which records the assignments there"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".db.tmp")
    tmp.unlink(missing_ok=True)
    with sqlite3.connect(source) as src, sqlite3.connect(tmp) as dst:
        src.backup(dst)
    src.close()
    dst.close()
    tmp.replace(target)


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
    gradebook, result = task_files(course, student)
    result.unlink(missing_ok=True)
    copy_gradebook(course / "gradebook.db", gradebook)
    problem = classgrade.sandbox_problem()
    isolation = "in a sandbox" if problem is None else f"not isolated: {problem}"
    print(f"grading {student} ({', '.join(names)}), {isolation}", flush=True)
    outcome = classgrade.grade_one(
        course, student, names, timeout, isolate=problem is None, gradebook=gradebook
    )
    record = {
        "student": student,
        "assignments": names,
        "status": outcome.status,
        "seconds": outcome.seconds,
        "why": outcome.why,
    }
    tmp = result.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(result)
    print(f"{student}: {outcome.status} in {outcome.seconds:.0f} s {outcome.why}".rstrip())
    return 0 if outcome.status == "ok" else 1


def merge_gradebook(master: Path, task: Path, student: str) -> None:
    """Copy `student`'s rows from a task gradebook into the master, replacing older ones."""
    db = sqlite3.connect(master, timeout=120, isolation_level=None)
    try:
        db.execute("ATTACH DATABASE ? AS task", (str(task),))
        db.execute("BEGIN IMMEDIATE")
        strangers = db.execute(
            "SELECT a.name FROM task.submitted_assignment s JOIN task.assignment a "
            "ON s.assignment_id = a.id WHERE s.student_id = :s AND NOT EXISTS "
            "(SELECT 1 FROM main.assignment m WHERE m.id = a.id)",
            {"s": student},
        ).fetchall()
        unknown_cells = db.execute(
            "SELECT COUNT(*) FROM (" + GRADE_ROWS + ") g "
            "WHERE g.cell_id NOT IN (SELECT id FROM main.base_cell)",
            {"s": student},
        ).fetchone()[0]
        if strangers or unknown_cells:
            what = ", ".join(name for (name,) in strangers) or f"{unknown_cells} graded cell(s)"
            raise MergeError(
                f"{task.name}: {what} not in {master.name}; it was graded against another "
                "release of the course (release again and regrade that student)"
            )
        # the student's older submissions of these assignments go, with their grades
        mine = (
            "SELECT id FROM main.submitted_assignment WHERE student_id = :s AND assignment_id "
            "IN (SELECT assignment_id FROM task.submitted_assignment WHERE student_id = :s)"
        )
        notebooks = f"SELECT id FROM main.submitted_notebook WHERE assignment_id IN ({mine})"
        old = {"s": student}
        for table in ("grade", "comment"):
            db.execute(f"DELETE FROM main.{table} WHERE notebook_id IN ({notebooks})", old)
        db.execute(f"DELETE FROM main.submitted_notebook WHERE id IN ({notebooks})", old)
        db.execute(f"DELETE FROM main.submitted_assignment WHERE id IN ({mine})", old)
        for table, rows in STUDENT_ROWS:
            db.execute(f"INSERT OR REPLACE INTO main.{table} {rows}", {"s": student})
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    finally:
        db.close()


def merge(course: Path, out=sys.stdout) -> int:
    """Merge every task gradebook into course/gradebook.db; write course/grades.csv.

    0 when every submission was graded and merged, 1 otherwise (grades.csv says which)."""
    course = Path(course).resolve()
    master = course / "gradebook.db"
    if not master.is_file():
        raise FileNotFoundError(f"{master} does not exist: release the course first")
    students, graded = build.students_to_grade(course, out=out)
    outcomes = []
    for student, names in sorted(students.items()):
        gradebook, result = task_files(course, student)
        outcome = classgrade.Outcome(student, names)
        if not result.is_file() or not gradebook.is_file():
            outcome.status = "failed"
            outcome.why = "its array task left no result (see that task's Slurm output)"
        else:
            record = json.loads(result.read_text())
            outcome.status, outcome.why = record["status"], record["why"]
            outcome.seconds = float(record["seconds"])
            try:
                merge_gradebook(master, gradebook, student)
            except (MergeError, sqlite3.Error) as exc:
                outcome.status, outcome.why = "failed", f"merge: {exc}"
        outcomes.append(outcome)
    classgrade.attach_scores(course, outcomes)
    classgrade.write_summary(course / "grades.csv", outcomes, graded)
    failed = [o for o in outcomes if o.status != "ok"]
    print(
        f"merged {len(outcomes) - len(failed)} of {len(outcomes)} submission(s) into "
        f"{master.name}; per-student scores in {course.name}/grades.csv",
        file=out,
    )
    for o in failed:
        print(f"  {o.student}: {o.status} ({o.why})", file=out)
    return 1 if failed else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pingpong_lab.grader.arraygrade", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("command", choices=("count", "task", "merge"))
    parser.add_argument("index", nargs="?", type=int, help="task: the array index")
    parser.add_argument("--course", default=".", help="the course directory (default: .)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=classgrade.SUBMISSION_TIMEOUT_S,
        help="task: seconds for one submission",
    )
    args = parser.parse_args(argv)
    course = Path(args.course).resolve()
    if not (course / "nbgrader_config.py").is_file():
        parser.error(f"{course} has no nbgrader_config.py: run from course/ or pass --course")
    # nbgrader runs `alembic` from PATH: this Python's environment first
    bin_dir = os.path.dirname(sys.executable)
    os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    try:
        if args.command == "count":
            print(len(todo(course)))
            return 0
        if args.command == "task":
            if args.index is None:
                index = os.environ.get("SLURM_ARRAY_TASK_ID")
                if index is None:
                    parser.error("task needs an index (or $SLURM_ARRAY_TASK_ID)")
                args.index = int(index)
            return run_task(course, args.index, args.timeout)
        return merge(course)
    except (IndexError, FileNotFoundError) as exc:
        print(f"arraygrade: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
