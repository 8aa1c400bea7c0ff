"""Engines lent by an EnginePool: borrowed by a kernel's MPICluster, new for every notebook
(nothing a borrower left on them reaches the next), ended after a deadlock, all gone after close
(what grading relies on, see docs/GRADING.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from pingpong_lab.engines.cluster import POOL_ENV, POOL_WAIT_S, wait_gone
from pingpong_lab.engines.pool import EnginePool
from pingpong_lab.grader.preprocessors import engine_sizes

from ..conftest import remember_pids, requires_mpi

# A kernel: borrows 2 engines, checks they work where it works, leaves a global on them (or
# deadlocks them), and prints what it saw as JSON.
BORROWER = r"""
import json, os, sys
from pingpong_lab.engines.cluster import MPICluster
from pingpong_lab.errors import DeadlockError

def left_behind():
    return globals().get("LEFT_BEHIND")

def leave():
    global LEFT_BEHIND
    LEFT_BEHIND = 1

def deadlock():
    from mpi4py import MPI
    MPI.COMM_WORLD.recv(source=1 - MPI.COMM_WORLD.Get_rank())

cluster = MPICluster(n=2, timeout=20).start()
seen = {
    "borrowed": not cluster.pids,
    "cwd": cluster.run(os.getcwd) == [os.getcwd()] * 2,
    "left_behind": cluster.run(left_behind),
}
cluster.run(leave)
if sys.argv[1] == "deadlock":
    try:
        cluster.run(deadlock, timeout=3)
    except DeadlockError:
        seen["deadlock_error"] = True
    seen["own_engines_after"] = bool(cluster.pids) and cluster.run(lambda: 1) == [1, 1]
cluster.stop()
print(json.dumps(seen))
"""


def _borrow(pool: EnginePool, how: str, cwd) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", BORROWER, how],
        env={**os.environ, **pool.env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@requires_mpi
def test_a_pool_lends_each_engine_job_to_one_notebook_and_ends_deadlocked_ones(tmp_path):
    pool = EnginePool()
    try:
        pool.ready([2])  # returns at once: the engines start while the kernel does
        assert pool.coming(2).exists() or pool.entry(2).exists()
        seen = _borrow(pool, "use", tmp_path)  # it waits for the engines that are coming
        pool.wait()
        first_pids = pool.clusters[2].pids
        remember_pids(first_pids)
        assert seen == {"borrowed": True, "cwd": True, "left_behind": [None, None]}
        assert not pool.coming(2).exists()

        pool.ready([2])  # new engines: the first borrower's code ran on the old ones
        pool.wait()
        assert pool.starts == 2 and wait_gone(first_pids)
        remember_pids(pool.clusters[2].pids)
        lent = json.loads(pool.entry(2).read_text())["pids"]  # all but the pool's watchdog
        seen = _borrow(pool, "deadlock", tmp_path)
        assert seen["left_behind"] == [None, None]
        assert seen["deadlock_error"] and seen["own_engines_after"]
        assert wait_gone(lent)  # the borrower gave them up, the pool ended them
        for _ in range(50):  # the pool looks every GIVEN_UP_POLL_S
            if not pool.entry(2).exists():
                break
            time.sleep(0.1)
        assert not pool.entry(2).exists()

        pool.ready([2])  # new engines for the next notebook
        pool.wait()
        assert pool.starts == 3 and pool.entry(2).exists()
        remember_pids(pool.clusters[2].pids)
        assert _borrow(pool, "use", tmp_path)["borrowed"]
        last_pids = pool.clusters[2].pids
    finally:
        pool.close()
    assert wait_gone(last_pids) and wait_gone(first_pids)
    assert not pool.folder.exists()


def test_the_engine_sizes_of_a_notebook_are_read_from_its_code():
    from nbformat.v4 import new_code_cell, new_markdown_cell

    cells = [
        new_code_cell("%matplotlib inline\ncluster = MPICluster(n=2).start()"),
        new_code_cell("with MPICluster(4, timeout=60) as cluster:\n    pass"),
        new_markdown_cell("MPICluster(n=8) in a text cell starts nothing"),
    ]
    assert engine_sizes(cells) == {2, 4}
    # an experiment that is not graded is not run while grading: its engines are not started
    ungraded = "x = {}\nif not grading.GRADING:\n    with MPICluster(n=6) as c:\n        x = 1"
    assert engine_sizes([*cells, new_code_cell(ungraded)]) == {2, 4}
    graded_too = ungraded + "\nelse:\n    MPICluster(n=3).start()"
    assert engine_sizes([new_code_cell(graded_too)]) == {3}
    unreadable = new_code_cell("if not grading.GRADING:\n    MPICluster(n=6)\n  oops(")
    assert engine_sizes([unreadable]) == {6}  # not Python: every size in its text


@requires_mpi
def test_a_pool_in_a_process_that_names_it_starts_its_own_engines_at_once(tmp_path, monkeypatch):
    """The pool's own engines never borrow from the pool (a process whose environment names the
    pool, as a notebook runner's does, would otherwise wait for the engines it is starting)."""
    with EnginePool() as pool:
        monkeypatch.setenv(POOL_ENV, str(pool.folder))
        started = time.monotonic()
        pool.ready([2])
        pool.wait()
        assert pool.entry(2).exists() and time.monotonic() - started < POOL_WAIT_S
        remember_pids(pool.clusters[2].pids)
        assert _borrow(pool, "use", tmp_path)["borrowed"]


def test_each_students_engines_are_confined_with_that_students_own_pool():
    """One grading process, several students (`nbgrader autograde NN`): the confinement of a
    student's engines names that student's pool folder, not the one closed before it (whose
    missing folder made every later student's engines fail to start)."""
    from pingpong_lab.grader.preprocessors import _StudentPool

    students, named = _StudentPool(), []
    try:
        for student in ("alice", "bob", "carol"):
            students.ready(student, [], lambda: named.append(students.pool.folder) or [])
            assert named[-1] == students.pool.folder and named[-1].is_dir()
        assert len(set(named)) == 3
    finally:
        students.close()
