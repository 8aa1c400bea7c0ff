"""Summary statistics for per-iteration timing samples.

Everything here works on plain numpy arrays of one-way times in seconds. NaN marks a sample that
was not measured (for example a rank that did not take part) and is always ignored.

The median is the headline number of the course: ping-pong times have a heavy right tail (the
operating system, other processes, page faults), so the mean is pulled up by a few slow
iterations while the median is not. Its confidence interval comes from order statistics and
needs no assumption about the distribution (see :func:`median_ci`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass

import numpy as np

from ..data.schema import SweepRow

__all__ = [
    "Summary",
    "bootstrap_median_ci",
    "check_confidence",
    "check_timed_block",
    "ci_half_width",
    "ci_relative_width",
    "combine",
    "generator",
    "mann_whitney",
    "max_across_ranks",
    "round_trips",
    "measured_timer_resolution",
    "median_ci",
    "min_samples_for_median_ci",
    "null_max_of_pairs",
    "null_median_interval",
    "outlier_mask",
    "per_pair_medians",
    "summarize",
    "summary_row",
]


@dataclass(frozen=True)
class Summary:
    """Descriptive statistics of one set of timing samples (seconds).

    ``ci_lo``/``ci_hi`` is the distribution-free confidence interval of the median from order
    statistics, with its exact coverage in ``ci_coverage`` (at least ``confidence``); both are
    NaN when there are too few samples (see :func:`min_samples_for_median_ci`).
    ``boot_ci_lo``/``boot_ci_hi`` is a percentile-bootstrap interval of the median (NaN when
    ``n_boot`` is 0). ``n_high_iqr``/``n_low_iqr`` count samples beyond Q3 + 1.5 IQR and below
    Q1 - 1.5 IQR (Tukey's fences); ``n_above_3x_median`` counts samples above 3 x median.
    """

    n: int
    mean: float
    std: float
    min: float
    max: float
    median: float
    p50: float
    p90: float
    p99: float
    q1: float
    q3: float
    confidence: float
    ci_lo: float
    ci_hi: float
    ci_coverage: float
    boot_ci_lo: float
    boot_ci_hi: float
    n_high_iqr: int
    n_low_iqr: int
    n_above_3x_median: int

    def as_dict(self) -> dict:
        """The summary as a plain dict (for JSON or a table row)."""
        return asdict(self)


def check_confidence(confidence: float) -> float:
    """confidence as a float; ValueError unless it lies strictly between 0 and 1."""
    confidence = float(confidence)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence}")
    return confidence


def _finite_1d(samples, what: str = "samples") -> np.ndarray:
    """Flatten ``samples`` to 1-D float, drop NaN, reject infinities and emptiness."""
    try:
        arr = np.asarray(samples, dtype=float).ravel()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be numbers, got {type(samples).__name__}") from exc
    arr = arr[~np.isnan(arr)]
    if arr.size == 0:
        raise ValueError(f"{what} contain no measured values (empty or all NaN)")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} contain infinite values")
    return arr


def generator(rng) -> np.random.Generator:
    """rng itself when it is a numpy Generator, else a new one seeded with it (None: fresh)."""
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(rng)


def min_samples_for_median_ci(confidence: float = 0.95) -> int:
    """Smallest sample count for which an order-statistics CI of the median exists.

    The widest such interval is [min, max]; it misses the median only when all samples fall on
    the same side of it, which happens with probability 2 * 0.5**n. So n must satisfy
    1 - 2 * 0.5**n >= confidence (n = 6 at 95 %, n = 8 at 99 %).
    """
    confidence = check_confidence(confidence)
    n = 1
    while 1.0 - 2.0 * 0.5**n < confidence:
        n += 1
    return n


def _binomial_half_cdf(n: int) -> np.ndarray:
    """P(B <= i) for B ~ Binomial(n, 1/2), i = 0..n, computed in log space (stable for big n)."""
    i = np.arange(n, dtype=float)
    log_ratio = np.log(n - i) - np.log(i + 1.0)  # log pmf(i+1) - log pmf(i)
    log_pmf = np.concatenate(([0.0], np.cumsum(log_ratio))) - n * math.log(2.0)
    return np.cumsum(np.exp(log_pmf))


def median_ci(samples, confidence: float = 0.95) -> tuple[float, float, float]:
    """Distribution-free confidence interval of the median by order statistics.

    With the samples sorted, x[j-1] <= median <= x[n-j] (0-based indices, j = 1..n/2) fails
    only if at most j-1 samples lie below the true median or at most j-1 lie above it. The count
    below is Binomial(n, 1/2), so the coverage is exactly 1 - 2 P(B <= j-1). The largest j with
    coverage >= ``confidence`` gives the narrowest interval. Returns (lo, hi, coverage).

    Raises ValueError when fewer than :func:`min_samples_for_median_ci` samples are measured.
    """
    confidence = check_confidence(confidence)
    x = np.sort(_finite_1d(samples))
    n = x.size
    need = min_samples_for_median_ci(confidence)
    if n < need:
        raise ValueError(f"a {confidence:.0%} median CI needs at least {need} samples, got {n}")
    cdf = _binomial_half_cdf(n)
    tail = (1.0 - confidence) / 2.0
    # cdf[j-1] <= tail  <=>  coverage(j) >= confidence; cdf is increasing.
    j = int(np.searchsorted(cdf, tail, side="right"))  # number of admissible j values
    j = max(min(j, n // 2), 1)
    coverage = 1.0 - 2.0 * float(cdf[j - 1])
    return float(x[j - 1]), float(x[n - j]), coverage


def bootstrap_median_ci(
    samples, confidence: float = 0.95, n_boot: int = 1000, rng=0
) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of the median.

    ``rng`` is a seed or a ``numpy.random.Generator``; the same seed gives the same interval.
    Resamples are drawn in chunks so that large sample sets do not exhaust memory.
    """
    confidence = check_confidence(confidence)
    if int(n_boot) < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot}")
    x = _finite_1d(samples)
    gen = generator(rng)
    n = x.size
    chunk = max(1, min(int(n_boot), 4_000_000 // n))
    medians = []
    done = 0
    while done < n_boot:
        k = min(chunk, n_boot - done)
        idx = gen.integers(0, n, size=(k, n))
        medians.append(np.median(x[idx], axis=1))
        done += k
    meds = np.concatenate(medians)
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(meds, [tail, 1.0 - tail])
    return float(lo), float(hi)


def outlier_mask(samples, method: str = "iqr", k: float | None = None) -> np.ndarray:
    """Boolean mask (same flat order as ``np.ravel(samples)``) of outlying samples.

    ``method="iqr"``: beyond Tukey's fences Q1 - k IQR or Q3 + k IQR (k defaults to 1.5).
    ``method="median"``: above k x median (k defaults to 3). NaN is never an outlier.
    """
    x = np.asarray(samples, dtype=float).ravel()
    finite = _finite_1d(x)
    if method == "iqr":
        k = 1.5 if k is None else float(k)
        q1, q3 = np.quantile(finite, [0.25, 0.75])
        iqr = q3 - q1
        with np.errstate(invalid="ignore"):
            return (x > q3 + k * iqr) | (x < q1 - k * iqr)
    if method == "median":
        k = 3.0 if k is None else float(k)
        with np.errstate(invalid="ignore"):
            return x > k * np.median(finite)
    raise ValueError(f"method must be 'iqr' or 'median', got {method!r}")


def summarize(samples, confidence: float = 0.95, n_boot: int = 1000, rng=0) -> Summary:
    """Summarise timing samples (any shape; NaN ignored) into a :class:`Summary`.

    ``std`` is the sample standard deviation (ddof=1; 0 for a single sample). ``n_boot=0``
    skips the bootstrap (its bounds are then NaN); its cost grows as n_boot x n (about 3 s
    for 1000 resamples of 10**5 samples), so pass ``n_boot=0`` when summarising many large
    sample sets and the order-statistics CI is enough. ``rng`` seeds the bootstrap.
    """
    confidence = check_confidence(confidence)
    x = _finite_1d(samples)
    n = x.size
    q1, median, q3, p90, p99 = np.quantile(x, [0.25, 0.5, 0.75, 0.90, 0.99])
    try:
        ci_lo, ci_hi, coverage = median_ci(x, confidence)
    except ValueError:
        ci_lo = ci_hi = coverage = math.nan
    if n_boot:
        boot_lo, boot_hi = bootstrap_median_ci(x, confidence, n_boot=n_boot, rng=rng)
    else:
        boot_lo = boot_hi = math.nan
    iqr = q3 - q1
    return Summary(
        n=int(n),
        mean=float(np.mean(x)),
        std=float(np.std(x, ddof=1)) if n > 1 else 0.0,
        min=float(x.min()),
        max=float(x.max()),
        median=float(median),
        p50=float(median),
        p90=float(p90),
        p99=float(p99),
        q1=float(q1),
        q3=float(q3),
        confidence=confidence,
        ci_lo=ci_lo,
        ci_hi=ci_hi,
        ci_coverage=coverage,
        boot_ci_lo=boot_lo,
        boot_ci_hi=boot_hi,
        n_high_iqr=int(np.count_nonzero(x > q3 + 1.5 * iqr)),
        n_low_iqr=int(np.count_nonzero(x < q1 - 1.5 * iqr)),
        n_above_3x_median=int(np.count_nonzero(x > 3.0 * median)),
    )


def ci_relative_width(summary: Summary | Mapping) -> float:
    """Width of the median CI relative to the median: (ci_hi - ci_lo) / median.

    Accepts a :class:`Summary` or a mapping with ``ci_lo``, ``ci_hi`` and ``median`` keys.
    """
    if isinstance(summary, Summary):
        lo, hi, med = summary.ci_lo, summary.ci_hi, summary.median
    else:
        try:
            lo, hi, med = summary["ci_lo"], summary["ci_hi"], summary["median"]
        except (KeyError, TypeError) as exc:
            raise ValueError("summary needs 'ci_lo', 'ci_hi' and 'median' entries") from exc
    if not med > 0:
        raise ValueError(f"relative CI width needs a positive median, got {med}")
    return float((hi - lo) / med)


def ci_half_width(s: Summary, tick_s: float = 0.0) -> float:
    """Half the median's CI width relative to the median (0.02 means +/- 2%).

    Never less than tick_s / median: when many samples fall on the same clock tick the
    order-statistics CI can collapse to zero width, but no measurement is more precise than
    the clock that took it.
    """
    if not s.median > 0 or math.isnan(s.ci_lo):
        return float("nan")
    return max(s.median - s.ci_lo, s.ci_hi - s.median, tick_s) / s.median


def summary_row(
    nbytes: int, reps: int, warmup: int, t, *, tick_s: float = 0.0, **extra
) -> SweepRow:
    """The results row (data.schema.SweepRow) of one message size from its one-way times t.

    tick_s is the smallest one-way time difference the clock can resolve; the reported CI
    half-width is never narrower than it (see ci_half_width). `extra` sets the other columns
    (batch, rounds, stop_reason, timer_resolution_s).
    """
    s = summarize(t, n_boot=0)  # the order-statistics CI; bootstrap on demand
    return SweepRow(
        nbytes=nbytes,
        reps=reps,
        warmup=warmup,
        t_median_s=s.median,
        t_min_s=s.min,
        t_mean_s=s.mean,
        t_max_s=s.max,
        t_std_s=s.std,
        t_p90_s=s.p90,
        t_p99_s=s.p99,
        ci_lo_s=s.ci_lo,
        ci_hi_s=s.ci_hi,
        ci_rel_halfwidth=ci_half_width(s, tick_s),
        n_outliers=s.n_high_iqr + s.n_low_iqr,
        bandwidth_Bps=(nbytes / s.median) if s.median > 0 else float("nan"),
        **extra,
    )


@dataclass(frozen=True)
class RankTest:
    """A Mann-Whitney U test of two sets of values: U of the first set, the two-sided p-value
    (exact from the distribution of U when the sets are small and have no ties, else the normal
    approximation with the tie and continuity corrections) and the probability that a value
    of the first set is above one of the second (ties count half)."""

    u: float
    p: float
    prob_first_above: float
    exact: bool


def _u_counts(n1: int, n2: int) -> np.ndarray:
    """counts[u] = number of orderings of n1 + n2 distinct values whose first set has U = u."""
    # f(i, j) as a polynomial in u: f(i, j) = f(i - 1, j) shifted by j + f(i, j - 1)
    table = [[None] * (n2 + 1) for _ in range(n1 + 1)]
    for i in range(n1 + 1):
        for j in range(n2 + 1):
            if i == 0 or j == 0:
                table[i][j] = np.ones(1)
                continue
            a, b = table[i - 1][j], table[i][j - 1]
            out = np.zeros(i * j + 1)
            out[j : j + a.size] += a
            out[: b.size] += b
            table[i][j] = out
    return table[n1][n2]


def mann_whitney(first, second, exact_max: int = 400) -> RankTest:
    """Two-sided Mann-Whitney U test: do `first` and `second` come from the same distribution,
    against one being shifted above the other? Needs no assumption about the distribution, so
    it suits timings (heavy tails). Give it independent values (one median per fresh run, not
    the samples of one run, which follow each other)."""
    x, y = _finite_1d(first, "first"), _finite_1d(second, "second")
    n1, n2 = x.size, y.size
    both = np.concatenate([x, y])
    order = np.argsort(both, kind="mergesort")
    ranks = np.empty(both.size)
    ranks[order] = np.arange(1, both.size + 1)
    values, inverse, counts = np.unique(both, return_inverse=True, return_counts=True)
    sums = np.zeros(values.size)
    np.add.at(sums, inverse, ranks)
    ranks = (sums / counts)[inverse]  # ties share their mean rank
    u = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2)
    prob = u / (n1 * n2)
    ties = counts.max() > 1
    if not ties and n1 * n2 <= exact_max:
        dist = _u_counts(n1, n2)
        dist = dist / dist.sum()
        low = min(u, n1 * n2 - u)
        p = min(1.0, 2 * float(dist[: int(round(low)) + 1].sum()))
        return RankTest(u, p, prob, True)
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - float((counts**3 - counts).sum()) / (n * (n - 1)))
    if var <= 0:  # every value the same
        return RankTest(u, 1.0, prob, False)
    z = (abs(u - n1 * n2 / 2) - 0.5) / math.sqrt(var)
    p = min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))
    return RankTest(u, p, prob, False)


def max_across_ranks(samples_2d) -> np.ndarray:
    """Per-iteration maximum over ranks (rows = ranks, columns = iterations).

    This is the honest per-iteration time: an exchange is over only when its slowest
    participant is done. Rows that are entirely NaN (ranks that did not measure) are ignored,
    as are NaN entries; an iteration no rank measured comes out NaN.
    """
    a = np.asarray(samples_2d, dtype=float)
    if a.ndim != 2:
        raise ValueError(f"expected a 2-D array (ranks, iterations), got shape {a.shape}")
    measured_rows = ~np.all(np.isnan(a), axis=1)
    a = a[measured_rows]
    if a.size == 0:
        raise ValueError("no rank measured anything (all samples are NaN)")
    out = np.where(np.isnan(a), -np.inf, a).max(axis=0)
    out[np.isneginf(out)] = np.nan
    return out


def round_trips(samples_2d, starter: int = 0) -> np.ndarray:
    """Per-iteration times of a ping-pong: the starting rank's readings (rows = ranks).

    The starting rank's clock runs from its send to the arrival of the reply: the whole round
    trip. The answering rank's iteration i runs from the moment its reply i-1 left to the moment
    reply i left, about half a round trip earlier than the starter's: the two readings of
    "iteration i" are not the same exchange. A stall that delays the starter after the reply
    arrived (between its iteration i and i+1) lands in the starter's reading i and in the answering
    rank's reading i+1, so a per-iteration maximum of the two rows (`max_across_ranks`, right for
    ranks that exchange at the same time) counts it twice. Falls back to `max_across_ranks`
    when the starting rank measured nothing (a row of NaN).
    """
    a = np.asarray(samples_2d, dtype=float)
    if a.ndim != 2:
        raise ValueError(f"expected a 2-D array (ranks, iterations), got shape {a.shape}")
    if not 0 <= starter < a.shape[0]:
        raise ValueError(f"no row {starter} in samples of {a.shape[0]} rank(s)")
    if np.all(np.isnan(a[starter])):
        return max_across_ranks(a)
    return a[starter].copy()


def null_max_of_pairs(one_pair_samples, pairs: int, iterations: int | None = None, rng=0):
    """Per-iteration maxima of ``pairs`` pairs that do not disturb each other (a null model).

    Each simulated iteration draws ``pairs`` samples independently (with replacement) from
    the one-pair samples and keeps the largest. With no contention at all the maximum of p
    samples still grows with p: its median is the 0.5^(1/p) quantile of one pair's
    distribution. A measured per-iteration maximum is evidence of contention only where it
    exceeds this. Returns an array of ``iterations`` maxima (default: as many as given).
    """
    x = _finite_1d(one_pair_samples, "one-pair samples")
    pairs = int(pairs)
    if pairs < 1:
        raise ValueError(f"pairs must be at least 1, got {pairs}")
    n = x.size if iterations is None else int(iterations)
    if n < 1:
        raise ValueError(f"iterations must be at least 1, got {n}")
    draws = generator(rng).choice(x, size=(n, pairs), replace=True)
    return draws.max(axis=1)


def null_median_interval(one_pair_samples, pairs: int, confidence: float = 0.95,
                         replicates: int = 200, rng=0) -> tuple[float, float, float]:  # fmt: skip
    """(median, lo, hi) of the null model's per-iteration maxima (null_max_of_pairs), with a
    percentile-bootstrap interval: each replicate resamples the one-pair run (a run as this one
    might have gone), draws its null maxima and keeps their median.

    The interval is how far the null model moves *within this run*'s samples; a fresh run of
    one pair moves by more on a shared machine (notebook 03), which this does not include.
    """
    x = _finite_1d(one_pair_samples, "one-pair samples")
    confidence = check_confidence(confidence)
    g = generator(rng)
    medians = np.empty(int(replicates))
    for k in range(medians.size):
        run = g.choice(x, size=x.size, replace=True)
        medians[k] = np.median(g.choice(run, size=(x.size, int(pairs)), replace=True).max(axis=1))
    point = float(np.median(null_max_of_pairs(x, pairs, rng=g)))
    lo, hi = np.quantile(medians, [(1 - confidence) / 2, (1 + confidence) / 2])
    return point, float(lo), float(hi)


def per_pair_medians(samples_2d) -> np.ndarray:
    """Median over iterations of each rank's samples (rows: ranks; all-NaN rows dropped)."""
    a = np.asarray(samples_2d, dtype=float)
    if a.ndim != 2:
        raise ValueError(f"samples must be a (ranks, iterations) array, got shape {a.shape}")
    a = a[~np.all(np.isnan(a), axis=1)]
    if a.shape[0] == 0:
        raise ValueError("no rank has a finite sample")
    return np.nanmedian(a, axis=1)


def combine(arrays: Iterable) -> np.ndarray:
    """Pool several sample arrays (any shapes) into one flat array without NaN."""
    parts = [np.asarray(a, dtype=float).ravel() for a in arrays]
    if not parts:
        raise ValueError("combine needs at least one array, got none")
    return _finite_1d(np.concatenate(parts), what="combined samples")


def measured_timer_resolution(
    timer: Callable[[], float] = time.perf_counter, n: int = 200, max_spins: int = 10_000_000
) -> float:
    """Smallest non-zero difference between two readings of ``timer`` (seconds).

    Call it with ``MPI.Wtime`` to measure the MPI clock (compare with ``MPI.Wtick()``). Each of
    the ``n`` trials spins until the reading changes; a timer that never changes within
    ``max_spins`` calls raises ValueError.
    """
    if int(n) < 1:
        raise ValueError(f"n must be a positive integer, got {n}")
    if not callable(timer):
        raise ValueError(f"timer must be callable (like time.perf_counter), got {timer!r}")
    best = math.inf
    for _ in range(int(n)):
        t0 = timer()
        t1 = timer()
        spins = 0
        while t1 == t0:
            spins += 1
            if spins > max_spins:
                raise ValueError(f"timer reading did not change in {max_spins} calls")
            t1 = timer()
        d = t1 - t0
        if d <= 0:
            raise ValueError(f"timer went backwards by {-d} s; it is not monotonic")
        best = min(best, d)
    return float(best)


def check_timed_block(duration_s: float, resolution_s: float, factor: float = 100) -> float:
    """Raise ValueError if a timed block is shorter than ``factor`` x timer resolution.

    A block timed with a clock of resolution r has a reading error up to r, so it must last at
    least 100 r for a 1 % error. Returns ``duration_s / resolution_s`` when the block is long
    enough.
    """
    duration_s, resolution_s, factor = float(duration_s), float(resolution_s), float(factor)
    if not resolution_s > 0:
        raise ValueError(f"timer resolution must be positive, got {resolution_s} s")
    if not factor > 0:
        raise ValueError(f"factor must be positive, got {factor}")
    if not duration_s >= factor * resolution_s:
        raise ValueError(
            f"timed block of {duration_s:.3g} s is shorter than {factor:g} x timer resolution "
            f"({factor * resolution_s:.3g} s); time more repetitions per block"
        )
    return duration_s / resolution_s
