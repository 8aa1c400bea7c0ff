"""A crash costs only its part: real nbgrader on 01_pingpong submissions that crash.

One module-scoped fixture generates 01_pingpong in a temporary copy of the course, submits the
solution with one crash each (one student per kind of crash), and autogrades them all in one
nbgrader run; the tests read the gradebook, the feedback and the process table.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pingpong_lab.grader.preprocessors import KERNEL_DIED

from ..conftest import requires_mpi
from .submissions import (
    cell_score,
    grade_cells,
    grading_env,
    notebook,
    processes_left,
    scratch_course,
    submit,
)

ROOT = Path(__file__).resolve().parents[2]
NAME = "01_pingpong"
SOLUTION = ROOT / "solutions" / NAME / f"{NAME}.ipynb"

pytestmark = [requires_mpi, pytest.mark.nbgrader, pytest.mark.timeout(1500)]

PART_A = ("test_pingpong_calls", "test_pingpong_engines")  # needs pingpong
PART_C = ("test_pingpong_pickle",)  # needs pingpong_pickle

_PICKLE_DEF = "def pingpong_pickle(comm, obj):\n"
_PINGPONG_BODY = "    rank = comm.Get_rank()\n    if rank == 0:\n        comm.Send("
_PICKLE_BODY = "    rank = comm.Get_rank()\n    if rank == 0:\n        comm.send("
_TAG = "TAG = 0  # any tag works, as long as sender and receiver agree\n"

# student -> (the text replaced in the solution, its replacement, the test cells that score 0)
CRASHES = {
    # the kernel exits while defining pingpong_pickle
    "os_exit": (_PICKLE_DEF, "import os\n\nos._exit(0)\n\n\n" + _PICKLE_DEF, PART_C),
    # pingpong segfaults wherever it runs: in the kernel (a check cell, then a test cell; two
    # kernel deaths) and on the engines (engine crashes, restarted by MPICluster)
    "segfault": (
        _PINGPONG_BODY,
        "    import ctypes\n\n    ctypes.string_at(0)\n" + _PINGPONG_BODY,
        PART_A,
    ),
    # pingpong_pickle asks for 8 GiB, over the kernel's and the engines' memory limit: MemoryError
    # (and a fresh kernel for the cells after the test cell where the kernel raised it)
    "memory": (
        _PICKLE_BODY,
        "    import numpy\n\n    numpy.zeros(8 << 30, dtype=numpy.uint8)\n" + _PICKLE_BODY,
        PART_C,
    ),
    # SystemExit after TAG is defined and before pingpong is
    "sys_exit": (_TAG, _TAG + "\nimport sys\n\nsys.exit(1)\n", PART_A),
}
KERNEL_DEATHS = ("os_exit", "segfault")


def _crash_edit(old: str, new: str):
    def edit(text: str) -> str:
        return text.replace(old, new, 1)

    return edit


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("course-crashes")
    course = scratch_course(root, ROOT / "course", [NAME])
    tag, env = grading_env(root)
    subprocess.run(
        [sys.executable, "-m", "nbgrader", "generate_assignment", NAME, "--log-level=WARN"],
        cwd=course,
        env=env,
        check=True,
        capture_output=True,
    )
    solution_text = "".join("".join(c["source"]) for c in notebook(SOLUTION)["cells"])
    for student, (old, new, _) in CRASHES.items():
        assert solution_text.count(old) >= 1, f"the {student} edit no longer applies: {old!r}"
        submit(course, student, NAME, SOLUTION, _crash_edit(old, new))
    proc = subprocess.run(
        [sys.executable, "-m", "pingpong_lab.grader", "autograde"],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    print(proc.stdout)
    return {"course": course, "tag": tag}


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
    if student == "segfault":
        assert "SIGSEGV" in html


def test_sys_exit_and_memory_errors_fail_their_cells_and_the_kernel_lives_on(graded):
    for student, ename in (("sys_exit", "SystemExit"), ("memory", "MemoryError")):
        outputs = [o for c in _autograded(graded, student)["cells"] for o in c.get("outputs", [])]
        enames = {o.get("ename") for o in outputs if o["output_type"] == "error"}
        assert ename in enames and KERNEL_DIED not in enames, (student, enames)


def test_no_engine_or_mpiexec_of_a_dead_kernel_survives(graded):
    left = processes_left(graded["tag"])
    assert not left, "processes left behind by crashed kernels:\n" + "\n".join(left)
