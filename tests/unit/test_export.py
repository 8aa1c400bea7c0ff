"""Grades out (`nbgrader export` with ClassExport): a real gradebook with a student in each
status; the rows, points and totals; the course's nbgrader_config names the plugin."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pingpong_lab.grader import export

from .gradebooks import open_gradebook

ROOT = Path(__file__).resolve().parents[2]
A, B = "01_pingpong", "02_timing"


def _score(gb, student, cell, auto=None, manual=None, extra=None, needs_manual=False):
    grade = gb.find_grade(cell, A, A, student)
    grade.auto_score, grade.manual_score, grade.extra_credit = auto, manual, extra
    grade.needs_manual_grade = needs_manual


def make_gradebook(path: Path) -> Path:
    """01_pingpong: two tests (2 + 3 points), a task (4) and a written answer (1), graded by
    hand; 02_timing: one test (5). ann is graded, bob waits for a person, cid submitted
    nothing, dan's submission has no score (grading failed on it)."""
    with open_gradebook(path) as gb:
        gb.add_assignment(A)
        gb.add_notebook(A, A)
        gb.add_grade_cell("part_a", A, A, max_score=2, cell_type="code")
        gb.add_grade_cell("part_b", A, A, max_score=3, cell_type="code")
        gb.add_task_cell("essay", A, A, max_score=4, cell_type="markdown")
        gb.add_grade_cell("answer", A, A, max_score=1, cell_type="markdown")
        gb.add_solution_cell("answer", A, A)
        gb.add_assignment(B)
        gb.add_notebook(B, B)
        gb.add_grade_cell("sweep", B, B, max_score=5, cell_type="code")
        for student in ("ann", "bob", "cid", "dan"):
            gb.update_or_create_student(student, first_name=student.title(), last_name="Lee")
        for student in ("ann", "bob", "dan"):
            gb.add_submission(A, student)
        for student in ("ann", "bob"):
            _score(gb, student, "part_a", auto=2)
            _score(gb, student, "part_b", auto=1)
        _score(gb, "ann", "essay", manual=3, extra=0.5)
        _score(gb, "ann", "answer", auto=0, manual=1)
        _score(gb, "bob", "essay", needs_manual=True)
        _score(gb, "bob", "answer", needs_manual=True)
        gb.db.commit()
    return path


@pytest.fixture(scope="module")
def class_gradebook(tmp_path_factory) -> Path:
    """make_gradebook once per module (nbgrader takes seconds to create one)."""
    return make_gradebook(tmp_path_factory.mktemp("export") / "gradebook.db")


@pytest.fixture
def gradebook(class_gradebook, tmp_path):
    path = tmp_path / "gradebook.db"
    shutil.copy(class_gradebook, path)
    with open_gradebook(path) as gb:
        yield gb


def _export(gradebook, to: Path, **traits) -> dict:
    export.ClassExport(to=str(to), **traits).export(gradebook)
    return {r["student_id"]: r for r in csv.DictReader(to.open())}


def test_every_student_has_one_row_with_each_notebooks_status(gradebook, tmp_path):
    rows = _export(gradebook, tmp_path / "out.csv")
    assert sorted(rows) == ["ann", "bob", "cid", "dan"]
    assert {s: r[f"{A} status"] for s, r in rows.items()} == {
        "ann": "graded",
        "bob": "needs manual grading",
        "cid": "missing",
        "dan": "failed",
    }
    assert {r[f"{B} status"] for r in rows.values()} == {"missing"}
    # the student's status: failed, then needs manual grading, then missing, else graded
    assert {s: r["status"] for s, r in rows.items()} == {
        "ann": "missing",  # graded in 01, nothing submitted for 02
        "bob": "needs manual grading",
        "cid": "missing",
        "dan": "failed",
    }
    assert rows["ann"]["first_name"] == "Ann"


def test_the_points_split_into_autograded_and_manual_and_add_up(gradebook, tmp_path):
    rows = _export(gradebook, tmp_path / "out.csv")
    ann, bob = rows["ann"], rows["bob"]
    assert (ann[f"{A} auto"], ann[f"{A} manual"]) == ("3", "4.5")  # 2 + 1; 3.5 + 1
    assert ann[f"{A} max"] == "10" and ann[f"{B} max"] == "5"
    assert ann["total"] == "7.5" and ann["max_total"] == "15"
    total = gradebook.find_submission(A, "ann").score
    assert float(ann["total"]) == pytest.approx(total)  # nbgrader's own sum
    assert (bob[f"{A} auto"], bob[f"{A} manual"], bob["total"]) == ("3", "0", "3")
    assert (rows["cid"]["total"], rows["cid"]["max_total"]) == ("0", "15")
    assert rows["dan"]["total"] == "0"


def test_a_class_where_everything_is_graded_says_graded(gradebook, tmp_path):
    rows = _export(gradebook, tmp_path / "out.csv", student=["ann"], assignment=[A])
    assert list(rows) == ["ann"] and rows["ann"]["status"] == "graded"
    assert f"{B} status" not in rows["ann"]


def test_the_student_and_assignment_lists_restrict_the_rows(gradebook, tmp_path):
    rows = _export(gradebook, tmp_path / "out.csv", student=["bob"], assignment=[A])
    assert list(rows) == ["bob"]


def test_the_default_file_is_grades_export_csv(gradebook, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    export.ClassExport().export(gradebook)
    header = (tmp_path / export.DEFAULT_FILE).read_text().splitlines()[0].split(",")
    assert header[:4] == export.WHO and header[-3:] == export.TOTALS
    assert f"{A} status" in header and f"{B} auto" in header
    assert not list(tmp_path.glob(".*.tmp"))


def test_the_course_config_makes_it_nbgraders_exporter():
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT / "course")).load_config()
    assert config.ExportApp.plugin_class == "pingpong_lab.grader.export.ClassExport"


@pytest.mark.skipif(not shutil.which("nbgrader"), reason="nbgrader's command is not installed")
def test_nbgrader_export_runs_the_plugin(tmp_path):
    make_gradebook(tmp_path / "gradebook.db")
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        f"c.CourseDirectory.root = {str(tmp_path)!r}\n"
        f"c.CourseDirectory.db_url = 'sqlite:///' + {str(tmp_path / 'gradebook.db')!r}\n"
        "c.ExportApp.plugin_class = 'pingpong_lab.grader.export.ClassExport'\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "nbgrader", "export"], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader((tmp_path / export.DEFAULT_FILE).open()))
    assert len(rows) == 4 and "needs manual grading" in {r["status"] for r in rows}
