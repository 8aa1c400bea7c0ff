"""The class grader's bookkeeping: progress lines and the per-student summary."""

from __future__ import annotations

import csv
import io

from pingpong_lab.grader import classgrade, gradebook

from .gradebooks import NAME, make_course


def _outcomes():
    ok = classgrade.Outcome("ann", ["01_pingpong", "02_timing"], seconds=12.0)
    ok.scores = {"01_pingpong": (10.0, 10.0), "02_timing": (4.0, 14.0)}
    late = classgrade.Outcome(
        "bob", ["01_pingpong"], status="timeout", seconds=30.0, why="over 30 s"
    )
    return [late, ok]


def test_the_summary_has_one_row_per_student_with_a_score_per_notebook(tmp_path):
    path = tmp_path / "class-grading.csv"
    classgrade.write_summary(path, _outcomes(), ["01_pingpong", "02_timing"])
    rows = list(csv.DictReader(path.open()))
    assert [r["student"] for r in rows] == ["ann", "bob"]
    assert rows[0]["01_pingpong"] == "10.0" and rows[0]["02_timing"] == "4.0"
    assert rows[0]["total"] == "14.0" and rows[0]["max_total"] == "24.0"
    assert rows[1]["status"] == "timeout" and rows[1]["01_pingpong"] == ""
    assert rows[1]["note"] == "over 30 s"
    assert not list(tmp_path.glob("*.tmp"))  # written whole, then renamed


def test_progress_counts_done_failed_and_left():
    out = io.StringIO()
    progress = classgrade.Progress(2, out=out)
    late, ok = _outcomes()
    progress.finished(ok)
    progress.finished(late)
    first, second = out.getvalue().splitlines()
    assert "1/2 done, 0 failed, 1 left" in first and "ann" in first
    assert "2/2 done, 1 failed, 0 left" in second and "TIMEOUT: over 30 s" in second


def test_the_report_names_failures_and_the_slowest():
    out = io.StringIO()
    classgrade.report(_outcomes(), 60.0, out=out)
    text = out.getvalue()
    assert "graded 2 submission(s) in 60 s (2.0 per minute), 1 failed" in text
    assert "bob: timeout (over 30 s)" in text
    assert text.strip().endswith("slowest: bob 30 s, ann 12 s")


def test_a_missing_nbgrader_run_is_a_failed_submission_not_a_crash(tmp_path, monkeypatch):
    def broken(course, student, timeout, env, wrap=()):
        raise RuntimeError("grading exited with 1: boom")

    monkeypatch.setattr(classgrade, "_grade_in_group", broken)
    course = make_course(tmp_path, students=["carol"])
    outcome = classgrade.grade_one(course, "carol", [NAME], timeout=10, isolate=False)
    assert outcome.status == "failed" and "boom" in outcome.why
    assert gradebook.scores(course) == []


def test_a_run_that_ends_well_but_records_no_scores_is_a_failure(tmp_path, monkeypatch):
    monkeypatch.setattr(classgrade, "_grade_in_group", lambda *a, **k: None)
    course = make_course(tmp_path, students=["carol"])
    outcome = classgrade.grade_one(course, "carol", [NAME], timeout=10, isolate=False)
    assert outcome.status == "failed" and "no scores recorded" in outcome.why
    classgrade.attach_scores(course, [outcome])
    assert outcome.status == "failed" and outcome.scores == {}


def test_an_ok_outcome_without_scores_in_the_gradebook_becomes_a_failure(tmp_path):
    course = make_course(tmp_path, students=["carol"])
    outcome = classgrade.Outcome("carol", [NAME])
    classgrade.attach_scores(course, [outcome])
    assert outcome.status == "failed" and f"no scores for {NAME}" in outcome.why


def test_grading_a_student_without_a_submission_names_the_failed_step(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\nc.CourseDirectory.root = " + repr(str(tmp_path)) + "\n"
        "c.CourseDirectory.db_url = " + repr("sqlite:///" + str(tmp_path / "gradebook.db")) + "\n"
    )
    out = io.StringIO()
    assert classgrade.grade_student(tmp_path, "dave", out=out) == 1
    assert out.getvalue().startswith("nbgrader autograde failed: ")
