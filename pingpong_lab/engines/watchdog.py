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
    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    for p in procs:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass


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
