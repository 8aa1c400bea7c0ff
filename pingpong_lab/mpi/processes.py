"""Child processes in their own process group, ended as a group: nothing is left behind.

mpiexec starts proxies and ranks, and hw_floor forks a partner: killing only the direct child
would orphan the rest. Every command this package runs with a deadline goes through here.
"""

from __future__ import annotations

import os
import signal
import subprocess


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


def run_group(cmd, timeout: float, env=None, cwd=None) -> subprocess.CompletedProcess:
    """Run cmd (text output captured) in a new process group with a deadline.

    On timeout (subprocess.TimeoutExpired) or Ctrl-C the whole group is ended before the
    exception propagates. The exit status is not checked: look at returncode.
    """
    proc = subprocess.Popen(
        [str(c) for c in cmd],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=env,
        cwd=cwd,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        kill_group(proc)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
