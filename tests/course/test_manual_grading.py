"""The written parts of a notebook, graded by hand the way Formgrader does it (real nbgrader).

The shared class (tests/course/classroom.py) has a student who submits 03_variability with
written answers; once autograded, the hand-graded parts get scores and comments through
nbgrader's gradebook API (what Formgrader's "save score" does), the feedback is generated
again, and the totals and the feedback HTML are read back. No other test reads that student.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import requires_mpi
from .classroom import MANUAL_STUDENT as STUDENT
from .classroom import WRITTEN
from .submissions import notebook, processes_left

ROOT = Path(__file__).resolve().parents[2]
COURSE = ROOT / "course"
NAME = "03_variability"

# grade_id: (score the grader gives, comment)
MANUAL = {
    "task_mean_or_median": (1.5, "COMMENT-MEAN: say what the mean is the right number for."),
    "task_between_run_spread": (3.0, "COMMENT-DRIFT: complete."),
}

pytestmark = [requires_mpi, pytest.mark.nbgrader, pytest.mark.timeout(600)]


def _nbgrader(course: Path, env: dict, *args: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _points(kind: str) -> float:
    """Points of the source notebook's test cells ("auto") or hand-graded task cells ("task")."""
    total = 0.0
    for cell in notebook(COURSE / "source" / NAME / f"{NAME}.ipynb")["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        is_task = bool(meta.get("task"))
        is_test = bool(meta.get("grade")) and not meta.get("solution")
        if (kind == "task" and is_task) or (kind == "auto" and is_test):
            total += meta["points"]
    return total


def _state(course: Path) -> dict:
    """Totals of the submission and the hand-graded cells' grades, from the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        sub = gb.find_submission(NAME, STUDENT)
        grades = {}
        for gid in MANUAL:
            g = gb.find_grade(gid, NAME, NAME, STUDENT)
            grades[gid] = (g.auto_score, g.manual_score, g.needs_manual_grade, g.max_score)
        return {
            "score": sub.score,
            "max_score": sub.max_score,
            "needs_manual_grade": sub.needs_manual_grade,
            "grades": grades,
        }


def _grade_by_hand(course: Path) -> None:
    """What Formgrader's score and comment boxes do (nbgrader's formgrader API handlers)."""
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        for gid, (score, text) in MANUAL.items():
            grade = gb.find_grade(gid, NAME, NAME, STUDENT)
            grade.manual_score = score
            grade.needs_manual_grade = grade.manual_score is None and grade.auto_score is None
            gb.find_comment(gid, NAME, NAME, STUDENT).manual_comment = text
        gb.db.commit()


@pytest.fixture(scope="module")
def graded(graded_class):
    """The shared class's STUDENT (tests/course/classroom.py: the 03 solution with both written
    answers), graded by hand as Formgrader does, and its feedback generated again."""
    root, course = graded_class["root"], graded_class["course"]
    env = graded_class["env"]
    before = _state(course)
    autograded = notebook(course / "autograded" / STUDENT / NAME / f"{NAME}.ipynb")
    _grade_by_hand(course)
    _nbgrader(course, env, "generate_feedback", NAME, "--student", STUDENT, "--force")
    html = (course / "feedback" / STUDENT / NAME / f"{NAME}.html").read_text()
    return {
        "root": root,
        "tag": graded_class["tag"],
        "before": before,
        "after": _state(course),
        "autograded": autograded,
        "release": notebook(root / "exercises" / NAME / f"{NAME}.ipynb"),
        "html": html,
    }


def test_the_notebook_has_parts_graded_by_hand():
    assert _points("task") >= 4 and _points("auto") > 0


def test_autograde_scores_the_tests_and_leaves_the_written_parts_to_the_instructor(graded):
    before = graded["before"]
    assert before["score"] == _points("auto")
    assert before["max_score"] == _points("auto") + _points("task")
    assert before["needs_manual_grade"]
    for gid, (auto, manual, needs, _) in before["grades"].items():
        assert auto is None and manual is None and needs, gid


def test_the_instructor_sees_the_mark_scheme_and_the_answer_the_learner_never_sees_it(graded):
    def texts(nb):
        return ["".join(c["source"]) for c in nb["cells"]]

    graded_text = "\n".join(texts(graded["autograded"]))
    assert graded_text.count("BEGIN MARK SCHEME") == len(MANUAL)  # Formgrader shows this
    for answer in WRITTEN:
        assert answer in graded_text
    released = "\n".join(texts(graded["release"]))
    assert "MARK SCHEME" not in released and "Model answer" not in released
    assert "## Part H" in released  # the question itself is there


def test_hand_scores_add_up_in_the_gradebook(graded):
    after = graded["after"]
    hand = sum(score for score, _ in MANUAL.values())
    assert after["score"] == _points("auto") + hand
    assert after["max_score"] == graded["before"]["max_score"]
    assert not after["needs_manual_grade"]
    for gid, (score, _) in MANUAL.items():
        _, manual, needs, max_score = after["grades"][gid]
        assert manual == score and not needs and 0 < score <= max_score, gid


def test_the_feedback_shows_the_new_total_scores_and_comments_but_no_mark_scheme(graded):
    html = graded["html"]
    total, max_total = graded["after"]["score"], graded["after"]["max_score"]
    assert f"(Score: {round(total, 2)} / {round(max_total, 2)})" in html
    for gid, (score, comment) in MANUAL.items():
        points = graded["after"]["grades"][gid][3]
        assert f"Task</a> (Score: {round(score, 2)} / {round(points, 2)})" in html, gid
        assert comment in html
    for answer in WRITTEN:
        assert answer in html
    assert "MARK SCHEME" not in html and "Model answer" not in html


def test_no_process_outlives_the_grading(graded):
    left = processes_left(graded["tag"])
    assert not left, "processes left behind:\n" + "\n".join(left)
