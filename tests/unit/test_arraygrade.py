"""The Slurm array's merge: per-task gradebooks into the course gradebook and class-grading.csv."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from pingpong_lab.grader import arraygrade, gradebook

from .gradebooks import NAME, array_task, make_course, open_gradebook


@pytest.fixture
def course(tmp_path) -> Path:
    return make_course(tmp_path)


def test_two_task_gradebooks_merge_into_the_course_gradebook_and_class_grading_csv(course):
    array_task(course, "ann", {"part_a": 2, "part_b": 1})
    array_task(course, "bob", {"part_a": 0, "part_b": 3})
    assert arraygrade.merge(course) == 1  # cid's task left nothing: a failure, reported
    assert gradebook.scores(course) == [(NAME, "ann", 3.0, 10.0), (NAME, "bob", 3.0, 10.0)]
    with open_gradebook(course / "gradebook.db") as gb:
        assert gb.find_grade("part_b", NAME, NAME, "bob").score == 3.0
        assert gb.find_grade("part_a", NAME, NAME, "bob").score == 0.0
    rows = {r["student"]: r for r in csv.DictReader((course / "class-grading.csv").open())}
    assert rows["ann"]["grading"] == "ok" and rows["ann"][NAME] == "3.0"
    assert rows["ann"]["max_total"] == "10" and rows["bob"]["total"] == "3"  # as the export
    assert rows["cid"]["grading"] == rows["cid"]["status"] == "failed"
    assert "left no result" in rows["cid"]["note"]


def test_merging_again_after_a_regrade_replaces_the_old_scores(course):
    array_task(course, "ann", {"part_a": 1, "part_b": 1})
    arraygrade.merge(course)
    array_task(course, "ann", {"part_a": 2, "part_b": 3})
    arraygrade.merge(course)
    assert gradebook.scores(course) == [(NAME, "ann", 5.0, 10.0)]
    with open_gradebook(course / "gradebook.db") as gb:
        assert len(gb.find_student("ann").submissions) == 1


def test_a_gradebook_from_another_release_is_refused_and_the_master_is_unchanged(course):
    other = make_course(course.parent / "other", new_release=True)  # the same names, new ids
    array_task(other, "ann", {"part_a": 2, "part_b": 3})
    book, _ = arraygrade.task_files(other, "ann")
    with pytest.raises(gradebook.ResultRefused, match="another release"):
        gradebook.merge(course / "gradebook.db", book, "ann", [NAME])
    assert gradebook.scores(course) == []


def test_the_merge_copies_the_class_gradebook_aside_first(course):
    array_task(course, "ann", {"part_a": 2, "part_b": 3})
    arraygrade.merge(course)
    (saved,) = (course / gradebook.BACKUPS).glob("gradebook-*.db")
    with open_gradebook(saved) as gb:
        assert gb.find_assignment(NAME).num_submissions == 0  # as it was before the merge


def test_a_task_index_past_the_class_says_how_many_tasks_there_are(course):
    with pytest.raises(IndexError, match=r"3 submission\(s\), tasks 0..2"):
        arraygrade.run_task(course, 3)
