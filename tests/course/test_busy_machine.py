"""Grading on a busy machine: while MPI jobs keep every core twice over, the solutions and the
correct variants earn the same full marks as on a quiet machine.

The load is real MPI traffic: one two-rank ping-pong job per core, each rank polling for its
messages all the time (as MPICH's ranks do), so the machine runs twice as many busy processes
as it has cores, and the grading's own MPI ranks and timers share the cores with them. Notebook
02 is the one whose checks time things (the benchmark program against the course's kernel, the
timing loops on the engines): it is graded through the instructor's path (`python -m
pingpong_lab.grader autograde`), and the benchmark program's checks are run on every variant.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from pingpong_lab.mpi import environment

from ..conftest import requires_mpi
from ..mpi.test_bench_c import VARIANTS, _outcomes, _program
from .classroom import ROOT, _grader
from .submissions import (
    cell_score,
    grade_cells,
    grading_env,
    notebook,
    processes_left,
    scratch_course,
    submit,
)

pytestmark = [requires_mpi, pytest.mark.nbgrader, pytest.mark.timeout(900)]

NAME = "02_timing"

# one rank echoes, the other sends, forever; each polls the whole time it waits
BUSY_PINGPONG = """
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
peer = 1 - comm.Get_rank()
buf = np.zeros(4096, np.uint8)
while True:
    if comm.Get_rank() == 0:
        comm.Send(buf, dest=peer)
        comm.Recv(buf, source=peer)
    else:
        comm.Recv(buf, source=peer)
        comm.Send(buf, dest=peer)
"""


@pytest.fixture(scope="module")
def busy_machine():
    """Busy MPI jobs, two ranks per core, for the tests of this module; ended by PID."""
    cores = os.cpu_count() or 1
    cmd = [environment.mpiexec(), "-n", "2", sys.executable, "-c", BUSY_PINGPONG]
    jobs = [
        subprocess.Popen(
            cmd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for _ in range(cores)
    ]
    try:
        ranks = _busy_ranks(jobs)
        before = sum(_cpu_s(p) for p in ranks)
        time.sleep(2)
        assert all(job.poll() is None for job in jobs), "a busy job ended before the tests"
        used = (sum(_cpu_s(p) for p in ranks) - before) / 2
        # the busy ranks take at least half of every core (the grading then shares the rest)
        assert used >= 0.5 * cores, f"the busy jobs used {used:.2f} of {cores} cores"
        yield 2 * cores
    finally:
        for job in jobs:
            try:
                os.killpg(job.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            job.wait(timeout=30)


def _busy_ranks(jobs) -> list[psutil.Process]:
    """The MPI ranks of the busy jobs, once each job has started both (within 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        ranks = [
            child
            for job in jobs
            for child in psutil.Process(job.pid).children(recursive=True)
            if "python" in child.name().lower()
        ]
        if len(ranks) >= 2 * len(jobs) or time.monotonic() > deadline:
            return ranks
        time.sleep(0.2)


def _cpu_s(proc: psutil.Process) -> float:
    try:
        times = proc.cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system


def _report_load(jobs_per_core: int) -> None:
    load = os.getloadavg()[0]
    print(f"1-minute load {load:.1f} on {os.cpu_count()} cores ({jobs_per_core} busy ranks)")


def test_the_benchmark_program_and_its_variants_pass_every_check_on_a_busy_machine(
    busy_machine, tmp_path, monkeypatch
):
    _report_load(busy_machine)
    monkeypatch.setenv("PINGPONG_LAB_BUILD", str(tmp_path / "build"))
    failed = {}
    for name, edits in {"the solution": [], **VARIANTS}.items():
        folder = tmp_path / str(len(failed)) / name.replace(" ", "_").replace("/", "_")
        folder.mkdir(parents=True)
        outcome = _outcomes(_program(folder, edits))
        if outcome:
            failed[name] = outcome
    assert failed == {}


def test_the_timing_notebook_graded_on_a_busy_machine_earns_full_marks(busy_machine, tmp_path):
    _report_load(busy_machine)
    course = scratch_course(tmp_path, ROOT / "course", [NAME])
    tag, env = grading_env(tmp_path)
    release = _grader(course, env, "release")
    assert release.returncode == 0, release.stdout + release.stderr
    submit(course, "busy", NAME, ROOT / "solutions" / NAME / f"{NAME}.ipynb")
    graded = _grader(course, env, "autograde")
    assert graded.returncode == 0, graded.stdout + graded.stderr
    tests = {
        gid: cell["metadata"]["nbgrader"]["points"]
        for gid, cell in grade_cells(notebook(course / "source" / NAME / f"{NAME}.ipynb")).items()
        if cell["cell_type"] == "code"
    }
    assert len(tests) > 10
    lost = {gid: cell_score(course, "busy", NAME, gid) for gid in tests}
    lost = {gid: (score, tests[gid]) for gid, score in lost.items() if score != tests[gid]}
    outputs = grade_cells(notebook(course / "autograded" / "busy" / NAME / f"{NAME}.ipynb"))
    assert lost == {}, {gid: outputs[gid].get("outputs") for gid in lost}
    assert processes_left(tag) == []
