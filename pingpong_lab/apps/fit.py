"""``pingpong-lab fit``: fit T(b) = alpha + beta*b to a sweep CSV from the command line.

Usage::

    pingpong-lab fit results.csv [--piecewise] [--json] [--ols] [--column t_median_s]
    python -m pingpong_lab fit results.csv ...

The fit is weighted by relative error unless ``--ols`` is given. The headline (alpha, beta,
bandwidth, R^2, n_1/2) is always printed with the line that says how it was read
(``analysis.headline``: the piecewise segments when two or three lines are better than one by
BIC, one line when it fits, otherwise latency from the smallest sizes and bandwidth from the
largest, Hockney's reading); for a sweep measured in interleaved rounds (``sweep --rounds``,
with its sidecar and samples file) it is read from each size's median round, followed by the
95 % interval of the median over the rounds and their spread. With the samples file and 5,000
or more round trips per small size, the latency floor (``headline.with_floor``) is printed
beside alpha as a best-case bound.
An implausible single-line fit (``analysis.model.fit_problems``: alpha
or beta not positive, R^2 below ``model.MIN_R2``) is printed under a warning that says why, for
diagnosis only; ``--json`` carries it at the top level with ``plausible`` and ``problems``, the
headline under ``headline`` (and ``rounds``) and, with ``--piecewise``, the segments and
``segment_problems``. Errors are reported as one line on stderr
(``pingpong-lab fit: error: ...``) with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings

import numpy as np

from ..analysis import headline, model
from ..analysis.formatting import format_number
from ..data import results
from ..data.jsonable import jsonable
from ..data.schema import COL
from .usage import OneLineParser, UsageError

PROG = "pingpong-lab fit"


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog=PROG,
        description="Fit the latency-bandwidth model T(b) = alpha + beta*b to a sweep CSV.",
    )
    p.add_argument("csv", help="sweep CSV (one row per message size, one-way seconds)")
    p.add_argument(
        "--column",
        help=f"time column to fit (default: {COL.t_median_s}, or for a sweep measured in "
        "interleaved rounds with its samples file, each size's median round)",
    )
    p.add_argument(
        "--ols", action="store_true", help="plain least squares instead of relative-error weights"
    )
    p.add_argument(
        "--piecewise", action="store_true", help="also fit two segments with a breakpoint"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def _segment(fit: model.LinearFit, lo: int, hi: int) -> dict:
    d = fit.as_dict()
    d.update(from_bytes=int(lo), to_bytes=int(hi))
    return d


def _warning(title: str, problems: list[str]) -> list[str]:
    return [f"WARNING: {title} (not quoted as results), because:"] + [f"  - {p}" for p in problems]


def _range(pair) -> str:
    return f"{pair[0]} .. {pair[1]} bytes" if pair else "n/a"


def _headline_lines(result: dict) -> list[str]:
    """The headline: how it was read, then alpha, beta, bandwidth, R^2, n_1/2 and the rounds."""
    h = result["headline"]
    lines = [
        f"headline:   {h['label']}: {h['why']}",
        f"alpha:      {format_number(h['alpha_s'])} s ({format_number(h['alpha_s'] * 1e6)} us)"
        f", latency from {_range(h['latency_bytes'])}",
        f"beta:       {format_number(h['beta_s_per_byte'])} s/byte"
        + (f", from {_range(h['bandwidth_bytes'])}" if h["bandwidth_bytes"] else ""),
        f"bandwidth:  {format_number(h['bandwidth_Bps'])} B/s"
        f" = {format_number(h['bandwidth_GiBps'])} GiB/s"
        f" = {format_number(h['bandwidth_Mbitps'])} Mbit/s",
        f"R^2:        {format_number(h['r2'], '.6f')} ({h['label'].split(' (')[0]}, "
        f"{'weighted' if result['method'] == 'weighted' else 'OLS'})",
        f"n_1/2:      {format_number(h['n_half_bytes'], '.4g')} bytes",
    ]
    spread = result.get("rounds")
    if spread:
        rs = headline.RoundSpread(tuple(spread["latency_s"]), tuple(spread["bandwidth_Bps"]))
        lines += [
            f"interval:   latency {headline.interval_text(rs, 'latency')}",
            f"            bandwidth {headline.interval_text(rs, 'bandwidth')}",
            f"rounds:     latency {headline.spread_text(rs, 'latency')}",
            f"            bandwidth {headline.spread_text(rs, 'bandwidth')}",
        ]
    floor = h.get("alpha_floor_s")
    if isinstance(floor, float) and math.isfinite(floor):
        lines.append(f"floor:      {format_number(floor * 1e6)} us (best case, a bound: the note)")
    lines += [f"note:       {n}" for n in h["notes"] if not n.startswith("One line over all")]
    return lines


def _text(result: dict, fit: model.LinearFit) -> str:
    lines = [
        f"file:       {result['file']} (column {result['column']}, {result['n_points']} rows)",
    ]
    if result["times"] != "column":
        lines.append(f"times:      {result['times']}")
    lines.append(
        f"method:     {'weighted (relative error)' if fit.method == 'weighted' else 'OLS'}"
    )
    numbers = [
        f"alpha:      {format_number(fit.alpha_s)} s ({format_number(fit.alpha_s * 1e6)} us)",
        f"beta:       {format_number(fit.beta_s_per_byte)} s/byte",
        f"bandwidth:  {format_number(fit.bandwidth_Bps)} B/s"
        f" = {format_number(fit.bandwidth_GiBps)} GiB/s"
        f" = {format_number(fit.bandwidth_Mbitps)} Mbit/s",
        f"R^2:        {format_number(fit.r2, '.6f')}",
        f"n_1/2:      {format_number(fit.n_half_bytes, '.4g')} bytes",
    ]
    if result["problems"]:
        lines += _warning("implausible single-line fit", result["problems"])
        lines += ["implausible single-line fit, for diagnosis only:"]
        lines += [f"  {n}" for n in numbers]
    if "headline" in result:
        lines += _headline_lines(result)
    elif not result["problems"]:
        lines += numbers
    if "breakpoint_bytes" in result:
        bps = result["breakpoints_bytes"]
        lines_n = result["piecewise_lines"]
        better = "yes" if result["two_segments_better"] else "no"
        bic = " -> ".join(f"{b:.1f}" for b in result["bic"] if math.isfinite(b))
        if len(bps) == 1:
            lines.append(f"breakpoint: {bps[0]} bytes (two segments better: {better}; BIC {bic})")
        else:
            where = ", ".join(str(b) for b in bps)
            lines.append(f"breakpoints: {where} bytes ({lines_n} lines better than one; BIC {bic})")
        if result["segment_problems"]:
            lines.append(
                "WARNING: implausible segments (the headline takes only the lowest segment's "
                "alpha and the highest segment's beta), because:"
            )
            lines += [f"  - {p}" for p in result["segment_problems"]]
        flagged = {p.split(" segment:")[0] for p in result["segment_problems"]}
        names = ["lower", *["middle"] * (len(bps) - 1), "upper"]
        starts = [f"below {bps[0]}"] + [f"from {b}" for b in bps]
        for start, name, seg in zip(starts, names, result["segments"], strict=True):
            lines.append(
                f"  {start}: "
                f"alpha {format_number(seg['alpha_s'])} s, "
                f"beta {format_number(seg['beta_s_per_byte'])} s/byte, "
                f"bandwidth {format_number(seg['bandwidth_GiBps'])} GiB/s"
                + (" (implausible)" if name in flagged else "")
            )
    return "\n".join(lines)


def _times(args) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, str, dict | None]:
    """(sizes, times, per-round medians or None, what the times are, floors or None) of the CSV.

    With no --column and the raw samples next to the CSV, the latency sizes' floors
    (:func:`headline.floor_times`); for a sweep measured in interleaved rounds (its sidecar
    says so), each size's median of its rounds, as `pingpong-lab report` reads them.
    """
    column = args.column or COL.t_median_s
    nbytes, t = model.load_sweep_csv(args.csv, column=column)
    samples_file = results.samples_path(args.csv)
    if args.column is None and samples_file.exists():
        samples = results.read_samples(samples_file)
        floor = headline.floor_times(nbytes, samples)
        rounds = headline.interleaved_rounds(results.read_sidecar(args.csv))
        if rounds:
            t2, per_round, what = headline.headline_times(nbytes, t, samples, rounds)
            return nbytes, t2, per_round, what, floor
        return nbytes, t, None, "column", floor
    return nbytes, t, None, "column", None


def run(args: argparse.Namespace) -> tuple[dict, model.LinearFit]:
    """Load and fit; return the result dict (as printed by --json) and the linear fit."""
    nbytes, t, per_round, times, floor = _times(args)
    weighted = not args.ols
    fit = model.fit_linear(nbytes, t, weighted=weighted)
    result = {"file": str(args.csv), "column": args.column or COL.t_median_s, "times": times}
    result.update(fit.as_dict())
    result["problems"] = model.fit_problems(fit)
    result["plausible"] = not result["problems"]
    h = headline.choose(nbytes, t, weighted=weighted, floor=floor)
    result["headline"] = h.as_dict()
    if per_round is not None:
        result["rounds"] = headline.round_spread(h, nbytes, per_round).as_dict()
    if args.piecewise:
        pw = h.piecewise or model.fit_piecewise(nbytes, t, weighted=weighted)  # raises: too few
        sizes = np.unique(np.asarray(nbytes, dtype=float))
        idx = pw.segment_index(sizes)
        result.update(
            breakpoint_bytes=pw.breakpoint_bytes,
            breakpoints_bytes=list(pw.breakpoints),
            piecewise_lines=pw.n_segments,
            two_segments_better=pw.two_segments_better,
            criterion=pw.criterion,
            bic_one=pw.bic_one,
            bic_two=pw.bic_two,
            bic=list(pw.bic),
            segment_problems=model.fit_problems(pw),
            segments=[
                _segment(seg, sizes[idx == k].min(), sizes[idx == k].max())
                for k, seg in enumerate(pw.segments)
            ],
        )
    return result, fit


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 2 usage or input error)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parser().parse_args(argv)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. polyfit conditioning; the fit still stands
            result, fit = run(args)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except (UsageError, ValueError, OSError) as exc:
        msg = " ".join(str(exc).split()) or type(exc).__name__
        print(f"{PROG}: error: {msg}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(jsonable(result), allow_nan=False))
    else:
        print(_text(result, fit))
    return 0


if __name__ == "__main__":
    sys.exit(main())
