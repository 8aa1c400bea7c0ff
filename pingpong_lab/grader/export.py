"""Grades out of the gradebook: ``nbgrader export`` with this course's plugin.

    cd course && nbgrader export                     # writes grades-export.csv
    cd course && nbgrader export --to marks.csv      # or another file

course/nbgrader_config.py makes ClassExport nbgrader's exporter. It writes one CSV row per
student of the gradebook (also those who submitted nothing), with, for every notebook of every
assignment, its points and status, then the student's totals:

    student_id, last_name, first_name, email,
    <notebook> auto, <notebook> manual, <notebook> max, <notebook> status,   (per notebook)
    total, max_total, status

"auto" sums the scores the autograder gave (cells no one graded by hand), "manual" the scores
given in Formgrader (with their extra credit); total is the sum over notebooks less late
penalties (never below 0 for a notebook). A notebook's status is:

- "graded": every graded cell of the notebook has a score and none waits for a person;
- "needs manual grading": some cell still needs a score by hand (Formgrader);
- "missing": the student submitted nothing for this assignment;
- "failed": a submission with no score at all (grading did not get through it).

The student's status is the first of failed, needs manual grading, missing that any notebook
has, else graded.

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
WHO = ["student_id", "last_name", "first_name", "email"]
PER_NOTEBOOK = ["auto", "manual", "max", "status"]
TOTALS = ["total", "max_total", "status"]
GRADED, MANUAL, MISSING, FAILED = "graded", "needs manual grading", "missing", "failed"
WORST_FIRST = (FAILED, MANUAL, MISSING)


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
            "total": "0",
            "status": MISSING,
        }  # fmt: skip
        for nb in assignment.notebooks
    ] or [{"notebook": "", "max_points": "0", "total": "0", "status": MISSING}]


def notebook_rows(gradebook, students=(), assignments=()) -> list[dict]:
    """Every (student, assignment, notebook) with its points and status, sorted."""
    out = []
    for assignment in sorted(gradebook.assignments, key=lambda a: a.name):
        if assignments and assignment.name not in assignments:
            continue
        for student in sorted(gradebook.students, key=lambda s: s.id):
            if students and student.id not in students:
                continue
            who = {"student": student, "assignment": assignment.name}
            try:
                submission = gradebook.find_submission(assignment.name, student.id)
            except MissingEntry:
                out += [{**who, **r} for r in missing_rows(assignment)]
                continue
            for nb in sorted(submission.notebooks, key=lambda n: n.name):
                out.append({**who, **notebook_row(nb)})
    return out


def _label(row: dict) -> str:
    """A notebook's column prefix: its name, with the assignment's when they differ."""
    a, nb = row["assignment"], row["notebook"]
    return nb if nb == a else f"{a}/{nb}" if nb else a


def rows(gradebook, students=(), assignments=()) -> tuple[list[str], list[dict]]:
    """(columns, one row per student): per-notebook points and status, then the totals."""
    per_notebook = notebook_rows(gradebook, students, assignments)
    labels = sorted({_label(r) for r in per_notebook})
    columns = WHO + [f"{label} {k}" for label in labels for k in PER_NOTEBOOK] + TOTALS
    table: dict[str, dict] = {}
    for r in per_notebook:
        s = r["student"]
        row = table.setdefault(s.id, {"student_id": s.id, "last_name": s.last_name or "",
                                      "first_name": s.first_name or "", "email": s.email or "",
                                      "total": 0.0, "max_total": 0.0, "statuses": []})  # fmt: skip
        label = _label(r)
        row[f"{label} auto"] = r.get("autograded_points", "0")
        row[f"{label} manual"] = r.get("manual_points", "0")
        row[f"{label} max"], row[f"{label} status"] = r["max_points"], r["status"]
        row["total"] += float(r["total"])
        row["max_total"] += float(r["max_points"])
        row["statuses"].append(r["status"])
    for row in table.values():
        statuses = row.pop("statuses")
        row["status"] = next((s for s in WORST_FIRST if s in statuses), GRADED)
        row["total"], row["max_total"] = _round(row["total"]), _round(row["max_total"])
    return columns, [table[k] for k in sorted(table)]


def csv_text(columns: list[str], table: list[dict]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    return buf.getvalue()


class ClassExport(ExportPlugin):
    """nbgrader's exporter for this course: points per notebook and a status per row."""

    def export(self, gradebook) -> None:
        dest = Path(self.to or DEFAULT_FILE)
        students = [str(s) for s in self.student]
        assignments = [str(a) for a in self.assignment]
        columns, table = rows(gradebook, students, assignments)
        runtime.atomic_write(dest, csv_text(columns, table))
        counts = {}
        for row in table:
            counts[row["status"]] = counts.get(row["status"], 0) + 1
        summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no rows"
        self.log.info("Exported %d student(s) to %s: %s", len(table), dest, summary)
