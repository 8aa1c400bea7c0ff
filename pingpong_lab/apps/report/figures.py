"""The report's figures (matplotlib, headless), drawn from the sweeps and the fits."""

from __future__ import annotations

from pathlib import Path

from ...analysis import stats
from ...analysis.formatting import (
    format_bytes,
)
from ...data.schema import COL
from .sweeps import Sweep


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

    fits = analysis["fits"]
    cb = sweeps.get("c_blocking")
    if cb is not None:
        fit = fits["c_blocking"].get("single")
        tab = cb.table()
        ax = plots.latency_plot(
            tab[COL.nbytes],
            tab[COL.t_median_s],
            tab[COL.ci_lo_s],
            tab[COL.ci_hi_s],
            fit=fit,
            label="C blocking (median, 95 % CI)",
        )
        ax.set_title("Ping-pong latency (one way)")
        save(ax, "latency_c_blocking.png", "C blocking one-way time with the weighted fit")
        ax = plots.bandwidth_plot(tab[COL.nbytes], tab[COL.t_median_s], fit=fit, label="C blocking")
        ax.set_title("Ping-pong bandwidth")
        save(ax, "bandwidth_c_blocking.png", "Bandwidth and the fitted asymptote 1/beta")
        pw = fits["c_blocking"].get("piecewise")
        if pw is not None:
            ax = plots.latency_plot(
                tab[COL.nbytes], tab[COL.t_median_s], fit=pw, label="C blocking (median)"
            )
            ax.set_title("Piecewise fit")
            save(
                ax,
                "piecewise_c_blocking.png",
                f"Two-segment fit, breakpoint {format_bytes(pw.breakpoint_bytes)}",
            )
            ax = plots.residual_plot(fit, tab[COL.nbytes], tab[COL.t_median_s])
            plots.residual_plot(pw, tab[COL.nbytes], tab[COL.t_median_s], ax=ax)
            ax.legend(["single line", "piecewise"])
            ax.set_title("Relative residuals")
            save(ax, "residuals_c_blocking.png", "Residuals of the single-line and piecewise fits")
    series = {
        label: sweeps[role].table()
        for role, label in (
            ("c_blocking", "C blocking"),
            ("c_nonblocking", "C non-blocking"),
            ("python_blocking", "Python blocking"),
            ("python_nonblocking", "Python non-blocking"),
        )
        if role in sweeps
    }
    if len(series) > 1:
        ax = plots.compare_plot(series)
        ax.set_title("C vs Python, blocking vs non-blocking")
        save(ax, "compare_kernels.png", "Kernels compared (median one-way time)")
    if cb is not None and "c_blocking_tcp" in sweeps:
        shm_tcp = {"shared memory": cb.table(), "TCP loopback": sweeps["c_blocking_tcp"].table()}
        ax = plots.compare_plot(shm_tcp)
        ax.set_title("Shared memory vs TCP loopback (C blocking)")
        save(ax, "shm_vs_tcp_latency.png", "Shared memory vs TCP: time")
        ax = plots.compare_plot(shm_tcp, quantity="bandwidth")
        ax.set_title("Shared memory vs TCP loopback (C blocking)")
        save(ax, "shm_vs_tcp_bandwidth.png", "Shared memory vs TCP: bandwidth")
    var = sweeps.get("variability") or cb
    if var is not None and var.samples:
        samples = {n: stats.max_across_ranks(a) for n, a in var.samples.items()}
        ax = plots.variability_plot(samples)
        ax.set_title(f"Per-iteration variability ({var.path.name})")
        save(ax, "variability.png", "Distribution of per-iteration times (box: IQR, x: mean)")
    cont = analysis["numbers"].get("contention")
    if cont:
        for label in ("small", "large"):
            if f"{label}_t_s" not in cont[0]:
                continue
            ax, ax_bw = plots.contention_plot(
                [r["pairs"] for r in cont],
                [r[f"{label}_t_s"] for r in cont],
                cont[0][f"{label}_bytes"],
            )
            name = f"contention_{label}.png"
            plots.save(ax, fig_dir / name)
            plt.close(ax.figure)
            made.append(
                (
                    name,
                    f"Contention at {format_bytes(cont[0][f'{label}_bytes'])}: "
                    "time and aggregate bandwidth vs pairs",
                )
            )
    return made
