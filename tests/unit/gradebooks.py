"""Scratch courses and per-submission gradebooks for the merge tests (no nbgrader run)."""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
from pathlib import Path

from pingpong_lab.grader import arraygrade, gradebook

NAME = "01_pingpong"


def open_gradebook(path: Path):
    from nbgrader.api import Gradebook

    return Gradebook("sqlite:///" + str(path))


def make_course(root: Path, students=("ann", "bob", "cid"), new_release: bool = False) -> Path:
    """A course with one released assignment (two grade cells, one task) and submissions; a
    copy of one release, or with `new_release` one of its own (the same names, new ids)."""
    course = root / "course"
    (course / "source" / NAME).mkdir(parents=True)
    (course / "source" / NAME / f"{NAME}.ipynb").write_text("{}")
    (course / "nbgrader_config.py").write_text("")
    for student in students:
        (course / "submitted" / student / NAME).mkdir(parents=True)
    if new_release:
        _release(course / "gradebook.db")
    else:
        shutil.copy(_released_gradebook(), course / "gradebook.db")
    return course


@functools.cache
def _released_gradebook() -> Path:
    """The class gradebook of the released assignment, made once per test run and copied for
    each test (nbgrader takes seconds to create a gradebook's schema)."""
    path = Path(tempfile.mkdtemp(prefix="pingpong-lab-gradebook-")) / "gradebook.db"
    atexit.register(shutil.rmtree, path.parent, True)
    return _release(path)


def _release(path: Path) -> Path:
    with open_gradebook(path) as gb:
        gb.add_assignment(NAME)
        gb.add_notebook(NAME, NAME)
        gb.add_grade_cell("part_a", NAME, NAME, max_score=2, cell_type="code")
        gb.add_grade_cell("part_b", NAME, NAME, max_score=3, cell_type="code")
        gb.add_task_cell("essay", NAME, NAME, max_score=4, cell_type="markdown")
        gb.add_task_cell("rubric", NAME, NAME, max_score=0, cell_type="markdown")  # for graders
        gb.add_grade_cell("answer", NAME, NAME, max_score=1, cell_type="markdown")
        gb.add_solution_cell("answer", NAME, NAME)  # an answer graded by hand
    return path


def graded_result(course: Path, student: str, scores: dict, path: Path) -> Path:
    """What grading one submission leaves: a gradebook of its own (gradebook.for_one_student)
    in which nbgrader recorded `student`'s scores ({cell: auto score})."""
    gradebook.for_one_student(course / "gradebook.db", path)
    with open_gradebook(path) as gb:
        gb.update_or_create_student(student)
        gb.add_submission(NAME, student)
        for cell, score in scores.items():
            grade = gb.find_grade(cell, NAME, NAME, student)
            grade.auto_score = score
        gb.db.commit()
    return path


def array_task(course: Path, student: str, scores: dict, status="ok") -> None:
    """What an array task leaves: its checked gradebook and how it went."""
    book, result = arraygrade.task_files(course, student)
    book.parent.mkdir(parents=True, exist_ok=True)
    graded_result(course, student, scores, book)
    result.write_text(json.dumps({"student": student, "status": status, "seconds": 4.0, "why": ""}))
