"""The report's headline numbers: latency and bandwidth (analysis.headline), ratios and notes,
from the sweeps by role."""

from __future__ import annotations

import math

import numpy as np

from ...analysis import headline, model, stats
from .sweeps import Sweep

SMALL_MAX = 64  # sizes up to this count as "small" for latency ratios


def _headline(sw: Sweep) -> dict:
    """{"headline", "x", "t", "per_round", "times"} of a sweep; {"error"} when none can be read."""
    x, t, per_round, what = sw.headline_times()
    floor = headline.floor_times(x, sw.samples) if sw.samples else None
    try:
        h = headline.choose(x, t, floor=floor)
    except ValueError as exc:
        return {"error": str(exc)}
    return {"headline": h, "x": x, "t": t, "per_round": per_round, "times": what, "floor": floor}


def _segments(x: np.ndarray, pw: model.PiecewiseFit) -> list[dict]:
    idx = pw.segment_index(x)
    return [
        {
            "from_bytes": int(x[idx == k].min()),
            "to_bytes": int(x[idx == k].max()),
            "alpha_s": seg.alpha_s,
            "beta_s_per_byte": seg.beta_s_per_byte,
            "bandwidth_Bps": seg.bandwidth_Bps,
        }
        for k, seg in enumerate(pw.segments)
    ]


def headline_numbers(read: dict) -> dict:
    """The headline keys of summary.json from one sweep's `_headline` result."""
    h: headline.Headline = read["headline"]
    x = np.asarray(read["x"], dtype=float)
    num = {
        "headline_method": h.method,
        "headline_label": h.label(),
        "headline_why": h.why,
        "headline_times": read["times"],
        "alpha_s": h.alpha_s,
        "alpha_floor_s": h.alpha_floor_s,
        "floor_bytes": list(h.floor_bytes) if h.floor_bytes else None,
        "beta_s_per_byte": h.beta_s_per_byte,
        "bandwidth_Bps": h.bandwidth_Bps,
        "n_half_bytes": h.n_half_bytes,
        "r2": h.r2,
        "latency_bytes": list(h.latency_bytes),
        "bandwidth_bytes": list(h.bandwidth_bytes) if h.bandwidth_bytes else None,
        "single_r2": h.single.r2,
    }
    if h.single_problems:
        num["single_line_problems"] = list(h.single_problems)
    if read["per_round"] is not None:
        num["rounds"] = headline.round_spread(h, x, read["per_round"]).as_dict()
    pw = h.piecewise
    if pw is not None:
        num["breakpoint_bytes"] = pw.breakpoint_bytes
        num["piecewise_better"] = pw.two_segments_better
        num["piecewise_lines"] = pw.n_segments
        num["piecewise_bic"] = list(pw.bic)
        ok = (x > 0) & np.isfinite(read["t"]) & (np.asarray(read["t"]) > 0)
        num["segments"] = _segments(np.sort(x[ok]), pw)
    return num


def _ratio_small(a: Sweep, b: Sweep) -> float:
    """Median over common sizes <= SMALL_MAX of b/a (median one-way times)."""
    ratios = [b.at(n) / a.at(n) for n in a.nbytes if n <= SMALL_MAX and a.at(n) > 0]
    ratios = [r for r in ratios if math.isfinite(r)]
    return float(np.median(ratios)) if ratios else math.nan


def _largest_common(a: Sweep, b: Sweep) -> int | None:
    common = set(map(int, a.nbytes)) & set(map(int, b.nbytes))
    return max(common) if common else None


def _c_blocking_numbers(s: dict, sweeps: dict[str, Sweep]) -> None:
    """The headline of the C blocking sweep (or why there is none), its smallest and peak."""
    cb = sweeps["c_blocking"]
    num = s["numbers"]
    read = s["headlines"]["c_blocking"]
    if "error" in read:
        s["notes"].append(f"No latency or bandwidth from the C blocking sweep: {read['error']}.")
    else:
        num.update(headline_numbers(read))
        s["notes"].extend(read["headline"].notes)
    num["latency_smallest_s"] = float(cb.t[0])
    num["smallest_bytes"] = int(cb.nbytes[0])
    num["peak_bandwidth_Bps"] = float(np.nanmax(cb.nbytes / cb.t))


def _python_numbers(s: dict, sweeps: dict[str, Sweep]) -> None:
    """Python/C: small-message latency, at the largest common size, Python's own alpha."""
    cb, pyb = sweeps["c_blocking"], sweeps.get("python_blocking")
    if pyb is None:
        return
    num = s["numbers"]
    num["python_over_c_latency"] = _ratio_small(cb, pyb)
    n = _largest_common(cb, pyb)
    if n:
        num["python_over_c_at_largest"] = pyb.at(n) / cb.at(n)
        num["python_over_c_largest_bytes"] = n
    hp = s["headlines"].get("python_blocking", {}).get("headline")
    if hp is not None:
        num["python_alpha_s"] = hp.alpha_s


def _nonblocking_numbers(s: dict, sweeps: dict[str, Sweep]) -> None:
    """Non-blocking / blocking small-message latency of the C kernel."""
    cnb = sweeps.get("c_nonblocking")
    if cnb is not None:
        s["numbers"]["nonblocking_over_blocking_c_latency"] = _ratio_small(
            sweeps["c_blocking"], cnb
        )


def _tcp_numbers(s: dict, sweeps: dict[str, Sweep]) -> None:
    """TCP / shared memory latency and bandwidth, and whether TCP was really used."""
    cb, tcp = sweeps["c_blocking"], sweeps.get("c_blocking_tcp")
    if tcp is None:
        return
    num = s["numbers"]
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


def _contention_row(c: Sweep, base: Sweep, ranks: int, sizes: dict) -> dict:
    """One rank count: time, slowdown vs one pair and aggregate bandwidth at each size."""
    row = {"ranks": ranks, "pairs": ranks // 2}
    for label, n in sizes.items():
        if n is not None:
            row[f"{label}_bytes"] = n
            row[f"{label}_t_s"] = c.at(n)
            row[f"{label}_slowdown"] = c.at(n) / base.at(n)
            row[f"{label}_aggregate_Bps"] = (ranks // 2) * n / c.at(n)
    return row


def _contention_numbers(s: dict, sweeps: dict[str, Sweep]) -> None:
    """Pairwise exchange at several rank counts: the smallest and the largest common size."""
    cont = {int(k.split("_")[1]): v for k, v in sweeps.items() if k.startswith("contention_")}
    if not cont:
        return
    num = s["numbers"]
    ranks = sorted(cont)
    common = sorted(set.intersection(*(set(map(int, c.nbytes)) for c in cont.values())))
    sizes = {
        "small": min(common, key=lambda n: abs(n - 8)) if common else None,
        "large": max(common) if common else None,
    }
    num["contention_ranks"] = ranks
    rows = [_contention_row(cont[r], cont[ranks[0]], r, sizes) for r in ranks]
    num["contention"] = rows
    num["contention_slowdown_small"] = rows[-1].get("small_slowdown", math.nan)
    num["contention_slowdown_large"] = rows[-1].get("large_slowdown", math.nan)
    num["contention_max_ranks"] = ranks[-1]


def _variability_row(nbytes: int, samples) -> dict:
    """The distribution of one size's per-iteration times (maximum over ranks)."""
    sm = stats.summarize(stats.max_across_ranks(samples), n_boot=0)
    return {
        "nbytes": nbytes,
        "n": sm.n,
        "median_s": sm.median,
        "mean_s": sm.mean,
        "p99_s": sm.p99,
        "max_s": sm.max,
        "std_s": sm.std,
        "mean_over_median": sm.mean / sm.median if sm.median > 0 else math.nan,
        "outliers_iqr": sm.n_high_iqr,
    }


def _variability_numbers(s: dict, sweeps: dict[str, Sweep]) -> None:
    """Tails of the raw samples: the variability run's, else the C blocking sweep's."""
    var = sweeps.get("variability") or sweeps.get("c_blocking")
    if var is None or not var.samples:
        return
    num = s["numbers"]
    num["variability"] = [_variability_row(n, var.samples[n]) for n in sorted(var.samples)]
    num["variability_source"] = var.path.name


# (what it reads, whether it needs the C blocking sweep), in the order summary.json lists them
_NUMBERS = (
    (_c_blocking_numbers, True),
    (_python_numbers, True),
    (_nonblocking_numbers, True),
    (_tcp_numbers, True),
    (_contention_numbers, False),
    (_variability_numbers, False),
)


def analyse(sweeps: dict[str, Sweep]) -> dict:
    """The headline numbers (plain floats, JSON-ready) and the fit objects."""
    s: dict = {"headlines": {}, "numbers": {}, "notes": []}
    for role in ("c_blocking", "python_blocking"):
        if role in sweeps:
            s["headlines"][role] = _headline(sweeps[role])
    for numbers, needs_c_blocking in _NUMBERS:
        if "c_blocking" in sweeps or not needs_c_blocking:
            numbers(s, sweeps)
    return s
