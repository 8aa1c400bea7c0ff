"""CrashTolerantExecute on small notebooks in real kernels (no nbgrader command, no MPI)."""

from __future__ import annotations

import signal
from pathlib import Path

import nbformat
import psutil
import pytest
from nbgrader.converters import Autograde
from nbgrader.preprocessors import Execute, SaveAutoGrades
from nbgrader.utils import determine_grade
from traitlets.config import Config

from pingpong_lab.grader import preprocessors, sandbox
from pingpong_lab.grader.preprocessors import (
    CELL_TIMEOUT,
    KERNEL_DIED,
    NOTEBOOK_TIMEOUT,
    CrashTolerantExecute,
    cells_to_replay,
    describe_exit,
)

from ..conftest import requires_mpi

pytestmark = pytest.mark.timeout(120)


def _run(tmp_path, *sources, **traits):
    """Run code cells (a source, or a cell made by _test) in a CrashTolerantExecute.

    Test cells run in the learner's kernel here (judge off): they probe that kernel's crashes
    and time limits; tests/course/test_judge.py runs them in the judge."""
    cells = [s if isinstance(s, dict) else nbformat.v4.new_code_cell(s) for s in sources]
    nb = nbformat.v4.new_notebook(cells=cells)
    traits.setdefault("timeout", 30)
    traits.setdefault("judge", False)
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
    message = _timeout_message(cells[0])
    assert "by an interrupt" in message and "the cells after it were not run" in message
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


# -- a cell past its time limit ---------------------------------------------------------------
# small limits: a cell times out after 2 s, and a kernel that does not answer the interrupt
# within 1 s is killed
FAST = {"timeout": 2, "interrupt_grace": 1}

PID = "import os, psutil\nprint(os.getpid(), psutil.Process().create_time())"
IGNORES_SIGINT = (
    "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
)


def _child_and_endless_loop(marker: str = "child", report: bool = True) -> str:
    """A cell that starts a child that ignores SIGINT too (`marker` ends its command line),
    prints its pid and start time (with report: where its pids are this process's), then loops
    ignoring SIGINT itself."""
    ignores = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(300)"
    source = (
        "import subprocess, sys\n"
        f"child = subprocess.Popen([sys.executable, '-c', {ignores!r}, {marker!r}])\n"
    )
    if report:
        source += "print(child.pid, psutil.Process(child.pid).create_time(), flush=True)\n"
    return source + IGNORES_SIGINT


def _test(source: str, gid: str):
    """A test cell of nbgrader worth one point."""
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "points": 1, "grade_id": gid}
    return cell


def _score(cell) -> float:
    return determine_grade(cell)[0]


def _process(line: str) -> tuple[int, float]:
    pid, started = line.split()
    return int(pid), float(started)


def _still_running(pid: int, started: float) -> bool:
    """Whether that process (that pid started then, not a later one) still runs; a zombie is
    over (its adopter may not reap it here)."""
    try:
        proc = psutil.Process(pid)
        return proc.create_time() == started and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _timeout_message(cell) -> str:
    (message,) = [o["evalue"] for o in cell.outputs if o.get("ename") == CELL_TIMEOUT]
    return message


def test_an_endless_loop_is_interrupted_and_costs_only_its_cell(tmp_path):
    cells = _run(
        tmp_path,
        "x = 41\n" + PID,
        _test("while True:\n    pass", "loop"),
        _test(PID + "\nassert x + 1 == 42", "after"),
        **FAST,
    )
    assert "KeyboardInterrupt" in _errors(cells[1]) and _score(cells[1]) == 0
    message = _timeout_message(cells[1])
    assert "ran past its time limit (2 s)" in message and "by an interrupt" in message
    assert "same kernel" in message
    assert not _errors(cells[2]) and _score(cells[2]) == 1
    assert _stdout(cells[2]) == _stdout(cells[0])  # the kernel answered: no restart


def test_a_cell_that_ignores_the_interrupt_is_killed_with_its_processes(tmp_path):
    (tmp_path / "runs.txt").write_text("")
    counted = "with open('runs.txt', 'a') as f:\n    f.write('x')\n"
    cells = _run(
        tmp_path,
        "x = 41\n" + PID,
        _test(counted + _child_and_endless_loop(), "stuck"),
        _test(PID + "\nassert x + 1 == 42", "after"),
        "import os\nos._exit(0)",  # a restart after it: the stuck cell is not run again
        _test("assert x == 41", "last"),
        **FAST,
    )
    old_kernel, child = _process(_stdout(cells[0])), _process(_stdout(cells[1]))
    assert not _still_running(*old_kernel) and not _still_running(*child)
    assert _errors(cells[1]) == [CELL_TIMEOUT] and _score(cells[1]) == 0
    message = _timeout_message(cells[1])
    assert "did not answer the interrupt" in message and "fresh kernel" in message
    assert not _errors(cells[2]) and _score(cells[2]) == 1  # the set-up was run again
    assert _process(_stdout(cells[2])) != old_kernel
    assert _errors(cells[3]) == [KERNEL_DIED] and _score(cells[4]) == 1
    assert (tmp_path / "runs.txt").read_text() == "x"


def test_an_endless_loop_in_c_is_killed(tmp_path):
    # deque consumes the endless iterator in C, never looking at signals
    c_loop = "import collections, itertools\ncollections.deque(itertools.repeat(0), maxlen=0)"
    cells = _run(tmp_path, PID, _test(c_loop, "c"), _test("print('graded')", "after"), **FAST)
    assert not _still_running(*_process(_stdout(cells[0])))
    assert _errors(cells[1]) == [CELL_TIMEOUT] and _score(cells[1]) == 0
    assert _stdout(cells[2]) == "graded\n" and _score(cells[2]) == 1


class _Watched(CrashTolerantExecute):
    """Notes each kernel's processes as this process sees them (a confined kernel may run in a
    pid namespace of its own, where its pids mean nothing here), before each cell."""

    def preprocess_cell(self, cell, resources, index):
        process = getattr(getattr(self.km, "provisioner", None), "process", None)
        if process is not None and process.poll() is None:
            leader = psutil.Process(process.pid)
            self.seen = {*getattr(self, "seen", ()), leader, *leader.children(recursive=True)}
        return super().preprocess_cell(cell, resources, index)


@pytest.mark.skipif(not sandbox.can_confine(), reason="bubblewrap cannot confine here")
def test_a_confined_kernel_past_its_time_limit_is_stopped(tmp_path):
    """The interrupt does not reach the kernel inside its confinement (it ends the confinement,
    or nothing): the kernel and all it started are killed, and the cells after it run in a
    fresh confined kernel."""
    work = tmp_path / "autograded"
    work.mkdir()
    config = Config()
    config.MemoryLimitedKernelManager.confine_readonly = [str(tmp_path)]
    config.MemoryLimitedKernelManager.confine_writable = [str(work)]
    confined = "try:\n    open('../course_file', 'w')\nexcept OSError as e:\n    print(e.strerror)"
    marker = f"stuck-{tmp_path.name}"  # on the command line of the child the stuck cell starts
    stuck = _child_and_endless_loop(marker, report=False)
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(f"x = 41\n{confined}"),
            _test(stuck, "stuck"),
            _test(f"{confined}\nassert x + 1 == 42", "after"),
        ]
    )
    grader = _Watched(config=config, engine_pool=False, judge=False, **FAST)
    grader.preprocess(nb, {"metadata": {"path": str(work)}})
    cells = nb.cells
    assert _stdout(cells[0]) == "Read-only file system\n"  # the kernel ran confined
    assert _errors(cells[1]) == [CELL_TIMEOUT] and _score(cells[1]) == 0
    assert "did not answer the interrupt" in _timeout_message(cells[1])
    assert _stdout(cells[2]) == "Read-only file system\n" and _score(cells[2]) == 1
    assert grader.seen  # the kernels' processes, confinement included: none runs on
    assert not [p for p in grader.seen if _still_running(p.pid, p.create_time())]
    left = [p for p in psutil.process_iter(["cmdline"]) if marker in (p.info["cmdline"] or [])]
    assert not [p for p in left if _still_running(p.pid, p.create_time())]


def test_a_stuck_cell_at_the_notebook_deadline_ends_the_notebook(tmp_path):
    cells = _run(
        tmp_path,
        PID,
        IGNORES_SIGINT,
        "print('late')",
        timeout=30,
        notebook_timeout=3,
        interrupt_grace=1,
    )
    assert not _still_running(*_process(_stdout(cells[0])))
    message = _timeout_message(cells[1])
    assert "what was left of the notebook's time" in message and "were not run" in message
    assert _errors(cells[2]) == [NOTEBOOK_TIMEOUT] and not _stdout(cells[2])


def test_a_cell_the_audit_cannot_read_is_never_sent_to_the_kernel(tmp_path):
    """IPython evaluates `{...}` in a magic's line and runs automagic lines as magics: such a
    learner cell is not run at all (its output says why), and the cells after it run as usual,
    also after a restart that replays the cells above."""
    marker = tmp_path / "ran"
    cells = _run(
        tmp_path,
        f"%%writefile {{open({str(marker)!r}, 'w').close() or 'x'}}.c\nint x;",
        "time print('ran as a magic')",
        "print('next')",
        "import os\nos._exit(1)",
        "print('after the restart')",
    )
    assert not marker.exists()
    assert _errors(cells[0]) == ["UnreadableCellError"] and "{...}" in cells[0].outputs[0]["evalue"]
    assert _errors(cells[1]) == ["UnreadableCellError"] and not _stdout(cells[1])
    assert _stdout(cells[2]) == "next\n"
    assert _stdout(cells[4]) == "after the restart\n" and not marker.exists()


def test_the_course_kernels_start_with_automagic_off():
    """The student lab's kernel, like grading's, runs a one-line cell as the Python the audit
    reads (KERNEL_ARGS)."""
    import json
    from pathlib import Path

    from pingpong_lab.grader.audit import KERNEL_ARGS
    from pingpong_lab.grader.preprocessors import MemoryLimitedKernelManager

    spec = Path(__file__).parents[2] / "jupyter" / "student" / "share" / "kernels" / "python3"
    argv = json.loads((spec / "kernel.json").read_text())["argv"]
    assert set(KERNEL_ARGS) <= set(argv)
    km = MemoryLimitedKernelManager(kernel_name="python3")
    assert set(KERNEL_ARGS) <= set(km.format_kernel_cmd())


PLANT = """\
import os
planted = []
for folder in (os.path.expanduser("~/.ipython/profile_default/startup"),
               os.path.join(os.environ.get("IPYTHONDIR", "/nonexistent"), "profile_default",
                            "startup"),
               "."):
    for name in ("00-planted.py", "numpy.py", "sitecustomize.py"):
        try:
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, name), "w") as f:
                f.write("PLANTED = True\\nprint('planted code ran')\\n")
            planted.append(os.path.join(folder, name))
        except OSError:
            pass
print(len(planted) > 0)
"""


@pytest.mark.skipif(not sandbox.can_confine(), reason="bubblewrap cannot confine here")
def test_nothing_a_confined_kernel_writes_runs_in_the_next_one(tmp_path):
    """Startup files in the home or the IPython profile, a module in the working folder: the
    fresh kernel after a crash (like the next notebook's) starts without any of them."""
    work = tmp_path / "autograded"
    work.mkdir()
    config = Config()
    config.MemoryLimitedKernelManager.confine_readonly = [str(tmp_path)]
    config.MemoryLimitedKernelManager.confine_writable = [str(work)]
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(PLANT),
            nbformat.v4.new_code_cell("import os\nos._exit(1)"),
            _test("import numpy\nassert 'PLANTED' not in globals()\nprint(numpy.__file__)", "t"),
        ]
    )
    CrashTolerantExecute(config=config, engine_pool=False, judge=False, timeout=60).preprocess(
        nb, {"metadata": {"path": str(work)}}
    )
    cells = nb.cells
    assert "True" in _stdout(cells[0])  # it could write somewhere (its own folder)
    assert _errors(cells[1]) == [KERNEL_DIED]
    assert _score(cells[2]) == 1, cells[2].outputs
    assert "planted" not in _stdout(cells[2]) and "site-packages" in _stdout(cells[2])
    assert not (Path.home() / ".ipython" / "profile_default" / "startup" / "00-planted.py").exists()


BUILD_AND_WRITE = """\
from pingpong_lab.mpi import ckernels
lib = ckernels.compile_c('int f(void) { return 3; }\\n', name='f', with_util=False)
print('built', lib.exists())
import os, pingpong_lab
for folder in (os.path.dirname(pingpong_lab.__file__), os.path.dirname(os.__file__)):
    try:
        open(os.path.join(folder, 'planted.py'), 'w').close()
        print('wrote', folder)
    except OSError as exc:
        print(exc.strerror)
"""


@requires_mpi
@pytest.mark.skipif(not sandbox.can_confine(), reason="bubblewrap cannot confine here")
def test_a_kernel_confined_by_autograde_alone_builds_c_and_cannot_write_the_code(tmp_path):
    """Formgrader's Autograde button and a plain `nbgrader autograde` confine the kernel
    without the grading sandbox: its home is read-only, so its C is built in a folder the
    grader gives it; the course's package and Python's library are read-only."""
    (tmp_path / "autograded" / "ann" / "a").mkdir(parents=True)
    config = Config()
    config.CourseDirectory.root = str(tmp_path)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(BUILD_AND_WRITE)])
    resources = {"metadata": {"path": str(tmp_path / "autograded" / "ann" / "a")}}
    resources["nbgrader"] = {"student": "ann"}
    CrashTolerantExecute(config=config, engine_pool=False, timeout=60).preprocess(nb, resources)
    out = _stdout(nb.cells[0])
    assert out == "built True\nRead-only file system\nRead-only file system\n", nb.cells[0].outputs
