"""The results schema: one row per message size, the columns of every sweep CSV, in CSV order.

`SweepRow` is the only place the columns are listed. Everything else derives from it:
`COLUMNS` (the header), `UNITS` (also written to the JSON sidecar), `COL` (column names by
attribute, for code that handles rows as dicts or tables: ``row[COL.t_median_s]``; a renamed or
mistyped column fails loudly instead of reading nothing). To add a column, add a field here and
fill it where rows are made (`analysis.stats.summary_row`); writers, readers and the sidecar
follow. Times are one-way (half a round trip), the per-iteration maximum over ranks.

The last columns, `RUN_COLUMNS` (kernel, mode, ranks, transport, link), say what was run; they
are the same on every row of a file and come from its provenance (`run_values`), so the CSVs
of several runs concatenate into one tidy table (one row per run and size).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import operator
import typing
from dataclasses import dataclass, field

__all__ = [
    "COL",
    "COLUMNS",
    "RUN_COLUMNS",
    "UNITS",
    "SweepRow",
    "columns",
    "run_values",
    "units",
]


def _column(unit: str, doc: str, default=dataclasses.MISSING):
    return field(default=default, metadata={"unit": unit, "doc": doc})


@dataclass(frozen=True, kw_only=True)
class SweepRow:
    """One message size of a sweep (units in each field's metadata: ``UNITS[name]``)."""

    nbytes: int = _column("B", "message size")
    reps: int = _column("1", "timed samples per rank, all rounds")
    warmup: int = _column("1", "untimed iterations before each round", 0)
    t_median_s: float = _column("s", "median one-way time")
    t_min_s: float = _column("s", "fastest one-way time", math.nan)
    t_mean_s: float = _column("s", "mean one-way time", math.nan)
    t_max_s: float = _column("s", "slowest one-way time", math.nan)
    t_std_s: float = _column("s", "standard deviation of the one-way times", math.nan)
    t_p90_s: float = _column("s", "90th percentile", math.nan)
    t_p99_s: float = _column("s", "99th percentile", math.nan)
    ci_lo_s: float = _column("s", "95% CI of the median, low end", math.nan)
    ci_hi_s: float = _column("s", "95% CI of the median, high end", math.nan)
    ci_rel_halfwidth: float = _column("1", "CI half-width / median, floored at the tick", math.nan)
    n_outliers: int = _column("1", "samples outside 1.5 IQR", 0)
    bandwidth_Bps: float = _column("B/s", "nbytes / median", math.nan)  # noqa: N815
    batch: int = _column("1", "round trips per timed sample", 1)
    rounds: int = _column("1", "measuring rounds", 1)
    stop_reason: str = _column("", "ci, budget or fixed", "")
    timer_resolution_s: float = _column("s", "measured MPI_Wtime resolution", math.nan)
    # what was run: the same on every row of a file, so that files concatenate into one table
    kernel: str = _column("", "c or python (or synthetic)", "")
    mode: str = _column("", "blocking, nonblocking, pairwise, pickle, ...", "")
    ranks: int = _column("1", "MPI ranks of the run (0: not recorded)", 0)
    transport: str = _column("", "default, or tcp when forced", "default")
    link: str = _column("", "emulated link between the ranks, none when not emulated", "none")

    def __post_init__(self):
        for name, kind in _kinds(type(self)).items():
            object.__setattr__(self, name, _convert(name, kind, getattr(self, name)))

    def to_dict(self) -> dict:
        """{column: value} in CSV order."""
        return {name: getattr(self, name) for name in columns(type(self))}

    @classmethod
    def from_dict(cls, values: typing.Mapping):
        """A row from {column: value}, each value converted to its column's type.

        A missing (or None) column takes its default; ValueError names a missing column
        without a default, an unknown column or a value of the wrong kind.
        """
        known = columns(cls)
        unknown = [k for k in values if k not in known]
        if unknown:
            names = ", ".join(map(repr, unknown))
            raise ValueError(f"unknown column(s) {names}; the columns are {', '.join(known)}")
        given = {k: v for k, v in values.items() if v is not None}
        missing = [
            f.name
            for f in dataclasses.fields(cls)
            if f.name not in given and f.default is dataclasses.MISSING
        ]
        if missing:
            raise ValueError(f"missing column(s) {', '.join(map(repr, missing))}")
        return cls(**given)


def _convert(name: str, kind: type, value):
    """value as a plain int, float or str; ValueError naming the column otherwise."""
    try:
        if kind is int and not isinstance(value, str):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            return operator.index(value)
        return kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"column {name}: {value!r} is not {_KIND_WORDS[kind]}") from None


def columns(row_type=SweepRow) -> tuple[str, ...]:
    """The column names of a row type (SweepRow or a dataclass derived from it), in CSV order."""
    return tuple(f.name for f in dataclasses.fields(row_type))


def units(row_type=SweepRow) -> dict[str, str]:
    """{column: unit} of a row type ('' when a column has none)."""
    return {f.name: f.metadata.get("unit", "") for f in dataclasses.fields(row_type)}


@functools.cache
def _kinds(row_type) -> dict[str, type]:
    """{column: int | float | str}: the type a column's values are converted to."""
    hints = typing.get_type_hints(row_type)
    kinds = {name: hints[name] for name in columns(row_type)}
    odd = [name for name, kind in kinds.items() if kind not in _KIND_WORDS]
    if odd:
        raise TypeError(f"{row_type.__name__}: columns must be int, float or str: {odd}")
    return kinds


_KIND_WORDS = {int: "a whole number", float: "a number", str: "text"}


COLUMNS = columns(SweepRow)
UNITS = units(SweepRow)
COL = collections.namedtuple("Columns", COLUMNS)(*COLUMNS)
"""Column names by attribute: ``COL.t_median_s == "t_median_s"``."""

RUN_COLUMNS = ("kernel", "mode", "ranks", "transport", "link")
"""The columns that say what was run (the same on every row of a file)."""


def run_values(info: typing.Mapping) -> dict:
    """{run column: value} from a provenance dict (a sidecar); absent keys are left out.

    The provenance keys have the columns' names ("kernel", "mode", "ranks", "transport",
    "link"); a value is converted to its column's type (ValueError naming the column).
    """
    kinds = _kinds(SweepRow)
    return {
        name: _convert(name, kinds[name], info[name])
        for name in RUN_COLUMNS
        if info.get(name) is not None
    }
