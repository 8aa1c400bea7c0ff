"""The lab's cell check: a learner's cell that grading would refuse is not run and says which
line and why; the course's own cells and correct cells run as usual."""

from __future__ import annotations

import json

import nbformat
import pytest

from pingpong_lab.grader import labcheck

from ..conftest import ROOT

COURSE_CELL = "import sys\nlimit = 3"  # a learner may not import sys; the course's cell may
TEST_CELL = "assert limit == 3\nprint(sys.version_info[0])"


def _course_notebook(folder):
    nb = nbformat.v4.new_notebook()
    locked = nbformat.v4.new_code_cell(COURSE_CELL)
    locked.metadata["nbgrader"] = {"locked": True, "grade_id": "setup", "schema_version": 3}
    answer = nbformat.v4.new_code_cell("x = 1")
    answer.metadata["nbgrader"] = {"solution": True, "grade_id": "answer", "schema_version": 3}
    test = nbformat.v4.new_code_cell(TEST_CELL)
    test.metadata["nbgrader"] = {"grade": True, "grade_id": "test", "points": 1}
    nb.cells = [locked, answer, test]
    path = folder / "course.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.fixture
def shell(tmp_path, monkeypatch):
    """A fresh IPython shell whose kernel folder holds a course notebook."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.delenv(labcheck.SESSION_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    _course_notebook(tmp_path)
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    ip = InteractiveShell.instance(config=config)
    yield ip
    labcheck.unload_ipython_extension(ip)
    InteractiveShell.clear_instance()


def test_the_course_cells_of_the_kernels_folder_are_known(tmp_path):
    path = _course_notebook(tmp_path)
    assert labcheck.course_notebooks(tmp_path, session="") == [path]
    locked, tests = labcheck.course_cells([path])
    assert locked == [COURSE_CELL, TEST_CELL] and tests == [TEST_CELL]


def test_a_refused_cell_is_not_run_and_names_the_line_and_why(shell, capsys):
    labcheck.load_ipython_extension(shell)
    assert shell.run_cell(COURSE_CELL).success  # the course's own cell runs as it is
    ok = shell.run_cell("total = sum(x * x for x in range(4))\nprint(total)")
    assert ok.success and shell.user_ns["total"] == 14
    assert shell.run_cell(TEST_CELL).success

    refused = shell.run_cell("mine = 1\nsys.modules['pingpong_lab'] = None")
    assert not refused.success
    assert isinstance(refused.error_before_exec, labcheck.RefusedCell)
    assert "mine" not in shell.user_ns  # nothing of the cell ran
    out = capsys.readouterr().out
    assert "This cell was not run" in out
    assert "line 2: `sys.modules['pingpong_lab'] = None`" in out
    assert "uses `sys` beyond what the course's own cells do with it" in out

    assert not shell.run_cell("limit = 0").success  # a name the tests read
    assert shell.user_ns["limit"] == 3
    assert shell.run_cell(TEST_CELL).success


def test_magics_are_read_as_the_grader_reads_them(shell, capsys):
    labcheck.load_ipython_extension(shell)
    assert shell.run_cell("%time y = 2").success
    assert not shell.run_cell("%time limit = 4").success
    assert not shell.run_cell("!true").success
    assert "shell command" in capsys.readouterr().out


def test_unloading_the_check_runs_cells_as_before(shell):
    labcheck.load_ipython_extension(shell)
    assert not shell.run_cell("import os").success
    labcheck.unload_ipython_extension(shell)
    assert shell.run_cell("import os").success


def test_outside_the_course_a_kernel_runs_as_usual(shell, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # no course notebook here
    before = list(shell.ast_transformers)
    labcheck.load_ipython_extension(shell)
    assert shell.ast_transformers == before
    assert shell.run_cell("import os").success


def test_the_student_labs_kernel_loads_the_check(monkeypatch):
    """`make lab` and Binder put jupyter/student/share first on JUPYTER_PATH."""
    from jupyter_client.kernelspec import KernelSpecManager

    share = ROOT / "jupyter" / "student" / "share"
    monkeypatch.setenv("JUPYTER_PATH", str(share))
    spec = KernelSpecManager().get_kernel_spec("python3")
    assert spec.argv[:3] == ["python", "-m", "ipykernel_launcher"]
    assert "--ext=pingpong_lab.grader.labcheck" in spec.argv
    kernel = json.loads((share / "kernels" / "python3" / "kernel.json").read_text())
    assert kernel["language"] == "python"
