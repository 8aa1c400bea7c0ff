"""The class gradebook and the per-submission gradebooks merged into it.

No submission is ever graded in the class gradebook (course/gradebook.db). Each is graded into
a gradebook of its own, made by `for_one_student`: a copy of the class gradebook's assignments,
notebooks and cells with no student in it, in the submission's sandbox. What that gradebook
holds afterwards is read here as data, in the instructor's process, and checked before any of
it reaches the class gradebook (`check_result`): one student, the one expected; only the
assignments this run graded; only notebooks and cells the class gradebook defines for them;
every score a number within 0 .. the cell's maximum, taken from the class gradebook; every
graded cell scored once. Then `merge` replaces that student's rows for those assignments in one
transaction, keeping what an instructor entered by hand (manual scores, extra credit,
comments), which a grading run never changes. `make autograde` and the Slurm array's merge
both go through `merge`.

`backup` copies the class gradebook aside (course/gradebook-backups/, timestamped) before
any grading run writes it.
"""

from __future__ import annotations

import math
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

BACKUPS = "gradebook-backups"
BLANK_COMMENT = "No answer was written: 0 points, given automatically."

# the tables that hold a student's data, children first (the order rows are deleted in)
STUDENT_TABLES = ("grade", "comment", "submitted_notebook", "submitted_assignment", "student")


class ResultRefused(RuntimeError):
    """A submission's gradebook holds something its grading run cannot have written."""


def copy(source: Path, target: Path) -> None:
    """A consistent copy of an SQLite file (sqlite3's backup), written whole or not at all."""
    source, target = Path(source), Path(target)
    if not source.is_file():
        raise FileNotFoundError(
            f"{source} does not exist: release the course first (`make release` or "
            "`nbgrader generate_assignment`), which records the assignments there"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.unlink(missing_ok=True)
    src, dst = sqlite3.connect(source, timeout=120), sqlite3.connect(tmp)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    tmp.replace(target)


def backup(master: Path) -> Path:
    """Copy the class gradebook to gradebook-backups/gradebook-<UTC time>.db beside it."""
    master = Path(master)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    folder = master.parent / BACKUPS
    target = folder / f"{master.stem}-{stamp}.db"
    n = 1
    while target.exists():  # two runs in one second keep both copies
        target = folder / f"{master.stem}-{stamp}-{n}.db"
        n += 1
    copy(master, target)
    return target


def for_one_student(master: Path, target: Path) -> None:
    """A gradebook to grade one submission in: the class gradebook's course, assignments,
    notebooks and cells, and no student data at all (the file is rebuilt, so no deleted row
    of another student survives in its free pages)."""
    copy(master, target)
    db = sqlite3.connect(target, isolation_level=None)
    try:
        for table in STUDENT_TABLES:
            db.execute(f"DELETE FROM {table}")
        db.execute("VACUUM")
    finally:
        db.close()


@dataclass(frozen=True)
class Cell:
    """A graded (or task) cell as the class gradebook defines it."""

    id: str
    name: str
    notebook: str
    max_score: float
    by_hand: bool  # a task, or an answer graded by a person: autograde gives it no points


def _definitions(db: sqlite3.Connection, prefix: str, names: list[str]):
    """{assignment name: (assignment id, {notebook id: (name, {cell id: Cell})})} for names."""
    out: dict[str, tuple[str, dict]] = {}
    for aid, aname in db.execute(f"SELECT id, name FROM {prefix}assignment"):
        if aname in names:
            out[aname] = (aid, {})
    for nid, nname, aid in db.execute(f"SELECT id, name, assignment_id FROM {prefix}notebook"):
        for _, (found, notebooks) in out.items():
            if found == aid:
                notebooks[nid] = (nname, {})
    # a grade cell that is also a solution cell (the same name) is an answer graded by hand
    cells = (
        f"SELECT b.id, b.name, b.notebook_id, g.max_score, g.task OR EXISTS (SELECT 1 FROM "
        f"{prefix}base_cell s JOIN {prefix}solution_cells sc ON sc.id = s.id WHERE "
        f"s.name = b.name AND s.notebook_id = b.notebook_id) FROM {prefix}base_cell b JOIN "
        f"(SELECT id, max_score, 0 AS task FROM {prefix}grade_cells UNION ALL "
        f"SELECT id, max_score, 1 AS task FROM {prefix}task_cells) g ON g.id = b.id"
    )
    by_notebook = {nid: nb for _, notebooks in out.values() for nid, nb in notebooks.items()}
    for cid, cname, nid, max_score, by_hand in db.execute(cells):
        if nid in by_notebook:
            name = by_notebook[nid][0]
            by_notebook[nid][1][cid] = Cell(cid, cname, name, float(max_score), bool(by_hand))
    return out


def _rows(db: sqlite3.Connection, table: str) -> list[dict]:
    cursor = db.execute(f"SELECT * FROM result.{table}")
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row)) for row in cursor]


def _open(master: Path, result: Path) -> sqlite3.Connection:
    """The class gradebook, with a submission's gradebook attached read-only as `result`."""
    db = sqlite3.connect(master, timeout=120, isolation_level=None)
    db.execute("PRAGMA trusted_schema = OFF")  # the result's schema may have been rewritten
    uri = Path(result).resolve().as_uri() + "?mode=ro"
    db.execute("ATTACH DATABASE ? AS result", (uri,))
    return db


def check_result(master: Path, result: Path, student: str, assignments: list[str]) -> dict:
    """The rows of `student` in a submission's gradebook, checked against the class gradebook.

    Returns {"submissions", "notebooks", "grades", "comments"} (lists of row dicts) or raises
    ResultRefused saying what is wrong. A gradebook nbgrader wrote for this run passes."""
    if not Path(result).is_file():
        raise ResultRefused("grading left no gradebook")
    try:
        db = sqlite3.connect(f"{Path(result).resolve().as_uri()}?mode=ro", uri=True)
        ok = db.execute("PRAGMA integrity_check").fetchone()[0]
        db.close()
    except sqlite3.Error as exc:
        raise ResultRefused(f"its gradebook cannot be read ({exc})") from exc
    if ok != "ok":
        raise ResultRefused(f"its gradebook is damaged ({ok})")
    db = _open(master, result)
    try:
        return _checked_rows(db, student, assignments)
    except sqlite3.Error as exc:
        raise ResultRefused(f"its gradebook does not have the course's tables ({exc})") from exc
    finally:
        db.close()


def _checked_rows(db, student: str, assignments: list[str]) -> dict:
    defined = _definitions(db, "main.", assignments)
    missing = sorted(set(assignments) - set(defined))
    if missing:
        raise ResultRefused(f"{', '.join(missing)} not in the class gradebook: release first")
    students = [r["id"] for r in _rows(db, "student")]
    if not students:
        raise ResultRefused("no scores recorded: the grading recorded no submission")
    if students != [student]:
        raise ResultRefused(f"it holds students {sorted(students)}, expected only {student!r}")
    by_id = {aid: name for name, (aid, _) in defined.items()}
    submissions = _rows(db, "submitted_assignment")
    for row in submissions:
        if row["student_id"] != student:
            raise ResultRefused(f"a submission of another student, {row['student_id']!r}")
        if row["assignment_id"] not in by_id:
            raise ResultRefused(
                "a submission of an assignment the class gradebook does not define: graded "
                "against another release of the course? (release again and regrade)"
            )
    got = sorted(by_id[r["assignment_id"]] for r in submissions)
    if got != sorted(assignments):
        lost = sorted(set(assignments) - set(got))
        raise ResultRefused(f"no scores recorded for {', '.join(lost) or 'a duplicate'}")
    sub_ids = {r["id"]: by_id[r["assignment_id"]] for r in submissions}
    notebooks = _rows(db, "submitted_notebook")
    cells: dict[str, dict[str, Cell]] = {}  # submitted notebook id -> its cells
    for row in notebooks:
        name = sub_ids.get(row["assignment_id"])
        defs = defined[name][1] if name else {}
        if row["notebook_id"] not in defs:
            raise ResultRefused(f"a notebook this course does not define: {row}")
        cells[row["id"]] = defs[row["notebook_id"]][1]
        penalty = row.get("late_submission_penalty")
        if penalty is not None and not (_finite(penalty) and penalty >= 0):
            raise ResultRefused(f"a late-submission penalty of {penalty!r}")
    expected = {nid for _, notebooks_ in defined.values() for nid in notebooks_}
    if {r["notebook_id"] for r in notebooks} != expected:
        raise ResultRefused("notebooks missing from the graded submission")
    grades = _rows(db, "grade")
    seen, cell_of = set(), {}
    for row in grades:
        cell = cells.get(row["notebook_id"], {}).get(row["cell_id"])
        if cell is None or (row["notebook_id"], row["cell_id"]) in seen:
            raise ResultRefused(f"a score for a cell this run did not grade: {row}")
        seen.add((row["notebook_id"], row["cell_id"]))
        cell_of[row["notebook_id"], row["cell_id"]] = cell
        value = row["auto_score"]  # the only score a grading run gives (merge keeps the rest)
        top = 0.0 if cell.by_hand else cell.max_score
        if value is not None and not (_finite(value) and 0 <= value <= top):
            raise ResultRefused(
                f"{cell.notebook} cell {cell.name}: a score of {value!r} is not within "
                f"0 .. {top:g}" + (" (it is graded by hand)" if cell.by_hand else "")
            )
    every = {(nb, cid) for nb, defs in cells.items() for cid in defs}
    if seen != every:
        raise ResultRefused(f"{len(every - seen)} graded cell(s) have no score")
    comments = _rows(db, "comment")
    for row in comments:
        if row["notebook_id"] not in cells:
            raise ResultRefused(f"a comment on a notebook this run did not grade: {row}")
    return {"submissions": submissions, "notebooks": notebooks, "grades": grades,
            "comments": comments, "cells": cell_of}  # fmt: skip


def _finite(value) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def merge(
    master: Path, result: Path, student: str, assignments: list[str], blank=frozenset()
) -> None:
    """Replace `student`'s rows for `assignments` in the class gradebook by the checked rows of
    their own gradebook, in one transaction. What an instructor entered by hand (manual score,
    extra credit, manual comment) is kept, cell by cell; the student's other assignments and
    every other student are not touched. Raises ResultRefused (nothing written) when the
    result does not pass `check_result`.

    No one is asked to grade what needs no person: a hand-graded cell worth 0 points (a rubric
    shown to the grader) and the answers in `blank` ((notebook, cell name) pairs the student
    left blank, blanks.unanswered) score 0 and wait for no one, until an instructor gives
    them a score of their own."""
    rows = check_result(master, result, student, assignments)
    blank = set(blank)
    db = _open(master, result)
    try:
        db.execute("BEGIN IMMEDIATE")
        kept = _hand_grading(db, student, assignments)
        _delete_student(db, student, assignments)
        if db.execute("SELECT 1 FROM main.student WHERE id = ?", (student,)).fetchone() is None:
            db.execute("INSERT INTO main.student (id) VALUES (?)", (student,))
        for r in rows["submissions"]:
            db.execute(
                "INSERT INTO main.submitted_assignment (id, assignment_id, student_id, "
                "timestamp, extension) VALUES (?, ?, ?, ?, NULL)",
                (r["id"], r["assignment_id"], student, r["timestamp"]),
            )
        for r in rows["notebooks"]:
            db.execute(
                "INSERT INTO main.submitted_notebook (id, assignment_id, notebook_id, flagged, "
                "late_submission_penalty) VALUES (?, ?, ?, ?, ?)",
                (r["id"], r["assignment_id"], r["notebook_id"], 0, r["late_submission_penalty"]),
            )
        keys = _cell_keys(db, rows["notebooks"])
        left_blank = set()
        for r in rows["grades"]:
            manual, extra = kept["grade"].get(keys[r["notebook_id"], r["cell_id"]], (None, None))
            needs = bool(r["needs_manual_grade"]) and manual is None
            auto, cell = r["auto_score"], rows["cells"][r["notebook_id"], r["cell_id"]]
            if needs and cell.by_hand and (cell.notebook, cell.name) in blank:
                auto, needs = 0.0, False
                left_blank.add(keys[r["notebook_id"], r["cell_id"]])  # its comment: same name
            elif needs and cell.by_hand and cell.max_score == 0:
                auto, needs = 0.0, False  # a rubric: nothing to score
            db.execute(
                "INSERT INTO main.grade (id, notebook_id, cell_id, auto_score, manual_score, "
                "extra_credit, needs_manual_grade) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (r["id"], r["notebook_id"], r["cell_id"], auto, manual, extra, needs),
            )
        for r in rows["comments"]:
            manual = kept["comment"].get(keys.get((r["notebook_id"], r["cell_id"])))
            said = r["auto_comment"]
            if keys.get((r["notebook_id"], r["cell_id"])) in left_blank and not said:
                said = BLANK_COMMENT
            db.execute(
                "INSERT INTO main.comment (id, notebook_id, cell_id, auto_comment, "
                "manual_comment) VALUES (?, ?, ?, ?, ?)",
                (r["id"], r["notebook_id"], r["cell_id"], said, manual),
            )
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    finally:
        db.close()


_NOTEBOOKS_OF = (
    "SELECT n.id FROM main.submitted_notebook n JOIN main.submitted_assignment s "
    "ON n.assignment_id = s.id JOIN main.assignment a ON s.assignment_id = a.id "
    "WHERE s.student_id = ? AND a.name IN ({})"
)


def _cell_keys(db, notebooks: list[dict]) -> dict:
    """(submitted notebook id, cell id) -> (notebook id, cell name): a cell's identity across
    regrades (a regrade gives the submitted notebook a new id)."""
    keys = {}
    for r in notebooks:
        for cid, name in db.execute(
            "SELECT id, name FROM main.base_cell WHERE notebook_id = ?", (r["notebook_id"],)
        ):
            keys[r["id"], cid] = (r["notebook_id"], name)
    return keys


def _hand_grading(db, student: str, assignments: list[str]) -> dict:
    """What an instructor entered for this student's cells: {"grade": {(notebook id, cell
    name): (manual score, extra credit)}, "comment": {(notebook id, cell name): text}}."""
    marks = ",".join("?" * len(assignments))
    ids = _NOTEBOOKS_OF.format(marks)
    kept: dict = {"grade": {}, "comment": {}}
    query = (
        "SELECT n.notebook_id, b.name, t.{cols} FROM main.{table} t "
        "JOIN main.submitted_notebook n ON t.notebook_id = n.id "
        f"JOIN main.base_cell b ON t.cell_id = b.id WHERE t.notebook_id IN ({ids})"
    )
    args = (student, *assignments)
    grades = query.format(cols="manual_score, t.extra_credit", table="grade")
    for nid, name, manual, extra in db.execute(grades, args):
        if manual is not None or extra is not None:
            kept["grade"][nid, name] = (manual, extra)
    for nid, name, text in db.execute(query.format(cols="manual_comment", table="comment"), args):
        if text:
            kept["comment"][nid, name] = text
    return kept


def _delete_student(db, student: str, assignments: list[str]) -> None:
    marks = ",".join("?" * len(assignments))
    ids = _NOTEBOOKS_OF.format(marks)
    args = (student, *assignments)
    for table in ("grade", "comment"):
        db.execute(f"DELETE FROM main.{table} WHERE notebook_id IN ({ids})", args)
    subs = (
        "SELECT s.id FROM main.submitted_assignment s JOIN main.assignment a "
        "ON s.assignment_id = a.id WHERE s.student_id = ? AND a.name IN (" + marks + ")"
    )
    db.execute(f"DELETE FROM main.submitted_notebook WHERE assignment_id IN ({subs})", args)
    db.execute(f"DELETE FROM main.submitted_assignment WHERE id IN ({subs})", args)


def scores(course: Path, gradebook: Path | None = None) -> list[tuple[str, str, float, float]]:
    """(assignment, student, score, max_score) of every graded submission in the gradebook
    (the course's own by default)."""
    from nbgrader.api import Gradebook

    path = Path(gradebook) if gradebook is not None else Path(course) / "gradebook.db"
    out = []
    with Gradebook("sqlite:///" + str(path)) as gb:
        for assignment in gb.assignments:
            for sub in assignment.submissions:
                out.append((assignment.name, sub.student.id, sub.score, sub.max_score))
    return sorted(out)
