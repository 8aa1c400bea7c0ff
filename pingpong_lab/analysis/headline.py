"""The headline of a sweep: one latency, one asymptotic bandwidth, and how they were read.

Hockney's reading of T(b) = alpha + beta b: alpha is the time of the smallest messages (the
latency), 1/beta the bandwidth the largest messages approach (r_inf), n_1/2 = alpha/beta the
half-performance length. One straight line over 1 B .. 64 MiB gives all three only when the
sweep is one line; shared memory is not (an eager/rendezvous step, a cache cliff). So the
headline is read in the first of these ways that works, and says which and why:

``"piecewise"``
    Two or three lines are better than one by BIC (:func:`model.fit_piecewise`): alpha is the
    intercept of the lowest segment.
``"single line"``
    One line fits (:func:`model.fit_problems` finds nothing: alpha and beta positive,
    R^2 >= 0.9) and more lines are not better: alpha is its intercept.
``"regimes"``
    Neither: alpha from a line through the smallest sizes (up to ``LATENCY_MAX_BYTES``), beta
    from a line through the largest ``BANDWIDTH_SIZES`` sizes, nothing assumed in between.

Whatever the reading, beta is the slope through the same sizes, the largest
``BANDWIDTH_SIZES`` of the sweep (the regime reading's): the asymptotic bandwidth of the
largest messages. Runs of one machine had BIC choose 2 lines (the highest from 8 KiB up) or 3
(the highest from the cache cliff at 4-8 MiB up), and the slope of "the highest segment" then
moved with that choice; the same sizes every run remove it. The piecewise segments still say
where the protocol and the caches change (the breakpoints, the drawing). Only when those sizes
give no positive slope is beta the highest segment's (the line's).

A piecewise reading is used only when its lowest segment gives a latency (alpha positive and not
above every time of its sizes: a line that falls with the size, e.g. through two slow outliers
at 1 and 2 B, has an intercept above them all) and its highest a positive beta. The highest
segment's own alpha may be negative (after a cache cliff the line, extended down to 0 bytes,
passes below zero) without making its slope wrong.

With a sweep measured in interleaved rounds (``pingpong-lab sweep --rounds``), the model is
read from each size's median of the per-round medians (:func:`low_round` at ``ROUND_QUANTILE``
0.5): the typical time of a message, the robust headline notebook 03 teaches, with alpha and
beta from the same rounds. The same reading applied to each round on its own
(:func:`round_spread`) gives a latency and a bandwidth per round: their median's 95 %
confidence interval over the rounds (order statistics, :func:`stats.median_ci`) and their
spread say how well one run knows the headline and how much the machine moved while it ran.
Other work on a shared machine only ever adds time; a report says when it saw any
(``BUSY MACHINE``), since the median of the rounds follows the load once half of them were hit.

Beside the headline, not instead of it, the latency sizes' floor (:func:`floor_times`,
:func:`with_floor`): the time the fastest 0.1 % of each size's round trips reach
(``FLOOR_QUANTILE``), read when a size has at least ``FLOOR_MIN_SAMPLES`` of them, as a line
through those floors. It is a best-case bound, labelled as such: a small message does not wait
for memory, its time is a software path plus where the two cores sit, and on a virtual machine
the host moves the virtual CPUs between placements with latencies of their own (here 1.24, 1.4,
1.55 and 1.68 us, each as tight as 1 %), held for seconds. The floor (the best placement) is
reached in every run and moved by 4 % over six runs here, while how long a run spends in each
placement is luck: the typical latency of a run moves with it, and the report says by how much.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from . import model
from .formatting import format_bandwidth, format_bytes, format_time

__all__ = [
    "BANDWIDTH_SIZES",
    "LATENCY_MAX_BYTES",
    "METHODS",
    "Headline",
    "RegimeFit",
    "RoundSpread",
    "choose",
    "FLOOR_MIN_SAMPLES",
    "FLOOR_QUANTILE",
    "floor_times",
    "ROUND_QUANTILE",
    "low_round",
    "headline_times",
    "interleaved_rounds",
    "round_medians",
    "round_spread",
    "spread_text",
    "interval_text",
]

LATENCY_MAX_BYTES = 1024
"""The regime reading takes alpha from sizes up to this (at least the 3 smallest sizes)."""

BANDWIDTH_SIZES = 4
"""The regime reading takes beta from this many of the largest sizes (at least 2)."""

METHODS = ("piecewise", "single line", "regimes")


def _weighted_r2(y: np.ndarray, pred: np.ndarray, weighted: bool = True) -> float:
    """R^2 of predictions `pred` for times `y`, on relative residuals when weighted."""
    w2 = 1.0 / y**2 if weighted else np.ones_like(y)
    ybar = np.sum(w2 * y) / np.sum(w2)
    ss_tot = float(np.sum(w2 * (y - ybar) ** 2))
    if ss_tot == 0:
        return math.nan
    return 1.0 - float(np.sum(w2 * (y - pred) ** 2)) / ss_tot


def _sorted_xy(nbytes, t) -> tuple[np.ndarray, np.ndarray]:
    """Sizes and times as float arrays sorted by size, without non-positive or NaN points."""
    x = np.asarray(nbytes, dtype=float).ravel()
    y = np.asarray(t, dtype=float).ravel()
    if x.size != y.size:
        raise ValueError(f"nbytes and t differ in length ({x.size} vs {y.size})")
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    x, y = x[ok], y[ok]
    order = np.argsort(x, kind="stable")
    return x[order], y[order]


@dataclass(frozen=True)
class RegimeFit:
    """Hockney's reading from the two ends of a sweep, nothing assumed in between.

    ``latency`` is the line through the sizes ``latency_bytes`` (smallest, largest), whose
    intercept is alpha (the median time of those sizes, ``alpha_from="median"``, when the
    intercept is not positive or above all their times);
    ``bandwidth`` the line through ``bandwidth_bytes``, whose slope is beta (NaN when there are
    not two larger sizes or the slope is not positive). ``predict`` is Hockney's model
    alpha + beta b with these two numbers.
    """

    alpha_s: float
    beta_s_per_byte: float
    latency: model.LinearFit
    bandwidth: model.LinearFit | None
    latency_bytes: tuple[int, int]
    bandwidth_bytes: tuple[int, int] | None
    alpha_from: str = "intercept"

    def predict(self, nbytes) -> np.ndarray:
        """Hockney's model alpha + beta b (NaN without a bandwidth)."""
        return self.alpha_s + self.beta_s_per_byte * np.asarray(nbytes, dtype=float)

    def pieces(self) -> list[tuple[int, int, model.LinearFit]]:
        """(smallest, largest size, line) of each regime line, for drawing."""
        out = [(*self.latency_bytes, self.latency)]
        if self.bandwidth is not None and self.bandwidth_bytes is not None:
            out.append((*self.bandwidth_bytes, self.bandwidth))
        return out


def _latency_like(alpha: float, times: np.ndarray) -> bool:
    """Can `alpha` be the latency of sizes with these times? Positive, and not above them all.

    The time of a message is alpha plus its transfer, so alpha lies below the times of its
    sizes (a flat, noisy regime puts it among them). An intercept above every time comes from a
    line that falls with the size: a few slow outliers among the smallest sizes, not a latency.
    """
    return bool(alpha > 0 and alpha <= float(np.max(times)))


def _regime_sizes(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Masks of the latency sizes and the bandwidth sizes (see the module's constants)."""
    sizes = np.unique(x)
    small = sizes[sizes <= LATENCY_MAX_BYTES]
    if small.size < 3:
        small = sizes[:3]
    rest = sizes[sizes > small.max()]
    large = rest[-BANDWIDTH_SIZES:]
    return np.isin(x, small), np.isin(x, large)


def _fixed_bandwidth(x: np.ndarray, y: np.ndarray, weighted: bool):
    """(beta, (smallest, largest size)) of the line through the largest BANDWIDTH_SIZES sizes
    above the latency sizes (the regime reading's), or (NaN, None) without two such sizes or
    a positive slope."""
    _, bw_mask = _regime_sizes(x)
    if np.unique(x[bw_mask]).size < 2:
        return math.nan, None
    beta = model.fit_linear(x[bw_mask], y[bw_mask], weighted).beta_s_per_byte
    if not beta > 0:
        return math.nan, None
    return float(beta), (int(x[bw_mask].min()), int(x[bw_mask].max()))


def _regimes(x: np.ndarray, y: np.ndarray, weighted: bool) -> RegimeFit:
    lat_mask, bw_mask = _regime_sizes(x)
    xl, yl = x[lat_mask], y[lat_mask]
    if np.unique(xl).size >= 2:
        lat = model.fit_linear(xl, yl, weighted)
    else:  # a single small size: a flat line through its median
        med = float(np.median(yl))
        lat = model.LinearFit(med, 0.0, math.nan, yl - med, "median", int(yl.size))
    alpha, alpha_from = lat.alpha_s, "intercept"
    if not _latency_like(alpha, yl):
        alpha, alpha_from = float(np.median(yl)), "median"
    bw, beta, bw_bytes = None, math.nan, None
    if np.unique(x[bw_mask]).size >= 2:
        bw = model.fit_linear(x[bw_mask], y[bw_mask], weighted)
        bw_bytes = (int(x[bw_mask].min()), int(x[bw_mask].max()))
        beta = bw.beta_s_per_byte if bw.beta_s_per_byte > 0 else math.nan
    return RegimeFit(
        alpha_s=float(alpha),
        beta_s_per_byte=float(beta),
        latency=lat,
        bandwidth=bw,
        latency_bytes=(int(xl.min()), int(xl.max())),
        bandwidth_bytes=bw_bytes,
        alpha_from=alpha_from,
    )


@dataclass(frozen=True)
class Headline:
    """Latency alpha and asymptotic inverse bandwidth beta of a sweep, and how they were read.

    ``method`` is one of :data:`METHODS`, ``why`` one sentence saying why that reading.
    ``model`` produced the numbers and is what to draw: a LinearFit ("single line"), a
    PiecewiseFit ("piecewise") or a RegimeFit ("regimes"). ``r2`` is its weighted R^2 over the
    sizes it covers. ``latency_bytes`` and ``bandwidth_bytes`` are the (smallest, largest)
    sizes alpha and beta were read from. ``single`` and ``piecewise`` are the fits that were
    compared (``piecewise`` is None with fewer than 6 sizes) and ``single_problems`` why the
    one line is implausible (:func:`model.fit_problems`); ``notes`` are sentences worth
    reading next to the numbers (why the single line was not used, a segment whose intercept is
    not a latency). The latency floor, a best-case bound beside alpha (:func:`with_floor`):
    ``alpha_floor_s``, read from ``floor``, the line through the floors over ``floor_bytes``
    (NaN and None without one).
    """

    method: str
    why: str
    alpha_s: float
    beta_s_per_byte: float
    r2: float
    latency_bytes: tuple[int, int]
    bandwidth_bytes: tuple[int, int] | None
    model: object
    single: model.LinearFit
    piecewise: model.PiecewiseFit | None
    weighted: bool = True
    notes: tuple[str, ...] = ()
    single_problems: tuple[str, ...] = ()
    alpha_floor_s: float = math.nan
    floor: model.LinearFit | None = None
    floor_bytes: tuple[int, int] | None = None

    @property
    def bandwidth_Bps(self) -> float:  # noqa: N802 - unit in the name
        """Asymptotic bandwidth 1/beta in bytes per second (NaN without one)."""
        return 1.0 / self.beta_s_per_byte if self.beta_s_per_byte > 0 else math.nan

    @property
    def n_half_bytes(self) -> float:
        """Half-performance length alpha/beta in bytes (NaN unless both are positive)."""
        if self.alpha_s > 0 and self.beta_s_per_byte > 0:
            return self.alpha_s / self.beta_s_per_byte
        return math.nan

    @property
    def breakpoints(self) -> tuple[int, ...]:
        """The piecewise breakpoints when the piecewise reading was used, else ()."""
        return self.model.breakpoints if self.method == "piecewise" else ()

    def label(self) -> str:
        """The reading in a few words, e.g. 'piecewise fit, 3 lines (breaks at 8 KiB, 4 MiB)'."""
        if self.method == "piecewise":
            bps = ", ".join(format_bytes(b) for b in self.breakpoints)
            s = "s" if len(self.breakpoints) > 1 else ""
            return f"piecewise fit, {len(self.model.segments)} lines (break{s} at {bps})"
        if self.method == "single line":
            return "single line over all sizes"
        return "latency and bandwidth regimes (Hockney)"

    def method_line(self) -> str:
        """'<label>: <why>' - the one line that says how the headline was read."""
        return f"{self.label()}: {self.why}"

    def estimate(self, nbytes, t) -> tuple[float, float]:
        """(alpha, beta) read the same way from other times of the sweep's sizes (one round).

        The same breakpoints or size ranges are used (beta from ``bandwidth_bytes`` whatever
        the method), nothing is searched again; NaN where the times do not allow it (too few
        sizes, a non-positive alpha or beta).
        """
        x, y = _sorted_xy(nbytes, t)
        alpha = beta = math.nan
        try:
            if self.method == "single line":
                alpha = model.fit_linear(x, y, self.weighted).alpha_s
            elif self.method == "piecewise":
                lo = self.breakpoints[0]
                alpha = model.fit_linear(x[x < lo], y[x < lo], self.weighted).alpha_s
                alpha = alpha if _latency_like(alpha, y[x < lo]) else math.nan
            else:
                lat = (x >= self.latency_bytes[0]) & (x <= self.latency_bytes[1])
                f = model.fit_linear(x[lat], y[lat], self.weighted)
                alpha = f.alpha_s if _latency_like(f.alpha_s, y[lat]) else float(np.median(y[lat]))
            if self.bandwidth_bytes is not None:
                big = (x >= self.bandwidth_bytes[0]) & (x <= self.bandwidth_bytes[1])
                beta = model.fit_linear(x[big], y[big], self.weighted).beta_s_per_byte
        except ValueError:
            pass
        return (
            float(alpha) if alpha > 0 else math.nan,
            float(beta) if beta > 0 else math.nan,
        )

    def as_dict(self) -> dict:
        """The headline as plain values (JSON-ready apart from NaN)."""
        out = {
            "method": self.method,
            "label": self.label(),
            "why": self.why,
            "alpha_s": self.alpha_s,
            "beta_s_per_byte": self.beta_s_per_byte,
            "bandwidth_Bps": self.bandwidth_Bps,
            "bandwidth_GiBps": self.bandwidth_Bps / model.GIB,
            "bandwidth_Mbitps": self.bandwidth_Bps * 8.0 / 1e6,
            "n_half_bytes": self.n_half_bytes,
            "r2": self.r2,
            "latency_bytes": list(self.latency_bytes),
            "bandwidth_bytes": list(self.bandwidth_bytes) if self.bandwidth_bytes else None,
            "single_r2": self.single.r2,
            "notes": list(self.notes),
            "alpha_floor_s": self.alpha_floor_s,
            "floor_bytes": list(self.floor_bytes) if self.floor_bytes else None,
        }
        if self.method == "piecewise":
            out["breakpoints_bytes"] = list(self.breakpoints)
        return out


def _short_problem(problems: list[str]) -> str:
    """The first problem of a line cut to its claim ('R^2 = 0.87 is below 0.9')."""
    return problems[0].split(":")[0] if problems else ""


def _segment_ranges(x: np.ndarray, pw: model.PiecewiseFit) -> list[tuple[int, int]]:
    idx = pw.segment_index(x)
    return [(int(x[idx == k].min()), int(x[idx == k].max())) for k in range(len(pw.segments))]


def choose(
    nbytes,
    t,
    weighted: bool = True,
    min_r2: float = model.MIN_R2,
    floor: dict[int, tuple[float, int]] | None = None,
) -> Headline:
    """Read latency and asymptotic bandwidth from a sweep: see the module's docstring.

    ``nbytes`` (bytes) and ``t`` (seconds, e.g. median one-way times) need at least two
    distinct positive sizes with positive times (ValueError otherwise); other points are
    dropped. ``weighted`` fits on relative residuals (the default; see
    :func:`model.fit_linear`). ``floor`` (:func:`floor_times`) reads alpha from the latency
    sizes' floors, where they have enough samples (:func:`with_floor`).
    """
    h = _choose(nbytes, t, weighted, min_r2)
    return with_floor(h, floor) if floor else h


def _bandwidth_reading(x, y, weighted, model_beta, model_bytes, model_part):
    """(beta, its sizes, a few words saying where it came from): the fixed bandwidth regime
    (:func:`_fixed_bandwidth`) where it gives one, else the model's own `model_part`."""
    beta, bw_bytes = _fixed_bandwidth(x, y, weighted)
    if bw_bytes is not None:
        lo, hi = (format_bytes(b) for b in bw_bytes)
        return beta, bw_bytes, (
            f"bandwidth from the largest sizes ({lo} .. {hi}), the same sizes whatever the "
            "number of lines"
        )  # fmt: skip
    return model_beta, model_bytes, f"bandwidth from {model_part}"


def _choose(nbytes, t, weighted: bool, min_r2: float) -> Headline:
    x, y = _sorted_xy(nbytes, t)
    single = model.fit_linear(x, y, weighted)
    single_problems = model.fit_problems(single, min_r2)
    try:
        pw = model.fit_piecewise(x, y, weighted)
    except ValueError:  # fewer than 6 sizes
        pw = None
    notes = []
    if single_problems:
        notes.append("One line over all sizes is not used: " + "; ".join(single_problems) + ".")
    line_fits = (
        f"one line fits all sizes (weighted R^2 = {single.r2:.4f})"
        if not single_problems
        else f"one line does not fit all sizes ({_short_problem(single_problems)})"
    )

    def made(**reading) -> Headline:  # a reading, with what every reading reports
        return Headline(
            single=single,
            piecewise=pw,
            weighted=weighted,
            notes=tuple(notes),
            single_problems=tuple(single_problems),
            **reading,
        )

    unusable = ""
    if pw is not None and pw.two_segments_better:
        ranges = _segment_ranges(x, pw)
        bic = f"BIC {pw.bic_one:.0f} -> {pw.bic[pw.n_segments - 1]:.0f}, lower is better"
        lowest = y[pw.segment_index(x) == 0]
        if _latency_like(pw.lower.alpha_s, lowest) and pw.upper.beta_s_per_byte > 0:
            if not pw.upper.alpha_s > 0:
                lo, hi = ranges[-1]
                notes.append(
                    f"The highest segment ({format_bytes(lo)} .. {format_bytes(hi)}) passes "
                    "below zero when extended down to 0 bytes: its intercept is no latency (the "
                    "latency is the lowest segment's), its slope is the bandwidth."
                )
            beta, bw_bytes, bw_why = _bandwidth_reading(
                x, y, weighted, pw.upper.beta_s_per_byte, ranges[-1], "the highest segment"
            )
            return made(
                method="piecewise",
                why=f"{pw.n_segments} lines fit better than one ({bic}); {line_fits}; "
                f"latency from the lowest segment, {bw_why}",
                alpha_s=pw.lower.alpha_s,
                beta_s_per_byte=beta,
                r2=_weighted_r2(y, pw.predict(x), weighted),
                latency_bytes=ranges[0],
                bandwidth_bytes=bw_bytes,
                model=pw,
            )
        if not _latency_like(pw.lower.alpha_s, lowest):
            bad = (
                f"the lowest segment ({format_bytes(ranges[0][0])} .. "
                f"{format_bytes(ranges[0][1])}) gives no latency (alpha = "
                f"{format_time(pw.lower.alpha_s)}, its times "
                f"{format_time(lowest.min())} .. {format_time(lowest.max())})"
            )
        else:
            bad = "the highest segment's beta is not positive (no bandwidth)"
        unusable = f"; {pw.n_segments} lines fit better ({bic}) but {bad}"
    if not single_problems:
        beta, bw_bytes, bw_why = _bandwidth_reading(
            x, y, weighted, single.beta_s_per_byte, (int(x.min()), int(x.max())), "the line"
        )
        return made(
            method="single line",
            why=line_fits
            + (unusable or " and two or three lines are not better by BIC")
            + f"; {bw_why}",
            alpha_s=single.alpha_s,
            beta_s_per_byte=beta,
            r2=single.r2,
            latency_bytes=(int(x.min()), int(x.max())),
            bandwidth_bytes=bw_bytes,
            model=single,
        )
    reg = _regimes(x, y, weighted)
    if pw is None:
        more = "; too few sizes to try more lines"
    elif unusable:
        more = unusable
    else:
        more = "; two or three lines are not better by BIC"
    how = (
        f"latency from the smallest sizes ({format_bytes(reg.latency_bytes[0])} .. "
        f"{format_bytes(reg.latency_bytes[1])}"
        + (", their median time" if reg.alpha_from == "median" else "")
        + "), bandwidth from the largest "
        + (
            f"({format_bytes(reg.bandwidth_bytes[0])} .. {format_bytes(reg.bandwidth_bytes[1])})"
            if reg.bandwidth_bytes
            else "(too few sizes)"
        )
    )
    if not reg.bandwidth_bytes:
        notes.append(
            "No bandwidth: the sweep has fewer than two sizes above the smallest ones "
            f"(up to {format_bytes(reg.latency_bytes[1])})."
        )
    elif not reg.beta_s_per_byte > 0:
        notes.append(
            "No bandwidth: the time of the largest sizes does not grow with the size (sizes too "
            "small for the transfer to show above the noise)."
        )
    covered = (x <= reg.latency_bytes[1]) | (
        (x >= reg.bandwidth_bytes[0]) if reg.bandwidth_bytes else False
    )
    pred = np.where(
        x <= reg.latency_bytes[1],
        reg.latency.predict(x),
        reg.bandwidth.predict(x) if reg.bandwidth is not None else np.nan,
    )
    return made(
        method="regimes",
        why=f"{line_fits}{more}; {how}",
        alpha_s=reg.alpha_s,
        beta_s_per_byte=reg.beta_s_per_byte,
        r2=_weighted_r2(y[covered], pred[covered], weighted),
        latency_bytes=reg.latency_bytes,
        bandwidth_bytes=reg.bandwidth_bytes,
        model=reg,
    )


FLOOR_QUANTILE = 0.001
"""A latency size's floor: this quantile of its round trips (see the module's docstring)."""

FLOOR_MIN_SAMPLES = 5000
"""... read only from a size with at least this many round trips (5 at or below the floor)."""


def floor_times(nbytes, samples: dict) -> dict[int, tuple[float, int]]:
    """{size: (floor time, round trips)} of every size with samples (see FLOOR_QUANTILE).

    ``samples[n]`` is a (ranks, reps) array of one-way times; each iteration's time is its
    maximum over ranks (non-finite ones are left out).
    """
    from .stats import max_across_ranks

    out = {}
    for n in np.asarray(nbytes).ravel():
        a = samples.get(int(n))
        if a is None:
            continue
        per_iter = max_across_ranks(np.atleast_2d(a))
        per_iter = per_iter[np.isfinite(per_iter)]
        if per_iter.size:
            out[int(n)] = (float(np.quantile(per_iter, FLOOR_QUANTILE)), int(per_iter.size))
    return out


def with_floor(h: Headline, floor: dict[int, tuple[float, int]]) -> Headline:
    """`h` with the latency floor beside its alpha (a best-case bound), where it can be read.

    The latency sizes are those alpha was read from (``h.latency_bytes``) that have at least
    ``FLOOR_MIN_SAMPLES`` round trips; the floor is the intercept of the line through their
    floors (their median floor when the intercept is not a latency, the floor itself for one
    size). Without such a size, or without a positive floor, `h` is returned as it is. Alpha,
    beta and how they were read do not change.
    """
    lo, hi = h.latency_bytes
    pts = sorted(
        (n, tf)
        for n, (tf, count) in floor.items()
        if lo <= n <= hi and count >= FLOOR_MIN_SAMPLES and tf > 0 and math.isfinite(tf)
    )
    if not pts:
        return h
    x = np.array([p[0] for p in pts], dtype=float)
    y = np.array([p[1] for p in pts], dtype=float)
    if x.size >= 2:
        line = model.fit_linear(x, y, h.weighted)
    else:
        line = model.LinearFit(float(y[0]), 0.0, math.nan, y - y[0], "floor", 1)
    bound = line.alpha_s if _latency_like(line.alpha_s, y) else float(np.median(y))
    if not bound > 0:
        return h
    fewest = min(count for n, (_, count) in floor.items() if lo <= n <= hi and n in x)
    note = (
        f"Best case: the latency floor is {format_time(bound)}, from {x.size} size(s) "
        f"({format_bytes(x.min())} .. {format_bytes(x.max())}): the line through the time "
        f"the fastest {100 * FLOOR_QUANTILE:g} % of each size's round trips reach (at least "
        f"{fewest:,} round trips per size). A typical message takes the headline's alpha, "
        f"{format_time(h.alpha_s)}; the floor is a bound it does not reach."
    )
    return replace(
        h,
        alpha_floor_s=float(bound),
        floor=line,
        floor_bytes=(int(x.min()), int(x.max())),
        notes=(*h.notes, note),
    )


def round_medians(nbytes, samples: dict, rounds: int) -> np.ndarray:
    """Per-round medians (rounds x sizes) from raw samples measured in interleaved rounds.

    ``samples[n]`` is a (ranks, reps) array of one-way times in the order they were measured,
    ``rounds`` equal blocks of repetitions (as `pingpong-lab sweep --rounds` writes them);
    each iteration's time is its maximum over ranks. A size without samples is NaN.
    """
    from .stats import max_across_ranks

    rounds = int(rounds)
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    sizes = [int(n) for n in np.asarray(nbytes).ravel()]
    out = np.full((rounds, len(sizes)), math.nan)
    for j, n in enumerate(sizes):
        a = samples.get(n)
        if a is None or np.asarray(a).shape[-1] < rounds:
            continue
        per_iter = max_across_ranks(np.atleast_2d(a))
        for r, block in enumerate(np.array_split(per_iter, rounds)):
            finite = block[np.isfinite(block)]
            if finite.size:
                out[r, j] = float(np.median(finite))
    return out


ROUND_QUANTILE = 0.5
"""Which per-round median of a size the headline reads: their median (see the docstring)."""


def low_round(per_round: np.ndarray, quantile: float = ROUND_QUANTILE) -> np.ndarray:
    """Each size's `quantile` of its per-round medians (NaN where no round has one)."""
    a = np.atleast_2d(np.asarray(per_round, dtype=float))
    out = np.full(a.shape[1], math.nan)
    seen = np.any(np.isfinite(a), axis=0)
    out[seen] = np.nanquantile(a[:, seen], float(quantile), axis=0)
    return out


def interleaved_rounds(info: dict) -> int | None:
    """Rounds of a sweep measured interleaved (its provenance sidecar says so), else None."""
    rounds = info.get("rounds") if info.get("interleaved") else None
    return int(rounds) if isinstance(rounds, int) and rounds >= 2 else None


def headline_times(
    nbytes, medians, samples: dict | None = None, rounds: int | None = None
) -> tuple[np.ndarray, np.ndarray | None, str]:
    """The times to read a headline from: (times, per-round medians or None, what they are).

    With raw samples of at least 2 interleaved rounds: each size's median of the per-round
    medians (:func:`low_round`; a size without samples keeps its median). Otherwise `medians`.
    """
    medians = np.asarray(medians, dtype=float)
    if samples and rounds and int(rounds) >= 2:
        per_round = round_medians(nbytes, samples, int(rounds))
        t = low_round(per_round)
        t = np.where(np.isfinite(t), t, medians)
        what = f"median of {int(rounds)} interleaved rounds per size (of the rounds' medians)"
        return t, per_round, what
    return medians, None, "median of all samples per size"


@dataclass(frozen=True)
class RoundSpread:
    """The headline read from each round on its own: per-round latency (s) and bandwidth (B/s)."""

    latency_s: tuple[float, ...]
    bandwidth_Bps: tuple[float, ...]

    @property
    def rounds(self) -> int:
        return len(self.latency_s)

    @staticmethod
    def _stats(values) -> tuple[float, float, float]:
        v = np.asarray([x for x in values if math.isfinite(x)], dtype=float)
        if v.size == 0:
            return math.nan, math.nan, math.nan
        lo, hi, mid = float(v.min()), float(v.max()), float(np.median(v))
        return lo, hi, (hi - lo) / mid if mid > 0 else math.nan

    @staticmethod
    def _ci(values) -> tuple[float, float]:
        from .stats import median_ci

        try:
            lo, hi, _ = median_ci([x for x in values if math.isfinite(x)])
        except ValueError:  # fewer rounds than a 95 % interval needs (6)
            return math.nan, math.nan
        return lo, hi

    def latency_ci(self) -> tuple[float, float]:
        """95 % confidence interval of the median per-round latency (NaN with too few rounds)."""
        return self._ci(self.latency_s)

    def bandwidth_ci(self) -> tuple[float, float]:
        """95 % confidence interval of the median per-round bandwidth (NaN: too few rounds)."""
        return self._ci(self.bandwidth_Bps)

    def latency(self) -> tuple[float, float, float]:
        """(lowest, highest, (highest - lowest) / median) of the per-round latencies."""
        return self._stats(self.latency_s)

    def bandwidth(self) -> tuple[float, float, float]:
        """(lowest, highest, (highest - lowest) / median) of the per-round bandwidths."""
        return self._stats(self.bandwidth_Bps)

    def as_dict(self) -> dict:
        lat, bw = self.latency(), self.bandwidth()
        return {
            "rounds": self.rounds,
            "latency_s": list(self.latency_s),
            "bandwidth_Bps": list(self.bandwidth_Bps),
            "latency_min_s": lat[0],
            "latency_max_s": lat[1],
            "latency_rel_spread": lat[2],
            "bandwidth_min_Bps": bw[0],
            "bandwidth_max_Bps": bw[1],
            "bandwidth_rel_spread": bw[2],
            "latency_ci_s": list(self.latency_ci()),
            "bandwidth_ci_Bps": list(self.bandwidth_ci()),
        }


def round_spread(headline: Headline, nbytes, per_round: np.ndarray) -> RoundSpread:
    """Read `headline`'s latency and bandwidth from each row of `per_round` (rounds x sizes)."""
    lat, bw = [], []
    for t in np.atleast_2d(per_round):
        alpha, beta = headline.estimate(nbytes, t)
        lat.append(alpha)
        bw.append(1.0 / beta if beta > 0 else math.nan)
    return RoundSpread(tuple(lat), tuple(bw))


def spread_text(spread: RoundSpread | None, which: str) -> str:
    """'1.17 .. 1.22 µs in 8 rounds (spread 4.1 %)' for which = 'latency' or 'bandwidth'."""
    if spread is None or spread.rounds < 2:
        return "n/a (not measured in interleaved rounds)"
    lo, hi, rel = spread.latency() if which == "latency" else spread.bandwidth()
    if not math.isfinite(lo):
        return f"n/a (no round gave a {which})"
    fmt = format_time if which == "latency" else format_bandwidth
    return f"{fmt(lo)} .. {fmt(hi)} in {spread.rounds} rounds (spread {100 * rel:.1f} %)"


def interval_text(spread: RoundSpread | None, which: str) -> str:
    """'1.17 .. 1.22 µs (95 % CI of the median over 12 rounds)' for which = 'latency' or
    'bandwidth': how well this run knows its headline (not how the next run will read it)."""
    if spread is None or spread.rounds < 2:
        return "n/a (not measured in interleaved rounds)"
    lo, hi = spread.latency_ci() if which == "latency" else spread.bandwidth_ci()
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"n/a (a 95 % interval needs 6 rounds with a {which}, this run has fewer)"
    fmt = format_time if which == "latency" else format_bandwidth
    return f"{fmt(lo)} .. {fmt(hi)} (95 % CI of the median over {spread.rounds} rounds)"
