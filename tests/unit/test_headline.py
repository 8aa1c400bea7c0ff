"""Claims about analysis.headline and the piecewise model choice behind it (synthetic, no MPI).

Every headline gives a latency and a bandwidth and says how it read them: the piecewise segments
when two or three lines beat one by BIC, one line when it fits, else the two ends of the sweep.
"""

import math

import numpy as np
import pytest

from pingpong_lab.analysis import headline, model
from pingpong_lab.analysis.synthetic import synthetic_sweep

GIB = 2.0**30
SIZES = 2 ** np.arange(27)  # 1 B .. 64 MiB
ALPHA, BETA = 1.5e-6, 1.0 / (8 * GIB)

# shared memory as measured here: 1.2 us and 7 GiB/s below the eager limit (8 KiB), 3.5 us and
# 15 GiB/s from it on, and above 4 MiB (caches) 6 GiB/s, continuous at 4 MiB
EAGER, CLIFF = 8192, 4 << 20
A1, B1, A2, B2, B3 = 1.2e-6, 1 / (7 * GIB), 3.5e-6, 1 / (15 * GIB), 1 / (6 * GIB)


def _step_and_cliff_truth(b):
    b = np.asarray(b, dtype=float)
    t = np.where(b < EAGER, A1 + B1 * b, A2 + B2 * b)
    return np.where(b > CLIFF, A2 + B2 * CLIFF + B3 * (b - CLIFF), t)


def _step_and_cliff(seed, noise="gaussian", rel_noise=0.05, reps=30):
    """Medians of `reps` samples per size with relative noise (and spikes for "heavy")."""
    gen = np.random.default_rng(seed)
    truth = _step_and_cliff_truth(SIZES)[:, None]
    factor = 1 + rel_noise * gen.standard_normal((SIZES.size, reps))
    if noise == "heavy":  # one sample in 20 is 2-10x slow: other work on a shared machine
        factor += (gen.random(factor.shape) < 0.05) * gen.uniform(1, 9, factor.shape)
    return np.median(truth * np.maximum(factor, 0.01), axis=1)


# -- the model choice ------------------------------------------------------------------------


@pytest.mark.parametrize("noise", ["gaussian", "heavy"])
@pytest.mark.parametrize("seed", range(5))
def test_a_step_and_a_cache_cliff_make_the_piecewise_model_win(seed, noise):
    t = _step_and_cliff(seed, noise)
    assert model.fit_problems(model.fit_linear(SIZES, t))  # one line does not fit (R^2 < 0.9)
    pw = model.fit_piecewise(SIZES, t)
    assert pw.two_segments_better and pw.n_segments == 3
    assert pw.breakpoints[0] == EAGER and CLIFF <= pw.breakpoints[1] <= 2 * CLIFF
    assert pw.bic_one - pw.bic[2] > 50  # not a close call
    h = headline.choose(SIZES, t)
    assert h.method == "piecewise" and h.breakpoints == pw.breakpoints
    assert h.alpha_s == pytest.approx(A1, rel=0.05)
    assert h.bandwidth_Bps == pytest.approx(1 / B3, rel=0.1)
    assert h.latency_bytes == (1, EAGER // 2) and h.bandwidth_bytes[1] == SIZES[-1]


def test_with_two_lines_at_most_the_cliff_hides_the_step_from_bic():
    # the defect fit_piecewise had: one breakpoint absorbs one change, the other change's misfit
    # stays in the residuals as if it were noise, and two lines do not earn their parameters
    hidden = [
        not model.fit_piecewise(SIZES, _step_and_cliff(s), max_segments=2).two_segments_better
        for s in range(5)
    ]
    assert sum(hidden) >= 4
    for change in ("step", "cliff"):  # either change alone wins by far with two lines
        t = _step_and_cliff_truth(SIZES)
        if change == "step":
            t = np.where(SIZES > CLIFF, A2 + B2 * SIZES, t)
        else:
            t = np.where(SIZES < EAGER, A2 + B2 * SIZES, t)
        t = t * (1 + 0.01 * np.random.default_rng(0).standard_normal(SIZES.size))
        pw = model.fit_piecewise(SIZES, t, max_segments=2)
        assert pw.two_segments_better and pw.bic_one - pw.bic_two > 50, change


@pytest.mark.parametrize("seed", range(10))
def test_on_a_straight_line_one_line_wins_and_gives_the_headline(seed):
    s = synthetic_sweep(ALPHA, BETA, sizes=SIZES, noise="gaussian", reps=30, seed=seed)
    pw = model.fit_piecewise(s.nbytes, s.medians)
    assert pw.n_segments == 1 and not pw.two_segments_better
    h = headline.choose(s.nbytes, s.medians)
    assert h.method == "single line" and isinstance(h.model, model.LinearFit)
    assert h.alpha_s == pytest.approx(ALPHA, rel=0.05)
    assert h.bandwidth_Bps == pytest.approx(1 / BETA, rel=0.05)
    assert h.r2 == h.single.r2 > 0.99
    assert "one line fits all sizes" in h.why and "not better by BIC" in h.why


def test_one_protocol_step_gives_two_lines_and_the_lowest_alpha():
    s = synthetic_sweep(
        ALPHA, BETA, sizes=SIZES, noise="gaussian", reps=30, seed=1, breakpoint=65536,
        alpha2=20e-6,
    )  # fmt: skip
    h = headline.choose(s.nbytes, s.medians)
    assert h.method == "piecewise" and h.breakpoints == (65536,)
    assert h.alpha_s == pytest.approx(ALPHA, rel=0.05)  # not the line's, pulled up by the step
    assert h.bandwidth_Bps == pytest.approx(1 / BETA, rel=0.05)
    assert h.label() == "piecewise fit, 2 lines (break at 64 KiB)"


def test_a_negative_intercept_after_a_cliff_is_a_note_not_a_lost_bandwidth():
    # 4x steeper from 64 KiB on: one line misses, the upper line crosses zero below 64 KiB
    s = synthetic_sweep(ALPHA, BETA, breakpoint=65536, beta2=4 * BETA, noise="gaussian")
    h = headline.choose(s.nbytes, s.medians)
    assert h.method == "piecewise" and h.model.upper.alpha_s < 0
    assert h.bandwidth_Bps == pytest.approx(1 / (4 * BETA), rel=0.05)
    assert h.alpha_s == pytest.approx(ALPHA, rel=0.05)
    assert any(n.startswith("One line over all sizes is not used: R^2 = ") for n in h.notes)
    assert any("intercept is no latency" in n for n in h.notes)


def test_when_nothing_fits_latency_and_bandwidth_come_from_the_two_ends():
    # a straight line judged against an R^2 it cannot reach, and no step to find: Hockney
    s = synthetic_sweep(ALPHA, BETA, noise="gaussian", reps=30, seed=2)  # 1 B .. 16 MiB
    h = headline.choose(s.nbytes, s.medians, min_r2=0.99999)
    assert h.method == "regimes" and isinstance(h.model, headline.RegimeFit)
    assert h.latency_bytes == (1, headline.LATENCY_MAX_BYTES)
    assert h.bandwidth_bytes == (2 << 20, 16 << 20)  # the largest four sizes
    assert h.alpha_s == pytest.approx(ALPHA, rel=0.05)
    assert h.bandwidth_Bps == pytest.approx(1 / BETA, rel=0.05)
    assert h.n_half_bytes == pytest.approx(h.alpha_s / h.beta_s_per_byte)
    assert h.label() == "latency and bandwidth regimes (Hockney)"
    assert "latency from the smallest sizes (1 B .. 1 KiB)" in h.why
    assert "bandwidth from the largest (2 MiB .. 16 MiB)" in h.why
    pieces = h.model.pieces()
    assert [(lo, hi) for lo, hi, _ in pieces] == [(1, 1024), (2 << 20, 16 << 20)]


def test_a_lowest_segment_made_of_slow_outliers_gives_no_latency():
    # 1 B and 2 B hit by other work (3.7x): the best split makes them a segment whose line
    # falls with the size, so its intercept lies above all its times; the two ends are read
    t = _step_and_cliff(0)
    t[:2] *= 3.7
    pw = model.fit_piecewise(SIZES, t)
    assert pw.breakpoints[0] == 8 and pw.lower.alpha_s > t[:3].max()
    h = headline.choose(SIZES, t)
    assert h.method == "regimes" and "the lowest segment (1 B .. 4 B) gives no latency" in h.why
    assert h.alpha_s == pytest.approx(A1, rel=0.1)
    assert h.bandwidth_Bps == pytest.approx(1 / B3, rel=0.05)


def test_sizes_too_small_for_a_bandwidth_say_so():
    s = synthetic_sweep(1e-3, 1e-15, sizes=2 ** np.arange(11), noise="gaussian", seed=4, reps=5)
    h = headline.choose(s.nbytes, s.medians)
    assert h.alpha_s == pytest.approx(1e-3, rel=0.05)
    assert math.isnan(h.bandwidth_Bps) and math.isnan(h.n_half_bytes)
    assert any(n.startswith("No bandwidth") for n in h.notes)


def test_the_headline_needs_two_sizes():
    with pytest.raises(ValueError, match="2 distinct message sizes"):
        headline.choose([8, 8], [1e-6, 1e-6])


# -- interleaved rounds ----------------------------------------------------------------------


def _rounds(t, slow_rounds, rounds=4, reps=20, ranks=2):
    """Raw samples as the interleaved sweep writes them: the rounds one after the other."""
    gen = np.random.default_rng(0)
    samples = {}
    for n, tn in zip(SIZES, t, strict=True):
        blocks = [
            tn
            * (2.0 if r in slow_rounds else 1.0)
            * (1 + 0.01 * gen.standard_normal((ranks, reps)))
            for r in range(rounds)
        ]
        samples[int(n)] = np.hstack(blocks)
    return samples


def test_round_medians_split_the_samples_into_the_rounds_in_order():
    t = _step_and_cliff_truth(SIZES)
    per_round = headline.round_medians(SIZES, _rounds(t, slow_rounds={1}), 4)
    assert per_round.shape == (4, SIZES.size)
    np.testing.assert_allclose(per_round[1] / t, 2.0, rtol=0.02)
    np.testing.assert_allclose(per_round[[0, 2, 3]] / t, 1.0, rtol=0.02)
    missing = headline.round_medians([1, 3], {1: np.ones((2, 8))}, 4)
    assert np.isnan(missing[:, 1]).all() and (missing[:, 0] == 1).all()


def test_the_median_round_is_the_headline_and_the_rounds_give_its_interval_and_spread():
    t = _step_and_cliff_truth(SIZES)
    samples = _rounds(t, slow_rounds={0, 9}, rounds=12)  # 2 of 12 rounds slowed
    times, per_round, what = headline.headline_times(SIZES, 2 * t, samples, 12)
    assert what.startswith("median of 12 interleaved rounds")
    np.testing.assert_allclose(times / t, 1.0, rtol=0.02)  # a few slow rounds: not seen
    h = headline.choose(SIZES, times)
    spread = headline.round_spread(h, SIZES, per_round)
    assert spread.rounds == 12
    lo, hi, rel = spread.latency()
    assert lo == pytest.approx(A1, rel=0.03) and hi == pytest.approx(2 * A1, rel=0.03)
    assert rel == pytest.approx(1.0, rel=0.05)  # (2a - a) / median a
    blo, bhi, _ = spread.bandwidth()
    assert bhi == pytest.approx(2 * blo, rel=0.05)
    ci_lo, ci_hi = spread.latency_ci()  # order statistics of 12 rounds: the 3rd and the 10th
    # (a third slow round would be the 10th: the interval would reach it)
    assert ci_lo == pytest.approx(A1, rel=0.03) and ci_hi == pytest.approx(A1, rel=0.03)
    assert headline.interval_text(spread, "latency").endswith(
        "(95 % CI of the median over 12 rounds)"
    )
    # most rounds slowed: the median round follows them (a busy machine, as the report says)
    slowed = _rounds(t, slow_rounds={0, 1, 3, 4, 6, 7, 9, 10}, rounds=12)
    times, _, _ = headline.headline_times(SIZES, t, slowed, 12)
    np.testing.assert_allclose(times / t, 2.0, rtol=0.02)
    # without rounds, the medians are read as they are
    same, none, what = headline.headline_times(SIZES, t, samples, None)
    assert none is None and what == "median of all samples per size" and same is not None


def test_an_interval_needs_six_rounds():
    few = headline.RoundSpread((1e-6,) * 5, (GIB,) * 5)
    assert headline.interval_text(few, "latency").startswith("n/a (a 95 % interval needs 6")
    assert headline.interval_text(None, "bandwidth") == "n/a (not measured in interleaved rounds)"


def test_interleaved_rounds_come_from_the_provenance():
    assert headline.interleaved_rounds({"interleaved": True, "rounds": 8}) == 8
    assert headline.interleaved_rounds({"rounds": 8}) is None  # adaptive rounds: back to back
    assert headline.interleaved_rounds({"interleaved": True, "rounds": 1}) is None


@pytest.mark.parametrize("reading", ["3 lines", "2 lines", "1 line"])
def test_the_bandwidth_is_read_from_the_same_sizes_whatever_the_number_of_lines(reading):
    # BIC choosing 2 or 3 lines for runs of one machine moved 1/beta (the slope of the highest
    # segment: from 8 KiB up, or from the cache cliff up); now it is always the largest sizes'
    if reading == "3 lines":
        t = _step_and_cliff(0)
    else:
        s = synthetic_sweep(ALPHA, BETA, sizes=SIZES, noise="gaussian", reps=30, seed=1,
                            **({"breakpoint": 65536, "alpha2": 20e-6} if reading == "2 lines"
                               else {}))  # fmt: skip
        t = s.medians
    h = headline.choose(SIZES, t)
    assert (
        h.method
        == {"3 lines": "piecewise", "2 lines": "piecewise", "1 line": "single line"}[reading]
    )
    largest = SIZES[-headline.BANDWIDTH_SIZES :]
    assert h.bandwidth_bytes == (largest[0], largest[-1])
    line = model.fit_linear(largest, t[-headline.BANDWIDTH_SIZES :])
    assert h.beta_s_per_byte == pytest.approx(line.beta_s_per_byte)
    assert "the same sizes whatever the number of lines" in h.why


def test_each_round_is_read_the_same_way_without_a_new_search():
    t = _step_and_cliff(0)
    h = headline.choose(SIZES, t)
    alpha, beta = h.estimate(SIZES, t * 1.1)
    assert alpha == pytest.approx(1.1 * h.alpha_s) and beta == pytest.approx(
        1.1 * h.beta_s_per_byte
    )
    alpha, beta = h.estimate(SIZES[:3], t[:3])  # too few sizes for the highest segment
    assert math.isnan(beta) and alpha > 0


# -- formatting ------------------------------------------------------------------------------


def test_the_method_line_names_the_reading_and_why():
    h = headline.choose(SIZES, _step_and_cliff(0))
    line = h.method_line()
    assert line.startswith("piecewise fit, 3 lines (breaks at 8 KiB, ")
    assert "3 lines fit better than one (BIC " in line
    assert "one line does not fit all sizes (R^2 = " in line
    assert line.endswith(
        "latency from the lowest segment, bandwidth from the largest sizes (8 MiB .. 64 MiB), "
        "the same sizes whatever the number of lines"
    )
    d = h.as_dict()
    assert d["method"] == "piecewise" and d["breakpoints_bytes"][0] == EAGER
    assert d["bandwidth_GiBps"] == pytest.approx(h.bandwidth_Bps / GIB)


def test_spread_text():
    spread = headline.RoundSpread((1.0e-6, 1.1e-6, 1.2e-6), (8 * GIB, 10 * GIB, 9 * GIB))
    assert headline.spread_text(spread, "latency") == "1 µs .. 1.2 µs in 3 rounds (spread 18.2 %)"
    assert (
        headline.spread_text(spread, "bandwidth")
        == "8 GiB/s .. 10 GiB/s in 3 rounds (spread 22.2 %)"
    )
    assert headline.spread_text(None, "latency") == "n/a (not measured in interleaved rounds)"
    nan = headline.RoundSpread((math.nan, math.nan), (math.nan, math.nan))
    assert headline.spread_text(nan, "bandwidth") == "n/a (no round gave a bandwidth)"


# -- the latency floor -----------------------------------------------------------------------


def _placements(fast_share, seed, rounds=12, reps=600):
    """Samples of a VM whose host moves the two virtual CPUs between placements.

    Each round sits in one placement: the fast one (latency A1) for `fast_share` of the rounds,
    else 1.4x slower; within a placement the round trips are tight (1 %) with a few slow ones.
    The bandwidth sizes get 8 round trips per round, 5 % noise.
    """
    gen = np.random.default_rng(seed)
    truth = _step_and_cliff_truth(SIZES)
    fast = np.zeros(rounds, dtype=bool)
    fast[: max(1, round(fast_share * rounds))] = True  # at least once in every run
    gen.shuffle(fast)
    samples = {}
    for n, tn in zip(SIZES, truth, strict=True):
        small = n < EAGER
        k = reps if small else 8
        blocks = []
        for r in range(rounds):
            state = 1.0 if (fast[r] or not small) else 1.4
            noise = 0.01 if small else 0.05
            b = tn * state * (1 + noise * np.abs(gen.standard_normal((2, k))))
            b[:, gen.random(k) < 0.02] *= 3  # preempted round trips
            blocks.append(b)
        samples[int(n)] = np.hstack(blocks)
    return samples


def test_floor_times_are_a_low_quantile_of_the_per_iteration_maximum():
    a = np.vstack([np.linspace(1, 2, 10_001), np.full(10_001, 0.5)])
    floor = headline.floor_times([8, 16], {8: a})
    ((t, count),) = floor.values()
    assert list(floor) == [8] and count == 10_001
    assert t == pytest.approx(1 + headline.FLOOR_QUANTILE, rel=1e-9)  # rank 0 is the slower


def test_the_latency_floor_is_a_bound_beside_alpha_and_the_same_in_every_placement_luck():
    typical, floor = [], []
    for seed, share in enumerate((0.05, 0.3, 0.6, 0.9)):
        samples = _placements(share, seed)
        t, _, _ = headline.headline_times(SIZES, np.ones(SIZES.size), samples, 12)
        plain = headline.choose(SIZES, t)
        h = headline.choose(SIZES, t, floor=headline.floor_times(SIZES, samples))
        assert math.isnan(plain.alpha_floor_s) and plain.floor is None
        assert h.floor_bytes == (1, EAGER // 2)
        assert (h.alpha_s, h.beta_s_per_byte, h.why) == (
            plain.alpha_s,
            plain.beta_s_per_byte,
            plain.why,
        )  # the headline is the typical message's; the floor stands beside it
        assert h.alpha_floor_s <= h.alpha_s
        assert h.notes[-1].startswith(
            f"Best case: the latency floor is {h.alpha_floor_s * 1e6:.3g}"
        )
        typical.append(plain.alpha_s)
        floor.append(h.alpha_floor_s)
    assert max(typical) / min(typical) > 1.3  # the typical latency follows the luck
    assert max(floor) / min(floor) < 1.02
    assert min(floor) == pytest.approx(A1, rel=0.02)


def test_sizes_with_too_few_round_trips_have_no_floor():
    samples = _placements(0.5, 0, reps=100)  # 1,200 round trips per size
    t, _, _ = headline.headline_times(SIZES, np.ones(SIZES.size), samples, 12)
    floor = headline.floor_times(SIZES, samples)
    h = headline.choose(SIZES, t, floor=floor)
    assert h.floor is None and h.alpha_s == headline.choose(SIZES, t).alpha_s
    d = h.as_dict()
    assert math.isnan(d["alpha_floor_s"]) and d["floor_bytes"] is None
