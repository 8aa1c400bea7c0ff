"""LogGP's g and G from windowed-bandwidth times (model.fit_gap) on synthetic windows."""

from __future__ import annotations

import numpy as np
import pytest

from pingpong_lab.analysis import model

G_SMALL = 0.4e-6  # seconds between small messages
G_BYTE = 1 / 8e9  # seconds per byte: 8 GB/s
W = 64


def _windows(sizes, ack=0.0, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    per_msg = G_SMALL + (np.asarray(sizes, float) - 1) * G_BYTE
    return W * per_msg * (1 + noise * rng.standard_normal(len(sizes))) + ack


SIZES = 2 ** np.arange(0, 23)


def test_exact_windows_give_back_g_and_G():
    fit = model.fit_gap(SIZES, _windows(SIZES), W)
    assert fit.g_s == pytest.approx(G_SMALL, rel=1e-3)
    assert fit.G_s_per_byte == pytest.approx(G_BYTE, rel=1e-3)
    assert fit.bandwidth_Bps == pytest.approx(8e9, rel=1e-3)
    assert fit.per_message_s(1) == pytest.approx(fit.g_s)
    assert set(fit.small_sizes) == set(SIZES[SIZES <= 256])


def test_the_acknowledgement_is_removed_when_given_and_lands_in_g_when_not():
    ack = 3e-6
    with_ack = _windows(SIZES, ack=ack)
    assert model.fit_gap(SIZES, with_ack, W, ack_s=ack).g_s == pytest.approx(G_SMALL, rel=1e-3)
    kept = model.fit_gap(SIZES, with_ack, W)
    assert kept.g_s == pytest.approx(G_SMALL + ack / W, rel=1e-3)
    assert kept.G_s_per_byte == pytest.approx(G_BYTE, rel=1e-2)


def test_noise_moves_the_fit_by_about_the_noise():
    fit = model.fit_gap(SIZES, _windows(SIZES, noise=0.03, seed=4), W)
    assert fit.g_s == pytest.approx(G_SMALL, rel=0.1)
    assert fit.G_s_per_byte == pytest.approx(G_BYTE, rel=0.1)


def test_nan_windows_are_dropped_and_too_few_sizes_refused():
    t = _windows(SIZES)
    t[3] = np.nan
    assert model.fit_gap(SIZES, t, W).g_s == pytest.approx(G_SMALL, rel=1e-3)
    with pytest.raises(ValueError):
        model.fit_gap([1, 2, 4], _windows([1, 2, 4]), W)  # no large sizes for G
    with pytest.raises(ValueError):
        model.fit_gap(SIZES, _windows(SIZES), 0)
