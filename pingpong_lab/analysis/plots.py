"""Plots for ping-pong sweeps (matplotlib; works with any backend, including Agg).

Every function draws on ``ax`` when given (a new figure otherwise) and returns the Axes, so plots
compose: ``ax = latency_plot(...); compare_plot(..., ax=ax)``. Measured data are drawn as
markers only; lines are drawn only for models, which are defined between the measured sizes.
Every axis label carries its unit. :func:`save` writes a PNG.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..data.schema import COL
from . import stats
from .formatting import format_bandwidth, format_bytes, format_time

__all__ = [
    "BANDWIDTH_UNITS",
    "TIME_UNITS",
    "add_model_line",
    "bandwidth_plot",
    "compare_plot",
    "contention_plot",
    "format_bytes",
    "latency_plot",
    "residual_plot",
    "save",
    "variability_plot",
]

TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
"""Time units accepted by ``time_unit`` -> seconds per unit."""

_TIME_LABELS = {"s": "s", "ms": "ms", "us": "µs", "ns": "ns"}

BANDWIDTH_UNITS = {
    "B/s": 1.0,
    "MB/s": 1e6,
    "GB/s": 1e9,
    "MiB/s": 2.0**20,
    "GiB/s": 2.0**30,
    "Mbit/s": 1e6 / 8.0,
    "Gbit/s": 1e9 / 8.0,
}
"""Bandwidth units accepted by ``unit`` -> bytes per second per unit (1 Mbit = 10**6 bit)."""

SIZE_LABEL = "message size [bytes]"
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")


def _time_scale(unit: str) -> tuple[float, str]:
    if unit not in TIME_UNITS:
        raise ValueError(f"time_unit must be one of {', '.join(TIME_UNITS)}; got {unit!r}")
    return TIME_UNITS[unit], _TIME_LABELS[unit]


def _bw_scale(unit: str) -> float:
    if unit not in BANDWIDTH_UNITS:
        raise ValueError(f"unit must be one of {', '.join(BANDWIDTH_UNITS)}; got {unit!r}")
    return BANDWIDTH_UNITS[unit]


def _axes(ax: Axes | None) -> Axes:
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4.4), layout="constrained")
    return ax


def _arrays(nbytes, t, what: str = "t") -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(nbytes, dtype=float).ravel()
    y = np.asarray(t, dtype=float).ravel()
    if x.size == 0:
        raise ValueError("nothing to plot: nbytes is empty")
    if x.size != y.size:
        raise ValueError(f"nbytes and {what} differ in length ({x.size} vs {y.size})")
    if np.any(x <= 0):
        raise ValueError("message sizes must be positive for a logarithmic axis")
    return x, y


def _ci_bounds(lo, hi, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The CI bounds in seconds as float arrays of n values, or None when neither is given."""
    if lo is None and hi is None:
        return None
    if lo is None or hi is None:
        raise ValueError("give both ci_lo_s and ci_hi_s, or neither")
    lo = np.asarray(lo, dtype=float).ravel()
    hi = np.asarray(hi, dtype=float).ravel()
    if lo.size != n or hi.size != n:
        raise ValueError("ci_lo_s/ci_hi_s must have one value per size")
    return lo, hi


def _error_bars(y, low, high) -> np.ndarray:
    return np.vstack([np.clip(y - low, 0, None), np.clip(high - y, 0, None)])


def _ci_errors(y, lo, hi, scale):
    """Error bars of times y (in units of scale seconds) from the CI in seconds; None without."""
    bounds = _ci_bounds(lo, hi, y.size)
    return None if bounds is None else _error_bars(y, bounds[0] / scale, bounds[1] / scale)


def _measured(x, t, lo, hi, quantity: str = "time", time_unit: str = "us", unit: str = "GiB/s"):
    """Measured times as drawn: (y, error bars or None, y-axis label) for time or bandwidth.

    Bandwidth is x / t; its error bars come from the time CI (the shorter time is the higher
    bandwidth).
    """
    if quantity == "time":
        scale, tlabel = _time_scale(time_unit)
        y = t / scale
        return y, _ci_errors(y, lo, hi, scale), f"one-way time [{tlabel}]"
    scale = _bw_scale(unit)
    y = x / t / scale
    bounds = _ci_bounds(lo, hi, y.size)
    yerr = None if bounds is None else _error_bars(y, x / bounds[1] / scale, x / bounds[0] / scale)
    return y, yerr, f"bandwidth [{unit}]"


def _size_axes(ax: Axes, ylabel: str, logy: bool = True, legend: bool = True) -> Axes:
    """Message size on a log2 x axis, ylabel (log scale unless logy=False), a grid, a legend."""
    ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(SIZE_LABEL)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    if legend:
        ax.legend()
    return ax


def _drawn_model(model):
    """The model to draw: a piecewise fit whose segments are not better is one line."""
    if getattr(model, "two_segments_better", True) is False:
        return model.single
    return model


def _fit_label(fit) -> str:
    bps = getattr(fit, "breakpoints", None)
    if bps:
        where = ", ".join(format_bytes(b) for b in bps)
        return f"piecewise fit, break{'s' if len(bps) > 1 else ''} at {where}"
    alpha = getattr(fit, "alpha_s", None)
    beta = getattr(fit, "beta_s_per_byte", None)
    if alpha is None or beta is None:
        return "model"
    bandwidth = format_bandwidth(1.0 / beta) if beta > 0 else "n/a"
    return f"fit: α = {format_time(alpha)}, 1/β = {bandwidth}"


def add_model_line(
    ax: Axes,
    model,
    nbytes_range=(1, 2**26),
    label: str | None = None,
    time_unit: str = "us",
    quantity: str = "time",
    unit: str = "GiB/s",
    **kwargs,
) -> Axes:
    """Draw a model curve over ``nbytes_range`` (bytes) on ``ax``.

    ``model`` is a fit with ``predict`` (LinearFit, PiecewiseFit) or a pair (alpha_s,
    beta_s_per_byte), e.g. a literature value. ``quantity`` is ``"time"`` or ``"bandwidth"``.
    A piecewise fit is drawn with its breaks only when its segments are better than one line
    (``two_segments_better``); otherwise its single-line fit is drawn.
    """
    model = _drawn_model(model)
    if hasattr(model, "predict"):
        predict = model.predict
        label = _fit_label(model) if label is None else label
    else:
        try:
            alpha, beta = (float(v) for v in model)
        except (TypeError, ValueError) as exc:
            raise ValueError("model must be a fit or a pair (alpha_s, beta_s_per_byte)") from exc

        def predict(b):
            return alpha + beta * np.asarray(b, dtype=float)

    lo, hi = (float(v) for v in nbytes_range)
    if not 0 < lo < hi:
        raise ValueError(f"nbytes_range must be increasing positive sizes, got {nbytes_range}")
    if quantity not in ("time", "bandwidth"):
        raise ValueError(f"quantity must be 'time' or 'bandwidth', got {quantity!r}")
    # A piecewise model is drawn as separate pieces: no line across a jump.
    cuts = [float(b) for b in getattr(model, "breakpoints", ()) if lo < b <= hi]
    starts, ends = [lo, *cuts], [c * 0.999 for c in cuts] + [hi]
    pieces = list(zip(starts, ends, strict=True))
    kwargs.setdefault("linestyle", "-")
    kwargs.setdefault("linewidth", 1.2)
    for k, (a, z) in enumerate(pieces):
        b = np.geomspace(a, z, 200)
        t = np.asarray(predict(b), dtype=float)
        if quantity == "time":
            y = t / _time_scale(time_unit)[0]
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                y = np.where(t > 0, b / t, np.nan) / _bw_scale(unit)
        (line,) = ax.plot(b, y, label=label if k == 0 else "_nolegend_", **kwargs)
        kwargs["color"] = line.get_color()
    return ax


def latency_plot(
    nbytes,
    t_s,
    ci_lo_s=None,
    ci_hi_s=None,
    fit=None,
    label: str | None = "measured (median)",
    ax: Axes | None = None,
    time_unit: str = "us",
) -> Axes:
    """One-way time vs message size, log-log, markers with CI error bars, optional model line."""
    ax = _axes(ax)
    x, t = _arrays(nbytes, t_s)
    y, yerr, ylabel = _measured(x, t, ci_lo_s, ci_hi_s, time_unit=time_unit)
    ax.errorbar(x, y, yerr=yerr, fmt="o", linestyle="none", markersize=4, capsize=2, label=label)
    if fit is not None:
        add_model_line(ax, fit, (x.min(), x.max()), time_unit=time_unit, color="black")
    return _size_axes(ax, ylabel, legend=label is not None or fit is not None)


def bandwidth_plot(
    nbytes,
    t_s,
    ci_lo_s=None,
    ci_hi_s=None,
    fit=None,
    unit: str = "GiB/s",
    label: str | None = "measured",
    ax: Axes | None = None,
    logy: bool = True,
    second_unit: str | None = "Gbit/s",
) -> Axes:
    """Bandwidth = size / one-way time vs size, in ``unit`` (B/s, GiB/s, Mbit/s, ...).

    With a fit, its curve b / T(b) is drawn and the asymptote 1/beta as a dashed line.
    ``second_unit`` adds a right-hand axis in that unit (None: no second axis).
    """
    ax = _axes(ax)
    scale = _bw_scale(unit)
    x, t = _arrays(nbytes, t_s)
    y, yerr, ylabel = _measured(x, t, ci_lo_s, ci_hi_s, "bandwidth", unit=unit)
    ax.errorbar(x, y, yerr=yerr, fmt="o", linestyle="none", markersize=4, capsize=2, label=label)
    if fit is not None:
        add_model_line(ax, fit, (x.min(), x.max()), quantity="bandwidth", unit=unit, color="black")
        beta = getattr(fit, "beta_s_per_byte", None)
        if beta is not None and beta > 0:
            ax.axhline(
                1.0 / beta / scale,
                color="gray",
                linestyle="--",
                linewidth=1,
                label=f"1/β = {1.0 / beta / scale:.3g} {unit}",
            )
    _size_axes(ax, ylabel, logy=logy, legend=label is not None or fit is not None)
    if second_unit is not None and second_unit != unit:
        second_bandwidth_axis(ax, unit, second_unit)
    return ax


def second_bandwidth_axis(ax: Axes, unit: str = "GiB/s", second: str = "Gbit/s"):
    """A right-hand axis that reads the same bandwidths in ``second`` (default Gbit/s).

    The course plots bandwidth in GiB/s (2**30 bytes per second) and labels network-style
    rates on this second axis (1 GiB/s = 8.59 Gbit/s), so that a memory-style number and a
    link-style number can be read off one plot without a unit slip.
    """
    factor = _bw_scale(unit) / _bw_scale(second)
    axis = ax.secondary_yaxis("right", functions=(lambda y: y * factor, lambda y: y / factor))
    axis.set_ylabel(f"bandwidth [{second}]")
    return axis


def _samples_by_size(samples, nbytes) -> tuple[list[float], list[np.ndarray]]:
    if isinstance(samples, Mapping):
        sizes = sorted(samples)
        data = [np.asarray(samples[s], dtype=float).ravel() for s in sizes]
    else:
        if nbytes is None:
            raise ValueError("give nbytes with a 2-D samples array (sizes x repetitions)")
        arr = np.asarray(samples, dtype=float)
        sizes = list(np.asarray(nbytes).ravel())
        if arr.ndim != 2 or arr.shape[0] != len(sizes):
            raise ValueError(
                f"samples must have shape (len(nbytes), reps) = ({len(sizes)}, ...), "
                f"got {arr.shape}"
            )
        data = list(arr)
    data = [d[~np.isnan(d)] for d in data]
    if not data or any(d.size == 0 for d in data):
        raise ValueError("every size needs at least one measured (non-NaN) sample")
    return sizes, data


def variability_plot(
    samples,
    nbytes=None,
    kind: str = "box",
    ax: Axes | None = None,
    time_unit: str = "us",
    show_mean: bool = True,
) -> Axes:
    """Distribution of per-iteration times per size: box (whiskers 1.5 IQR) or violin.

    ``samples`` is {nbytes: array} or a 2-D array (sizes x repetitions) with ``nbytes``.
    Outliers beyond Q3 + 1.5 IQR are drawn as points in both kinds; with ``show_mean`` the
    mean is marked too, to show how a heavy tail drags it above the median.
    """
    if kind not in ("box", "violin"):
        raise ValueError(f"kind must be 'box' or 'violin', got {kind!r}")
    ax = _axes(ax)
    scale, tlabel = _time_scale(time_unit)
    sizes, data = _samples_by_size(samples, nbytes)
    data = [d / scale for d in data]
    pos = np.arange(1, len(data) + 1)
    if kind == "box":
        ax.boxplot(data, positions=pos, whis=1.5, showfliers=True, widths=0.6)
    else:
        ax.violinplot(data, positions=pos, showmedians=True, showextrema=False)
        for p, d in zip(pos, data, strict=True):
            mask = stats.outlier_mask(d, "iqr")
            mask &= d > np.median(d)
            ax.plot(np.full(mask.sum(), p), d[mask], "o", color="C3", markersize=3)
    if show_mean:
        ax.plot(pos, [d.mean() for d in data], "x", color="C1", linestyle="none", label="mean")
        ax.legend()
    ax.set_xticks(pos, [format_bytes(s) for s in sizes], rotation=45, ha="right")
    ax.set_yscale("log")
    ax.set_xlabel(SIZE_LABEL)
    ax.set_ylabel(f"one-way time per iteration [{tlabel}]")
    ax.grid(True, axis="y", alpha=0.3)
    return ax


def residual_plot(
    fit, nbytes, t_s, relative: bool = True, ax: Axes | None = None, time_unit: str = "us"
) -> Axes:
    """Residuals (measured - model) vs size: in percent of the measured time, or in time units.

    A good model leaves residuals scattered around zero; a systematic bend points at a missing
    regime (for example an eager/rendezvous switch).
    """
    ax = _axes(ax)
    x, t = _arrays(nbytes, t_s)
    if not hasattr(fit, "predict"):
        raise ValueError("fit must be a LinearFit or PiecewiseFit (with .predict)")
    resid = t - np.asarray(fit.predict(x), dtype=float)
    if relative:
        y, ylabel = 100.0 * resid / t, "relative residual [%]"
    else:
        scale, tlabel = _time_scale(time_unit)
        y, ylabel = resid / scale, f"residual [{tlabel}]"
    ax.plot(x, y, "o", linestyle="none", markersize=4, label=getattr(fit, "method", None))
    ax.axhline(0.0, color="black", linewidth=0.8)
    return _size_axes(ax, ylabel, logy=False, legend=False)


def _series_arrays(name, data, column):
    if isinstance(data, tuple | list) and len(data) == 2:
        return np.asarray(data[0], dtype=float), np.asarray(data[1], dtype=float), None, None
    try:
        x = np.asarray(data[COL.nbytes], dtype=float)
        y = np.asarray(data[column], dtype=float)
    except (KeyError, TypeError, IndexError) as exc:
        raise ValueError(
            f"series {name!r} needs 'nbytes' and {column!r} entries (or a pair (nbytes, t))"
        ) from exc

    def optional(key):
        try:
            return np.asarray(data[key], dtype=float)
        except (KeyError, TypeError, IndexError):
            return None

    lo, hi = optional(COL.ci_lo_s), optional(COL.ci_hi_s)
    if lo is None or hi is None or column != COL.t_median_s:
        lo = hi = None
    return x, y, lo, hi


def compare_plot(
    series: Mapping,
    quantity: str = "time",
    column: str = COL.t_median_s,
    ax: Axes | None = None,
    time_unit: str = "us",
    unit: str = "GiB/s",
    fits: Mapping | None = None,
) -> Axes:
    """Several sweeps on one axes, e.g. C vs Python, blocking vs non-blocking, shm vs TCP.

    ``series`` maps a legend label to a table: a dict of arrays or a DataFrame with ``nbytes``
    and ``column`` (and optionally ``ci_lo_s``/``ci_hi_s`` for error bars), or a pair
    (nbytes, t_s). ``quantity`` is ``"time"`` or ``"bandwidth"``. ``fits`` optionally maps
    some labels to fits whose model lines are drawn in the same colour.
    """
    if quantity not in ("time", "bandwidth"):
        raise ValueError(f"quantity must be 'time' or 'bandwidth', got {quantity!r}")
    if not isinstance(series, Mapping) or not series:
        raise ValueError("series must be a non-empty mapping of label -> data")
    ax = _axes(ax)
    fits = fits or {}
    for i, (name, data) in enumerate(series.items()):
        x, t, lo, hi = _series_arrays(name, data, column)
        x, t = _arrays(x, t)
        color = f"C{i % 10}"
        marker = _MARKERS[i % len(_MARKERS)]
        y, yerr, ylabel = _measured(x, t, lo, hi, quantity, time_unit, unit)
        ax.errorbar(
            x,
            y,
            yerr=yerr,
            fmt=marker,
            linestyle="none",
            markersize=4,
            capsize=2,
            color=color,
            label=str(name),
        )
        if name in fits:
            add_model_line(
                ax,
                fits[name],
                (x.min(), x.max()),
                label="_nolegend_",
                time_unit=time_unit,
                quantity=quantity,
                unit=unit,
                color=color,
            )
    return _size_axes(ax, ylabel)


def contention_plot(
    npairs,
    t_s,
    nbytes: int,
    ci_lo_s=None,
    ci_hi_s=None,
    ax: Axes | None = None,
    ax_bw: Axes | None = None,
    time_unit: str = "us",
    unit: str = "GiB/s",
    label: str | None = None,
) -> tuple[Axes, Axes]:
    """Contention: one-way time and aggregate bandwidth vs the number of concurrent pairs.

    ``t_s`` is the per-exchange one-way time for each pair count (e.g. the median over pairs
    and iterations of the max-over-ranks time). The aggregate bandwidth is
    npairs * nbytes / t. Without axes a figure with two panels side by side is made; returns
    (time axes, bandwidth axes).
    """
    if int(nbytes) <= 0:
        raise ValueError(f"nbytes must be positive, got {nbytes}")
    p = np.asarray(npairs, dtype=float).ravel()
    t = np.asarray(t_s, dtype=float).ravel()
    if p.size == 0 or p.size != t.size:
        raise ValueError(
            f"npairs and t_s must be non-empty and equal in length ({p.size} vs {t.size})"
        )
    if np.any(p < 1):
        raise ValueError("npairs must be at least 1")
    if ax is None and ax_bw is None:
        _, (ax, ax_bw) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    elif ax is None or ax_bw is None:
        raise ValueError("give both ax and ax_bw, or neither")
    scale, tlabel = _time_scale(time_unit)
    y = t / scale
    yerr = _ci_errors(y, ci_lo_s, ci_hi_s, scale)
    kw = dict(fmt="o", linestyle="none", markersize=5, capsize=2, label=label)
    ax.errorbar(p, y, yerr=yerr, **kw)
    ax.set_xlabel("number of pairs")
    ax.set_ylabel(f"one-way time [{tlabel}]")
    ax.set_title(f"{format_bytes(nbytes)} messages")
    bw_scale = _bw_scale(unit)
    agg = p * float(nbytes) / t / bw_scale
    ax_bw.plot(p, agg, "s", linestyle="none", markersize=5, label=label)
    ax_bw.set_xlabel("number of pairs")
    ax_bw.set_ylabel(f"aggregate bandwidth [{unit}]")
    for a in (ax, ax_bw):
        a.xaxis.get_major_locator().set_params(integer=True)
        a.grid(True, alpha=0.3)
        if label is not None:
            a.legend()
    return ax, ax_bw


def save(fig: Figure | Axes, path, dpi: int = 150) -> Path:
    """Write a figure (or the figure of an Axes) as PNG to ``path``; creates parent folders."""
    if isinstance(fig, Axes):
        fig = fig.figure
    if not isinstance(fig, Figure):
        raise ValueError(f"save needs a matplotlib Figure or Axes, got {type(fig).__name__}")
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise ValueError(f"save writes PNG; the path must end in .png, got {path.name!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=dpi)
    return path
