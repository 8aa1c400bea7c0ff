"""The stopping rule's precision can never be finer than the clock (no MPI needed)."""

from __future__ import annotations

import numpy as np
import pytest

from pingpong_lab.analysis import stats
from pingpong_lab.mpi import measure


def test_samples_on_one_clock_tick_do_not_claim_a_zero_width_ci():
    # 2000 one-way times, most of them exactly 3 us (the same tick of a 1 ns clock)
    t = np.full(2000, 3e-6)
    t[:50] = 3.2e-6
    row = stats.summary_row(64, t.size, 10, t, tick_s=0.5e-9)
    assert row.t_median_s == pytest.approx(3e-6)
    assert row.ci_rel_halfwidth == pytest.approx(0.5e-9 / 3e-6)


def test_a_wide_ci_is_reported_as_it_is():
    rng = np.random.default_rng(1)
    t = 1e-5 * (1 + 0.5 * rng.random(200))
    floored = stats.summary_row(64, t.size, 10, t, tick_s=1e-12).ci_rel_halfwidth
    plain = stats.summary_row(64, t.size, 10, t).ci_rel_halfwidth
    assert floored == plain > 0.01


def test_the_tick_of_a_batched_one_way_sample_is_the_resolution_over_twice_the_batch():
    assert measure.one_way_tick(1e-6, 1) == pytest.approx(5e-7)
    assert measure.one_way_tick(1e-6, 50) == pytest.approx(1e-8)
