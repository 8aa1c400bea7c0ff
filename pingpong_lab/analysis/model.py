"""The latency-bandwidth model T(b) = alpha + beta * b and its fits.

``alpha`` (seconds) is the time of an empty message, ``beta`` (seconds per byte) the inverse of
the asymptotic bandwidth. Half of the time goes to latency at the half-performance length
n_1/2 = alpha / beta: smaller messages are latency-dominated, larger ones bandwidth-dominated.

Sizes in a sweep usually span many decades (1 B .. 64 MiB), which is why the default fit here is
weighted by relative error; see :func:`fit_linear`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..data import results
from ..data.schema import COL
from . import stats

__all__ = [
    "GIB",
    "MAX_SEGMENTS",
    "MIN_R2",
    "FitCI",
    "LinearFit",
    "PiecewiseFit",
    "Regimes",
    "bootstrap_ci",
    "fit_linear",
    "fit_piecewise",
    "fit_problems",
    "load_sweep_csv",
    "read_sweep_table",
    "regimes",
]

GIB = 2.0**30
"""Bytes in one GiB."""


def _bandwidths(beta: float) -> tuple[float, float, float]:
    """(B/s, GiB/s, Mbit/s) for an inverse bandwidth in s/byte; NaN unless beta > 0."""
    if not beta > 0:
        return math.nan, math.nan, math.nan
    bps = 1.0 / beta
    return bps, bps / GIB, bps * 8.0 / 1e6


@dataclass(frozen=True)
class LinearFit:
    """Result of fitting T(b) = alpha + beta * b.

    ``residuals`` are measured minus predicted times (seconds), in the order of the input.
    ``r2`` is the coefficient of determination in the metric the fit minimised: plain for
    ``method="ols"``, weighted by 1/t^2 (i.e. on relative errors) for ``method="weighted"``.
    Bandwidths are NaN when beta <= 0 (no meaningful asymptote).
    """

    alpha_s: float
    beta_s_per_byte: float
    r2: float
    residuals: np.ndarray = field(repr=False)
    method: str
    n_points: int

    @property
    def bandwidth_Bps(self) -> float:  # noqa: N802 - unit in the name
        """Asymptotic bandwidth 1/beta in bytes per second."""
        return _bandwidths(self.beta_s_per_byte)[0]

    @property
    def bandwidth_GiBps(self) -> float:  # noqa: N802
        """Asymptotic bandwidth in GiB/s (1 GiB = 2**30 bytes)."""
        return _bandwidths(self.beta_s_per_byte)[1]

    @property
    def bandwidth_Mbitps(self) -> float:  # noqa: N802
        """Asymptotic bandwidth in Mbit/s (1 Mbit = 10**6 bits)."""
        return _bandwidths(self.beta_s_per_byte)[2]

    @property
    def n_half_bytes(self) -> float:
        """Half-performance length alpha/beta in bytes (NaN unless both are positive)."""
        if self.alpha_s > 0 and self.beta_s_per_byte > 0:
            return self.alpha_s / self.beta_s_per_byte
        return math.nan

    def predict(self, nbytes) -> np.ndarray:
        """Model time in seconds for the given sizes in bytes."""
        return self.alpha_s + self.beta_s_per_byte * np.asarray(nbytes, dtype=float)

    def as_dict(self) -> dict:
        """Scalar results as a plain dict (no residual array)."""
        return {
            "alpha_s": self.alpha_s,
            "beta_s_per_byte": self.beta_s_per_byte,
            "r2": self.r2,
            "n_half_bytes": self.n_half_bytes,
            "bandwidth_Bps": self.bandwidth_Bps,
            "bandwidth_GiBps": self.bandwidth_GiBps,
            "bandwidth_Mbitps": self.bandwidth_Mbitps,
            "method": self.method,
            "n_points": self.n_points,
        }


def _xy(nbytes, t, min_points: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Validate sizes and times and return them as float arrays."""
    x = np.asarray(nbytes, dtype=float).ravel()
    y = np.asarray(t, dtype=float).ravel()
    if x.size != y.size:
        raise ValueError(f"nbytes and t differ in length ({x.size} vs {y.size})")
    if x.size < min_points:
        raise ValueError(f"need at least {min_points} points to fit, got {x.size}")
    if not np.all(np.isfinite(x)) or not np.all(np.isfinite(y)):
        raise ValueError("nbytes and t must be finite numbers (no NaN or inf)")
    if np.any(x <= 0):
        raise ValueError(f"message sizes must be positive, got {x[x <= 0][0]:g}")
    if np.any(y <= 0):
        raise ValueError(f"times must be positive, got {y[y <= 0][0]:g}")
    if np.unique(x).size < 2:
        raise ValueError("need at least 2 distinct message sizes to fit a line")
    return x, y


def _fit_arrays(x: np.ndarray, y: np.ndarray, weighted: bool) -> tuple[float, float]:
    """(alpha, beta) by numpy.polyfit, weights 1/t on the residuals when ``weighted``."""
    w = 1.0 / y if weighted else None
    beta, alpha = np.polyfit(x, y, 1, w=w)
    return float(alpha), float(beta)


def _r2(x: np.ndarray, y: np.ndarray, alpha: float, beta: float, weighted: bool) -> float:
    w2 = 1.0 / y**2 if weighted else np.ones_like(y)
    resid = y - (alpha + beta * x)
    ybar = np.sum(w2 * y) / np.sum(w2)
    ss_tot = np.sum(w2 * (y - ybar) ** 2)
    if ss_tot == 0:
        return 1.0 if np.allclose(resid, 0) else math.nan
    return float(1.0 - np.sum(w2 * resid**2) / ss_tot)


def fit_linear(nbytes, t, weighted: bool = True) -> LinearFit:
    """Fit T(b) = alpha + beta * b to sizes ``nbytes`` (bytes) and times ``t`` (seconds).

    ``weighted=False`` is ordinary least squares with ``numpy.polyfit``: it minimises the sum
    of squared *absolute* residuals. Over sizes from 1 B to 64 MiB the times span four or more
    decades, so a 1 % wobble at 64 MiB (milliseconds) outweighs the whole small-message range
    (microseconds). The line is then pinned by the few largest messages and its intercept is
    essentially unconstrained: alpha is often off by orders of magnitude and can be negative,
    which is physically meaningless.

    ``weighted=True`` (the default) passes ``w = 1/t`` to ``numpy.polyfit``, which minimises
    the sum of squared *relative* residuals ((t - T(b)) / t)**2. Every size then counts
    equally, a 1 % error is a 1 % error at 8 B and at 8 MiB, and alpha is set by the small
    messages where it actually shows.
    """
    x, y = _xy(nbytes, t)
    alpha, beta = _fit_arrays(x, y, weighted)
    return LinearFit(
        alpha_s=alpha,
        beta_s_per_byte=beta,
        r2=_r2(x, y, alpha, beta, weighted),
        residuals=y - (alpha + beta * x),
        method="weighted" if weighted else "ols",
        n_points=int(x.size),
    )


@dataclass(frozen=True)
class FitCI:
    """Bootstrap confidence intervals of alpha (s) and beta (s/byte)."""

    alpha_lo_s: float
    alpha_hi_s: float
    beta_lo_s_per_byte: float
    beta_hi_s_per_byte: float
    confidence: float
    n_boot: int
    resample: str

    def contains(self, alpha_s: float, beta_s_per_byte: float) -> bool:
        """True when both values lie inside their intervals."""
        return (
            self.alpha_lo_s <= alpha_s <= self.alpha_hi_s
            and self.beta_lo_s_per_byte <= beta_s_per_byte <= self.beta_hi_s_per_byte
        )


def bootstrap_ci(
    nbytes,
    t,
    weighted: bool = True,
    confidence: float = 0.95,
    n_boot: int = 1000,
    rng=0,
    resample: str | None = None,
) -> FitCI:
    """Percentile-bootstrap confidence intervals for alpha and beta.

    ``resample="residuals"`` keeps the chosen sizes fixed, as in a designed sweep, and
    resamples the residuals: relative residuals t/T(b) - 1 multiplied back onto the model for a
    weighted fit, absolute residuals added to it for OLS. ``resample="points"`` draws
    (size, time) pairs with replacement (redrawing when fewer than 2 distinct sizes come up).
    The default is ``"residuals"`` for a weighted fit and ``"points"`` for OLS: absolute
    residuals of timings grow with the size, so shuffling them between sizes (which assumes
    equal spread everywhere) gives OLS intervals that miss the truth far too often.
    ``rng`` is a seed or a ``numpy.random.Generator``: the same seed gives the same interval.
    """
    confidence = stats.check_confidence(confidence)
    if int(n_boot) < 2:
        raise ValueError(f"n_boot must be at least 2, got {n_boot}")
    if resample is None:
        resample = "residuals" if weighted else "points"
    if resample not in ("residuals", "points"):
        raise ValueError(f"resample must be 'residuals' or 'points', got {resample!r}")
    x, y = _xy(nbytes, t, min_points=3)
    gen = stats.generator(rng)
    alpha, beta = _fit_arrays(x, y, weighted)
    pred = alpha + beta * x
    n = x.size
    est = np.empty((int(n_boot), 2))
    for i in range(int(n_boot)):
        if resample == "points":
            while True:
                idx = gen.integers(0, n, size=n)
                if np.unique(x[idx]).size >= 2:
                    break
            xb, yb = x[idx], y[idx]
        else:
            idx = gen.integers(0, n, size=n)
            xb = x
            if weighted:
                yb = pred * (y[idx] / pred[idx])
            else:
                yb = pred + (y - pred)[idx]
        if weighted and np.any(yb <= 0):
            yb = np.maximum(yb, np.min(y) * 1e-3)
        est[i] = _fit_arrays(xb, yb, weighted)
    tail = (1.0 - confidence) / 2.0
    (a_lo, b_lo), (a_hi, b_hi) = np.quantile(est, [tail, 1.0 - tail], axis=0)
    return FitCI(
        alpha_lo_s=float(a_lo),
        alpha_hi_s=float(a_hi),
        beta_lo_s_per_byte=float(b_lo),
        beta_hi_s_per_byte=float(b_hi),
        confidence=float(confidence),
        n_boot=int(n_boot),
        resample=resample,
    )


@dataclass(frozen=True)
class PiecewiseFit:
    """Straight lines split at breakpoints (each the first size of the segment above it).

    ``segments`` are the lines from the smallest sizes up, ``breakpoints`` the sizes where the
    next line takes over (one fewer). ``n_segments`` is how many lines the data support by BIC
    on relative residuals (see :func:`fit_piecewise`): 1 when one line is enough, and then the
    fit still holds the best two-line split, so that the best breakpoint can be read. ``bic``
    holds the BIC of the best fit with 1, 2, ... lines (inf where too few sizes). ``single`` is
    the one-line fit of all points.

    ``lower``/``upper`` are the first and last segments and ``breakpoint_bytes`` the first
    breakpoint (in a shared-memory sweep the eager/rendezvous switch; a cache cliff comes
    later). ``two_segments_better`` is True when more than one line is better than one.
    """

    breakpoints: tuple[int, ...]
    segments: tuple[LinearFit, ...]
    single: LinearFit
    bic: tuple[float, ...]
    n_segments: int
    criterion: str = "BIC on relative residuals"

    @property
    def breakpoint_bytes(self) -> int:
        """The first breakpoint: the smallest size of the second segment."""
        return self.breakpoints[0]

    @property
    def lower(self) -> LinearFit:
        """The segment of the smallest sizes."""
        return self.segments[0]

    @property
    def upper(self) -> LinearFit:
        """The segment of the largest sizes."""
        return self.segments[-1]

    @property
    def bic_one(self) -> float:
        """BIC of one line."""
        return self.bic[0]

    @property
    def bic_two(self) -> float:
        """BIC of the best two-line split."""
        return self.bic[1]

    @property
    def two_segments_better(self) -> bool:
        """True when more than one line is better than one (by ``min_bic_gain``)."""
        return self.n_segments > 1

    def segment_index(self, nbytes) -> np.ndarray:
        """Which segment (0, 1, ...) each size belongs to."""
        b = np.asarray(nbytes, dtype=float)
        return np.searchsorted(np.asarray(self.breakpoints, dtype=float), b, side="right")

    def predict(self, nbytes) -> np.ndarray:
        """Model time in seconds: each size on the line of its segment."""
        b = np.asarray(nbytes, dtype=float)
        idx = self.segment_index(b)
        out = np.empty_like(b)
        for k, seg in enumerate(self.segments):
            out = np.where(idx == k, seg.predict(b), out)
        return out

    def as_dict(self) -> dict:
        """Scalar results as a plain dict."""
        return {
            "breakpoint_bytes": self.breakpoint_bytes,
            "breakpoints_bytes": list(self.breakpoints),
            "n_segments": self.n_segments,
            "two_segments_better": self.two_segments_better,
            "criterion": self.criterion,
            "bic_one": self.bic_one,
            "bic_two": self.bic_two,
            "bic": list(self.bic),
            "single": self.single.as_dict(),
            "lower": self.lower.as_dict(),
            "upper": self.upper.as_dict(),
            "segments": [s.as_dict() for s in self.segments],
        }


def _bic(rel_resid: np.ndarray, n_params: int, noise_floor: float) -> float:
    n = rel_resid.size
    mse = max(float(np.mean(rel_resid**2)), noise_floor**2)
    return n * math.log(mse) + n_params * math.log(n)


MAX_SEGMENTS = 3
"""Lines :func:`fit_piecewise` tries at most: a protocol step and a cache cliff need three."""


def fit_piecewise(
    nbytes,
    t,
    weighted: bool = True,
    min_points: int = 3,
    noise_floor: float = 1e-6,
    min_bic_gain: float = 10.0,
    max_segments: int = MAX_SEGMENTS,
) -> PiecewiseFit:
    """Fit one, two or three lines split at breakpoints chosen among the measured sizes.

    Points are sorted by size; every split that leaves at least ``min_points`` distinct sizes
    in each segment is tried, each segment is fitted with :func:`fit_linear`, and for each
    number of lines the split with the smallest total squared residual (relative when
    ``weighted``) wins. A breakpoint is the smallest size of the segment above it, so it is
    exact to one size step: an MPI protocol switch (eager -> rendezvous) lies between it and the
    size below.

    More lines must earn their parameters (each adds an alpha, a beta and a breakpoint). The
    decision uses the Bayesian information criterion on relative residuals
    r_i = (t_i - T(b_i)) / t_i, which approximate log-residuals but stay defined when a
    prediction is negative: BIC = n ln(mean(r^2)) + k ln(n) with k = 3 m - 1 for m lines;
    lower is better. Because the breakpoints are the best of many candidates, the search itself
    finds spurious improvements in pure noise, so m lines replace the fewer lines chosen so far
    only when they lower the BIC by more than ``min_bic_gain`` (default 10, "very strong"
    evidence on the usual BIC scale; on straight-line synthetic sweeps of 27 sizes with 5 %
    noise per sample, 0.5-2 % of 200 seeds pass it). ``noise_floor`` bounds the RMS relative
    residual from below (timers do not resolve 1 ppm), so that noise-free data do not favour
    extra parameters through rounding errors.

    Why three lines (``max_segments``, 2 or 3): a shared-memory sweep over 1 B .. 64 MiB has
    two changes, the eager/rendezvous step (8 KiB on MPICH) and a cache cliff (above 4 MiB).
    BIC's mean(r^2) is the noise level of the model: two lines can absorb only one change, so
    the other change's misfit stays in their residuals as if it were noise, and the real gain
    of the second line is hidden (one line R^2 ~0.87: n ln(MSE1/MSE2) ~ 11-19, below the
    penalty 3 ln n ~ 9.9 plus the margin), although either change alone gains 80-170. With a
    third line both changes are modelled and three lines are compared with one directly.
    """
    x, y = _xy(nbytes, t)
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    min_points = int(min_points)
    if min_points < 2:
        raise ValueError(f"min_points must be at least 2, got {min_points}")
    if int(max_segments) not in (2, 3):
        raise ValueError(f"max_segments must be 2 or 3, got {max_segments}")
    n = x.size
    # cumulative count of distinct sizes: segment [i, j) has distinct[j] - distinct[i] sizes
    distinct = np.concatenate([[0], np.cumsum(np.r_[True, x[1:] != x[:-1]])])
    # candidate splits only between different sizes
    splits = [k for k in range(1, n) if x[k] != x[k - 1]]

    def enough(i, j):
        return distinct[j] - distinct[i] >= min_points

    pairs = [(k,) for k in splits if enough(0, k) and enough(k, n)]
    if not pairs:
        raise ValueError(
            f"piecewise fit needs at least {2 * min_points} distinct sizes "
            f"({min_points} per segment), got {np.unique(x).size}"
        )
    cache: dict[tuple[int, int], tuple[float, LinearFit]] = {}

    def segment(i, j):
        if (i, j) not in cache:
            f = fit_linear(x[i:j], y[i:j], weighted)
            r = f.residuals / y[i:j] if weighted else f.residuals
            cache[i, j] = (float(np.sum(r**2)), f)
        return cache[i, j]

    def best(cuts_list):
        found = None
        for cuts in cuts_list:
            bounds = (0, *cuts, n)
            parts = [segment(i, j) for i, j in zip(bounds[:-1], bounds[1:], strict=True)]
            cost = sum(c for c, _ in parts)
            if found is None or cost < found[0]:
                found = (cost, cuts, tuple(f for _, f in parts))
        return found

    single = fit_linear(x, y, weighted)
    fits = {1: ((), (single,)), 2: best(pairs)[1:]}
    if int(max_segments) >= 3:
        triples = [
            (k1, k2)
            for k1 in splits
            for k2 in splits
            if k1 < k2 and enough(0, k1) and enough(k1, k2) and enough(k2, n)
        ]
        if triples:
            fits[3] = best(triples)[1:]
    bic = []
    for m in range(1, int(max_segments) + 1):
        if m not in fits:
            bic.append(math.inf)
            continue
        resid = np.concatenate([f.residuals for f in fits[m][1]])
        bic.append(_bic(resid / y, 3 * m - 1, noise_floor))
    chosen = 1
    for m in range(2, len(bic) + 1):
        if bic[chosen - 1] - bic[m - 1] > float(min_bic_gain):
            chosen = m
    cuts, segments = fits[max(2, chosen)]
    return PiecewiseFit(
        breakpoints=tuple(int(x[k]) for k in cuts),
        segments=segments,
        single=single,
        bic=tuple(float(b) for b in bic),
        n_segments=chosen,
        criterion=f"BIC on relative residuals, 1 to {int(max_segments)} lines",
    )


MIN_R2 = 0.9
"""Below this R^2 a line is not a model of the sweep (see :func:`fit_problems`)."""


def _line_problems(fit: LinearFit, segment: str = "") -> list[str]:
    """What is wrong with one line; `segment` ("lower", "upper") names a piecewise segment."""
    name = f"{segment} segment: " if segment else ""
    problems = []
    if not fit.alpha_s > 0:
        if segment:
            why = "the segment's line, extended down to 0 bytes, passes below zero"
        elif fit.method == "ols":
            why = "a plain least-squares fit is pinned by the largest sizes; fit weighted instead"
        else:
            why = "too few small sizes, or noise larger than the latency"
        problems.append(
            f"{name}alpha = {fit.alpha_s:.3g} s is not positive: an empty message cannot take "
            f"zero or negative time ({why})"
        )
    if not fit.beta_s_per_byte > 0:
        problems.append(
            f"{name}beta = {fit.beta_s_per_byte:.3g} s/byte is not positive: the time does not "
            "grow with the size, so there is no bandwidth (sizes too small for the transfer "
            "to show above the noise)"
        )
    return problems


def fit_problems(fit, min_r2: float = MIN_R2) -> list[str]:
    """Why `fit` is not a plausible model of a ping-pong sweep; [] when it is.

    `fit` is a :class:`LinearFit` or a :class:`PiecewiseFit`. A line is implausible when
    alpha <= 0 (an empty message takes time), beta <= 0 (a larger message cannot be faster:
    no bandwidth) or R^2 < ``min_r2``. A piecewise fit is implausible when any segment's
    alpha or beta is (named "lower", "middle" or "upper" segment); a segment's R^2 is not
    judged, because a latency-dominated segment is nearly flat and a flat line explains little
    of a flat segment's noise even when it is right.

    Why 0.9: the weighted R^2 of a synthetic sweep over 1 B .. 16 MiB is above 0.995 in every
    one of 20 seeds with 5 % or 20 % noise per sample or with heavy-tailed spikes, because the
    times span decades; even a 13x latency jump at 64 KiB (eager to rendezvous, far larger
    than MPICH's) keeps it above 0.91. Below 0.9 the line leaves more than a tenth of the
    (relative) variation unexplained: the sweep is dominated by noise or covers too few sizes
    in one regime, and its alpha and beta describe the noise, not the link. Each problem is one
    sentence saying what is wrong and why.
    """
    if isinstance(fit, PiecewiseFit):
        names = ["lower", *["middle"] * (len(fit.segments) - 2), "upper"]
        return [
            p
            for seg, name in zip(fit.segments, names, strict=True)
            for p in _line_problems(seg, name)
        ]
    if not isinstance(fit, LinearFit):
        raise TypeError(f"fit_problems needs a LinearFit or PiecewiseFit, got {type(fit).__name__}")
    problems = _line_problems(fit)
    if not fit.r2 >= float(min_r2):
        problems.append(
            f"R^2 = {fit.r2:.3g} is below {float(min_r2):g}: the line does not follow the "
            "measured times (noise dominates, or the sizes do not span both regimes), so its "
            "alpha and beta describe the noise rather than the link"
        )
    return problems


@dataclass(frozen=True)
class Regimes:
    """Size ranges of the latency- and bandwidth-dominated regimes of a fit.

    Latency-dominated: beta*b <= alpha/margin, i.e. b <= ``latency_max_bytes``.
    Bandwidth-dominated: beta*b >= margin*alpha, i.e. b >= ``bandwidth_min_bytes``.
    In between is the transition around n_1/2. When sizes were given, ``latency_sizes``,
    ``transition_sizes`` and ``bandwidth_sizes`` list them by regime.
    """

    n_half_bytes: float
    margin: float
    latency_max_bytes: float
    bandwidth_min_bytes: float
    latency_sizes: tuple = ()
    transition_sizes: tuple = ()
    bandwidth_sizes: tuple = ()

    def classify(self, nbytes: float) -> str:
        """'latency', 'transition' or 'bandwidth' for one size in bytes."""
        if nbytes <= self.latency_max_bytes:
            return "latency"
        if nbytes >= self.bandwidth_min_bytes:
            return "bandwidth"
        return "transition"


def regimes(fit: LinearFit, nbytes=None, margin: float = 10.0) -> Regimes:
    """Split sizes into latency- and bandwidth-dominated ranges around n_1/2 = alpha/beta.

    With the default ``margin=10`` a size is latency-dominated when moving its bytes takes at
    most a tenth of alpha, and bandwidth-dominated when it takes at least ten times alpha.
    ``margin=1`` splits exactly at n_1/2 with no transition band.
    """
    margin = float(margin)
    if not margin >= 1.0:
        raise ValueError(f"margin must be at least 1, got {margin}")
    alpha, beta = fit.alpha_s, fit.beta_s_per_byte
    if not (alpha > 0 and beta > 0):
        raise ValueError(
            f"regimes need positive alpha and beta, got alpha={alpha:.3g} s, "
            f"beta={beta:.3g} s/byte (try a weighted fit)"
        )
    n_half = alpha / beta
    reg = Regimes(n_half, margin, n_half / margin, n_half * margin)
    if nbytes is None:
        return reg
    sizes = sorted({int(b) for b in np.asarray(nbytes).ravel()})
    groups = {"latency": [], "transition": [], "bandwidth": []}
    for b in sizes:
        groups[reg.classify(b)].append(b)
    return Regimes(
        n_half,
        margin,
        n_half / margin,
        n_half * margin,
        tuple(groups["latency"]),
        tuple(groups["transition"]),
        tuple(groups["bandwidth"]),
    )


def read_sweep_table(path) -> dict[str, np.ndarray]:
    """Read a sweep CSV into {column: array}; numeric columns as float, others as str.

    Lines starting with ``#`` and blank lines are skipped; the first other line is the header.
    Raises ValueError (one line) for a missing file, a file without header or data rows, and
    rows whose field count differs from the header (see data.results.read_table).
    """
    return results.read_table(path)[0]


def load_sweep_csv(path, column: str = COL.t_median_s) -> tuple[np.ndarray, np.ndarray]:
    """Sizes (int bytes) and one time column (seconds) of a sweep CSV, ready to fit.

    Raises ValueError with a one-line message for: missing file, empty file, a header without
    rows, a single row (a line needs at least two sizes), a missing ``nbytes`` or ``column``,
    non-numeric values, non-positive sizes or times.
    """
    path = Path(path)
    table, linenos = results.read_table(path)
    names = ", ".join(table)
    for name in (COL.nbytes, column):
        if name not in table:
            raise ValueError(f"{path}: no column {name!r} (columns: {names})")
        if table[name].dtype.kind != "f":
            bad = next(i for i, v in enumerate(table[name]) if not _is_number(v))
            raise ValueError(
                f"{path}: malformed line {linenos[bad]}: {name}={str(table[name][bad])!r} "
                "is not a number"
            )
    nbytes, t = table[COL.nbytes], table[column]
    if nbytes.size < 2:
        raise ValueError(f"{path}: only one data row; a fit needs at least 2 message sizes")
    for name, arr in ((COL.nbytes, nbytes), (column, t)):
        bad = np.flatnonzero(~np.isfinite(arr) | (arr <= 0))
        if bad.size:
            i = bad[0]
            raise ValueError(f"{path}: line {linenos[i]}: {name} must be positive, got {arr[i]:g}")
    if np.any(nbytes != np.round(nbytes)):
        i = int(np.flatnonzero(nbytes != np.round(nbytes))[0])
        raise ValueError(f"{path}: line {linenos[i]}: nbytes must be a whole number")
    return nbytes.astype(np.int64), t


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# -- LogGP's gap: what a window of messages in flight costs per message ----------------------
@dataclass(frozen=True)
class GapFit:
    """LogGP's gap g (seconds between consecutive small messages that a sender can inject) and
    G (seconds per byte of a long message), read from windowed bandwidth runs (Alexandrov et
    al., 1995). A full window costs about W·(g + (m-1)·G), plus one acknowledgement (bw)."""

    g_s: float
    G_s_per_byte: float
    small_sizes: np.ndarray
    large_sizes: np.ndarray

    @property
    def bandwidth_Bps(self) -> float:
        """The streaming bandwidth 1/G in bytes per second (NaN when G is not positive)."""
        return 1.0 / self.G_s_per_byte if self.G_s_per_byte > 0 else math.nan

    def per_message_s(self, nbytes) -> np.ndarray:
        """The model's time per message in a full window: g + (m - 1)·G (m >= 1)."""
        m = np.maximum(np.asarray(nbytes, dtype=float), 1.0)
        return self.g_s + (m - 1.0) * self.G_s_per_byte


def fit_gap(nbytes, window_s, window: int, small_max: int = 256, ack_s: float = 0.0) -> GapFit:
    """g and G from the time of a whole window of `window` messages per size.

    The time per message is (window_s - ack_s) / window: `ack_s` removes the acknowledgement
    that closes a bw window (0 for bibw, or to keep it in g). G is the least-squares slope of
    the time per message against m over the sizes above `small_max` bytes; g is the median over
    the sizes up to `small_max` of the time per message less their (m - 1)·G (there the bytes
    cost little next to the gap).
    """
    m = np.asarray(nbytes, dtype=float)
    t = np.asarray(window_s, dtype=float)
    if m.shape != t.shape or m.ndim != 1:
        raise ValueError("nbytes and window_s must be 1-D arrays of the same length")
    if int(window) < 1:
        raise ValueError(f"the window must hold at least one message, got {window}")
    ok = np.isfinite(m) & np.isfinite(t) & (t > 0) & (m >= 0)
    m, per_msg = m[ok], (t[ok] - ack_s) / int(window)
    small, large = m <= small_max, m > small_max
    if not small.any() or large.sum() < 2:
        raise ValueError(
            f"need sizes up to {small_max} B (for g) and at least two above it (for G)"
        )
    G = float(np.polyfit(m[large], per_msg[large], 1)[0])
    g = float(np.median(per_msg[small] - (np.maximum(m[small], 1.0) - 1.0) * G))
    return GapFit(g, G, m[small].astype(int), m[large].astype(int))
