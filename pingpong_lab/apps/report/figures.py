"""The report's figures (matplotlib, headless), drawn from the sweeps and the fits."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...analysis import headline, stats
from ...analysis.formatting import format_bandwidth, format_bytes, format_time
from ...analysis.model import GIB
from ...data.schema import COL
from .sweeps import Sweep


def draw_headline(ax, h: headline.Headline, span, quantity: str = "time") -> None:
    """Draw the model the headline was read from on `ax` (time or bandwidth vs size).

    One line or the piecewise segments as fitted; for the regime reading, the two regime
    lines over the sizes they were fitted to and Hockney's alpha + beta b, dotted, across all
    sizes. With a bandwidth, its asymptote 1/beta is a dashed horizontal line.
    """
    from ...analysis import plots

    kw = {"quantity": quantity}
    if h.method == "regimes":
        names = ("latency regime", "bandwidth regime")
        for (lo, hi, line), name, color in zip(
            h.model.pieces(), names, ("tab:green", "tab:red"), strict=False
        ):
            lo, hi = lo / 1.5, hi * 1.5
            plots.add_model_line(ax, line, (lo, hi), label=name, color=color, linewidth=2, **kw)
        if h.beta_s_per_byte > 0:
            plots.add_model_line(
                ax,
                (h.alpha_s, h.beta_s_per_byte),
                span,
                label=f"Hockney: α = {format_time(h.alpha_s)}, "
                f"1/β = {format_bandwidth(h.bandwidth_Bps)}",
                color="black",
                linestyle=":",
                **kw,
            )
    else:
        what = "one line" if h.method == "single line" else f"{len(h.model.segments)} lines"
        label = f"{what}: α = {format_time(h.alpha_s)}, 1/β = {format_bandwidth(h.bandwidth_Bps)}"
        plots.add_model_line(ax, h.model, span, label=label, color="black", **kw)
    if h.floor is not None and quantity == "time":
        lo, hi = h.floor_bytes
        plots.add_model_line(
            ax,
            h.floor,
            (lo / 1.5, hi * 1.5),
            label=f"latency floor (best case): {format_time(h.alpha_floor_s)}",
            color="tab:purple",
            linestyle="--",
            linewidth=2,
            **kw,
        )
    if quantity == "bandwidth" and h.beta_s_per_byte > 0:
        ax.axhline(
            h.bandwidth_Bps / GIB,
            color="gray",
            linestyle="--",
            linewidth=1,
            label=f"1/β = {format_bandwidth(h.bandwidth_Bps)}",
        )


def _headline_points(ax, read: dict, quantity: str = "time") -> None:
    """Mark the times the headline was read from, where they are not the medians drawn."""
    if read.get("per_round") is None:
        return
    x, t = np.asarray(read["x"], dtype=float), np.asarray(read["t"], dtype=float)
    y = t * 1e6 if quantity == "time" else x / t / GIB
    ax.plot(x, y, "x", color="black", markersize=5, label="median round (headline)")


def model_plot(h: headline.Headline, read: dict):
    """The headline's figure: the times it was read from, each round's medians, the model."""
    from ...analysis import plots

    x, t = np.asarray(read["x"], dtype=float), np.asarray(read["t"], dtype=float)
    ax = plots.latency_plot(x, t, label=read["times"])
    per_round = read.get("per_round")
    if per_round is not None:
        xs = np.broadcast_to(x, per_round.shape)
        ax.plot(
            xs.ravel(), per_round.ravel() * 1e6, ".", color="gray", alpha=0.4, markersize=3,
            label=f"each of {per_round.shape[0]} rounds (median)",
        )  # fmt: skip
    if h.floor is not None and read.get("floor"):
        lo, hi = h.floor_bytes
        fx = [n for n in sorted(read["floor"]) if lo <= n <= hi]
        ax.plot(
            fx, [read["floor"][n][0] * 1e6 for n in fx], "v", color="tab:purple", markersize=4,
            label=f"floor: fastest {100 * headline.FLOOR_QUANTILE:g} % of round trips",
        )  # fmt: skip
    draw_headline(ax, h, (float(x.min()), float(x.max())))
    ax.legend(fontsize="small")
    ax.set_title(f"Headline model: {h.label()}", fontsize="medium")
    return ax


def _latency_figure(cb: Sweep, read: dict, save) -> None:
    """C blocking one-way time with its CI, the headline's times and model."""
    from ...analysis import plots

    tab = cb.table()
    x, t = tab[COL.nbytes], tab[COL.t_median_s]
    ax = plots.latency_plot(
        x, t, tab[COL.ci_lo_s], tab[COL.ci_hi_s], label="C blocking (median, 95 % CI)"
    )
    h = read.get("headline")
    if h is not None:
        _headline_points(ax, read)
        draw_headline(ax, h, (float(np.nanmin(x)), float(np.nanmax(x))))
    ax.legend(fontsize="small")
    ax.set_title("Ping-pong latency (one way)")
    save(ax, "latency_c_blocking.png", "C blocking one-way time and the headline's model")


def _bandwidth_figure(cb: Sweep, read: dict, save) -> None:
    """C blocking bandwidth and the headline's asymptote."""
    from ...analysis import plots

    tab = cb.table()
    x, t = tab[COL.nbytes], tab[COL.t_median_s]
    ax = plots.bandwidth_plot(x, t, label="C blocking (median)")
    h = read.get("headline")
    if h is not None:
        _headline_points(ax, read, quantity="bandwidth")
        draw_headline(ax, h, (float(np.nanmin(x)), float(np.nanmax(x))), quantity="bandwidth")
    ax.legend(fontsize="small")
    ax.set_title("Ping-pong bandwidth")
    save(ax, "bandwidth_c_blocking.png", "Bandwidth and the asymptote 1/beta of the headline")


def _model_figures(read: dict, save) -> None:
    """The model the headline was read from, and the residuals of one line and of that model."""
    from ...analysis import plots

    h = read["headline"]
    ax = model_plot(h, read)
    save(ax, "model_c_blocking.png", f"The model the headline was read from: {h.label()}")
    ax = plots.residual_plot(h.single, read["x"], read["t"])
    legend = ["one line over all sizes"]
    if h.method != "single line":
        plots.residual_plot(h.model, read["x"], read["t"], ax=ax)
        legend.append(h.label())
    ax.legend(legend, fontsize="small")
    ax.set_title("Relative residuals")
    save(ax, "residuals_c_blocking.png", "Residuals of one line and of the headline model")


def _c_blocking_figures(sweeps: dict[str, Sweep], analysis: dict, save) -> None:
    """Latency, bandwidth and (with a headline) the model and its residuals."""
    cb = sweeps.get("c_blocking")
    if cb is None:
        return
    read = analysis.get("headlines", {}).get("c_blocking", {})
    _latency_figure(cb, read, save)
    _bandwidth_figure(cb, read, save)
    if read.get("headline") is not None:
        _model_figures(read, save)


_KERNELS = (
    ("c_blocking", "C blocking"),
    ("c_nonblocking", "C non-blocking"),
    ("python_blocking", "Python blocking"),
    ("python_nonblocking", "Python non-blocking"),
)


def _kernel_figures(sweeps: dict[str, Sweep], analysis: dict, save) -> None:
    """The kernels' median one-way times on one plot (when there are two or more)."""
    from ...analysis import plots

    series = {label: sweeps[role].table() for role, label in _KERNELS if role in sweeps}
    if len(series) > 1:
        ax = plots.compare_plot(series)
        ax.set_title("C vs Python, blocking vs non-blocking")
        save(ax, "compare_kernels.png", "Kernels compared (median one-way time)")


def _transport_figures(sweeps: dict[str, Sweep], analysis: dict, save) -> None:
    """Shared memory vs TCP loopback, time and bandwidth."""
    from ...analysis import plots

    if "c_blocking" not in sweeps or "c_blocking_tcp" not in sweeps:
        return
    shm_tcp = {
        "shared memory": sweeps["c_blocking"].table(),
        "TCP loopback": sweeps["c_blocking_tcp"].table(),
    }
    for quantity, name in (("time", "latency"), ("bandwidth", "bandwidth")):
        ax = plots.compare_plot(shm_tcp, quantity=quantity)
        ax.set_title("Shared memory vs TCP loopback (C blocking)")
        save(ax, f"shm_vs_tcp_{name}.png", f"Shared memory vs TCP: {quantity}")


def _variability_figure(sweeps: dict[str, Sweep], analysis: dict, save) -> None:
    """The distribution of per-iteration times (the variability run, else C blocking)."""
    from ...analysis import plots

    var = sweeps.get("variability") or sweeps.get("c_blocking")
    if var is not None and var.samples:
        samples = {n: stats.max_across_ranks(a) for n, a in var.samples.items()}
        ax = plots.variability_plot(samples)
        ax.set_title(f"Per-iteration variability ({var.path.name})")
        save(ax, "variability.png", "Distribution of per-iteration times (box: IQR, x: mean)")


def _contention_figures(sweeps: dict[str, Sweep], analysis: dict, save) -> None:
    """Time and aggregate bandwidth vs pairs, at the small and at the large size."""
    from ...analysis import plots

    cont = analysis["numbers"].get("contention")
    for label in ("small", "large") if cont else ():
        if f"{label}_t_s" not in cont[0]:
            continue
        nbytes = cont[0][f"{label}_bytes"]
        ax, _ = plots.contention_plot(
            [r["pairs"] for r in cont], [r[f"{label}_t_s"] for r in cont], nbytes
        )
        caption = f"Contention at {format_bytes(nbytes)}: time and aggregate bandwidth vs pairs"
        save(ax, f"contention_{label}.png", caption)


# every figure the report can draw, in the order the report lists them
_FIGURES = (
    _c_blocking_figures,
    _kernel_figures,
    _transport_figures,
    _variability_figure,
    _contention_figures,
)


def figures(sweeps: dict[str, Sweep], analysis: dict, fig_dir: Path) -> list[tuple[str, str]]:
    """Draw every figure the data allow; [(file name, caption)]."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ...analysis import plots

    fig_dir.mkdir(parents=True, exist_ok=True)
    made = []

    def save(ax, name, caption):
        plots.save(ax, fig_dir / name)
        plt.close(ax.figure)
        made.append((name, caption))

    for draw in _FIGURES:
        draw(sweeps, analysis, save)
    return made
