"""mpi.processes.run_group: a command's whole process group runs under a deadline, never left."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from pingpong_lab.mpi.processes import run_group


def _gone(pid: int, timeout: float = 5.0) -> bool:
    """Whether `pid` no longer runs, looking at least once and for up to `timeout` s."""
    end = time.monotonic() + timeout
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)


def test_output_and_exit_status_are_captured():
    proc = run_group(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=30)
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "out\n", "err\n")


def test_on_line_gets_each_line_while_the_command_runs(tmp_path):
    """The command waits for a file that on_line creates when it sees the first line: it can
    only finish if that line was delivered while it ran (not buffered until it ended)."""
    flag = tmp_path / "seen-one"
    seen = []

    def on_line(line):
        seen.append(line)
        if line == "one\n":
            flag.touch()

    script = f"echo one; while [ ! -e {flag} ]; do sleep 0.05; done; echo two"
    proc = run_group(["sh", "-c", script], timeout=60, on_line=on_line)
    assert proc.returncode == 0 and proc.stdout == ""
    assert seen == ["one\n", "two\n"]


def test_a_deadline_ends_the_whole_group_and_raises_timeout_expired():
    lines = []
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as info:
        run_group(
            ["sh", "-c", "sleep 60 & echo $!; echo late >&2; sleep 60"],
            timeout=1,
            on_line=lines.append,
        )
    assert time.monotonic() - start < 10
    assert info.value.stderr == "late\n"
    assert _gone(int(lines[0])), "the command's child outlived the deadline"


@pytest.mark.parametrize("error", [KeyboardInterrupt, BrokenPipeError])
def test_an_exception_in_on_line_ends_the_group_and_propagates(error):
    pids = []

    def on_line(line):
        pids.append(int(line))
        raise error

    with pytest.raises(error):
        run_group(["sh", "-c", "sleep 60 & echo $!; sleep 60"], timeout=30, on_line=on_line)
    assert _gone(pids[0])


def test_what_outlives_the_command_in_its_group_is_ended_before_run_group_returns():
    """A rank still tearing down when mpiexec has exited is ended too, and run_group returns
    only when it no longer runs (no waiting here: `_gone` is given no time)."""
    proc = run_group(["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!; exit 0"], timeout=30)
    assert proc.returncode == 0
    assert _gone(int(proc.stdout), timeout=0), "the command's child outlived it"


def test_what_left_the_commands_group_is_ended_too():
    """MPICH's proxy starts each rank in a session of its own: a rank still alive when the
    command has exited is found by the mark in its environment and ended."""
    script = (
        "import subprocess, sys; "
        "p = subprocess.Popen(['sleep', '60'], start_new_session=True, "
        "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
        "print(p.pid, flush=True); sys.exit(3)"
    )
    proc = run_group([sys.executable, "-c", script], timeout=30)
    assert proc.returncode == 3
    assert _gone(int(proc.stdout), timeout=0), "a process in a session of its own outlived it"
