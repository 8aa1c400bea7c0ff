"""Claims about pingpong_lab.synthetic: seeded sweeps with a known truth."""

import numpy as np
import pytest

from pingpong_lab.analysis import model
from pingpong_lab.analysis.synthetic import (
    correlated_samples,
    default_sizes,
    synthetic_sweep,
    write_sweep_csv,
)
from pingpong_lab.data import results, schema

ALPHA, BETA = 2e-6, 1e-10


def test_noiseless_sweep_is_exactly_the_model():
    s = synthetic_sweep(ALPHA, BETA, sizes=[1, 1000, 10**6], reps=4)
    assert s.samples.shape == (3, 4)
    np.testing.assert_allclose(s.medians, ALPHA + BETA * np.array([1, 1000, 10**6]))
    np.testing.assert_allclose(s.samples, s.true_time()[:, None] * np.ones((1, 4)))
    assert s.truth == {"alpha_s": ALPHA, "beta_s_per_byte": BETA}


def test_default_sizes_are_powers_of_two_from_1_byte_to_16_mib():
    sizes = default_sizes()
    assert sizes[0] == 1 and sizes[-1] == 2**24 and np.all(sizes[1:] == 2 * sizes[:-1])
    assert synthetic_sweep(ALPHA, BETA).nbytes.tolist() == sizes.tolist()


@pytest.mark.parametrize("noise", ["gaussian", "heavy"])
def test_same_seed_gives_the_same_sweep_and_another_seed_a_different_one(noise):
    a = synthetic_sweep(ALPHA, BETA, noise=noise, seed=1)
    b = synthetic_sweep(ALPHA, BETA, noise=noise, seed=1)
    c = synthetic_sweep(ALPHA, BETA, noise=noise, seed=2)
    np.testing.assert_array_equal(a.samples, b.samples)
    assert not np.array_equal(a.samples, c.samples)


def test_gaussian_noise_has_the_requested_relative_spread():
    s = synthetic_sweep(ALPHA, BETA, sizes=[1024], noise="gaussian", rel_noise=0.1, reps=20000)
    rel = s.samples[0] / s.true_time()[0] - 1
    assert np.std(rel) == pytest.approx(0.1, rel=0.05)
    assert abs(np.median(rel)) < 0.01
    assert np.all(s.samples > 0)


def test_heavy_noise_drags_the_mean_but_barely_moves_the_median():
    s = synthetic_sweep(ALPHA, BETA, sizes=[8], noise="heavy", rel_noise=0.02, reps=20000)
    truth = s.true_time()[0]
    assert np.mean(s.samples) > 1.1 * truth
    assert np.median(s.samples) == pytest.approx(truth, rel=0.01)


def test_breakpoint_switches_to_the_second_line_from_the_breakpoint_on():
    s = synthetic_sweep(ALPHA, BETA, sizes=[1024, 2048, 4096], breakpoint=2048, alpha2=9e-6)
    np.testing.assert_allclose(
        s.medians, [ALPHA + BETA * 1024, 9e-6 + BETA * 2048, 9e-6 + BETA * 4096]
    )
    assert s.truth["breakpoint_bytes"] == 2048 and s.truth["beta2_s_per_byte"] == BETA


def test_breakpoint_without_alpha2_keeps_the_model_continuous():
    s = synthetic_sweep(ALPHA, BETA, sizes=[4096], breakpoint=4096, beta2=2 * BETA)
    assert s.medians[0] == pytest.approx(ALPHA + BETA * 4096)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"alpha": -1.0}, "alpha must be a positive number"),
        ({"beta": 0.0}, "beta must be a positive number"),
        ({"noise": "pink"}, "noise must be one of none, gaussian, heavy"),
        ({"rel_noise": -0.1}, "rel_noise must be non-negative"),
        ({"reps": 0}, "reps must be a positive integer"),
        ({"sizes": [0, 8]}, "sizes must be a non-empty list of positive"),
        ({"alpha2": 1e-6}, "without a breakpoint"),
        ({"breakpoint": 64, "alpha2": -1.0}, "non-positive times"),
    ],
)
def test_synthetic_sweep_rejects_bad_parameters(kwargs, message):
    args = {"alpha": ALPHA, "beta": BETA} | kwargs
    with pytest.raises(ValueError, match=message):
        synthetic_sweep(**args)


def test_written_csv_has_the_sweep_columns_and_reloads(tmp_path):
    s = synthetic_sweep(ALPHA, BETA, sizes=[1, 64, 4096], noise="gaussian", reps=11, seed=3)
    path = write_sweep_csv(s, tmp_path / "s.csv", comment="made by a test")
    table = model.read_sweep_table(path)
    assert path.read_text().startswith("# made by a test\n")
    assert tuple(table) == schema.COLUMNS
    assert table["stop_reason"].tolist() == ["fixed"] * 3
    assert results.read_sidecar(path)["truth"] == s.truth
    assert table["reps"].tolist() == [11, 11, 11]
    assert np.all(table["ci_lo_s"] <= table["t_median_s"])
    assert np.all(table["t_median_s"] <= table["ci_hi_s"])
    np.testing.assert_allclose(table["t_min_s"], s.samples.min(axis=1))


@pytest.mark.parametrize("phi", [0.0, 0.5, 0.9, -0.4])
def test_correlated_samples_have_the_requested_lag1_autocorrelation_and_spread(phi):
    x = correlated_samples(40_000, phi, median_s=3e-6, rel_sd=0.1, seed=1)
    d = x - x.mean()
    r1 = np.sum(d[:-1] * d[1:]) / np.sum(d * d)
    assert abs(r1 - phi) < 0.03
    assert np.std(x) == pytest.approx(0.1 * 3e-6, rel=0.1 if phi < 0.9 else 0.25)
    assert np.median(x) == pytest.approx(3e-6, rel=0.02)
    assert np.array_equal(x, correlated_samples(40_000, phi, median_s=3e-6, rel_sd=0.1, seed=1))


@pytest.mark.parametrize("phi", [1.0, -1.0, 2.0])
def test_correlated_samples_refuse_a_series_that_does_not_settle(phi):
    with pytest.raises(ValueError, match="phi"):
        correlated_samples(100, phi)
