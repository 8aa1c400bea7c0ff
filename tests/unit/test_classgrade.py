"""The class grader's bookkeeping: progress lines and the per-student summary."""

from __future__ import annotations

import csv
import io

from pingpong_lab.grader import classgrade, gradebook

from .gradebooks import NAME, graded_result, make_course


def test_the_summary_gives_the_exports_totals_and_status_and_how_grading_went(tmp_path):
    course = make_course(tmp_path, students=["ann", "bob", "cid"])
    book = graded_result(course, "ann", {"part_a": 2, "part_b": 1}, tmp_path / "ann.db")
    gradebook.merge(course / "gradebook.db", book, "ann", [NAME])
    ann = classgrade.Outcome("ann", [NAME], seconds=12.0)
    bob = classgrade.Outcome("bob", [NAME], status="timeout", seconds=30.0, why="over 30 s")
    cid = classgrade.Outcome("cid", ["02_timing"], seconds=5.0)  # handed in only the other one
    classgrade.attach_scores(course, [ann, bob, cid])
    path = course / "class-grading.csv"
    classgrade.write_summary(path, [cid, bob, ann], [NAME, "02_timing"], course)
    rows = {r["student"]: r for r in csv.DictReader(path.open())}
    assert list(rows) == ["ann", "bob", "cid"]
    exported = {r["student_id"]: r for r in _export(course)}
    for student in exported:  # one total, the export's
        assert (rows[student]["total"], rows[student]["max_total"]) == (
            exported[student]["total"],
            exported[student]["max_total"],
        )
    assert (rows["bob"]["total"], rows["bob"]["max_total"]) == ("0", "10")  # not in the book
    assert rows["ann"]["grading"] == "ok" and rows["ann"][NAME] == "3.0"
    assert rows["ann"]["02_timing"] == "missing" and rows["ann"]["max_total"] == "10"
    assert rows["ann"]["status"] == exported["ann"]["status"] == "needs manual grading"
    assert rows["bob"]["grading"] == "timeout" and rows["bob"][NAME] == ""
    assert rows["bob"]["status"] == "failed" and rows["bob"]["note"] == "over 30 s"
    assert rows["cid"][NAME] == "missing" and rows["cid"]["status"] == "failed"  # no scores
    assert not list(course.glob("*.tmp"))  # written whole, then renamed


def _export(course):
    from nbgrader.api import Gradebook

    from pingpong_lab.grader import export

    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        return export.rows(gb)[1]


def _outcomes():
    ok = classgrade.Outcome("ann", ["01_pingpong", "02_timing"], seconds=12.0)
    ok.scores = {"01_pingpong": (10.0, 10.0), "02_timing": (4.0, 14.0)}
    late = classgrade.Outcome(
        "bob", ["01_pingpong"], status="timeout", seconds=30.0, why="over 30 s"
    )
    return [late, ok]


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
