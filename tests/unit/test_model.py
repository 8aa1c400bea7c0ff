"""Claims about pingpong_lab.model: alpha-beta fits, bootstrap CIs, breakpoints, CSV loading."""

import numpy as np
import pytest

from pingpong_lab.analysis import model
from pingpong_lab.analysis.synthetic import synthetic_sweep, write_sweep_csv

ALPHA = 1.5e-6
BETA = 1.0 / (8 * 2**30)  # 8 GiB/s
SIZES = 2 ** np.arange(27)  # 1 B .. 64 MiB


@pytest.mark.parametrize("weighted", [True, False])
def test_fit_recovers_alpha_and_beta_within_1_percent_on_noiseless_data(weighted):
    sweep = synthetic_sweep(ALPHA, BETA, sizes=SIZES)
    fit = model.fit_linear(sweep.nbytes, sweep.medians, weighted=weighted)
    assert fit.alpha_s == pytest.approx(ALPHA, rel=0.01)
    assert fit.beta_s_per_byte == pytest.approx(BETA, rel=0.01)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.method == ("weighted" if weighted else "ols")
    np.testing.assert_allclose(fit.residuals, 0.0, atol=1e-12)


def test_fit_reports_bandwidth_in_bytes_gib_and_mbit_per_second_and_n_half():
    fit = model.fit_linear([1, 2, 4], [ALPHA + BETA, ALPHA + 2 * BETA, ALPHA + 4 * BETA])
    assert fit.bandwidth_Bps == pytest.approx(8 * 2**30)
    assert fit.bandwidth_GiBps == pytest.approx(8.0)
    assert fit.bandwidth_Mbitps == pytest.approx(8 * 2**30 * 8 / 1e6)
    assert fit.n_half_bytes == pytest.approx(ALPHA / BETA)
    np.testing.assert_allclose(fit.predict([0, 1024]), [ALPHA, ALPHA + 1024 * BETA])
    assert fit.as_dict()["n_half_bytes"] == fit.n_half_bytes


def test_ols_over_many_decades_can_give_negative_alpha_where_weighted_fit_does_not():
    sweep = synthetic_sweep(ALPHA, BETA, sizes=SIZES, noise="gaussian", reps=1, seed=1)
    ols = model.fit_linear(sweep.nbytes, sweep.medians, weighted=False)
    weighted = model.fit_linear(sweep.nbytes, sweep.medians)
    assert ols.alpha_s < 0
    assert np.isnan(ols.n_half_bytes)
    assert weighted.alpha_s == pytest.approx(ALPHA, rel=0.1)


def test_fit_matches_numpy_polyfit_with_inverse_time_weights():
    sweep = synthetic_sweep(ALPHA, BETA, sizes=SIZES, noise="gaussian", seed=4)
    fit = model.fit_linear(sweep.nbytes, sweep.medians)
    beta, alpha = np.polyfit(sweep.nbytes, sweep.medians, 1, w=1 / sweep.medians)
    assert (fit.alpha_s, fit.beta_s_per_byte) == pytest.approx((alpha, beta), rel=1e-12)


@pytest.mark.parametrize(
    ("nbytes", "t", "message"),
    [
        ([1, 2], [1e-6], "differ in length"),
        ([1], [1e-6], "at least 2 points"),
        ([4, 4, 4], [1e-6, 2e-6, 3e-6], "2 distinct message sizes"),
        ([0, 2], [1e-6, 2e-6], "sizes must be positive"),
        ([1, 2], [1e-6, -2e-6], "times must be positive"),
        ([1, 2], [1e-6, np.nan], "finite"),
    ],
)
def test_fit_rejects_bad_input_with_a_clear_message(nbytes, t, message):
    with pytest.raises(ValueError, match=message):
        model.fit_linear(nbytes, t)


@pytest.mark.parametrize("weighted", [True, False])
def test_true_alpha_and_beta_lie_within_the_bootstrap_ci_on_noisy_data(weighted):
    sweep = synthetic_sweep(ALPHA, BETA, sizes=SIZES, noise="gaussian", reps=25, seed=11)
    ci = model.bootstrap_ci(sweep.nbytes, sweep.medians, weighted=weighted, n_boot=400, rng=0)
    assert ci.contains(ALPHA, BETA)
    assert ci.alpha_lo_s < ci.alpha_hi_s and ci.beta_lo_s_per_byte < ci.beta_hi_s_per_byte


def test_bootstrap_ci_covers_the_truth_in_most_seeded_sweeps():
    hits = 0
    for seed in range(30):
        sweep = synthetic_sweep(ALPHA, BETA, sizes=SIZES, noise="gaussian", reps=25, seed=seed)
        ci = model.bootstrap_ci(sweep.nbytes, sweep.medians, n_boot=200, rng=seed)
        hits += ci.alpha_lo_s <= ALPHA <= ci.alpha_hi_s
    assert hits >= 24  # nominal 95 %; a small-sample bootstrap runs a little narrow


def test_bootstrap_ci_is_deterministic_for_a_seed_and_supports_point_resampling():
    sweep = synthetic_sweep(ALPHA, BETA, sizes=SIZES, noise="gaussian", seed=2)
    a = model.bootstrap_ci(sweep.nbytes, sweep.medians, n_boot=100, rng=5)
    b = model.bootstrap_ci(sweep.nbytes, sweep.medians, n_boot=100, rng=5)
    assert a == b
    p = model.bootstrap_ci(sweep.nbytes, sweep.medians, n_boot=100, rng=5, resample="points")
    assert p.resample == "points" and p.alpha_lo_s < p.alpha_hi_s
    with pytest.raises(ValueError, match="resample must be"):
        model.bootstrap_ci(sweep.nbytes, sweep.medians, resample="wild")


@pytest.mark.parametrize("breakpoint", [4096, 65536, 1 << 20])
def test_piecewise_fit_finds_a_protocol_jump_within_one_size_step(breakpoint):
    sweep = synthetic_sweep(
        ALPHA, BETA, sizes=SIZES, noise="gaussian", reps=30, seed=3,
        breakpoint=breakpoint, alpha2=20e-6, beta2=BETA * 1.5,
    )  # fmt: skip
    pw = model.fit_piecewise(sweep.nbytes, sweep.medians)
    assert breakpoint / 2 <= pw.breakpoint_bytes <= breakpoint * 2
    assert pw.two_segments_better
    assert pw.lower.alpha_s == pytest.approx(ALPHA, rel=0.05)
    assert pw.upper.beta_s_per_byte == pytest.approx(BETA * 1.5, rel=0.05)
    assert pw.bic_two < pw.bic_one


def test_piecewise_fit_finds_a_pure_slope_change_within_one_size_step():
    sweep = synthetic_sweep(
        ALPHA, BETA, sizes=SIZES, noise="gaussian", reps=50, seed=8, breakpoint=65536,
        beta2=2 * BETA,
    )  # fmt: skip
    pw = model.fit_piecewise(sweep.nbytes, sweep.medians)
    assert 32768 <= pw.breakpoint_bytes <= 131072 and pw.two_segments_better


def test_one_straight_line_is_not_declared_two_segments():
    clean = synthetic_sweep(ALPHA, BETA, sizes=SIZES)
    assert not model.fit_piecewise(clean.nbytes, clean.medians).two_segments_better
    false_alarms = 0
    for seed in range(20):
        s = synthetic_sweep(ALPHA, BETA, sizes=SIZES, noise="gaussian", reps=30, seed=seed)
        false_alarms += model.fit_piecewise(s.nbytes, s.medians).two_segments_better
    assert false_alarms <= 2


def test_piecewise_predict_switches_lines_at_the_breakpoint():
    sweep = synthetic_sweep(ALPHA, BETA, sizes=SIZES, breakpoint=4096, alpha2=9e-6)
    pw = model.fit_piecewise(sweep.nbytes, sweep.medians)
    np.testing.assert_allclose(pw.predict(sweep.nbytes), sweep.medians, rtol=1e-6)
    assert pw.as_dict()["breakpoint_bytes"] == 4096


def test_piecewise_fit_needs_enough_sizes_per_segment():
    with pytest.raises(ValueError, match="at least 6 distinct sizes"):
        model.fit_piecewise([1, 2, 4, 8, 16], [1e-6, 1e-6, 1e-6, 2e-6, 3e-6])


def test_regimes_split_sizes_around_the_half_performance_length():
    fit = model.fit_linear(SIZES, ALPHA + BETA * SIZES)
    n_half = ALPHA / BETA  # ~12.9 kB
    reg = model.regimes(fit, SIZES)
    assert reg.n_half_bytes == pytest.approx(n_half)
    assert max(reg.latency_sizes) <= n_half / 10 < min(reg.transition_sizes)
    assert max(reg.transition_sizes) < n_half * 10 <= min(reg.bandwidth_sizes)
    exact = model.regimes(fit, SIZES, margin=1)
    assert not exact.transition_sizes and exact.classify(n_half * 2) == "bandwidth"


def test_regimes_refuse_a_fit_with_negative_alpha():
    fit = model.LinearFit(-1e-6, BETA, 0.9, np.zeros(2), "ols", 2)
    with pytest.raises(ValueError, match="positive alpha and beta"):
        model.regimes(fit)


# --- CSV loading ------------------------------------------------------------------------------


def _write(tmp_path, text, name="sweep.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_load_sweep_csv_skips_comments_and_returns_integer_sizes(tmp_path):
    path = _write(tmp_path, "# run 1\nnbytes,reps,t_median_s\n\n1,10,1e-6\n# x\n1024,10,2e-6\n")
    nbytes, t = model.load_sweep_csv(path)
    assert nbytes.dtype.kind == "i" and nbytes.tolist() == [1, 1024]
    np.testing.assert_allclose(t, [1e-6, 2e-6])


def test_load_sweep_csv_reads_another_column_and_tolerates_text_columns(tmp_path):
    path = _write(tmp_path, "kernel,nbytes,t_min_s\nc,1,1e-6\nc,2,2e-6\n")
    _, t = model.load_sweep_csv(path, column="t_min_s")
    assert t.tolist() == [1e-6, 2e-6]
    assert model.read_sweep_table(path)["kernel"].tolist() == ["c", "c"]


def test_load_sweep_csv_round_trips_a_synthetic_sweep(tmp_path):
    sweep = synthetic_sweep(ALPHA, BETA, noise="gaussian", reps=20, seed=1)
    nbytes, t = model.load_sweep_csv(write_sweep_csv(sweep, tmp_path / "s.csv"))
    np.testing.assert_array_equal(nbytes, sweep.nbytes)
    np.testing.assert_allclose(t, sweep.medians, rtol=1e-15)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("# only a comment\n", "empty"),
        ("nbytes,t_median_s\n", "no data rows"),
        ("nbytes,t_median_s\n8,1e-6\n", "only one data row"),
        ("nbytes,t_median_s\n8,1e-6\n16,2e-6,3\n", "malformed line 3: expected 2 fields"),
        ("nbytes,t_median_s\n8,1e-6\n16,fast\n", "malformed line 3: t_median_s='fast'"),
        ("nbytes,t_min_s\n8,1e-6\n16,2e-6\n", "no column 't_median_s'"),
        ("size,t_median_s\n8,1e-6\n16,2e-6\n", "no column 'nbytes'"),
        ("nbytes,t_median_s\n0,1e-6\n16,2e-6\n", "line 2: nbytes must be positive"),
        ("nbytes,t_median_s\n8,1e-6\n-16,2e-6\n", "line 3: nbytes must be positive"),
        ("nbytes,t_median_s\n8,0\n16,2e-6\n", "t_median_s must be positive"),
        ("nbytes,t_median_s\n8.5,1e-6\n16,2e-6\n", "whole number"),
        ("nbytes,nbytes\n8,8\n16,16\n", "malformed header"),
    ],
)
def test_load_sweep_csv_rejects_bad_files_with_one_line_messages(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=message) as info:
        model.load_sweep_csv(path)
    assert "\n" not in str(info.value)


def test_load_sweep_csv_reports_a_missing_file_or_a_directory(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        model.load_sweep_csv(tmp_path / "missing.csv")
    with pytest.raises(ValueError, match="not a file"):
        model.load_sweep_csv(tmp_path)


# -- plausibility: which fits are not quoted as results ------------------------------------------
def _fit(sweep, weighted=True):
    return model.fit_linear(sweep.nbytes, sweep.medians, weighted=weighted)


@pytest.mark.parametrize("seed", range(3))
def test_a_clean_noisy_sweep_with_a_protocol_jump_raises_no_plausibility_flag(seed):
    sweep = synthetic_sweep(
        ALPHA, BETA, noise="gaussian", reps=30, seed=seed, breakpoint=65536, alpha2=20e-6
    )
    assert model.fit_problems(_fit(sweep)) == []
    assert model.fit_problems(model.fit_piecewise(sweep.nbytes, sweep.medians)) == []


def test_a_segment_of_latency_only_sizes_has_no_bandwidth_to_quote():
    # one straight line: the best split leaves a few tiny sizes below, whose slope is noise
    sweep = synthetic_sweep(ALPHA, BETA, noise="gaussian", seed=0)
    assert model.fit_problems(_fit(sweep)) == []
    pw = model.fit_piecewise(sweep.nbytes, sweep.medians)
    assert [p.split(":")[0] for p in model.fit_problems(pw)] == ["lower segment"]


def test_a_negative_alpha_is_flagged_and_the_ols_fit_is_named_as_the_cause():
    sweep = synthetic_sweep(ALPHA, BETA, sizes=2 ** np.arange(27), noise="gaussian", reps=1, seed=1)
    (problem,) = model.fit_problems(_fit(sweep, weighted=False))
    assert problem.startswith("alpha = -") and "not positive" in problem
    assert "plain least-squares" in problem


def test_a_non_positive_beta_is_flagged_as_no_bandwidth():
    # 1 ms latency, sizes up to 1 KiB: the transfer time is far below the 5 % noise
    sweep = synthetic_sweep(1e-3, 1e-15, sizes=2 ** np.arange(11), noise="gaussian", seed=4, reps=5)
    fit = _fit(sweep)
    assert fit.beta_s_per_byte <= 0
    problems = model.fit_problems(fit)
    assert any(p.startswith("beta = -") and "no bandwidth" in p for p in problems)


def test_a_low_r2_is_flagged_even_when_alpha_and_beta_are_positive():
    sweep = synthetic_sweep(
        1e-6, 1e-9, sizes=2 ** np.arange(8), noise="gaussian", rel_noise=0.3, seed=0, reps=3
    )
    fit = _fit(sweep)
    assert fit.alpha_s > 0 and fit.beta_s_per_byte > 0 and fit.r2 < model.MIN_R2
    (problem,) = model.fit_problems(fit)
    assert problem.startswith("R^2 = ") and f"below {model.MIN_R2:g}" in problem
    assert model.fit_problems(fit, min_r2=0.0) == []  # the threshold is the one rule


def test_a_piecewise_segment_with_negative_alpha_is_flagged_by_name():
    # from 64 KiB on the line is 4x steeper: continuous there, so it crosses zero below
    sweep = synthetic_sweep(ALPHA, BETA, breakpoint=65536, beta2=4 * BETA, noise="gaussian")
    assert sweep.truth["alpha2_s"] < 0
    pw = model.fit_piecewise(sweep.nbytes, sweep.medians)
    (problem,) = model.fit_problems(pw)
    assert problem.startswith("upper segment: alpha = -")


def test_fit_problems_refuses_what_is_not_a_fit():
    with pytest.raises(TypeError, match="LinearFit or PiecewiseFit"):
        model.fit_problems({"alpha_s": 1.0})
