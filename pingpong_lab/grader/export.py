"""Grades out of the gradebook: ``nbgrader export`` with this course's plugin.

    cd course && nbgrader export                     # writes grades-export.csv
    cd course && nbgrader export --to marks.csv      # or another file

course/nbgrader_config.py makes ClassExport nbgrader's exporter. It writes one CSV row per
student, assignment and notebook (every student of the gradebook, every assignment, also what
was not submitted), with:

    student_id, last_name, first_name, email, assignment, notebook, timestamp,
    autograded_points, manual_points, max_points, late_penalty, total, status

autograded_points sums the scores the autograder gave (cells no one graded by hand),
manual_points the scores given in Formgrader (with their extra credit), total is their sum less
the late penalty (never below 0). status is:

- "graded": every graded cell of the notebook has a score and none waits for a person;
- "needs manual grading": some cell still needs a score by hand (Formgrader);
- "missing": the student submitted nothing for this assignment;
- "failed": a submission with no score at all (grading did not get through it).

Nbgrader's `--student` and `--assignment` lists restrict the rows. The file is written whole
or not at all (runtime.atomic_write).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from nbgrader.api import MissingEntry
from nbgrader.plugins import ExportPlugin

from .. import runtime

DEFAULT_FILE = "grades-export.csv"
COLUMNS = [
    "student_id",
    "last_name",
    "first_name",
    "email",
    "assignment",
    "notebook",
    "timestamp",
    "autograded_points",
    "manual_points",
    "max_points",
    "late_penalty",
    "total",
    "status",
]
GRADED, MANUAL, MISSING, FAILED = "graded", "needs manual grading", "missing", "failed"


def points(grades) -> tuple[float, float]:
    """(autograded points, points given by hand) of a submitted notebook's grades."""
    auto = manual = 0.0
    for grade in grades:
        if grade.manual_score is not None:
            manual += grade.manual_score + (grade.extra_credit or 0.0)
        elif grade.auto_score is not None:
            auto += grade.auto_score + (grade.extra_credit or 0.0)
    return auto, manual


def status(grades) -> str:
    """graded, needs manual grading or failed (see the module's docstring)."""
    scored = [g.manual_score is not None or g.auto_score is not None for g in grades]
    if not any(scored):
        return FAILED
    if not all(scored) or any(g.needs_manual_grade for g in grades):
        return MANUAL
    return GRADED


def _round(x: float) -> str:
    return f"{x:g}"


def notebook_row(submitted) -> dict:
    """The points and status of one submitted notebook."""
    grades = list(submitted.grades)
    auto, manual = points(grades)
    penalty = submitted.late_submission_penalty or 0.0
    return {
        "notebook": submitted.name,
        "autograded_points": _round(auto),
        "manual_points": _round(manual),
        "max_points": _round(submitted.max_score),
        "late_penalty": _round(penalty),
        "total": _round(max(0.0, auto + manual - penalty)),
        "status": status(grades),
    }


def missing_rows(assignment) -> list[dict]:
    return [
        {
            "notebook": nb.name,
            "autograded_points": "0",
            "manual_points": "0",
            "max_points": _round(nb.max_score),
            "late_penalty": "0",
            "total": "0",
            "status": MISSING,
        }  # fmt: skip
        for nb in assignment.notebooks
    ] or [{"notebook": "", "max_points": "0", "total": "0", "status": MISSING}]


def rows(gradebook, students=(), assignments=()) -> list[dict]:
    """Every (student, assignment, notebook) row, students and assignments sorted."""
    out = []
    for assignment in sorted(gradebook.assignments, key=lambda a: a.name):
        if assignments and assignment.name not in assignments:
            continue
        for student in sorted(gradebook.students, key=lambda s: s.id):
            if students and student.id not in students:
                continue
            who = {"student_id": student.id, "last_name": student.last_name or "",
                   "first_name": student.first_name or "", "email": student.email or "",
                   "assignment": assignment.name}  # fmt: skip
            try:
                submission = gradebook.find_submission(assignment.name, student.id)
            except MissingEntry:
                out += [{**who, "timestamp": "", **r} for r in missing_rows(assignment)]
                continue
            when = str(submission.timestamp or "")
            for nb in sorted(submission.notebooks, key=lambda n: n.name):
                out.append({**who, "timestamp": when, **notebook_row(nb)})
    return out


def csv_text(table: list[dict]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    return buf.getvalue()


class ClassExport(ExportPlugin):
    """nbgrader's exporter for this course: points per notebook and a status per row."""

    def export(self, gradebook) -> None:
        dest = Path(self.to or DEFAULT_FILE)
        students = [str(s) for s in self.student]
        assignments = [str(a) for a in self.assignment]
        table = rows(gradebook, students, assignments)
        runtime.atomic_write(dest, csv_text(table))
        counts = {}
        for row in table:
            counts[row["status"]] = counts.get(row["status"], 0) + 1
        summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no rows"
        self.log.info("Exported %d row(s) to %s: %s", len(table), dest, summary)
