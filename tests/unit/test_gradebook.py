"""A submission's own gradebook is data: checked, then merged; never trusted, never shared."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pingpong_lab.grader import gradebook

from .gradebooks import NAME, graded_result, make_course, open_gradebook


@pytest.fixture
def course(tmp_path) -> Path:
    return make_course(tmp_path)


def _merge(course, student, scores, edit=None):
    result = graded_result(course, student, scores, course.parent / f"{student}.db")
    if edit is not None:
        db = sqlite3.connect(result)
        db.executescript(edit)
        db.commit()
        db.close()
    gradebook.merge(course / "gradebook.db", result, student, [NAME])


def _all_rows(course):
    db = sqlite3.connect(course / "gradebook.db")
    rows = {
        t: sorted(map(repr, db.execute(f"SELECT * FROM {t}")))
        for t in ("student", "submitted_assignment", "grade", "assignment", "grade_cells")
    }
    db.close()
    return rows


def test_a_graded_submission_merges_and_leaves_the_other_students_alone(course):
    _merge(course, "bob", {"part_a": 1, "part_b": 1})
    bob = _all_rows(course)
    _merge(course, "ann", {"part_a": 2, "part_b": 3})
    assert gradebook.scores(course) == [(NAME, "ann", 5.0, 10.0), (NAME, "bob", 2.0, 10.0)]
    after = _all_rows(course)
    assert set(bob["grade"]) <= set(after["grade"])  # bob's rows, untouched


def test_the_per_submission_gradebook_holds_no_other_student(course, tmp_path):
    _merge(course, "bob", {"part_a": 1, "part_b": 1})
    own = tmp_path / "own.db"
    gradebook.for_one_student(course / "gradebook.db", own)
    with open_gradebook(own) as gb:
        assert gb.students == [] and [a.name for a in gb.assignments] == [NAME]
    assert b"bob" not in own.read_bytes()  # not even in free pages


REFUSED = {
    "a score above the cell's maximum": ("UPDATE grade SET auto_score = 99", "not within"),
    "a negative score": ("UPDATE grade SET auto_score = -1", "not within"),
    "points for a task graded by hand": (
        "UPDATE grade SET auto_score = 4 WHERE cell_id IN "
        "(SELECT id FROM base_cell WHERE name = 'essay')",
        "graded by hand",
    ),
    "another student's rows": (
        "INSERT INTO student (id) VALUES ('bob'); "
        "UPDATE submitted_assignment SET student_id = 'bob'",
        "students",
    ),
    "a cell left without a score row": (
        "DELETE FROM grade WHERE cell_id IN (SELECT id FROM base_cell WHERE name = 'part_b')",
        "no score",
    ),
    "a score for a cell of no notebook": ("UPDATE grade SET cell_id = 'x' || cell_id", "did not"),
    "no submission at all": (
        "DELETE FROM grade; DELETE FROM comment; DELETE FROM submitted_notebook; "
        "DELETE FROM submitted_assignment",
        "no scores recorded",
    ),
    "a dropped table": ("DROP TABLE grade", "tables"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_gradebook_the_run_cannot_have_written_is_refused_and_changes_nothing(course, case):
    _merge(course, "bob", {"part_a": 1, "part_b": 1})
    before = _all_rows(course)
    edit, why = REFUSED[case]
    with pytest.raises(gradebook.ResultRefused, match=why):
        _merge(course, "ann", {"part_a": 2, "part_b": 3}, edit)
    assert _all_rows(course) == before


@pytest.mark.parametrize("content", [b"", b"not a database at all" * 100])
def test_a_truncated_or_rewritten_gradebook_file_is_refused(course, tmp_path, content):
    book = tmp_path / "ann.db"
    book.write_bytes(content)
    with pytest.raises(gradebook.ResultRefused):
        gradebook.merge(course / "gradebook.db", book, "ann", [NAME])
    with pytest.raises(gradebook.ResultRefused, match="no gradebook"):
        gradebook.merge(course / "gradebook.db", tmp_path / "none.db", "ann", [NAME])
    assert gradebook.scores(course) == []


def test_a_score_that_is_not_a_number_is_refused(course):
    with pytest.raises(gradebook.ResultRefused, match="not within"):
        _merge(course, "ann", {"part_a": 1, "part_b": 3}, "UPDATE grade SET auto_score = 'full'")


def test_what_the_instructor_graded_by_hand_survives_a_regrade(course):
    _merge(course, "ann", {"part_a": 1, "part_b": 1})
    with open_gradebook(course / "gradebook.db") as gb:
        essay = gb.find_grade("essay", NAME, NAME, "ann")
        essay.manual_score, essay.needs_manual_grade = 3.0, False
        gb.db.commit()
    # a regrade, whose own gradebook also claims a manual score: it is not taken
    _merge(course, "ann", {"part_a": 2, "part_b": 3}, "UPDATE grade SET manual_score = 4")
    with open_gradebook(course / "gradebook.db") as gb:
        assert gb.find_grade("essay", NAME, NAME, "ann").score == 3.0
        assert gb.find_grade("part_a", NAME, NAME, "ann").score == 2.0
        assert gb.find_grade("part_b", NAME, NAME, "ann").manual_score is None
        assert len(gb.find_student("ann").submissions) == 1


BY_HAND = (
    "UPDATE grade SET needs_manual_grade = 1 WHERE cell_id IN "
    "(SELECT id FROM base_cell WHERE name IN ('essay', 'answer', 'rubric'))"
)  # what nbgrader's autograde records for written answers and tasks


def test_a_rubric_and_a_blank_answer_wait_for_no_one_and_score_0(course):
    result = graded_result(course, "ann", {"part_a": 2, "part_b": 3}, course.parent / "a.db")
    db = sqlite3.connect(result)
    db.executescript(BY_HAND)
    db.close()
    gradebook.merge(course / "gradebook.db", result, "ann", [NAME], blank={(NAME, "answer")})
    with open_gradebook(course / "gradebook.db") as gb:
        answer, rubric, essay = (gb.find_grade(c, NAME, NAME, "ann") for c in BY_HAND_CELLS)
        assert (answer.score, answer.needs_manual_grade) == (0.0, False)
        assert gb.find_comment("answer", NAME, NAME, "ann").auto_comment == gradebook.BLANK_COMMENT
        assert (rubric.score, rubric.needs_manual_grade) == (0.0, False)
        assert essay.needs_manual_grade  # written: a person reads it
        answer.manual_score = 1.0  # the instructor disagrees: that stays through a regrade
        gb.db.commit()
    gradebook.merge(course / "gradebook.db", result, "ann", [NAME], blank={(NAME, "answer")})
    with open_gradebook(course / "gradebook.db") as gb:
        assert gb.find_grade("answer", NAME, NAME, "ann").score == 1.0


BY_HAND_CELLS = ("answer", "rubric", "essay")


def test_each_backup_is_kept_under_its_own_name(course):
    first = gradebook.backup(course / "gradebook.db")
    second = gradebook.backup(course / "gradebook.db")
    assert first != second and first.is_file() and second.is_file()
    assert first.parent.name == gradebook.BACKUPS
