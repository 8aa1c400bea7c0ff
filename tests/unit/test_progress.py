"""Claims about progress bars: on a terminal they show; while grading nothing reaches stderr."""

import io

import pytest

from pingpong_lab import progress
from pingpong_lab.course import notebook


class Terminal(io.StringIO):
    """A stderr that says it is a terminal (where tqdm draws its bar)."""

    def isatty(self):
        return True


@pytest.fixture
def terminal(monkeypatch):
    """Called in the test itself: pytest's output capture replaces sys.stderr between the
    fixtures and the test."""
    monkeypatch.delenv("PINGPONG_LAB_GRADING", raising=False)
    monkeypatch.delenv("PINGPONG_LAB_PROGRESS", raising=False)

    def use():
        err = Terminal()
        monkeypatch.setattr("sys.stderr", err)
        return err

    return use


def test_a_bar_is_drawn_on_a_terminal(terminal):
    terminal = terminal()
    assert list(progress.bar(range(3), "sizes")) == [0, 1, 2]
    assert "sizes" in terminal.getvalue() and "3/3" in terminal.getvalue()


@pytest.mark.parametrize(
    "variable,value", [("PINGPONG_LAB_GRADING", "1"), ("PINGPONG_LAB_PROGRESS", "0")]
)
def test_grading_mode_or_the_switch_draws_nothing(terminal, monkeypatch, variable, value):
    terminal = terminal()
    monkeypatch.setenv(variable, value)
    assert progress.disabled() is True
    assert list(progress.bar(range(3), "sizes")) == [0, 1, 2]
    assert terminal.getvalue() == ""


def test_no_bar_when_stderr_is_not_a_terminal(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    monkeypatch.delenv("PINGPONG_LAB_GRADING", raising=False)
    assert list(progress.bar(range(3), "sizes")) == [0, 1, 2]
    assert err.getvalue() == ""


class FakeCluster:
    """Answers each engine call with rank 0's row for the sizes it was given."""

    def __init__(self):
        self.calls = []

    def run(self, func, *args, timeout=None):
        sizes = args[3]
        self.calls.append((sizes, timeout))
        return [[{"nbytes": n, "reps": 10, "t_s": 1e-6} for n in sizes]]


def test_a_notebook_sweep_moves_size_by_size_and_is_silent_while_grading(
    terminal, monkeypatch, capfd
):
    terminal = terminal()
    monkeypatch.setenv("PINGPONG_LAB_GRADING", "1")
    cluster = FakeCluster()
    rows = notebook.student_sweep(cluster, print, None, print, [1, 8, 64], timeout=60)
    assert [r["nbytes"] for r in rows] == [1, 8, 64]
    assert [sizes for sizes, _ in cluster.calls] == [[1], [8], [64]]
    assert all(0 < left <= 60 for _, left in cluster.calls)  # one deadline for the sweep
    assert terminal.getvalue() == "" and capfd.readouterr().err == ""


def test_a_notebook_sweep_shows_its_bar_outside_grading(terminal):
    terminal = terminal()
    notebook.student_sweep(FakeCluster(), print, None, print, [1, 8], timeout=60)
    assert "your sweep" in terminal.getvalue()


def test_progress_events_are_read_whole_and_in_order(tmp_path):
    from pingpong_lab.mpi import measure

    path = tmp_path / "events.jsonl"
    assert measure.read_events(path) == ([], 0)
    measure.emit_event(str(path), done=1, total=3)
    measure.emit_event(None, done=9, total=9)  # no file named: nothing is written
    events, offset = measure.read_events(path)
    assert events == [{"done": 1, "total": 3}]
    with open(path, "a") as f:
        f.write('{"done": 2, "tot')  # a line still being written is left for next time
    assert measure.read_events(path, offset) == ([], offset)
    with open(path, "a") as f:
        f.write('al": 3}\n')
    assert measure.read_events(path, offset)[0] == [{"done": 2, "total": 3}]


def test_the_sweep_launchers_bar_follows_the_jobs_events_not_its_text(
    tmp_path, monkeypatch, capsys
):
    import sys

    from pingpong_lab.apps import sweep

    class Bar:
        total, n = 0, 0

        def update(self, k):
            self.n += k

        def write(self, line, end="", file=None):
            print(line, end=end, file=file)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    shown = Bar()
    monkeypatch.setattr(sweep, "bar", lambda **_: shown)
    events = tmp_path / "events.jsonl"
    script = (
        "import sys\n"
        "from pingpong_lab.mpi.measure import emit_event\n"
        "for k in (1, 2, 3):\n"
        f"    emit_event({str(events)!r}, done=k, total=3)\n"
        "    print(f'size {k} measured', flush=True)\n"  # no '[k/n]' in the text
    )
    assert sweep._run_job([sys.executable, "-c", script], None, 60, str(events)) == 0
    assert (shown.n, shown.total) == (3, 3)
    assert "size 3 measured" in capsys.readouterr().out
