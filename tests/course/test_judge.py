"""Test cells in the judge (CrashTolerantExecute with judge on, its default): small notebooks in
real kernels, no nbgrader command and no MPI; one confined as a class is graded."""

from __future__ import annotations

import tempfile

import nbformat
import pytest
from traitlets.config import Config

from pingpong_lab.grader.judge_kernel import names_read
from pingpong_lab.grader.preprocessors import CELL_TIMEOUT, CrashTolerantExecute
from pingpong_lab.grader.sandbox import can_confine

from .test_crash_tolerant_execute import _errors, _score, _stdout, _test
from .test_crash_tolerant_execute import _run as run_cells

pytestmark = pytest.mark.timeout(180)

WHERE = "import os\nprint(os.getpid())"


def _run(tmp_path, *sources, **traits):
    """The crash tests' notebook runner, with the judge on (its default)."""
    return run_cells(tmp_path, *sources, judge=True, **traits)


def _run_confined(tmp_path, *sources):
    """As _run, but confined as a class is graded: student s1's notebook in a scratch course,
    with a temporary folder of its own (a class's grading gives each submission one)."""
    folder = tmp_path / "course" / "autograded" / "s1" / "nb"
    folder.mkdir(parents=True)
    (tmp_path / "tmp").mkdir()
    config = Config()
    config.CourseDirectory.root = str(tmp_path / "course")
    cells = [s if isinstance(s, dict) else nbformat.v4.new_code_cell(s) for s in sources]
    nb = nbformat.v4.new_notebook(cells=cells)
    resources = {"metadata": {"path": str(folder)}, "nbgrader": {"student": "s1"}}
    tempdir, tempfile.tempdir = tempfile.tempdir, str(tmp_path / "tmp")
    try:
        CrashTolerantExecute(config=config, timeout=25, engine_pool=False).preprocess(nb, resources)
    finally:
        tempfile.tempdir = tempdir
    return nb.cells


# What native code (a learner's C calling system(), a constructor in a C kernel) could run:
# find every kernel connection file it can read (the grading's folders, the home, the command
# lines in /proc) and ask each kernel but its own to run every later cell as `pass` (a kernel that
# answers was reached).
TAKE_OVER = """\
import glob, json, os, socket, time
from jupyter_client import BlockingKernelClient
try:
    from ipykernel.connect import get_connection_file
    own = json.load(open(get_connection_file()))["key"]
except Exception:
    own = None
found = set(glob.glob(os.path.join(WITHIN, "**", "*.json"), recursive=True))
found |= set(glob.glob(os.path.expanduser("~/**/*.json"), recursive=True))
for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
    try:
        parts = open(cmdline, "rb").read().split(b"\\0")
    except OSError:
        continue
    found |= {parts[i + 1].decode() for i, p in enumerate(parts[:-1]) if p == b"-f"}
# only the kernels of this grading (their files are in its scratch course and temporary
# folder, WITHIN): other work's kernels on this machine are hidden from a class's grading by
# its own sandbox (a private /tmp, no network), which this test does not start
found = {p for p in found if os.path.realpath(p).startswith(WITHIN)}
reached = 0
for path in found:
    try:
        info = json.load(open(path))
    except Exception:
        continue
    if not isinstance(info, dict) or "shell_port" not in info or info.get("key") == own:
        continue
    try:  # a kernel that is still there
        socket.create_connection((info["ip"], info["shell_port"]), timeout=1).close()
    except OSError:
        continue
    client = BlockingKernelClient()
    client.load_connection_info(info)
    client.start_channels()
    asked = client.execute("get_ipython().input_transformers_post.append(lambda l: ['pass\\n'])")
    deadline = time.monotonic() + 8  # a judge still starting answers a little later
    while time.monotonic() < deadline:
        try:
            reply = client.get_shell_msg(timeout=1)
        except Exception:
            continue
        if reply["parent_header"].get("msg_id") == asked:
            reached += 1
            break
    client.stop_channels()
print("kernels reached:", reached)
"""


@pytest.mark.skipif(not can_confine(), reason="bubblewrap cannot confine here")
def test_neither_the_learners_kernel_nor_a_program_the_judge_runs_can_reach_the_judge(tmp_path):
    take_over = f"WITHIN = {str(tmp_path.resolve())!r}\n" + TAKE_OVER
    cells = _run_confined(
        tmp_path,
        take_over,
        _test("assert False, 'the judge decides'", "after_the_learner"),
        _test(
            "import subprocess, sys\n"
            f"print(subprocess.run([sys.executable, '-c', {take_over!r}], text=True,\n"
            "                     capture_output=True).stdout)",
            "a_program",
        ),
        _test("assert False, 'still the judge decides'", "after_the_program"),
    )
    assert _stdout(cells[0]) == "kernels reached: 0\n", cells[0].outputs
    assert _errors(cells[1]) == ["AssertionError"] and _score(cells[1]) == 0
    # the program may reach the learner's own kernel (its file is in the grader's temporary
    # folder): that kernel then serves nothing and the test fails as a JudgeError, which
    # costs only that learner; the judge itself was not reached
    assert _stdout(cells[2]).startswith("kernels reached: 0"), cells[2].outputs
    assert _errors(cells[3]) in (["AssertionError"], ["JudgeError"]) and _score(cells[3]) == 0


def test_a_test_cell_runs_in_another_process_on_the_learners_data_and_functions(tmp_path):
    cells = _run(
        tmp_path,
        WHERE + "\nimport numpy as np\nt = np.array([2.0, 4.0])\ndef half(x):\n    return x / 2",
        _test(WHERE + "\nassert half(t).tolist() == [1.0, 2.0]\nprint(type(t).__name__)", "a"),
    )
    assert not _errors(cells[1]) and _score(cells[1]) == 1
    learner_pid, (judge_pid, kind) = _stdout(cells[0]).split(), _stdout(cells[1]).split()
    assert learner_pid != [judge_pid] and kind == "ndarray"


def test_the_judges_fakes_record_what_the_learners_function_did(tmp_path):
    cells = _run(
        tmp_path,
        "def hello(comm):\n    return comm.Get_rank(), comm.Get_size()",
        _test(
            "class Comm:\n"
            "    def __init__(self):\n"
            "        self.calls = []\n"
            "    def Get_rank(self):\n"
            "        self.calls.append('rank')\n"
            "        return 3\n"
            "    def Get_size(self):\n"
            "        self.calls.append('size')\n"
            "        return 4\n"
            "comm = Comm()\n"
            "assert hello(comm) == (3, 4)\n"
            "assert comm.calls == ['rank', 'size'], comm.calls",
            "fakes",
        ),
    )
    assert not _errors(cells[1]), cells[1].outputs


def test_what_a_learners_cell_changes_in_its_kernel_does_not_reach_the_judge(tmp_path):
    # a builtin replaced in the learner's kernel: the test cell runs in the judge
    cells = _run(
        tmp_path,
        "import builtins\nbuiltins.AssertionError = type('Quiet', (Exception,), {})",
        _test("assert 1 == 2, 'the judge decides'", "judged"),
    )
    assert "AssertionError" in _errors(cells[1]) and _score(cells[1]) == 0


PINGPONG_ZERO_ECHO = (
    "import numpy as np\n"
    "from pingpong_lab.course import grading\n"
    "import sys\n"
    "vars(sys.modules['pingpong_lab.course.grading.trace'])['check_trace'] = lambda *a, **k: 1\n"
    "def pingpong(comm, sendbuf, recvbuf):\n"
    "    if comm.Get_rank() == 0:\n"
    "        comm.Send(sendbuf, dest=1)\n"
    "        comm.Recv(recvbuf, source=1)\n"
    "    elif comm.Get_rank() == 1:\n"
    "        comm.Recv(recvbuf, source=0)\n"
    "        comm.Send(np.zeros_like(recvbuf), dest=0)"
)


def test_a_learners_function_is_traced_on_the_judges_fakes_not_its_own_kernels(tmp_path):
    # the learner's kernel replaces the course's check (as native code could, past the read-only
    # module): the trace and its verdict are the judge's
    cells = _run(
        tmp_path,
        PINGPONG_ZERO_ECHO,
        _test("grading.check_pingpong(pingpong, size=2, nbytes=8)", "traced"),
    )
    assert "AssertionError" in _errors(cells[1]) and _score(cells[1]) == 0
    assert "send back exactly the bytes it received" in str(cells[1].outputs)


def test_a_learners_kernel_that_will_not_serve_the_judge_scores_zero_for_that_test(tmp_path):
    # an input transformer that empties every later cell (the grader's serve call too)
    cells = _run(
        tmp_path,
        "ip = get_ipython()\nip.input_transformers_post.append(lambda lines: ['pass\\n'])",
        _test("pass", "empty"),
        timeout=5,
    )
    assert _errors(cells[1]) == ["JudgeError"] and _score(cells[1]) == 0


def test_a_learners_error_reaches_the_test_as_its_builtin_type(tmp_path):
    cells = _run(
        tmp_path,
        "def pick(xs):\n    if not xs:\n        raise ValueError('empty')\n    return xs[0]",
        _test(
            "try:\n    pick([])\nexcept ValueError as exc:\n    print('refused:', exc)\n"
            "else:\n    raise AssertionError('should raise')",
            "raises",
        ),
    )
    assert _stdout(cells[1]) == "refused: empty\n" and _score(cells[1]) == 1


def test_a_learners_function_that_never_returns_costs_that_test_and_the_rest_is_graded(
    tmp_path,
):
    cells = _run(
        tmp_path,
        "x = 41\ndef spin():\n    while True:\n        pass",
        _test("spin()", "spins"),
        _test("assert x + 1 == 42", "after"),
        timeout=3,
        interrupt_grace=1,
    )
    assert CELL_TIMEOUT in _errors(cells[1]) and _score(cells[1]) == 0
    assert not _errors(cells[2]) and _score(cells[2]) == 1


def test_a_learners_function_that_ignores_interrupts_is_ended_with_its_kernel(tmp_path):
    cells = _run(
        tmp_path,
        "x = 41\nimport signal\ndef stuck():\n"
        "    signal.signal(signal.SIGINT, signal.SIG_IGN)\n    while True:\n        pass",
        _test("stuck()", "stuck"),
        _test("assert x + 1 == 42", "after"),
        timeout=3,
        interrupt_grace=1,
    )
    assert CELL_TIMEOUT in _errors(cells[1]) and _score(cells[1]) == 0
    assert not _errors(cells[2]) and _score(cells[2]) == 1  # the learner's kernel was rebuilt


def test_names_read_are_those_a_test_cell_does_not_bind_itself():
    source = (
        "import math\nclass Clock:\n    pass\n"
        "def helper(a):\n    return a\n"
        "for i in range(3):\n    got = by_rank(helper(i), Clock(), _private)\n"
        "assert got == expected, math.pi\nprint(len(got))"
    )
    assert names_read(source) == ["by_rank", "expected"]
