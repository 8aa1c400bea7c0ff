"""Ends a cluster's processes when the Python process that started them dies without stopping.

MPICluster starts one watchdog per cluster:

    python -m pingpong_lab.engines.watchdog <parent pid> <pid file>

The pid file (JSON list, kept up to date by the cluster) lives in the cluster's private profile
folder. The watchdog exits quietly when the file disappears (the cluster was stopped normally);
when the parent is gone first (a notebook kernel killed, say), it ends the listed processes:
SIGTERM, then SIGKILL after a grace period.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import psutil

POLL_S = 0.5
GRACE_S = 3.0


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def end_processes(pids, grace_s: float = GRACE_S) -> None:
    """SIGTERM each of pids, then SIGKILL what still runs after grace_s (0: SIGKILL at once)."""
    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    if grace_s > 0:
        for p in procs:
            try:
                p.terminate()
            except psutil.NoSuchProcess:
                pass
        procs = wait_ended(procs, grace_s)
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    wait_ended(procs, GRACE_S)


def wait_ended(procs: list, timeout: float) -> list:
    """Wait up to timeout s until none of procs runs; those still running. A zombie has ended:
    whoever adopted it reaps it when it will (psutil's own wait would wait for that, and a
    zombie adopted by an init that reaps late took the whole grace period each time)."""
    until = time.monotonic() + timeout
    while True:
        procs = [p for p in procs if _running(p)]
        if not procs or time.monotonic() >= until:
            return procs
        time.sleep(0.01)


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def main(argv=None) -> int:
    parent_pid, pid_file = (argv or sys.argv[1:])[:2]
    parent, pid_file = int(parent_pid), Path(pid_file)
    pids: list[int] = []
    while True:
        if not pid_file.exists():
            return 0
        try:
            pids = [int(p) for p in json.loads(pid_file.read_text())]
        except (OSError, ValueError):
            pass  # being rewritten: keep the last list
        if not alive(parent):
            end_processes([p for p in pids if p != psutil.Process().pid])
            return 0
        time.sleep(POLL_S)


if __name__ == "__main__":
    sys.exit(main())
