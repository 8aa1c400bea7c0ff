"""CrashTolerantExecute on small notebooks in real kernels (no nbgrader command, no MPI)."""

from __future__ import annotations

import signal

import nbformat
import pytest
from nbgrader.converters import Autograde
from nbgrader.preprocessors import Execute, SaveAutoGrades
from traitlets.config import Config

from pingpong_lab.grader import preprocessors
from pingpong_lab.grader.preprocessors import (
    KERNEL_DIED,
    NOTEBOOK_TIMEOUT,
    CrashTolerantExecute,
    cells_to_replay,
    describe_exit,
)

pytestmark = pytest.mark.timeout(120)


def _run(tmp_path, *sources, **traits):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    traits.setdefault("timeout", 30)
    CrashTolerantExecute(**traits).preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    return nb.cells


def _errors(cell) -> list[str]:
    return [o["ename"] for o in cell.outputs if o["output_type"] == "error"]


def _stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")


def test_a_cell_that_kills_the_kernel_loses_only_itself(tmp_path):
    cells = _run(
        tmp_path,
        "x = 41\nprint('set up')",
        "import os\nos._exit(0)",
        "print(x + 1)",
    )
    assert _stdout(cells[0]) == "set up\n" and cells[0].execution_count == 1  # first run kept
    assert _errors(cells[1]) == [KERNEL_DIED]
    assert "exited with status 0" in cells[1].outputs[-1]["evalue"]
    assert _stdout(cells[2]) == "42\n" and not _errors(cells[2])  # the set-up was run again


def test_a_segfault_in_the_kernel_is_reported_with_its_signal(tmp_path):
    cells = _run(tmp_path, "import ctypes\nctypes.string_at(0)", "print('still grading')")
    assert _errors(cells[0]) == [KERNEL_DIED]
    assert "SIGSEGV" in cells[0].outputs[-1]["evalue"]
    assert _stdout(cells[1]) == "still grading\n"


def test_sys_exit_fails_its_cell_without_a_restart(tmp_path):
    cells = _run(tmp_path, "x = 1", "import sys\nsys.exit(3)", "print(x)")
    assert _errors(cells[1]) == ["SystemExit"]
    assert _stdout(cells[2]) == "1\n"


def test_a_cell_that_kills_the_kernel_when_run_again_is_skipped_in_later_replays(tmp_path):
    second_run_dies = (
        "import os, pathlib\n"
        "runs = pathlib.Path('runs.txt')\n"
        "runs.write_text(runs.read_text() + 'x' if runs.exists() else 'x')\n"
        "if len(runs.read_text()) > 1:\n"
        "    os._exit(1)\n"
        "print('ran')"
    )
    cells = _run(tmp_path, second_run_dies, "y = 2", "import os\nos._exit(0)", "print(y)")
    assert _stdout(cells[0]) == "ran\n" and not _errors(cells[0])  # graded on its first run
    assert _errors(cells[2]) == [KERNEL_DIED]
    assert _stdout(cells[3]) == "2\n"


def test_a_notebook_where_every_cell_kills_the_kernel_ends(tmp_path):
    cells = _run(tmp_path, *["import os\nos._exit(0)"] * 4)
    assert [_errors(c) for c in cells] == [[KERNEL_DIED]] * 4


def test_cells_after_the_notebook_deadline_are_not_run(tmp_path):
    cells = _run(tmp_path, "import time\ntime.sleep(30)", "print('late')", notebook_timeout=3)
    assert "CellTimeoutError" in _errors(cells[0])  # cut to the time left, not 30 s
    assert _errors(cells[1]) == [NOTEBOOK_TIMEOUT] and not _stdout(cells[1])


def test_the_kernel_and_its_children_get_the_memory_limit(tmp_path):
    config = Config()
    config.MemoryLimitedKernelManager.memory_limit_mb = 512
    cells = _run(
        tmp_path,
        "import resource, subprocess, sys\n"
        "print(resource.getrlimit(resource.RLIMIT_DATA)[0] >> 20)\n"
        "print(subprocess.check_output([sys.executable, '-c', 'import resource; "
        "print(resource.getrlimit(resource.RLIMIT_DATA)[0] >> 20)'], text=True), end='')",
        "import numpy\nhog = numpy.zeros(1 << 30, dtype=numpy.uint8)",
        config=config,
    )
    assert _stdout(cells[0]) == "512\n512\n"
    assert _errors(cells[1]) == ["MemoryError"]


def test_a_cell_that_runs_out_of_memory_and_keeps_it_does_not_starve_the_cells_after_it(tmp_path):
    config = Config()
    config.MemoryLimitedKernelManager.memory_limit_mb = 512
    cells = _run(
        tmp_path,
        "x = 1",
        "hog = []\nwhile True:\n    hog.append(bytearray(16 << 20))",  # ~512 MiB held in `hog`
        "room = bytearray(256 << 20)\nprint(x)",
        config=config,
    )
    assert _errors(cells[1]) == ["MemoryError"]
    assert "restarted" in _stdout(cells[1])
    assert _stdout(cells[2]) == "1\n" and not _errors(cells[2])


def test_replayed_cells_are_those_above_the_crash_except_cells_that_crashed():
    cells = [
        nbformat.v4.new_code_cell("a = 1"),
        nbformat.v4.new_markdown_cell("text"),
        nbformat.v4.new_code_cell("   "),
        nbformat.v4.new_code_cell("b = 2"),
        nbformat.v4.new_code_cell("boom()"),
        nbformat.v4.new_code_cell("c = 3"),
        nbformat.v4.new_code_cell("boom_again()"),
    ]
    assert cells_to_replay(cells, 4, skip={4}) == [0, 3]
    assert cells_to_replay(cells, 6, skip={3, 4, 6}) == [0, 5]


@pytest.mark.parametrize(
    "status, words",
    [
        (0, "exited with status 0"),
        (1, "exited with status 1"),
        (-signal.SIGSEGV, "SIGSEGV"),
        (-signal.SIGKILL, "out of memory"),
        (None, "unknown"),
    ],
)
def test_an_exit_status_is_described_in_words(status, words):
    assert words in describe_exit(status)


def test_the_autograde_pipeline_is_nbgraders_with_crash_tolerant_execute_and_the_audit():
    default = Autograde.class_traits()["autograde_preprocessors"].default()
    ours = preprocessors.autograde_preprocessors()
    assert ours[default.index(Execute)] is CrashTolerantExecute
    assert ours[ours.index(SaveAutoGrades) - 1] is preprocessors.AuditSubmission
    ours_plain = [p for p in ours if p not in (CrashTolerantExecute, preprocessors.AuditSubmission)]
    assert ours_plain == [p for p in default if p is not Execute]


@pytest.mark.engines
def test_grading_in_this_process_leaves_its_environment_as_it_was(tmp_path, monkeypatch):
    """What Formgrader's Autograde button does: the preprocessors run inside the Jupyter
    server. The graded kernel borrows the student's engines and runs in grading mode; the
    server's own environment (and so every kernel it starts later) gets neither."""
    import os

    from pingpong_lab.engines.cluster import POOL_ENV

    monkeypatch.delenv("PINGPONG_LAB_GRADING", raising=False)
    before = dict(os.environ)
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "import os  # the notebook starts MPICluster(n=2)\n"
                f"print(os.environ.get('{POOL_ENV}', 'no pool'))\n"
                "print(os.environ.get('PINGPONG_LAB_GRADING', 'not grading'))"
            )
        ]
    )
    resources = {"metadata": {"path": str(tmp_path)}, "nbgrader": {"student": "ann"}}
    try:
        CrashTolerantExecute(timeout=60).preprocess(nb, resources)
        assert os.environ == before
    finally:
        preprocessors.ENGINE_POOL.close()
    pool, grading_mode = _stdout(nb.cells[0]).split()
    assert pool != "no pool" and grading_mode == "1"
    assert dict(os.environ) == before
