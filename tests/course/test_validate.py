"""`make validate` and the student lab's Validate button run a notebook as the grader will: the
course's cell timeout, grading mode in the validating kernel only, and a verdict per notebook."""

from __future__ import annotations

import os
import re
import subprocess

import pytest
from traitlets.config.loader import PyFileConfigLoader

from pingpong_lab.grader import validation

from ..conftest import ROOT

NAME = "03_variability"


def _student_lab_config():
    return PyFileConfigLoader(
        "nbgrader_config.py", path=str(ROOT / "jupyter" / "student")
    ).load_config()


def test_the_student_lab_validates_with_the_course_timeout_in_grading_mode(monkeypatch):
    monkeypatch.delenv("PINGPONG_LAB_GRADING", raising=False)
    config = _student_lab_config()
    course = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT / "course")).load_config()
    assert config.Execute.timeout == course.Execute.timeout > 30  # not nbgrader's default
    assert config.Exchange.root == course.Exchange.root
    assert config.CourseDirectory.course_id == course.CourseDirectory.course_id
    assert config.Execute.kernel_manager_class is validation.GradingModeKernelManager


def test_reading_the_course_settings_leaves_the_server_environment_alone(monkeypatch):
    """The server that validates keeps starting the learner's kernels at full size."""
    monkeypatch.delenv("PINGPONG_LAB_GRADING", raising=False)
    before = dict(os.environ)
    validation.course_config()
    _student_lab_config()
    assert dict(os.environ) == before


def test_the_validating_kernel_starts_in_grading_mode_with_the_memory_limit():
    km = validation.GradingModeKernelManager(kernel_name="python3", memory_limit_mb=512)
    cmd = km.format_kernel_cmd()
    assert "PINGPONG_LAB_GRADING=1" in cmd
    assert "512" in cmd  # the course's memory limit still wraps the kernel


def test_an_unknown_notebook_name_lists_the_exercises():
    with pytest.raises(FileNotFoundError, match=r"no notebook .*03_variability"):
        validation.notebooks(["99_nothing"])


def test_verdicts_name_the_failing_tests_and_read_only_cells_edited(tmp_path):
    path = ROOT / "exercises" / NAME / f"{NAME}.ipynb"
    assert validation.verdict(path, {}) == (True, f"{NAME}: passed")
    passed, text = validation.verdict(path, {"changed": [{"source": "x"}]})
    assert not passed and "1 read-only course cell(s) were edited" in text


@pytest.mark.nbgrader
def test_make_validate_fails_the_released_exercise_and_passes_the_solution():
    solution = ROOT / "solutions" / NAME / f"{NAME}.ipynb"
    proc = subprocess.run(
        ["make", "--no-print-directory", "validate", f"NB={NAME} {solution}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = proc.stdout
    assert proc.returncode != 0, out + proc.stderr
    released, solved = out.split(f"validating solutions/{NAME}")
    assert re.search(rf"{NAME}: FAILED - \d+ test\(s\) fail", released), out
    stub = "not done yet (the code it tests still raises NotImplementedError)"
    assert re.search(rf"\n  test_\w+: {re.escape(stub)}", released), out
    assert f"{NAME}: passed" in solved, out
