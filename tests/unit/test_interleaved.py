"""Claims about sweeps in interleaved rounds (`pingpong-lab sweep --rounds`), without MPI: a
one-rank stand-in communicator and a kernel that records what it was asked to time."""

from __future__ import annotations

import numpy as np
import pytest

from pingpong_lab.analysis import headline
from pingpong_lab.apps import report, sweep
from pingpong_lab.mpi import measure
from pingpong_lab.mpi.settings import SweepSettings


class _OneRank:
    def Get_rank(self):  # noqa: N802 - the mpi4py names
        return 0

    def allreduce(self, value, op=None):
        return value

    def allgather(self, value):
        return [value]

    def gather(self, value, root=0):
        return [value]

    def bcast(self, value, root=0):
        return value


class _Kernel:
    """Times sizes as nbytes * 1 us * (round number): the round is readable from the samples."""

    def __init__(self, reps):
        self.reps = reps
        self.timed: list[int] = []

    def __call__(self, comm, nbytes, warmup, iters, batch=1, **options):
        if iters != self.reps:  # the calibration run of plan()
            return np.full(iters, 1e-6), 0
        self.timed.append(nbytes)
        rnd = self.timed.count(nbytes)
        return np.full(iters, 2e-6 * nbytes * rnd), 0  # round trips; one way is half


def test_every_round_runs_every_size_once_in_alternating_order():
    settings = SweepSettings(sizes=[1, 8, 64], rounds=3, reps=4)
    kernel = _Kernel(reps=4)
    seen = []
    rows, raw = measure.interleaved_rows(
        settings, _OneRank(), kernel, on_round=lambda i, n, s: seen.append((i, n))
    )
    assert kernel.timed == [1, 8, 64, 64, 8, 1, 1, 8, 64]
    assert seen == [(0, 3), (1, 3), (2, 3)]
    assert [r.reps for r in rows] == [12, 12, 12] and {r.rounds for r in rows} == {3}
    assert {r.stop_reason for r in rows} == {"fixed"}
    assert raw[8].shape == (1, 12)
    # the rounds follow one another in the samples, as round_medians reads them
    per_round = headline.round_medians([1, 8, 64], raw, 3)
    np.testing.assert_allclose(per_round, np.outer([1, 2, 3], [1, 8, 64]) * 1e-6)


def test_rounds_are_a_setting_of_the_sweep_and_of_the_command_line(monkeypatch, tmp_path):
    s = SweepSettings(sizes=[1, 2], rounds=8, target_s=0.01)
    assert SweepSettings.from_dict(s.to_dict()) == s
    assert "8 interleaved rounds of 0.01 s per size" in s.describe()
    with pytest.raises(ValueError, match="rounds must be at least 1"):
        SweepSettings(sizes=[1], rounds=0)
    launched = []
    monkeypatch.setattr(sweep, "launch_sweep", lambda s, n, out, **kw: launched.append(s) or 0)
    out = str(tmp_path / "r.csv")
    assert sweep.main(["--max-bytes", "4", "--rounds", "5", "--out", out]) == 0
    assert launched[-1].rounds == 5 and launched[-1].reps is None


def test_the_report_measures_its_main_sweeps_in_rounds():
    plan = {role: s for role, _, s in report.FULL.runs(2)}
    assert plan["c_blocking"].rounds == report.FULL.headline_rounds >= 8
    for role in ("c_nonblocking", "python_blocking", "c_blocking_tcp"):
        assert plan[role].rounds == report.FULL.rounds >= 4, role
    assert plan["variability"].rounds is None and plan["contention_2"].rounds is None
