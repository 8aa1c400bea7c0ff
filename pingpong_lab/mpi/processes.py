"""Child processes in their own process group, ended as a group: nothing is left behind.

mpiexec starts proxies and ranks, and hw_floor forks a partner: killing only the direct child
would orphan the rest. Every command this package runs with a deadline goes through run_group,
which can also pass on the output line by line while the command runs (`pingpong-lab sweep`).
MPICH's proxy starts each rank in a session of its own, out of the command's process group:
run_group also marks the command's environment (RUN_TAG), which the ranks inherit, and ends
whatever still carries the mark once the command has exited (a rank still tearing down after
MPI_Abort, say).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid

RUN_TAG = "PINGPONG_LAB_RUN"  # in the environment of every process a run_group command starts


def kill_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """SIGTERM the child's whole process group, then SIGKILL what is still there."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            proc.wait(timeout=grace_s)
            break
        except subprocess.TimeoutExpired:
            continue


def end_stragglers(pgid: int, grace_s: float = 2.0) -> None:
    """End what is left of process group `pgid` once its leader has exited (an MPI rank still
    tearing down after mpiexec returned, say), and wait until none of it is alive."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + grace_s
        while _group_alive(pgid):
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        else:
            return


def end_tagged(token: str, grace_s: float = 2.0) -> None:
    """End every live process whose environment carries RUN_TAG=token (SIGKILL: the command
    they belong to is over) and wait, up to grace_s, until none runs."""
    deadline = time.monotonic() + grace_s
    while True:
        left = _tagged(token)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if not left or time.monotonic() > deadline:
            return
        time.sleep(0.02)


def _tagged(token: str) -> list[int]:
    """This user's live processes (not zombies) with RUN_TAG=token in their environment."""
    mark = f"{RUN_TAG}={token}".encode()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rpartition(")")[2].split()[0] != "Z":
                    found.append(int(pid))
        except (OSError, IndexError):
            continue
    return found


def _group_alive(pgid: int) -> bool:
    """Whether a process of group `pgid` is still running (zombies waiting to be reaped by
    their new parent do not count: they run nothing)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


def run_group(cmd, timeout: float, env=None, cwd=None, on_line=None) -> subprocess.CompletedProcess:
    """Run cmd (text output captured) in a new process group with a deadline.

    With on_line, each line of stdout is passed to on_line(line) as soon as it arrives (and is
    not kept in the result); stderr is always collected. On timeout the whole group is ended
    and subprocess.TimeoutExpired is raised (with the stderr written so far); on Ctrl-C, or
    when on_line raises, the group is ended before the exception propagates. The exit status
    is not checked: look at returncode.
    """
    token = uuid.uuid4().hex
    proc = subprocess.Popen(
        [str(c) for c in cmd],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**(os.environ if env is None else env), RUN_TAG: token},
        cwd=cwd,
    )
    out: list[str] = []
    err: list[str] = []
    reader = threading.Thread(target=err.extend, args=(proc.stderr,), daemon=True)
    reader.start()
    expired = threading.Event()

    def expire():  # a command still running, or what it left holding its output, is ended
        if proc.poll() is None:
            expired.set()
        kill_group(proc)

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    keep = out.append if on_line is None else on_line
    try:
        for line in proc.stdout:
            keep(line)
        proc.wait()
    except BaseException:
        kill_group(proc)
        raise
    finally:
        timer.cancel()
        if proc.poll() is None:
            kill_group(proc)
        end_stragglers(proc.pid)
        end_tagged(token)  # what left the group: MPICH's ranks have sessions of their own
        reader.join(timeout=5)
        proc.stdout.close()
        if not reader.is_alive():  # else something outside the group still holds stderr
            proc.stderr.close()
    if expired.is_set():
        raise subprocess.TimeoutExpired(proc.args, timeout, "".join(out), "".join(err))
    return subprocess.CompletedProcess(proc.args, proc.returncode, "".join(out), "".join(err))
