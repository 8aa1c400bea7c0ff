"""What notebook 02 states about clocks and the eager limit holds, on this machine and in text.

The smallest step measured between consecutive clock readings is never finer than the clock's
resolution (MPI.Wtick()); from Python it is the cost of one reading. The eager limit is a
setting of the MPI library and its transport, so the notebook never states this machine's
value as a fact and points to where the learner measured theirs.
"""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NB = ROOT / "course" / "source" / "02_timing" / "02_timing.ipynb"


def cells():
    return json.loads(NB.read_text())["cells"]


def markdown() -> list[str]:
    return ["".join(c["source"]) for c in cells() if c["cell_type"] == "markdown"]


def solution(grade_id: str):
    """The notebook's own solution function `grade_id`, run as the learner's code would be."""
    cell = next(c for c in cells() if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)
    namespace = {"math": math, "np": pytest.importorskip("numpy")}
    exec("".join(cell["source"]), namespace)  # noqa: S102 - the course's own source
    return namespace[grade_id]


def test_the_measured_step_is_never_finer_than_wtick_and_is_the_cost_of_a_reading():
    mpi = pytest.importorskip("mpi4py.MPI")
    timer_resolution = solution("timer_resolution")
    step = timer_resolution(mpi.Wtime)
    assert step >= mpi.Wtick() * (1 - 1e-9)
    # a reading costs time: n readings take at least n times the smallest step, give or take
    # the clock's own resolution
    n = 20_000
    start = time.perf_counter()
    for _ in range(n):
        mpi.Wtime()
    per_call = (time.perf_counter() - start) / n
    assert step <= per_call + mpi.Wtick() + 1e-9


def test_key_points_call_wtick_the_resolution_and_the_measured_step_the_cost_of_reading():
    key = next(t for t in markdown() if t.startswith("## Key points"))
    first = key.split("\n- ")[1]
    assert "Wtick" in first and "resolution" in first
    assert "cost of reading the clock" in first
    assert not re.search(r"a tick is typically\s+tens of nanoseconds", key)


def test_the_eager_limit_is_not_stated_as_this_machines_8_kib():
    for text in markdown():
        flat = " ".join(text.split())
        for match in re.finditer(r"\b8 KiB|\b8192\b", flat):
            around = flat[max(0, match.start() - 300) : match.end() + 300]
            assert "depends" in around or "developed on" in around, around
    limit = [t for t in markdown() if "eager limit" in t]
    assert limit, "say where the learner's eager limit comes from"
    flat = " ".join(limit[0].split())
    assert "depends on the MPI library" in flat and "transport" in flat
    assert "01_deadlock" in flat and "first_deadlock_bytes" in flat


def test_the_written_answer_asks_for_own_numbers_and_its_scheme_has_half_points_and_a_model():
    schemes = [t for t in markdown() if "=== BEGIN MARK SCHEME ===" in t]
    assert schemes
    for text in schemes:
        question, scheme = text.split("=== BEGIN MARK SCHEME ===")
        assert "your" in question and "output" in question and "interval" in question
        items = [line for line in scheme.splitlines() if line.startswith("- **1 point")]
        assert items and scheme.count("Half a point") >= len(items), "half points per item"
        assert "**Model answer**" in scheme and "not the learner's own" in scheme
