"""Claims about pingpong_lab.stats: summaries, median CIs, rank reduction, timer checks."""

import math
import subprocess
import sys

import numpy as np
import pytest

from pingpong_lab.analysis import model, stats


@pytest.mark.parametrize(("confidence", "n"), [(0.9, 5), (0.95, 6), (0.99, 8)])
def test_min_samples_for_median_ci_is_smallest_n_with_min_max_coverage(confidence, n):
    assert stats.min_samples_for_median_ci(confidence) == n
    assert 1 - 2 * 0.5**n >= confidence > 1 - 2 * 0.5 ** (n - 1)


def test_median_ci_of_100_samples_uses_order_statistics_40_and_61():
    lo, hi, coverage = stats.median_ci(np.arange(1.0, 101.0), 0.95)
    assert (lo, hi) == (40.0, 61.0)
    assert coverage == pytest.approx(0.9648, abs=1e-4)


@pytest.mark.parametrize("n", [6, 7, 10, 25, 60, 201])
def test_median_ci_coverage_equals_exact_binomial_sum(n):
    x = np.arange(n, dtype=float)
    lo, hi, coverage = stats.median_ci(x, 0.95)
    j = int(lo) + 1  # 1-based rank of the lower bound
    assert hi == n - j  # symmetric: x(n-j+1), 0-based n-j
    exact = sum(math.comb(n, i) for i in range(j, n - j + 1)) / 2**n
    assert coverage == pytest.approx(exact, rel=1e-9)
    assert coverage >= 0.95
    if j + 1 <= n // 2:  # the next narrower interval would fall short
        narrower = sum(math.comb(n, i) for i in range(j + 1, n - j)) / 2**n
        assert narrower < 0.95


def test_median_ci_covers_true_median_of_a_skewed_distribution_at_least_nominally():
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(400):
        lo, hi, _ = stats.median_ci(rng.lognormal(size=31), 0.95)
        hits += lo <= 1.0 <= hi  # median of lognormal(0, 1) is 1
    assert hits / 400 >= 0.93


def test_median_ci_refuses_fewer_samples_than_needed():
    with pytest.raises(ValueError, match="at least 6 samples, got 5"):
        stats.median_ci([1, 2, 3, 4, 5], 0.95)


def test_median_ci_of_a_million_samples_is_stable_and_narrow():
    x = np.random.default_rng(0).normal(10.0, 1.0, size=1_000_000)
    lo, hi, coverage = stats.median_ci(x)
    assert lo < np.median(x) < hi and hi - lo < 0.01
    assert 0.95 <= coverage < 0.96


def test_summarize_reports_basic_statistics_and_percentiles():
    s = stats.summarize(np.arange(1.0, 101.0), n_boot=0)
    assert s.n == 100 and s.min == 1 and s.max == 100
    assert s.mean == pytest.approx(50.5) and s.median == s.p50 == pytest.approx(50.5)
    assert s.std == pytest.approx(np.std(np.arange(1, 101), ddof=1))
    assert s.p90 == pytest.approx(np.quantile(np.arange(1, 101), 0.9))
    assert s.p99 == pytest.approx(np.quantile(np.arange(1, 101), 0.99))
    assert (s.ci_lo, s.ci_hi) == (40.0, 61.0)
    assert math.isnan(s.boot_ci_lo)
    assert set(s.as_dict()) >= {"n", "mean", "median", "p99", "ci_lo", "ci_hi"}


def test_summarize_ignores_nan_and_accepts_2d_rank_by_iteration_arrays():
    a = np.array([[1.0, 2.0, np.nan], [np.nan, 3.0, 4.0]])
    s = stats.summarize(a, n_boot=0)
    assert s.n == 4 and s.mean == pytest.approx(2.5)


def test_heavy_tail_pulls_the_mean_above_the_median_and_outliers_are_counted():
    x = np.array([1.0] * 90 + [1.1] * 5 + [100.0] * 5)
    s = stats.summarize(x, n_boot=200)
    assert s.mean > 5 * s.median
    assert s.n_above_3x_median == 5
    assert s.n_high_iqr == 10  # Q1 = Q3 = 1, so both 1.1 and 100 lie beyond the fence
    assert s.n_low_iqr == 0


def test_bootstrap_median_ci_is_deterministic_for_a_seed_and_brackets_the_median():
    x = np.random.default_rng(3).lognormal(size=500)
    a = stats.bootstrap_median_ci(x, rng=42, n_boot=300)
    b = stats.bootstrap_median_ci(x, rng=42, n_boot=300)
    c = stats.bootstrap_median_ci(x, rng=43, n_boot=300)
    assert a == b and a != c
    assert a[0] <= np.median(x) <= a[1]


def test_summarize_with_too_few_samples_leaves_the_order_statistics_ci_undefined():
    s = stats.summarize([1.0, 2.0, 3.0], n_boot=0)
    assert math.isnan(s.ci_lo) and math.isnan(s.ci_hi) and s.median == 2.0


def test_single_sample_has_zero_standard_deviation():
    assert stats.summarize([5.0], n_boot=0).std == 0.0


@pytest.mark.parametrize(
    ("samples", "confidence", "message"),
    [
        ([], 0.95, "no measured values"),
        ([np.nan, np.nan], 0.95, "no measured values"),
        ([1.0, np.inf], 0.95, "infinite"),
        ([1.0, 2.0], 1.0, "confidence must be between 0 and 1"),
        (["a", "b"], 0.95, "must be numbers"),
    ],
)
def test_summarize_rejects_bad_input_with_a_clear_message(samples, confidence, message):
    with pytest.raises(ValueError, match=message):
        stats.summarize(samples, confidence)


def test_outlier_mask_marks_the_tail_by_iqr_and_by_median_multiple():
    x = np.array([1.0, 1.0, 1.0, 1.2, 1.1, 2.5, 10.0, np.nan])
    assert stats.outlier_mask(x, "median").tolist() == [0, 0, 0, 0, 0, 0, 1, 0]
    assert stats.outlier_mask(x, "iqr")[-2] and not stats.outlier_mask(x, "iqr")[-1]
    with pytest.raises(ValueError, match="method must be"):
        stats.outlier_mask(x, "zscore")


def test_max_across_ranks_takes_the_slowest_rank_per_iteration_and_skips_idle_ranks():
    a = np.array(
        [
            [1.0, 5.0, 2.0],
            [np.nan, np.nan, np.nan],  # an idle rank
            [3.0, 1.0, np.nan],
        ]
    )
    np.testing.assert_array_equal(stats.max_across_ranks(a), [3.0, 5.0, 2.0])


def test_max_across_ranks_gives_nan_for_an_iteration_nobody_measured():
    out = stats.max_across_ranks([[1.0, np.nan], [2.0, np.nan]])
    assert out[0] == 2.0 and math.isnan(out[1])


def _pingpong_readings(iters, stall_in, stall=50.0, one_way=1.0, gap=0.2):
    """Both ranks' samples of a simulated blocking ping-pong timed as notebook 02 times it (a
    clock reading before the first round trip and after each one, half of each difference),
    with one stall of `stall` in round trip 5: "reply" delays the reply's arrival at rank 0,
    "message" the message's arrival at rank 1."""
    send = [0.0]  # rank 0 starts round trip i
    reply_left, reply_back = [], []  # rank 1's Send returns (eager); rank 0's Recv returns
    for i in range(iters):
        arrives = send[i] + one_way + (stall if (i == 5 and stall_in == "message") else 0.0)
        reply_left.append(arrives)
        reply_back.append(arrives + one_way + (stall if (i == 5 and stall_in == "reply") else 0.0))
        send.append(reply_back[i] + gap)
    rank0 = np.diff([0.0, *reply_back]) / 2
    rank1 = np.diff([0.0, *reply_left]) / 2  # rank 1 reads its clock first at time 0 too
    return np.array([rank0, rank1])


@pytest.mark.parametrize("stall_in", ["message", "reply"])
def test_a_pingpongs_stall_counts_once_in_its_round_trips(stall_in):
    a = _pingpong_readings(20, stall_in)
    slow = lambda x: int(np.sum(x > 10.0))  # noqa: E731
    assert slow(stats.round_trips(a)) == 1
    # the per-iteration max pairs readings half a round trip apart: a stall on the reply's way
    # back is in rank 0's reading 5 and rank 1's reading 6, and the max counts it twice
    assert slow(stats.max_across_ranks(a)) == (2 if stall_in == "reply" else 1)
    np.testing.assert_array_equal(stats.round_trips(a), a[0])
    idle_starter = np.array([np.full(3, np.nan), [1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(stats.round_trips(idle_starter), [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="no row 2"):
        stats.round_trips(a, starter=2)


def test_max_across_ranks_refuses_all_nan_and_non_2d_input():
    with pytest.raises(ValueError, match="no rank measured"):
        stats.max_across_ranks(np.full((2, 3), np.nan))
    with pytest.raises(ValueError, match="2-D array"):
        stats.max_across_ranks([1.0, 2.0])


def test_combine_pools_arrays_of_any_shape_and_drops_nan():
    out = stats.combine([[1.0, np.nan], np.array([[2.0], [3.0]])])
    np.testing.assert_array_equal(out, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="at least one array"):
        stats.combine([])


def test_ci_relative_width_is_width_over_median_for_summaries_and_dicts():
    s = stats.summarize(np.arange(1.0, 101.0), n_boot=0)
    assert stats.ci_relative_width(s) == pytest.approx(21 / 50.5)
    assert stats.ci_relative_width({"ci_lo": 9, "ci_hi": 11, "median": 10}) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="positive median"):
        stats.ci_relative_width({"ci_lo": 0, "ci_hi": 0, "median": 0})
    with pytest.raises(ValueError, match="needs 'ci_lo'"):
        stats.ci_relative_width({"median": 1})


class _QuantisedClock:
    """A fake clock that advances 0.3 ms per call but reads in whole milliseconds."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        self.t += 3e-4
        return math.floor(self.t * 1000) / 1000


def test_measured_timer_resolution_finds_the_tick_of_a_coarse_clock():
    assert stats.measured_timer_resolution(_QuantisedClock(), n=20) == pytest.approx(1e-3)


def test_measured_timer_resolution_of_perf_counter_is_below_a_millisecond():
    assert 0 < stats.measured_timer_resolution(n=50) < 1e-3


def test_measured_timer_resolution_rejects_a_frozen_or_backwards_clock():
    with pytest.raises(ValueError, match="did not change"):
        stats.measured_timer_resolution(lambda: 1.0, n=1, max_spins=100)
    ticks = iter([2.0, 1.0])
    with pytest.raises(ValueError, match="backwards"):
        stats.measured_timer_resolution(lambda: next(ticks), n=1)


def test_importing_stats_does_not_import_mpi4py():
    code = "import sys, pingpong_lab.analysis.stats; print('mpi4py' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_check_timed_block_refuses_blocks_shorter_than_100_ticks():
    with pytest.raises(ValueError, match=r"shorter than 100 x timer resolution"):
        stats.check_timed_block(5e-5, 1e-6)
    assert stats.check_timed_block(1e-4, 1e-6) == pytest.approx(100)
    with pytest.raises(ValueError, match="shorter than 10 x"):
        stats.check_timed_block(5e-6, 1e-6, factor=10)
    with pytest.raises(ValueError, match="resolution must be positive"):
        stats.check_timed_block(1.0, 0.0)


@pytest.mark.parametrize("bad", [0, 1, -0.5, 1.5, float("nan")])
def test_one_confidence_check_for_medians_and_fits(bad):
    message = "confidence must be between 0 and 1 .exclusive."
    with pytest.raises(ValueError, match=message):
        stats.check_confidence(bad)
    with pytest.raises(ValueError, match=message):
        model.bootstrap_ci([1, 2, 4, 8], [1.0, 1.1, 1.2, 1.4], confidence=bad, n_boot=10)
    assert stats.check_confidence("0.9") == 0.9


def test_generator_passes_a_generator_through_and_seeds_anything_else():
    gen = np.random.default_rng(5)
    assert stats.generator(gen) is gen
    assert stats.generator(5).random() == np.random.default_rng(5).random()
    x, t = [1, 2, 4, 8, 16], [1.0, 1.1, 1.25, 1.5, 2.1]
    assert model.bootstrap_ci(x, t, n_boot=20, rng=3) == model.bootstrap_ci(
        x, t, n_boot=20, rng=np.random.default_rng(3)
    )


def test_the_null_max_of_p_pairs_grows_with_p_without_any_contention():
    one_pair = np.random.default_rng(5).lognormal(mean=0.0, sigma=0.3, size=2000)
    medians = [np.median(stats.null_max_of_pairs(one_pair, p, 4000, rng=1)) for p in (1, 2, 4, 8)]
    assert np.all(np.diff(medians) > 0), medians
    # its median is the 0.5^(1/p) quantile of one pair's samples
    for p, med in zip((1, 2, 4, 8), medians, strict=True):
        assert np.isclose(med, np.quantile(one_pair, 0.5 ** (1 / p)), rtol=0.03), p
    assert stats.null_max_of_pairs(one_pair, 3).shape == one_pair.shape
    with pytest.raises(ValueError, match="pairs must be at least 1"):
        stats.null_max_of_pairs(one_pair, 0)


def test_per_pair_medians_drop_ranks_that_did_not_time():
    a = np.array([[1.0, 2.0, 3.0], [np.nan] * 3, [4.0, np.nan, 6.0]])
    assert np.array_equal(stats.per_pair_medians(a), [2.0, 5.0])
    with pytest.raises(ValueError, match="no rank"):
        stats.per_pair_medians(np.full((2, 3), np.nan))


# -- Mann-Whitney U: exact for small sets without ties, normal approximation otherwise ---------
def test_mann_whitney_exact_p_values_are_the_counts_of_orderings():
    # 3 vs 3 completely separated: 2 of the C(6, 3) = 20 orderings are as extreme
    assert stats.mann_whitney([1, 2, 3], [4, 5, 6]).p == pytest.approx(2 / 20)
    # 5 vs 5 completely separated: 2 of 252
    test = stats.mann_whitney([6, 7, 8, 9, 10], [1, 2, 3, 4, 5])
    assert test.exact and test.p == pytest.approx(2 / 252) and test.prob_first_above == 1.0
    # interleaved: U = 10 of 25, P(U <= 10) = 87 / 252
    assert stats.mann_whitney([1, 2, 3, 4, 5], [1.5, 2.5, 3.5, 4.5, 5.5]).p == pytest.approx(
        2 * 87 / 252
    )


def test_mann_whitney_with_ties_uses_mean_ranks_and_the_tie_correction():
    test = stats.mann_whitney([1, 1, 2, 2, 3], [2, 3, 3, 4, 4])
    assert not test.exact and test.u == 3.0
    n1 = n2 = 5
    ties = np.array([2, 3, 3, 2])  # 1, 2, 3, 4
    var = n1 * n2 / 12 * (11 - float((ties**3 - ties).sum()) / 90)
    z = (abs(3 - 12.5) - 0.5) / np.sqrt(var)
    assert test.p == pytest.approx(math.erfc(z / math.sqrt(2)))
    assert stats.mann_whitney([2, 2, 2], [2, 2, 2]).p == 1.0


def test_mann_whitney_tells_a_shift_from_noise_on_independent_run_medians():
    rng = np.random.default_rng(1)
    same = [stats.mann_whitney(rng.lognormal(0, 0.3, 8), rng.lognormal(0, 0.3, 8)).p
            for _ in range(400)]  # fmt: skip
    assert 0.02 < np.mean(np.array(same) < 0.05) < 0.08  # about 5 % false alarms
    shifted = stats.mann_whitney(rng.lognormal(0.5, 0.1, 8), rng.lognormal(0, 0.1, 8))
    assert shifted.p < 0.01 and shifted.prob_first_above > 0.9


def test_a_comparison_of_runs_says_same_when_the_runs_cannot_tell():
    from pingpong_lab.course import notebook

    slow, fast = [2.0, 2.1, 2.2, 2.05, 2.15], [1.0, 1.1, 1.2, 1.05, 1.15]
    assert notebook.compare_runs(slow, fast)[0] == "slower"
    assert notebook.compare_runs(fast, slow)[0] == "faster"
    seen, why = notebook.compare_runs(slow[:3], fast[:3])  # 3 each: p is at least 0.1
    assert seen == "same" and "p = 0.100" in why and "x1.91" in why
    assert notebook.compare_runs(slow, [2.12, 2.0, 2.21, 2.07, 2.1])[0] == "same"


def test_the_null_models_interval_holds_its_median_and_narrows_with_more_samples():
    rng = np.random.default_rng(3)
    few, many = rng.lognormal(0, 0.3, 200), rng.lognormal(0, 0.3, 5000)
    for x in (few, many):
        point, lo, hi = stats.null_median_interval(x, 4, rng=1)
        assert lo <= point <= hi
        assert point == pytest.approx(np.quantile(x, 0.5 ** (1 / 4)), rel=0.05)
    width = [np.subtract(*stats.null_median_interval(x, 4, rng=1)[:0:-1]) for x in (few, many)]
    assert width[1] < width[0] / 2
