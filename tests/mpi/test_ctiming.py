"""Notebook 02's C timing loop on real engines: the solution passes, classic slips fail."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from pingpong_lab.course import grading, notebook
from pingpong_lab.course.grading import ctiming
from pingpong_lab.errors import DeadlockError

from ..conftest import requires_mpi

pytestmark = [requires_mpi, pytest.mark.engines]

SOURCE = Path(__file__).resolve().parents[2] / "course" / "source" / "02_timing" / "02_timing.ipynb"


def solution_c() -> str:
    """The C of the notebook's solution cell (without its %%writefile line)."""
    nb = json.loads(SOURCE.read_text())
    cell = next(
        c
        for c in nb["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade_id") == "time_pingpong_c"
    )
    return "".join(cell["source"]).split("\n", 1)[1]


SLIPS = {
    "the warm-up is timed": (
        "    MPI_Barrier(comm);\n    double start = MPI_Wtime();\n",
        "    double start = MPI_Wtime();\n    MPI_Barrier(comm);\n",
    ),
    "no half round trip": ("samples[i] = (after - before) / 2.0;", "samples[i] = after - before;"),
    "the fastest rank": ("MPI_DOUBLE, MPI_MAX, comm", "MPI_DOUBLE, MPI_MIN, comm"),
}


@pytest.fixture
def build_here(tmp_path, monkeypatch):
    monkeypatch.setenv("PINGPONG_LAB_BUILD", str(tmp_path / "build"))
    return tmp_path


def _library(folder, source, instrument):
    path = folder / "timing.c"
    path.write_text(source)
    return grading.compile_student_c(str(path), name="timing", instrument=instrument)


def test_the_solution_passes_the_instrumented_check(build_here):
    lib = _library(build_here, solution_c(), instrument=True)
    assert grading.check_c_timing(lib, nbytes=64, reps=5, warmup=3)
    assert grading.check_c_timing(lib, nbytes=4097, reps=9, warmup=0)


@pytest.mark.parametrize(("old", "new"), SLIPS.values(), ids=SLIPS.keys())
def test_a_slip_in_the_timing_loop_fails_the_instrumented_check(build_here, old, new):
    source = solution_c()
    assert old in source
    lib = _library(build_here, source.replace(old, new), instrument=True)
    with pytest.raises(AssertionError):
        grading.check_c_timing(lib, nbytes=64, reps=5, warmup=3)


def test_the_c_sweep_keeps_every_sample_and_hands_on_the_contract_shapes(cluster2, build_here):
    lib = _library(build_here, solution_c(), instrument=False)

    def choose_reps(comm, calibration_s, calibration_reps, target_s, min_reps=10, max_reps=500):
        from mpi4py import MPI

        reps = math.ceil(target_s * calibration_reps / calibration_s) if calibration_s else max_reps
        return int(comm.allreduce(min(max_reps, max(min_reps, reps)), op=MPI.MAX))

    rows = grading.c_sweep(cluster2, lib, choose_reps, [1, 1024, 65536], target_s=0.005)
    assert [r["nbytes"] for r in rows] == [1, 1024, 65536]
    for row in rows:
        assert row["samples"].shape == (2, row["reps"]) and np.all(row["samples"] > 0)
    sweep = notebook.sweep_result(rows)
    assert sweep["t_median_s"].shape == (3,) and sweep["method"] == "echo"
    assert np.all(sweep["ci_lo_s"] <= sweep["t_median_s"])
    assert np.all(sweep["t_median_s"] <= sweep["ci_hi_s"])
    kept = notebook.samples_by_size(notebook.samples_result(rows))
    assert {b: a.shape for b, a in kept.items()} == {r["nbytes"]: (2, r["reps"]) for r in rows}


def test_a_c_function_can_be_called_more_often_than_mpi4py_has_error_handlers(cluster2, build_here):
    lib = _library(build_here, solution_c(), instrument=False)
    for _ in range(40):  # mpi4py has 32 slots for Python error handlers per process
        results = ctiming.c_timing_on_engines(cluster2, lib, nbytes=8, reps=3, warmup=1)
        ctiming.raise_for_rc(results)
        assert results[0]["one_way"] > 0


def _in_place(folder, source):
    (folder / "timing.c").write_text(source)
    return str(folder / "timing.c")


def test_the_solution_agrees_with_what_the_course_rank_saw(build_here, monkeypatch):
    monkeypatch.chdir(build_here)
    assert grading.check_c_timing_against_partner(_in_place(build_here, solution_c()))


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        # twice the one-way time, give or take the noise of one run
        (*SLIPS["no half round trip"], r"is (1\.[89]\d|2\.[0-4]\d)x the one-way time"),
        ("    MPI_Barrier(comm);\n", "", "the other never reaches"),  # the course's Barrier
    ],
    ids=["no half round trip", "no Barrier"],
)
def test_a_timing_slip_disagrees_with_the_course_rank(build_here, monkeypatch, old, new, says):
    monkeypatch.chdir(build_here)
    source = solution_c()
    assert old in source
    with pytest.raises((AssertionError, DeadlockError), match=says):
        grading.check_c_timing_against_partner(
            _in_place(build_here, source.replace(old, new)), timeout=10
        )
