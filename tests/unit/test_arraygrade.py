"""The Slurm array's merge: per-task gradebooks into the course's gradebook and grades.csv."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from pingpong_lab.grader import arraygrade, build

NAME = "01_pingpong"


def _gradebook(path: Path):
    from nbgrader.api import Gradebook

    return Gradebook("sqlite:///" + str(path))


@pytest.fixture
def course(tmp_path) -> Path:
    """A course with one released assignment (two grade cells) and three submissions."""
    course = tmp_path / "course"
    (course / "source" / NAME).mkdir(parents=True)
    (course / "source" / NAME / f"{NAME}.ipynb").write_text("{}")
    (course / "nbgrader_config.py").write_text("")
    for student in ("ann", "bob", "cid"):
        (course / "submitted" / student / NAME).mkdir(parents=True)
    with _gradebook(course / "gradebook.db") as gb:
        gb.add_assignment(NAME)
        gb.add_notebook(NAME, NAME)
        gb.add_grade_cell("part_a", NAME, NAME, max_score=2, cell_type="code")
        gb.add_grade_cell("part_b", NAME, NAME, max_score=3, cell_type="code")
    return course


def _grade_task(course: Path, student: str, scores: dict, status="ok") -> None:
    """What an array task leaves: its own gradebook with the student's scores, and a result."""
    gradebook, result = arraygrade.task_files(course, student)
    arraygrade.copy_gradebook(course / "gradebook.db", gradebook)
    with _gradebook(gradebook) as gb:
        gb.update_or_create_student(student)  # a regrade's copy has the student already
        if any(sub.student.id == student for sub in gb.find_assignment(NAME).submissions):
            gb.remove_submission(NAME, student)  # graded anew: new ids, as after a resubmission
        gb.add_submission(NAME, student)
        for cell, score in scores.items():
            grade = gb.find_grade(cell, NAME, NAME, student)
            grade.auto_score = score
        gb.db.commit()
    result.write_text(json.dumps({"student": student, "status": status, "seconds": 4.0, "why": ""}))


def test_two_task_gradebooks_merge_into_the_course_gradebook_and_grades_csv(course):
    _grade_task(course, "ann", {"part_a": 2, "part_b": 1})
    _grade_task(course, "bob", {"part_a": 0, "part_b": 3})
    assert arraygrade.merge(course) == 1  # cid's task left nothing: a failure, reported
    assert build.scores(course) == [(NAME, "ann", 3.0, 5.0), (NAME, "bob", 3.0, 5.0)]
    with _gradebook(course / "gradebook.db") as gb:
        assert gb.find_grade("part_b", NAME, NAME, "bob").score == 3.0
        assert gb.find_grade("part_a", NAME, NAME, "bob").score == 0.0
    rows = {r["student"]: r for r in csv.DictReader((course / "grades.csv").open())}
    assert rows["ann"]["status"] == "ok" and rows["ann"][NAME] == "3.0"
    assert rows["ann"]["max_total"] == "5.0" and rows["bob"]["total"] == "3.0"
    assert rows["cid"]["status"] == "failed" and "left no result" in rows["cid"]["note"]


def test_merging_again_after_a_regrade_replaces_the_old_scores(course):
    _grade_task(course, "ann", {"part_a": 1, "part_b": 1})
    arraygrade.merge(course)
    _grade_task(course, "ann", {"part_a": 2, "part_b": 3})
    arraygrade.merge(course)
    assert build.scores(course) == [(NAME, "ann", 5.0, 5.0)]
    with _gradebook(course / "gradebook.db") as gb:
        assert len(gb.find_student("ann").submissions) == 1


def test_a_gradebook_from_another_release_is_refused_and_the_master_is_unchanged(course):
    other = course.parent / "other"
    shutil.copytree(course, other)
    (other / "gradebook.db").unlink()
    with _gradebook(other / "gradebook.db") as gb:  # the same names, new ids
        gb.add_assignment(NAME)
        gb.add_notebook(NAME, NAME)
        gb.add_grade_cell("part_a", NAME, NAME, max_score=2, cell_type="code")
        gb.add_grade_cell("part_b", NAME, NAME, max_score=3, cell_type="code")
    _grade_task(other, "ann", {"part_a": 2, "part_b": 3})
    gradebook, _ = arraygrade.task_files(other, "ann")
    with pytest.raises(arraygrade.MergeError, match="another release"):
        arraygrade.merge_gradebook(course / "gradebook.db", gradebook, "ann")
    assert build.scores(course) == []


def test_a_task_index_past_the_class_says_how_many_tasks_there_are(course):
    with pytest.raises(IndexError, match=r"3 submission\(s\), tasks 0..2"):
        arraygrade.run_task(course, 3)
