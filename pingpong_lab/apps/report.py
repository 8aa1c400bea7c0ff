"""`pingpong-lab report`: measure everything headless and write a report folder.

    pingpong-lab report [--np 2] [--out report] [--quick]
    pingpong-lab report --from DIR [--out DIR2]      # re-analyse CSVs (cluster data)

Measuring runs, each as one `pingpong-lab sweep` (mpiexec, no Jupyter):
blocking and non-blocking sweeps in C and Python, a variability run (many raw samples at a few
sizes), shared memory vs TCP loopback (`--transport tcp`), and a contention run (pairwise at 2,
4, 8 ranks). Then it fits T(b) = alpha + beta b (single line and piecewise), draws the figures
and writes:

    OUT/data/*.csv (+ .csv.json provenance, .samples.npz raw samples)
    OUT/figures/*.png
    OUT/summary.md, OUT/summary.html, OUT/summary.json (the headline numbers)

`--from DIR` reads the CSVs in DIR (or DIR/data): their roles come from the file names this
command writes or, for other files, from the provenance sidecar (kernel, mode, transport, ranks),
so sweeps from a cluster job can be analysed the same way. The full run takes 1-2 minutes on two
cores; `--quick` (tiny sizes, a few seconds per run) is for tests.
"""

from __future__ import annotations

import argparse
import html
import json
import math
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..analysis import model, stats
from ..analysis.formatting import (
    format_bandwidth,
    format_bytes,
    format_number,
    format_ratio,
    format_time,
)
from ..data import results
from ..data.jsonable import jsonable
from ..data.schema import COL
from ..mpi import measure
from ..mpi.settings import SweepSettings

KIB, MIB = 1 << 10, 1 << 20
SMALL_MAX = 64  # sizes up to this count as "small" for latency ratios


@dataclass
class Plan:
    """What to measure: one entry per sweep (role, ranks, settings)."""

    target_s: float
    main_range: tuple[int, int]
    python_range: tuple[int, int]
    tcp_range: tuple[int, int]
    variability_range: tuple[int, int]
    variability_reps: int
    contention_ranks: tuple[int, ...]
    contention_range: tuple[int, int]
    contention_target_s: float

    def runs(self, np_: int) -> list[tuple[str, int, SweepSettings]]:
        def sweep(kind, mode, size_range, target_s=self.target_s, **more):
            sizes = measure.message_sizes(*size_range)
            return SweepSettings(kind=kind, mode=mode, sizes=sizes, target_s=target_s, **more)

        runs = [
            ("c_blocking", np_, sweep("c", "blocking", self.main_range)),
            ("c_nonblocking", np_, sweep("c", "nonblocking", self.main_range)),
            ("python_blocking", np_, sweep("python", "blocking", self.python_range)),
            ("python_nonblocking", np_, sweep("python", "nonblocking", self.python_range)),
            (
                "variability",
                np_,
                sweep(
                    "c",
                    "blocking",
                    self.variability_range,
                    target_s=measure.TARGET_S,
                    reps=self.variability_reps,
                ),
            ),
            ("c_blocking_tcp", np_, sweep("c", "blocking", self.tcp_range, transport="tcp")),
        ]
        for n in self.contention_ranks:
            pairwise = sweep("c", "pairwise", self.contention_range, self.contention_target_s)
            runs.append((f"contention_{n}", n, pairwise))
        return runs


FULL = Plan(
    target_s=0.04,
    main_range=(1, 64 * MIB),
    python_range=(1, 16 * MIB),
    tcp_range=(1, 16 * MIB),
    variability_range=(8, MIB),
    variability_reps=1000,
    contention_ranks=(2, 4, 8),
    contention_range=(8, MIB),
    contention_target_s=0.02,
)
QUICK = Plan(
    target_s=0.002,
    main_range=(1, 4 * KIB),
    python_range=(1, 4 * KIB),
    tcp_range=(1, 4 * KIB),
    variability_range=(8, 1 * KIB),
    variability_reps=100,
    contention_ranks=(2, 4),
    contention_range=(8, 1 * KIB),
    contention_target_s=0.002,
)


def _log(message: str) -> None:
    print(f"[report {time.strftime('%H:%M:%S')}] {message}", flush=True)


# -- measuring --------------------------------------------------------------------------------
def measure_all(data_dir: Path, np_: int, quick: bool) -> dict:
    """Run every sweep of the plan into data_dir; {role: seconds}; a failed run is skipped."""
    from . import cli

    plan = QUICK if quick else FULL
    data_dir.mkdir(parents=True, exist_ok=True)
    runs = plan.runs(np_)
    times = {}
    for k, (role, ranks, settings) in enumerate(runs, start=1):
        out = data_dir / f"{role}.csv"
        _log(f"({k}/{len(runs)}) {role}: {ranks} ranks, {settings.describe()}")
        t0 = time.perf_counter()
        code = cli.launch_sweep(settings, ranks, out)
        times[role] = time.perf_counter() - t0
        if code != 0:
            _log(f"({k}/{len(runs)}) {role} FAILED (exit {code}); the report goes on without it")
        else:
            _log(f"({k}/{len(runs)}) {role} done in {times[role]:.1f} s")
    return times


# -- reading ----------------------------------------------------------------------------------
@dataclass
class Sweep:
    path: Path
    rows: list[dict]
    info: dict
    samples: dict = field(default_factory=dict)

    def col(self, name: str) -> np.ndarray:
        return np.array([float(r[name]) for r in self.rows])

    @property
    def nbytes(self) -> np.ndarray:
        return self.col(COL.nbytes)

    @property
    def t(self) -> np.ndarray:
        return self.col(COL.t_median_s)

    def at(self, nbytes: int, column: str = COL.t_median_s) -> float:
        for r in self.rows:
            if int(r[COL.nbytes]) == int(nbytes):
                return float(r[column])
        return math.nan

    def table(self) -> dict:
        return {k: self.col(k) for k in (COL.nbytes, COL.t_median_s, COL.ci_lo_s, COL.ci_hi_s)}


def load_sweep(path: Path) -> Sweep:
    rows, info = results.read_results(path)
    rows = [r for r in rows if isinstance(r.get(COL.nbytes), int | float)]
    samples = {}
    sp = results.samples_path(path)
    if sp.exists():
        try:
            samples = results.read_samples(sp)
        except Exception:  # a damaged sample file must not stop the report
            samples = {}
    return Sweep(Path(path), rows, info, samples)


ROLES = (
    "c_blocking",
    "c_nonblocking",
    "python_blocking",
    "python_nonblocking",
    "c_blocking_tcp",
    "variability",
)


def discover(folder: Path) -> dict[str, Sweep]:
    """Sweeps in folder (and folder/data) by role: file names first, then provenance."""
    paths = sorted({*folder.glob("*.csv"), *folder.glob("data/*.csv")})
    found: dict[str, Sweep] = {}
    others = []
    for p in paths:
        try:
            sw = load_sweep(p)
        except Exception as exc:
            _log(f"skipping {p}: {exc}")
            continue
        if not sw.rows:
            continue
        stem = p.stem
        if stem in ROLES or re.fullmatch(r"contention_\d+", stem):
            found[stem] = sw
        else:
            others.append(sw)
    for sw in others:  # cluster files with other names: classify by provenance
        info = sw.info
        kind, mode = info.get("kernel"), info.get("mode")
        transport = info.get("transport", "default")
        if mode == "pairwise":
            role = f"contention_{info.get('ranks', len(sw.rows))}"
        elif transport == "tcp" or info.get("transport_env", {}).get("MPIR_CVAR_NOLOCAL") == "1":
            role = "c_blocking_tcp" if kind == "c" else None
        elif kind and mode:
            role = f"{kind}_{mode}"
        else:
            role = None
        if role and role in found and len(found[role].rows) >= len(sw.rows):
            continue
        if role:
            found[role] = sw
    return found


# -- analysis ---------------------------------------------------------------------------------
def _fit(sw: Sweep) -> dict:
    out = {}
    x, t = sw.nbytes, sw.t
    ok = (x > 0) & np.isfinite(t) & (t > 0)
    x, t = x[ok], t[ok]
    if x.size >= 2:
        lin = model.fit_linear(x, t)
        out["single"] = lin
    try:
        out["piecewise"] = model.fit_piecewise(x, t)
    except ValueError:
        pass
    return out


def _ratio_small(a: Sweep, b: Sweep) -> float:
    """Median over common sizes <= SMALL_MAX of b/a (median one-way times)."""
    ratios = [b.at(n) / a.at(n) for n in a.nbytes if n <= SMALL_MAX and a.at(n) > 0]
    ratios = [r for r in ratios if math.isfinite(r)]
    return float(np.median(ratios)) if ratios else math.nan


def _largest_common(a: Sweep, b: Sweep) -> int | None:
    common = set(map(int, a.nbytes)) & set(map(int, b.nbytes))
    return max(common) if common else None


def analyse(sweeps: dict[str, Sweep]) -> dict:
    """The headline numbers (plain floats, JSON-ready) and the fit objects."""
    s: dict = {"fits": {}, "numbers": {}, "notes": []}
    num = s["numbers"]
    for role in ("c_blocking", "python_blocking", "c_nonblocking", "python_nonblocking"):
        if role in sweeps:
            s["fits"][role] = _fit(sweeps[role])
    cb = sweeps.get("c_blocking")
    if cb is not None and "single" in s["fits"]["c_blocking"]:
        f = s["fits"]["c_blocking"]["single"]
        num["alpha_s"] = f.alpha_s
        num["beta_s_per_byte"] = f.beta_s_per_byte
        num["bandwidth_Bps"] = f.bandwidth_Bps
        num["n_half_bytes"] = f.n_half_bytes
        num["r2"] = f.r2
        num["latency_smallest_s"] = float(cb.t[0])
        num["smallest_bytes"] = int(cb.nbytes[0])
        num["peak_bandwidth_Bps"] = float(np.nanmax(cb.nbytes / cb.t))
        pw = s["fits"]["c_blocking"].get("piecewise")
        if pw is not None:
            num["breakpoint_bytes"] = pw.breakpoint_bytes
            num["two_segments_better"] = pw.two_segments_better
            num["lower_alpha_s"] = pw.lower.alpha_s
            num["upper_alpha_s"] = pw.upper.alpha_s
            num["lower_bandwidth_Bps"] = pw.lower.bandwidth_Bps
            num["upper_bandwidth_Bps"] = pw.upper.bandwidth_Bps
    pyb = sweeps.get("python_blocking")
    if cb is not None and pyb is not None:
        num["python_over_c_latency"] = _ratio_small(cb, pyb)
        n = _largest_common(cb, pyb)
        if n:
            num["python_over_c_at_largest"] = pyb.at(n) / cb.at(n)
            num["python_over_c_largest_bytes"] = n
        fp = s["fits"].get("python_blocking", {}).get("single")
        if fp is not None and "alpha_s" in num:
            num["python_alpha_s"] = fp.alpha_s
    cnb = sweeps.get("c_nonblocking")
    if cb is not None and cnb is not None:
        num["nonblocking_over_blocking_c_latency"] = _ratio_small(cb, cnb)
    tcp = sweeps.get("c_blocking_tcp")
    if cb is not None and tcp is not None:
        lat = _ratio_small(cb, tcp)
        num["tcp_over_shm_latency"] = lat
        n = _largest_common(cb, tcp)
        if n:
            num["tcp_over_shm_bandwidth"] = (n / tcp.at(n)) / (n / cb.at(n))
            num["tcp_compared_at_bytes"] = n
        env = tcp.info.get("transport_env", {})
        forced = env.get("MPIR_CVAR_NOLOCAL") == "1"
        num["tcp_env_recorded"] = ", ".join(f"{k}={v}" for k, v in env.items()) or "none"
        num["tcp_verified"] = bool(forced and lat >= 2.0)
        if not num["tcp_verified"]:
            s["notes"].append(
                f"TCP NOT verified: latency only {lat:.2f} x shared memory "
                f"(forced by environment: {forced}); the run may not have used TCP."
            )
    cont = {int(k.split("_")[1]): v for k, v in sweeps.items() if k.startswith("contention_")}
    if cont:
        ranks = sorted(cont)
        base = cont[ranks[0]]
        sizes = sorted(set.intersection(*(set(map(int, c.nbytes)) for c in cont.values())))
        small = min(sizes, key=lambda n: abs(n - 8)) if sizes else None
        large = max(sizes) if sizes else None
        num["contention_ranks"] = ranks
        rows = []
        for r in ranks:
            c = cont[r]
            row = {"ranks": r, "pairs": r // 2}
            for label, n in (("small", small), ("large", large)):
                if n is not None:
                    row[f"{label}_bytes"] = n
                    row[f"{label}_t_s"] = c.at(n)
                    row[f"{label}_slowdown"] = c.at(n) / base.at(n)
                    row[f"{label}_aggregate_Bps"] = (r // 2) * n / c.at(n)
            rows.append(row)
        num["contention"] = rows
        num["contention_slowdown_small"] = rows[-1].get("small_slowdown", math.nan)
        num["contention_slowdown_large"] = rows[-1].get("large_slowdown", math.nan)
        num["contention_max_ranks"] = ranks[-1]
    var = sweeps.get("variability") or cb
    if var is not None and var.samples:
        vrows = []
        for n in sorted(var.samples):
            t = stats.max_across_ranks(var.samples[n])
            sm = stats.summarize(t, n_boot=0)
            vrows.append(
                {
                    "nbytes": n,
                    "n": sm.n,
                    "median_s": sm.median,
                    "mean_s": sm.mean,
                    "p99_s": sm.p99,
                    "max_s": sm.max,
                    "std_s": sm.std,
                    "mean_over_median": sm.mean / sm.median if sm.median > 0 else math.nan,
                    "outliers_iqr": sm.n_high_iqr,
                }
            )
        num["variability"] = vrows
        num["variability_source"] = var.path.name
    return s


# -- figures ----------------------------------------------------------------------------------
def figures(sweeps: dict[str, Sweep], analysis: dict, fig_dir: Path) -> list[tuple[str, str]]:
    """Draw every figure the data allow; [(file name, caption)]."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..analysis import plots

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
            tab["nbytes"],
            tab["t_median_s"],
            tab["ci_lo_s"],
            tab["ci_hi_s"],
            fit=fit,
            label="C blocking (median, 95 % CI)",
        )
        ax.set_title("Ping-pong latency (one way)")
        save(ax, "latency_c_blocking.png", "C blocking one-way time with the weighted fit")
        ax = plots.bandwidth_plot(tab["nbytes"], tab["t_median_s"], fit=fit, label="C blocking")
        ax.set_title("Ping-pong bandwidth")
        save(ax, "bandwidth_c_blocking.png", "Bandwidth and the fitted asymptote 1/beta")
        pw = fits["c_blocking"].get("piecewise")
        if pw is not None:
            ax = plots.latency_plot(
                tab["nbytes"], tab["t_median_s"], fit=pw, label="C blocking (median)"
            )
            ax.set_title("Piecewise fit")
            save(
                ax,
                "piecewise_c_blocking.png",
                f"Two-segment fit, breakpoint {format_bytes(pw.breakpoint_bytes)}",
            )
            ax = plots.residual_plot(fit, tab["nbytes"], tab["t_median_s"])
            plots.residual_plot(pw, tab["nbytes"], tab["t_median_s"], ax=ax)
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


# -- summary ----------------------------------------------------------------------------------
def sections(sweeps, analysis, figs, meta) -> list[dict]:
    """The report as data: [{"title", "text": [..], "table": [[header], rows..], "images"}]."""
    n = analysis["numbers"]
    out = []
    prov = next(iter(sweeps.values())).info if sweeps else {}
    out.append(
        {
            "title": "Where and how",
            "text": [
                f"Date: {prov.get('date', '?')}; MPI: {prov.get('mpi_vendor', '?')}; mpi4py "
                f"{prov.get('mpi4py_version', '?')}; Python {prov.get('python', '?')}; hosts: "
                f"{', '.join(prov.get('hosts', [])) or '?'}; platform {prov.get('platform', '?')}.",
                f"Mode: {meta['mode']}. {meta.get('timing', '')}",
                "Times are one-way (half a round trip), the per-iteration maximum over ranks, "
                "summarised by the median; every CSV has a .csv.json provenance sidecar and a "
                ".samples.npz file with every sample.",
            ],
            "table": [["data file", "kernel", "mode", "transport", "ranks", "sizes"]]
            + [
                [
                    sw.path.name,
                    str(sw.info.get("kernel", "?")),
                    str(sw.info.get("mode", "?")),
                    str(sw.info.get("transport", "?")),
                    str(sw.info.get("ranks", "?")),
                    f"{format_bytes(sw.nbytes.min())} .. {format_bytes(sw.nbytes.max())} "
                    f"({len(sw.rows)})",
                ]
                for _, sw in sorted(sweeps.items())
            ],
        }
    )
    head = [["quantity", "value"]]
    rows = [
        ["alpha (latency, weighted fit, C blocking)", format_time(n.get("alpha_s"))],
        [
            "beta (inverse bandwidth)",
            f"{n['beta_s_per_byte']:.4g} s/B"
            if isinstance(n.get("beta_s_per_byte"), float)
            else "n/a",
        ],
        ["bandwidth 1/beta", format_bandwidth(n.get("bandwidth_Bps"), bits=True)],
        ["peak measured bandwidth", format_bandwidth(n.get("peak_bandwidth_Bps"), bits=True)],
        ["n_1/2 = alpha/beta", format_bytes(n.get("n_half_bytes"))],
        ["R^2 (weighted)", format_number(n.get("r2"), ".4f")],
        [
            f"measured latency at {format_bytes(n.get('smallest_bytes'))}",
            format_time(n.get("latency_smallest_s")),
        ],
        [
            "piecewise breakpoint",
            format_bytes(n.get("breakpoint_bytes"))
            + (
                ""
                if "two_segments_better" not in n
                else (
                    " (two segments better by BIC)"
                    if n["two_segments_better"]
                    else " (not better than one line by BIC)"
                )
            ),
        ],
        [
            "  lower segment alpha, bandwidth",
            f"{format_time(n.get('lower_alpha_s'))}, "
            f"{format_bandwidth(n.get('lower_bandwidth_Bps'), bits=True)}",
        ],
        [
            "  upper segment alpha, bandwidth",
            f"{format_time(n.get('upper_alpha_s'))}, "
            f"{format_bandwidth(n.get('upper_bandwidth_Bps'), bits=True)}",
        ],
        [
            f"Python overhead: Python/C latency (sizes <= {SMALL_MAX} B)",
            format_ratio(n.get("python_over_c_latency")),
        ],
        [
            f"Python/C at {format_bytes(n.get('python_over_c_largest_bytes'))}",
            format_ratio(n.get("python_over_c_at_largest")),
        ],
        [
            "non-blocking/blocking latency (C)",
            format_ratio(n.get("nonblocking_over_blocking_c_latency")),
        ],
        ["TCP/shared-memory latency", format_ratio(n.get("tcp_over_shm_latency"))],
        [
            f"TCP/shared-memory bandwidth at {format_bytes(n.get('tcp_compared_at_bytes'))}",
            format_ratio(n.get("tcp_over_shm_bandwidth")),
        ],
        [
            "TCP really used (latency >= 2x and MPIR_CVAR_NOLOCAL=1)",
            {True: "yes", False: "NO"}.get(n.get("tcp_verified"), "n/a"),
        ],
        [
            f"contention slowdown at {n.get('contention_max_ranks', '?')} ranks, small messages",
            format_ratio(n.get("contention_slowdown_small")),
        ],
        [
            f"contention slowdown at {n.get('contention_max_ranks', '?')} ranks, large messages",
            format_ratio(n.get("contention_slowdown_large")),
        ],
    ]
    out.append(
        {
            "title": "Headline numbers",
            "text": analysis["notes"],
            "table": head + rows,
            "images": [f for f in figs if f[0].startswith(("latency", "bandwidth"))],
        }
    )
    out.append(
        {
            "title": "Model fit",
            "text": [
                "T(b) = alpha + beta b fitted with weights 1/t (relative residuals), so that "
                "every size counts; the piecewise fit searches the breakpoint (eager/rendezvous "
                "switch) and keeps two segments only when the BIC improves by more than 10."
            ],
            "images": [f for f in figs if f[0].startswith(("piecewise", "residuals"))],
        }
    )
    out.append(
        {
            "title": "Kernels compared",
            "text": [
                "Python pays the interpreter on every call: compare small-message latencies; "
                "large messages are dominated by the copy and converge."
            ],
            "images": [f for f in figs if f[0].startswith("compare")],
        }
    )
    out.append(
        {
            "title": "Shared memory vs TCP loopback",
            "text": [f"TCP forced with: {n.get('tcp_env_recorded', 'n/a')}."],
            "images": [f for f in figs if f[0].startswith("shm_vs_tcp")],
        }
    )
    if n.get("variability"):
        vt = [["size", "samples", "median", "mean", "p99", "max", "mean/median", "outliers"]]
        for r in n["variability"]:
            vt.append(
                [
                    format_bytes(r["nbytes"]),
                    str(r["n"]),
                    format_time(r["median_s"]),
                    format_time(r["mean_s"]),
                    format_time(r["p99_s"]),
                    format_time(r["max_s"]),
                    f"{r['mean_over_median']:.3f}",
                    str(r["outliers_iqr"]),
                ]
            )
        out.append(
            {
                "title": "Variability",
                "text": [
                    f"From {n.get('variability_source')}: heavy right tails pull the mean "
                    "above the median."
                ],
                "table": vt,
                "images": [f for f in figs if f[0].startswith("variability")],
            }
        )
    if n.get("contention"):
        ct = [
            [
                "ranks",
                "pairs",
                "small size",
                "time",
                "slowdown",
                "large size",
                "time",
                "slowdown",
                "aggregate bandwidth",
            ]
        ]
        for r in n["contention"]:
            ct.append(
                [
                    str(r["ranks"]),
                    str(r["pairs"]),
                    format_bytes(r.get("small_bytes")),
                    format_time(r.get("small_t_s")),
                    format_ratio(r.get("small_slowdown")),
                    format_bytes(r.get("large_bytes")),
                    format_time(r.get("large_t_s")),
                    format_ratio(r.get("large_slowdown")),
                    format_bandwidth(r.get("large_aggregate_Bps"), bits=True),
                ]
            )
        out.append(
            {
                "title": "Contention (pairwise exchange)",
                "text": [
                    "All ranks exchange in pairs (r <-> r + size/2) at once; slowdown is "
                    "relative to one pair. More ranks than cores are oversubscribed (ranks take "
                    "turns)."
                ],
                "table": ct,
                "images": [f for f in figs if f[0].startswith("contention")],
            }
        )
    return out


def to_markdown(secs, title) -> str:
    lines = [f"# {title}", ""]
    for s in secs:
        lines += [f"## {s['title']}", ""]
        for t in s.get("text", []):
            lines += [t, ""]
        table = s.get("table")
        if table:
            lines.append("| " + " | ".join(table[0]) + " |")
            lines.append("| " + " | ".join("---" for _ in table[0]) + " |")
            lines += [
                "| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in table[1:]
            ]
            lines.append("")
        for name, caption in s.get("images", []):
            lines += [f"![{caption}](figures/{name})", ""]
    return "\n".join(lines)


def to_html(secs, title) -> str:
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        "<html lang='en'><head><meta charset='utf-8'>",
        f"<title>{e(title)}</title>",
        "<style>body{font-family:sans-serif;max-width:60em;margin:auto;padding:1em}"
        "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:.2em .5em;"
        "text-align:left}img{max-width:100%}figure{margin:1em 0}</style></head><body>",
        f"<h1>{e(title)}</h1>",
    ]
    for s in secs:
        parts.append(f"<h2>{e(s['title'])}</h2>")
        parts += [f"<p>{e(t)}</p>" for t in s.get("text", [])]
        table = s.get("table")
        if table:
            parts.append("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in table[0]) + "</tr>")
            parts += [
                "<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in table[1:]
            ]
            parts.append("</table>")
        for name, caption in s.get("images", []):
            parts.append(
                f"<figure><img src='figures/{e(name)}' alt='{e(caption)}'>"
                f"<figcaption>{e(caption)}</figcaption></figure>"
            )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_report(sweeps, out: Path, meta: dict) -> dict:
    if not sweeps:
        raise ValueError("no sweep CSVs to analyse")
    _log("fitting and summarising")
    analysis = analyse(sweeps)
    _log("drawing figures")
    figs = figures(sweeps, analysis, out / "figures")
    title = "MPI ping-pong report"
    secs = sections(sweeps, analysis, figs, meta)
    (out / "summary.md").write_text(to_markdown(secs, title), encoding="utf-8")
    (out / "summary.html").write_text(to_html(secs, title), encoding="utf-8")
    summary = {
        "meta": meta,
        "numbers": jsonable(analysis["numbers"]),
        "notes": analysis["notes"],
        "figures": [f for f, _ in figs],
        "data": {role: sw.path.name for role, sw in sorted(sweeps.items())},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pingpong-lab report",
        description="Measure (or re-analyse) and write a report folder.",
    )
    p.add_argument("--np", type=int, default=2, help="ranks for the main sweeps (default 2)")
    p.add_argument("--out", help="output folder (default: report, or the --from folder)")
    p.add_argument("--quick", action="store_true", help="tiny sizes (seconds), for tests")
    p.add_argument("--from", dest="source", help="re-analyse the CSVs in this folder")
    return p


def main(argv=None) -> int:
    a = parser().parse_args(argv)
    t0 = time.perf_counter()
    if a.source:
        src = Path(a.source)
        if not src.is_dir():
            print(f"report: error: --from {src}: no such folder", file=sys.stderr)
            return 2
        out = Path(a.out) if a.out else src
        out.mkdir(parents=True, exist_ok=True)
        sweeps = discover(src)
        if not sweeps:
            print(f"report: error: no sweep CSVs in {src} or {src}/data", file=sys.stderr)
            return 1
        _log(f"re-analysing {len(sweeps)} sweeps from {src}: {', '.join(sorted(sweeps))}")
        meta = {"mode": f"re-analysis of {src} (nothing measured)"}
    else:
        if a.np < 2:
            print("report: error: --np must be at least 2", file=sys.stderr)
            return 2
        out = Path(a.out or "report")
        data = out / "data"
        if data.exists():
            shutil.rmtree(data)  # a report describes one run
        out.mkdir(parents=True, exist_ok=True)
        try:
            times = measure_all(data, a.np, a.quick)
        except KeyboardInterrupt:
            print("report: interrupted; the MPI job was stopped", file=sys.stderr)
            return 130
        sweeps = discover(data)
        if not sweeps:
            print("report: error: every sweep failed; nothing to report", file=sys.stderr)
            return 1
        meta = {
            "mode": "quick (tiny sizes, for tests)" if a.quick else "full",
            "ranks": a.np,
            "sweep_seconds": times,
            "timing": f"Measuring took {sum(times.values()):.0f} s.",
        }
    try:
        summary = write_report(sweeps, out, meta)
    except ValueError as exc:
        print(f"report: error: {exc}", file=sys.stderr)
        return 1
    n = summary["numbers"]
    total = time.perf_counter() - t0
    summary["meta"]["total_seconds"] = total
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    _log(
        f"alpha {format_time(n.get('alpha_s'))}, "
        f"bandwidth {format_bandwidth(n.get('bandwidth_Bps'), bits=True)}, "
        f"n_1/2 {format_bytes(n.get('n_half_bytes'))}, "
        f"breakpoint {format_bytes(n.get('breakpoint_bytes'))}, "
        f"Python/C {format_ratio(n.get('python_over_c_latency'))}, TCP/shm "
        f"{format_ratio(n.get('tcp_over_shm_latency'))}, contention "
        f"{format_ratio(n.get('contention_slowdown_small'))}"
    )
    _log(f"wrote {out}/summary.md, summary.html, summary.json, figures/, data/ in {total:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
