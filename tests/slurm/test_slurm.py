"""The slurm/ templates, engines on Slurm and the class-grading array, on a real Slurm.

One private single-node Slurm (tests/slurm/localslurm.py) serves the module; every job is
submitted with its tag, so after each test no process of a job may remain, and after the module
neither may the daemons. Skips with one line when not root, without Slurm (`make slurm`) or
when the daemons cannot start here.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pingpong_lab.data.results import read_results

from ..conftest import remember_pids, requires_mpi
from ..course.submissions import scratch_course, submit
from . import localslurm

ROOT = Path(__file__).resolve().parents[2]
JOB_TIMEOUT_S = 240
pytestmark = [pytest.mark.slurm, requires_mpi]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory, c_library):
    problem = localslurm.problem()
    if problem:
        pytest.skip(problem)
    cluster = localslurm.LocalSlurm(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
    except (localslurm.SlurmStartError, OSError) as exc:
        pytest.skip(f"a single-node Slurm cannot start here: {exc}")
    daemons = [p.pid for p in cluster.daemons.values()]
    remember_pids(daemons)
    yield cluster
    cluster.stop()
    gone = [pid for pid in daemons if _alive(pid)]
    assert not gone, f"Slurm daemons still running: {gone}"
    assert not cluster.tagged_processes(), "processes of the Slurm jobs outlived the daemons"


@pytest.fixture
def jobs_leave_nothing(slurm):
    """After the test: no job left in the queue, no process of any job left running."""
    yield slurm
    assert _wait(lambda: not _queue(slurm), 60), f"jobs still queued: {_queue(slurm)}"
    left = slurm.tagged_processes()
    end = time.monotonic() + 30
    while left and time.monotonic() < end:
        time.sleep(0.5)
        left = slurm.tagged_processes()
    remember_pids(left)
    assert not left, f"processes of finished jobs still running: {left}"


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _queue(slurm) -> list[str]:
    return slurm.command(["squeue", "-h", "-o", "%A %T"], check=False).stdout.split("\n")[:-1]


def _wait(condition, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.5)
    return True


_ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")


def _job_state(slurm, job: str) -> tuple[str, int]:
    """(JobState, exit status) of a job from scontrol ('' while Slurm does not know it)."""
    text = slurm.command(["scontrol", "show", "job", job], check=False).stdout
    state = re.search(r"JobState=(\S+)", text)
    code = re.search(r"ExitCode=(\d+):(\d+)", text)
    status = int(code.group(1)) or int(code.group(2)) if code else 1
    return (state.group(1) if state else ""), status


def _sbatch_wait(slurm, log: Path, *args: str) -> subprocess.CompletedProcess:
    """Submit from the repository root and wait for the job; the exit status is the job's.

    Polls scontrol every 0.2 s: `sbatch --wait` sleeps 2 s, then up to 10 s, between looks,
    which made a 3 s job take 10 s."""
    proc = slurm.command(["sbatch", "--parsable", f"--output={log}", *args], check=False, cwd=ROOT)
    if proc.returncode != 0:
        return proc
    job = proc.stdout.strip().split(";")[0]
    end = time.monotonic() + JOB_TIMEOUT_S
    state, status = _job_state(slurm, job)
    while state not in _ENDED:
        if time.monotonic() > end:
            slurm.command(["scancel", job], check=False)
            raise subprocess.TimeoutExpired(["sbatch", *args], JOB_TIMEOUT_S)
        time.sleep(0.2)
        state, status = _job_state(slurm, job)
    return subprocess.CompletedProcess(proc.args, status, f"job {job}: {state}\n", proc.stderr)


def _job_failed(proc, log: Path) -> str:
    text = log.read_text() if log.is_file() else "(no job output)"
    return f"{proc.stdout}{proc.stderr}\n{text[-3000:]}"


def test_the_sweep_template_writes_results_with_provenance(jobs_leave_nothing, tmp_path):
    out, log = tmp_path / "sweep.csv", tmp_path / "sweep.out"
    proc = _sbatch_wait(
        jobs_leave_nothing, log, "slurm/sweep.sbatch", str(out), "--max-bytes", "4096",
        "--reps", "20",
    )  # fmt: skip
    assert proc.returncode == 0, _job_failed(proc, log)
    rows, meta = read_results(out)
    assert [r["nbytes"] for r in rows] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
    assert all(r["t_median_s"] > 0 for r in rows)
    assert _found(meta, "ranks") == 2 and len(_found(meta, "hosts")) == 1
    assert sorted(p["rank"] for p in _found(meta, "placement")) == [0, 1]
    assert "MPICH" in _found(meta, "mpi_library_version")


def _found(meta: dict, key: str):
    """meta[key], looked up in nested sections too."""
    if key in meta:
        return meta[key]
    for value in meta.values():
        if isinstance(value, dict) and (found := _found(value, key)) is not None:
            return found
    return None


def test_the_pairwise_template_pairs_every_rank(jobs_leave_nothing, tmp_path):
    out, log = tmp_path / "pairwise.csv", tmp_path / "pairwise.out"
    proc = _sbatch_wait(
        jobs_leave_nothing, log, "--nodes=1", "--ntasks-per-node=2", "slurm/pairwise.sbatch",
        str(out), "--max-bytes", "1024", "--reps", "20",
    )  # fmt: skip
    assert proc.returncode == 0, _job_failed(proc, log)
    rows, meta = read_results(out)
    assert [r["nbytes"] for r in rows][-1] == 1024
    assert _found(meta, "mode") == "pairwise" and _found(meta, "ranks") == 2


def _pingpong_1k():
    """On each engine: one blocking ping-pong of 1 KiB between ranks 0 and 1 (median seconds)."""
    import numpy as np
    from mpi4py import MPI

    from pingpong_lab.mpi import kernels

    samples, corrupt = kernels.pingpong_blocking(MPI.COMM_WORLD, 1024, 5, 20)
    return MPI.COMM_WORLD.Get_size(), float(np.median(samples)), int(corrupt)


def test_engines_started_by_sbatch_ping_pong_as_one_mpi_job(
    jobs_leave_nothing, tmp_path, monkeypatch
):
    from pingpong_lab.engines.cluster import MPICluster

    for name, value in jobs_leave_nothing.env.items():
        if name in ("SLURM_CONF", localslurm.TAG_VARIABLE):
            monkeypatch.setenv(name, value)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setenv("PINGPONG_LAB_SLURM_DIR", str(tmp_path))
    with MPICluster(n=2, launcher="slurm", timeout=60) as cluster:
        assert cluster.launcher == "sbatch" and cluster.slurm_job_id
        remember_pids(cluster.pids)
        states = jobs_leave_nothing.command(["squeue", "-h", "-o", "%A %T"]).stdout
        assert f"{cluster.slurm_job_id} RUNNING" in states
        results = cluster.run(_pingpong_1k, label="a ping-pong on Slurm engines")
        assert [(size, corrupt) for size, _, corrupt in results] == [(2, 0), (2, 0)]
        assert results[0][1] > 0  # rank 0 timed its round trips
        job = cluster.slurm_job_id
    assert not _queue(jobs_leave_nothing), f"the engines' job {job} is still queued"
    assert not list(Path.cwd().glob("*.sbatch")), "the engines' job script is left behind"


ENGINES_IN_ALLOCATION = """
import sys
from pingpong_lab.engines.cluster import MPICluster
with MPICluster(n=2, launcher="slurm", timeout=60) as cluster:
    ranks = cluster.run(lambda: __import__("mpi4py.MPI").MPI.COMM_WORLD.Get_rank())
    print("launcher", cluster.launcher, "ranks", ranks, "job", cluster.slurm_job_id)
"""


def test_inside_an_allocation_the_engines_are_a_job_step(jobs_leave_nothing, tmp_path):
    script = tmp_path / "engines.sbatch"
    script.write_text(f"#!/bin/bash\n{sys.executable} -c '{ENGINES_IN_ALLOCATION}'\n")
    log = tmp_path / "engines.out"
    proc = _sbatch_wait(jobs_leave_nothing, log, "--ntasks=2", str(script))
    assert proc.returncode == 0, _job_failed(proc, log)
    assert "launcher srun ranks [0, 1] job None" in log.read_text()


@pytest.fixture
def submitted_class(tmp_path):
    """A course with 01_pingpong released; ann submits the solution, bob the exercise."""
    from pingpong_lab.grader import gradebook

    name = "01_pingpong"
    course = scratch_course(tmp_path, ROOT / "course", [name])
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(
        [sys.executable, "-m", "nbgrader", "generate_assignment", name, "--log-level=WARN"],
        cwd=course,
        env=env,
        check=True,
        capture_output=True,
    )
    submit(course, "ann", name, ROOT / "solutions" / name / f"{name}.ipynb")
    submit(course, "bob", name, ROOT / "exercises" / name / f"{name}.ipynb")
    assert gradebook.scores(course) == []
    return course


def test_the_class_grading_array_grades_each_student_and_merges_the_gradebooks(
    jobs_leave_nothing, submitted_class
):
    from pingpong_lab.grader import gradebook

    slurm, course = jobs_leave_nothing, submitted_class
    env = {
        **slurm.env,
        "PINGPONG_LAB_COURSE": str(course),
        "PINGPONG_LAB_VENV": str(Path(sys.executable).parent.parent),
        "PINGPONG_LAB_BUILD": str(course.parent / "c-build"),
        "PINGPONG_LAB_EXCHANGE": str(course.parent / "exchange"),
    }
    # one CPU per task, so that both run at once on a two-core node
    proc = subprocess.run(
        ["slurm/grade-class.sh", "--cpus-per-task=1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "grading 2 submission(s)" in proc.stdout
    logs = course / "slurm-logs"
    finished = _wait(lambda: not _queue(slurm), 600)
    outputs = "\n".join(f"{p.name}: {p.read_text()[-1500:]}" for p in sorted(logs.glob("*")))
    assert finished, f"the grading jobs did not finish: {_queue(slurm)}\n{outputs}"
    scores = {student: (score, top) for _, student, score, top in gradebook.scores(course)}
    assert set(scores) == {"ann", "bob"}, outputs
    # the solution: every autograded point; the written answers wait for the instructor
    assert scores["ann"][0] == scores["ann"][1] - _by_hand(course, "01_pingpong") > 0, outputs
    assert scores["bob"][0] < scores["bob"][1], outputs  # the untouched exercise: not
    rows = {r["student"]: r for r in csv.DictReader((course / "class-grading.csv").open())}
    assert rows["ann"]["grading"] == rows["bob"]["grading"] == "ok", outputs
    assert float(rows["ann"]["total"]) == scores["ann"][0]
    assert float(rows["bob"]["01_pingpong"]) == scores["bob"][0]
    assert sorted(p.name for p in (course / "gradebooks").glob("*.db")) == ["ann.db", "bob.db"]
    assert (course / "feedback" / "ann" / "01_pingpong" / "01_pingpong.html").is_file()


def _by_hand(course: Path, name: str) -> float:
    """Points of the answers an instructor grades by hand in assignment `name`."""
    nb = json.loads((course / "source" / name / f"{name}.ipynb").read_text())
    meta = [c["metadata"].get("nbgrader", {}) for c in nb["cells"]]
    return sum(
        m.get("points", 0) for m in meta if m.get("task") or (m.get("grade") and m.get("solution"))
    )
