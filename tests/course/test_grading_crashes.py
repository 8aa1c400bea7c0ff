"""A crash costs only its part: real nbgrader on 01_pingpong submissions that crash.

The crashing students (tests/course/classroom.py's CRASHES: one per kind of crash) are graded
in the class that the course tests share (conftest.py's graded_class); the tests read the
gradebook, the feedback and the process table.
"""

from __future__ import annotations

import pytest

from pingpong_lab.grader.preprocessors import KERNEL_DIED

from ..conftest import requires_mpi
from .classroom import CRASH_NAME as NAME
from .classroom import CRASHES, KERNEL_DEATHS
from .submissions import cell_score, grade_cells, notebook, processes_left

pytestmark = [requires_mpi, pytest.mark.nbgrader, pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def graded(graded_class):
    return graded_class


def _autograded(graded, student) -> dict:
    return notebook(graded["course"] / "autograded" / student / NAME / f"{NAME}.ipynb")


@pytest.mark.parametrize("student", sorted(CRASHES))
def test_a_crash_costs_only_the_tests_that_need_the_crashed_code(graded, student):
    _, _, lost = CRASHES[student]
    cells = {  # the autograded tests (answers graded by hand wait for the instructor)
        gid: c
        for gid, c in grade_cells(_autograded(graded, student)).items()
        if not c["metadata"]["nbgrader"].get("solution")
    }
    got = {gid: cell_score(graded["course"], student, NAME, gid) for gid in cells}
    want = {
        gid: 0 if gid in lost else c["metadata"]["nbgrader"]["points"] for gid, c in cells.items()
    }
    assert got == want


@pytest.mark.parametrize("student", KERNEL_DEATHS)
def test_the_cell_where_the_kernel_died_says_so_in_the_feedback(graded, student):
    nb = _autograded(graded, student)
    died = [
        c for c in nb["cells"] if any(o.get("ename") == KERNEL_DIED for o in c.get("outputs", []))
    ]
    assert died, f"no cell of {student}'s notebook reports the kernel's death"
    html = (graded["course"] / "feedback" / student / NAME / f"{NAME}.html").read_text()
    assert "the kernel died while running this cell" in html


def test_a_segfault_in_the_c_answer_never_kills_the_grading_kernel(graded):
    nb = _autograded(graded, "segfault_c")
    text = str([o for c in nb["cells"] for o in c.get("outputs", [])])
    assert "KernelDiedError" not in text  # the kernel never ran the C


def test_sys_exit_and_memory_errors_fail_their_cells_and_the_kernel_lives_on(graded):
    for student, ename in (("sys_exit", "SystemExit"), ("memory", "MemoryError")):
        outputs = [o for c in _autograded(graded, student)["cells"] for o in c.get("outputs", [])]
        enames = {o.get("ename") for o in outputs if o["output_type"] == "error"}
        assert ename in enames and KERNEL_DIED not in enames, (student, enames)


def test_no_engine_or_mpiexec_of_a_dead_kernel_survives(graded):
    left = processes_left(graded["tag"])
    assert not left, "processes left behind by crashed kernels:\n" + "\n".join(left)
