"""The report's headline numbers: fits, ratios and notes, from the sweeps by role."""

from __future__ import annotations

import math

import numpy as np

from ...analysis import model, stats
from .sweeps import Sweep

SMALL_MAX = 64  # sizes up to this count as "small" for latency ratios


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


def _warning(what: str, problems: list[str]) -> str:
    """A report note: `what` is implausible, why, and that its numbers are left out."""
    return f"WARNING: implausible {what}, left out of the headline: " + "; ".join(problems) + "."


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
        problems = model.fit_problems(f)
        if problems:
            num["fit_problems"] = problems
            s["notes"].append(_warning("single-line fit of the C blocking sweep", problems))
        else:
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
            problems = model.fit_problems(pw)
            if problems:
                num["segment_problems"] = problems
                s["notes"].append(_warning("piecewise segments of the C blocking sweep", problems))
            else:
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
        if fp is not None and "alpha_s" in num and not model.fit_problems(fp):
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
