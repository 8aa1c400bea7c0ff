"""Synthetic ping-pong sweeps with a known truth, for tests, exercises and grading.

A sweep follows T(b) = alpha + beta*b, optionally switching to alpha2 + beta2*b from a
breakpoint on (a protocol switch), with seeded noise per repetition. The same arguments and seed
always give the same arrays, so a grader can check a student's fit against the truth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..data import results
from . import stats

__all__ = [
    "NOISE_KINDS",
    "SyntheticSweep",
    "correlated_samples",
    "default_sizes",
    "synthetic_sweep",
    "write_sweep_csv",
]

NOISE_KINDS = ("none", "gaussian", "heavy")


def default_sizes(max_bytes: int = 2**24) -> np.ndarray:
    """Powers of two from 1 B to ``max_bytes`` (default 16 MiB)."""
    if int(max_bytes) < 1:
        raise ValueError(f"max_bytes must be at least 1, got {max_bytes}")
    return 2 ** np.arange(int(math.log2(int(max_bytes))) + 1, dtype=np.int64)


@dataclass(frozen=True)
class SyntheticSweep:
    """A synthetic sweep: sizes (bytes), samples (sizes x reps, one-way s), their medians.

    ``truth`` holds the parameters the data were generated from (``alpha_s``,
    ``beta_s_per_byte`` and, with a breakpoint, ``breakpoint_bytes``, ``alpha2_s``,
    ``beta2_s_per_byte``).
    """

    nbytes: np.ndarray
    samples: np.ndarray = field(repr=False)
    medians: np.ndarray = field(repr=False)
    truth: dict

    def true_time(self, nbytes=None) -> np.ndarray:
        """Noise-free one-way time in seconds (for the sweep's sizes by default)."""
        b = self.nbytes if nbytes is None else np.asarray(nbytes, dtype=float)
        return _model(np.asarray(b, dtype=float), self.truth)


def _model(b: np.ndarray, truth: dict) -> np.ndarray:
    t = truth["alpha_s"] + truth["beta_s_per_byte"] * b
    bp = truth.get("breakpoint_bytes")
    if bp is not None:
        t = np.where(b >= bp, truth["alpha2_s"] + truth["beta2_s_per_byte"] * b, t)
    return t


def _positive(name: str, value) -> float:
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive number, got {value}")
    return value


def synthetic_sweep(
    alpha: float,
    beta: float,
    sizes=None,
    noise: str = "none",
    rel_noise: float = 0.05,
    breakpoint: int | None = None,
    alpha2: float | None = None,
    beta2: float | None = None,
    reps: int = 50,
    seed: int = 0,
    spike_prob: float = 0.05,
) -> SyntheticSweep:
    """Make a sweep from T(b) = alpha + beta*b (seconds, seconds per byte).

    ``noise``: ``"none"`` (every sample is the truth), ``"gaussian"`` (relative normal noise of
    standard deviation ``rel_noise``) or ``"heavy"`` (the gaussian noise plus, with probability
    ``spike_prob``, a slow outlier 2x .. ~100x longer, Pareto-distributed: the mean is pulled
    up, the median barely moves). Samples are kept above 1 % of the truth.

    With ``breakpoint`` (bytes), sizes >= breakpoint follow alpha2 + beta2*b. A missing
    ``beta2`` defaults to ``beta``; a missing ``alpha2`` makes the model continuous at the
    breakpoint. ``sizes`` defaults to :func:`default_sizes`.
    """
    alpha, beta = _positive("alpha", alpha), _positive("beta", beta)
    if noise not in NOISE_KINDS:
        raise ValueError(f"noise must be one of {', '.join(NOISE_KINDS)}; got {noise!r}")
    rel_noise = float(rel_noise)
    if not rel_noise >= 0:
        raise ValueError(f"rel_noise must be non-negative, got {rel_noise}")
    if not 0.0 <= float(spike_prob) <= 1.0:
        raise ValueError(f"spike_prob must be between 0 and 1, got {spike_prob}")
    if int(reps) < 1:
        raise ValueError(f"reps must be a positive integer, got {reps}")
    b = default_sizes() if sizes is None else np.asarray(sizes, dtype=np.int64).ravel()
    if b.size == 0 or np.any(b <= 0):
        raise ValueError("sizes must be a non-empty list of positive byte counts")
    truth = {"alpha_s": alpha, "beta_s_per_byte": beta}
    if breakpoint is not None:
        bp = _positive("breakpoint", breakpoint)
        beta2 = beta if beta2 is None else _positive("beta2", beta2)
        alpha2 = alpha + (beta - beta2) * bp if alpha2 is None else float(alpha2)
        truth.update(breakpoint_bytes=int(bp), alpha2_s=alpha2, beta2_s_per_byte=beta2)
        if np.any(_model(np.asarray(b, dtype=float), truth) <= 0):
            raise ValueError("alpha2 and beta2 give non-positive times for some sizes")
    elif alpha2 is not None or beta2 is not None:
        raise ValueError("alpha2/beta2 given without a breakpoint")

    gen = np.random.default_rng(seed)
    true_t = _model(b.astype(float), truth)[:, None]
    shape = (b.size, int(reps))
    if noise == "none":
        samples = np.broadcast_to(true_t, shape).copy()
    else:
        factor = 1.0 + rel_noise * gen.standard_normal(shape)
        if noise == "heavy":
            spikes = gen.random(shape) < spike_prob
            factor = factor + spikes * (1.0 + np.minimum(gen.pareto(1.5, shape), 100.0))
        samples = true_t * np.maximum(factor, 0.01)
    return SyntheticSweep(
        nbytes=b, samples=samples, medians=np.median(samples, axis=1), truth=truth
    )


def write_sweep_csv(sweep: SyntheticSweep, path, comment: str | None = None) -> Path:
    """Write ``sweep`` as a results CSV (the format the measuring code writes); return the path.

    One row per size with the columns of :class:`pingpong_lab.data.schema.SweepRow` (one-way
    seconds; the CI is the order-statistics CI of the median; with fewer than 6 reps its
    bounds are NaN), ``comment`` (default "synthetic sweep") as ``#`` lines on top, and the
    JSON sidecar ``<path>.json`` with the truth the data were made from.
    """
    rows = [
        stats.summary_row(nbytes, int(np.count_nonzero(np.isfinite(t))), 0, t, stop_reason="fixed")
        for nbytes, t in zip(sweep.nbytes, sweep.samples, strict=True)
    ]
    info = {"kernel": "synthetic", "truth": sweep.truth, "sizes": [int(n) for n in sweep.nbytes]}
    return results.write_results(path, rows, info, comment=comment or "synthetic sweep")


def correlated_samples(n: int, phi: float, median_s=2e-6, rel_sd=0.05, seed=0) -> np.ndarray:
    """n timings (seconds) whose noise is an AR(1) series: e_t = phi e_(t-1) + innovation.

    Each sample is median_s * (1 + rel_sd * e_t) with e of unit variance, so the lag-1
    autocorrelation is phi (0: independent samples; near 1: slow and fast stretches, as when a
    neighbour comes and goes) and the standard deviation is rel_sd * median_s. Seeded.
    """
    n = int(n)
    if n < 2:
        raise ValueError(f"n must be at least 2, got {n}")
    phi = float(phi)
    if not -1 < phi < 1:
        raise ValueError(f"phi must be in (-1, 1) for a stationary series, got {phi}")
    median_s, rel_sd = _positive("median_s", median_s), _positive("rel_sd", rel_sd)
    innovations = np.random.default_rng(seed).standard_normal(n) * math.sqrt(1 - phi**2)
    e = np.empty(n)
    e[0] = innovations[0] / math.sqrt(1 - phi**2)  # start in the stationary distribution
    for t in range(1, n):
        e[t] = phi * e[t - 1] + innovations[t]
    return median_s * (1 + rel_sd * e)
