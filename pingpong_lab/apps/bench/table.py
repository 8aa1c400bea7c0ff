"""The bench table: rows of two measured values and their ratio; CSV, Markdown and console."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np

from ...analysis.formatting import format_bandwidth, format_bytes, format_number, format_time

COLUMNS = (
    "group",
    "metric",
    "nbytes",
    "a_label",
    "a_value",
    "b_label",
    "b_value",
    "unit",
    "ratio",
    "ratio_definition",
    "target",
    "within_target",
    "rounds",
    "note",
)


def median(values) -> float:
    v = [x for x in values if x is not None and math.isfinite(x)]
    return float(np.median(v)) if v else math.nan


class Table:
    """The rows of one bench run (`rounds` interleaved rounds each)."""

    def __init__(self, rounds: int):
        self.rounds = rounds
        self.rows: list[dict] = []

    def row(
        self,
        group,
        metric,
        nbytes,
        a_label,
        a,
        b_label,
        b,
        unit,
        target="",
        note="",
        ratio_definition="b / a",
        tolerance=None,
        paired=None,
    ):
        ratio = b / a if a and math.isfinite(a) and b is not None and math.isfinite(b) else math.nan
        if paired is not None:  # the median of the per-round ratios: drift between rounds cancels
            ratio = median([y / x for x, y in paired if x and y is not None])
            ratio_definition = "median over rounds of b / a"
        within = ""
        if tolerance is not None and math.isfinite(ratio):
            within = "yes" if abs(ratio - 1.0) <= tolerance else "no"
        self.rows.append(
            {
                "group": group,
                "metric": metric,
                "nbytes": nbytes if nbytes is not None else "",
                "a_label": a_label,
                "a_value": a,
                "b_label": b_label,
                "b_value": b,
                "unit": unit,
                "ratio": ratio,
                "ratio_definition": ratio_definition,
                "target": target,
                "within_target": within,
                "rounds": self.rounds,
                "note": note,
            }
        )

    def not_measured(self, group, metric, why):
        self.rows.append(
            {k: "" for k in COLUMNS}
            | {"group": group, "metric": metric, "note": f"not measured: {why}", "ratio": math.nan}
        )

    def write_csv(self, path: Path) -> None:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        for r in self.rows:
            w.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()})
        path.write_text(buf.getvalue())


def _fmt(v, unit) -> str:
    """A table cell: a time, a bandwidth or a plain number; '-' when not measured."""
    if unit == "s":
        return format_time(v, missing="-")
    if unit == "B/s":
        return format_bandwidth(v, missing="-")
    return format_number(v, ".3g", missing="-")


def _cells(r) -> tuple[str, str, str, str]:
    """A row's size, A value, B value and B / A as table cells."""
    return (
        format_bytes(r["nbytes"], missing=""),
        _fmt(r["a_value"], r["unit"]),
        _fmt(r["b_value"], r["unit"]),
        format_number(r["ratio"], ".3f", missing="-"),
    )


def markdown_table(rows, machine: str = "") -> str:
    lines = ["# pingpong_lab bench: ratios measured in one run", ""]
    if machine:
        lines += [f"Machine: {machine}", ""]
    lines += [
        "| group | metric | size | A | B | B / A | target | ok | note |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        size, a, b, ratio = _cells(r)
        a = f"{r['a_label']}: {a}" if r["a_label"] else ""
        b = f"{r['b_label']}: {b}" if r["b_label"] else ""
        lines.append(
            f"| {r['group']} | {r['metric']} | {size} | {a} | {b} | {ratio} "
            f"| {r['target']} | {r['within_target']} | {r['note']} |"
        )
    return "\n".join(lines) + "\n"


def print_table(rows) -> None:
    print()
    print(f"{'group':<13} {'metric':<46} {'size':>8} {'A':>11} {'B':>11} {'B/A':>8}  ok")
    for r in rows:
        size, a, b, ratio = _cells(r)
        print(
            f"{r['group']:<13} {r['metric'][:46]:<46} {size:>8} {a:>11} {b:>11} "
            f"{ratio:>8}  {r['within_target'] or ''}"
            + (f"  ({r['note']})" if r["note"].startswith("not measured") else "")
        )
    print()
