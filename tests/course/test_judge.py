"""Test cells in the judge (CrashTolerantExecute with judge on, its default): small notebooks in
real kernels, no nbgrader command and no MPI."""

from __future__ import annotations

import pytest

from pingpong_lab.grader.judge_kernel import names_read
from pingpong_lab.grader.preprocessors import CELL_TIMEOUT

from .test_crash_tolerant_execute import _errors, _score, _stdout, _test
from .test_crash_tolerant_execute import _run as run_cells

pytestmark = pytest.mark.timeout(180)

WHERE = "import os\nprint(os.getpid())"


def _run(tmp_path, *sources, **traits):
    """The crash tests' notebook runner, with the judge on (its default)."""
    return run_cells(tmp_path, *sources, judge=True, **traits)


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
