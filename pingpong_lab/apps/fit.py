"""``pingpong-lab fit``: fit T(b) = alpha + beta*b to a sweep CSV from the command line.

Usage::

    pingpong-lab fit results.csv [--piecewise] [--json] [--ols] [--column t_median_s]
    python -m pingpong_lab fit results.csv ...

The fit is weighted by relative error unless ``--ols`` is given. An implausible fit
(``analysis.model.fit_problems``: alpha or beta not positive, R^2 below ``model.MIN_R2``, a
piecewise segment with alpha or beta not positive) is printed under a warning that says why,
apart from the headline lines; ``--json`` carries ``plausible``, ``problems`` and, with
``--piecewise``, ``segment_problems``. Errors are reported as one line
on stderr (``pingpong-lab fit: error: ...``) with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings

from ..analysis import model
from ..analysis.formatting import format_number
from ..data.jsonable import jsonable
from ..data.schema import COL

PROG = "pingpong-lab fit"


class _UsageError(Exception):
    """A command-line or input error, reported as one line with exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line instead of usage + message, no SystemExit
        raise _UsageError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=PROG,
        description="Fit the latency-bandwidth model T(b) = alpha + beta*b to a sweep CSV.",
    )
    p.add_argument("csv", help="sweep CSV (one row per message size, one-way seconds)")
    p.add_argument(
        "--column", default=COL.t_median_s, help=f"time column to fit (default: {COL.t_median_s})"
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


def _text(result: dict, fit: model.LinearFit) -> str:
    lines = [
        f"file:       {result['file']} (column {result['column']}, {result['n_points']} rows)",
        f"method:     {'weighted (relative error)' if fit.method == 'weighted' else 'OLS'}",
    ]
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
        lines += _warning("implausible fit", result["problems"])
        lines += ["implausible fit, for diagnosis only:"] + [f"  {n}" for n in numbers]
    else:
        lines += numbers
    if "breakpoint_bytes" in result:
        better = "yes" if result["two_segments_better"] else "no"
        lines.append(
            f"breakpoint: {result['breakpoint_bytes']} bytes (two segments better: {better}; "
            f"BIC {result['bic_one']:.1f} -> {result['bic_two']:.1f})"
        )
        if result["segment_problems"]:
            lines += _warning("implausible segments", result["segment_problems"])
        flagged = {p.split(" segment:")[0] for p in result["segment_problems"]}
        for name, segment, seg in zip(
            ("below", "from"), ("lower", "upper"), result["segments"], strict=True
        ):
            lines.append(
                f"  {name:5s} {result['breakpoint_bytes']}: "
                f"alpha {format_number(seg['alpha_s'])} s, "
                f"beta {format_number(seg['beta_s_per_byte'])} s/byte, "
                f"bandwidth {format_number(seg['bandwidth_GiBps'])} GiB/s"
                + (" (implausible)" if segment in flagged else "")
            )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> tuple[dict, model.LinearFit]:
    """Load and fit; return the result dict (as printed by --json) and the linear fit."""
    nbytes, t = model.load_sweep_csv(args.csv, column=args.column)
    fit = model.fit_linear(nbytes, t, weighted=not args.ols)
    result = {"file": str(args.csv), "column": args.column}
    result.update(fit.as_dict())
    result["problems"] = model.fit_problems(fit)
    result["plausible"] = not result["problems"]
    if args.piecewise:
        pw = model.fit_piecewise(nbytes, t, weighted=not args.ols)
        sizes = sorted(set(int(b) for b in nbytes))
        below = [b for b in sizes if b < pw.breakpoint_bytes]
        result.update(
            breakpoint_bytes=pw.breakpoint_bytes,
            two_segments_better=pw.two_segments_better,
            criterion=pw.criterion,
            bic_one=pw.bic_one,
            bic_two=pw.bic_two,
            segment_problems=model.fit_problems(pw),
            segments=[
                _segment(pw.lower, sizes[0], below[-1]),
                _segment(pw.upper, pw.breakpoint_bytes, sizes[-1]),
            ],
        )
    return result, fit


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 2 usage or input error)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = _parser().parse_args(argv)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. polyfit conditioning; the fit still stands
            result, fit = run(args)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except (_UsageError, ValueError, OSError) as exc:
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
