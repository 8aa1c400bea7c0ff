"""The one reader and writer of results files: CSV rows + a JSON sidecar + raw samples.

    results.csv               one row per message size, the columns of data.schema.SweepRow,
                              the last ones (kernel, mode, ranks, transport, link) say what
                              was run: taken from the provenance, the same on every row
    results.csv.json          provenance (mpi.environment.provenance): MPI library, hosts,
                              rank -> host/core, kernel, sizes, repetitions, timer resolution,
                              transport settings, date; and the CSV's "columns" and "units"
    results.samples.npz       every raw one-way sample: array "n<nbytes>" of shape (ranks, reps)

Floats are written with repr (they read back exactly); lines starting with # are comments.
Files are written to a temporary name and renamed, so a crash never leaves half a result.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
from pathlib import Path

import numpy as np

from ..runtime import atomic_write
from . import schema
from .schema import RUN_COLUMNS, SweepRow

__all__ = [
    "check_writable",
    "read_results",
    "read_samples",
    "read_sidecar",
    "read_table",
    "samples_path",
    "sidecar_path",
    "write_results",
]


def sidecar_path(path) -> Path:
    return Path(str(path) + ".json")


def samples_path(path) -> Path:
    p = Path(path)
    return p.with_name(p.stem + ".samples.npz")


def check_writable(path) -> Path:
    """Raise a clear OSError now if results cannot be written to `path` later."""
    p = Path(path)
    if p.is_dir():
        raise OSError(f"{p} is a directory; give a file name such as {p / 'results.csv'}")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise OSError(f"cannot write {p}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise OSError(f"cannot write {p}: permission denied")
    return p


def _text(value) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def write_results(
    path, rows, info: dict, raw: dict | None = None, comment: str | None = None
) -> Path:
    """Write the CSV, its JSON sidecar and (if given) the raw samples, each atomically.

    rows: SweepRow objects (or a dataclass derived from SweepRow, whose columns are then
    written), or dicts that SweepRow.from_dict accepts. The header is the row type's columns;
    the sidecar gets them as "columns" with their "units". `comment` lines go first, each
    starting with "# ".
    """
    path = check_writable(path)
    if not rows:
        raise ValueError("no rows to write")
    rows = [r if isinstance(r, SweepRow) else SweepRow.from_dict(r) for r in rows]
    rows = [_with_run_values(r, info) for r in rows]
    row_type = type(rows[0])
    if any(type(r) is not row_type for r in rows):
        raise ValueError("rows of one file must all have the same columns")
    columns = schema.columns(row_type)
    buf = io.StringIO()
    for line in (comment or "").splitlines():
        buf.write(f"# {line}\n")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_text(v) for v in row.to_dict().values()])
    info = {**info, "columns": list(columns), "units": schema.units(row_type)}
    if raw:
        npz = io.BytesIO()
        np.savez_compressed(npz, **{f"n{int(n)}": a for n, a in raw.items()})
        atomic_write(samples_path(path), npz.getvalue())
        info["samples_file"] = samples_path(path).name
    atomic_write(sidecar_path(path), json.dumps(info, indent=2, default=str))
    atomic_write(path, buf.getvalue())
    return path


def _with_run_values(row: SweepRow, info: dict) -> SweepRow:
    """`row` with each run column (schema.RUN_COLUMNS) still at its default taken from `info`."""
    defaults = {f.name: f.default for f in dataclasses.fields(SweepRow)}
    fill = {
        name: value
        for name, value in schema.run_values(info).items()
        if getattr(row, name) == defaults[name]
    }
    return dataclasses.replace(row, **fill) if fill else row


def _is_data(line: str) -> bool:
    return bool(line.strip()) and not line.lstrip().startswith("#")


def read_results(path) -> tuple[list[dict], dict]:
    """Rows as dicts of every column in the file (numbers parsed) and the sidecar ({} if none).

    Comment and blank lines are skipped. A file written before the run columns existed
    (schema.RUN_COLUMNS) gets them from its sidecar, or their defaults, so old and new files
    concatenate into one table. A missing file raises FileNotFoundError.
    """
    path = Path(path)
    with open(path, newline="", encoding="utf-8") as f:
        lines = [ln for ln in f if _is_data(ln)]
    info = read_sidecar(path)
    run = {f.name: f.default for f in dataclasses.fields(SweepRow) if f.name in RUN_COLUMNS}
    run.update(schema.run_values(info))
    rows = [{k: _number(v) for k, v in rec.items()} for rec in csv.DictReader(lines)]
    rows = [{**row, **{k: v for k, v in run.items() if k not in row}} for row in rows]
    return rows, info


def read_sidecar(path) -> dict:
    """The JSON sidecar of a results CSV ({} when there is none)."""
    side = sidecar_path(path)
    return json.loads(side.read_text()) if side.exists() else {}


def _number(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        try:
            return float(text)
        except (TypeError, ValueError):
            return text


def read_table(path) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """A results CSV as {column: array} (numbers as float, other columns as str) and the file's
    line number of every row (for error messages).

    Raises ValueError (one line) for a missing file, a file without header or data rows, a
    malformed header and rows whose field count differs from the header's.
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"no such file: {path}")
    if not path.is_file():
        raise ValueError(f"not a file: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read as UTF-8 text ({exc})") from exc
    lines = [(i, line) for i, line in enumerate(text.splitlines(), start=1) if _is_data(line)]
    if not lines:
        raise ValueError(f"{path}: empty (no header line)")
    rows = list(csv.reader([line for _, line in lines]))
    header = [h.strip() for h in rows[0]]
    if len(set(header)) != len(header) or any(not h for h in header):
        raise ValueError(f"{path}: malformed header on line {lines[0][0]}: {lines[0][1]!r}")
    data = rows[1:]
    if not data:
        raise ValueError(f"{path}: no data rows after the header")
    for (lineno, _), row in zip(lines[1:], data, strict=True):
        if len(row) != len(header):
            raise ValueError(
                f"{path}: malformed line {lineno}: expected {len(header)} fields, got {len(row)}"
            )
    table: dict[str, np.ndarray] = {}
    for j, name in enumerate(header):
        col = [row[j].strip() for row in data]
        try:
            table[name] = np.array([float(v) for v in col], dtype=float)
        except ValueError:
            table[name] = np.array(col, dtype=str)
    return table, np.array([lineno for lineno, _ in lines[1:]])


def read_samples(path) -> dict[int, np.ndarray]:
    """Read a ``<stem>.samples.npz`` file: {nbytes: array (ranks, iters) of one-way seconds}.

    Arrays are named ``n<nbytes>``; the result is sorted by message size.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no such samples file: {path}")
    try:
        data = np.load(path, allow_pickle=False)
    except Exception as exc:  # OSError, ValueError, zipfile.BadZipFile, ...
        raise ValueError(f"{path}: not a readable .npz file ({exc})") from exc
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError(f"{path}: is a single .npy array, expected an .npz archive")
    out: dict[int, np.ndarray] = {}
    with data:
        for name in data.files:
            if not (name.startswith("n") and name[1:].isdigit()):
                raise ValueError(f"{path}: unexpected array name {name!r} (want n<nbytes>)")
            out[int(name[1:])] = np.asarray(data[name], dtype=float)
    if not out:
        raise ValueError(f"{path}: contains no sample arrays")
    return dict(sorted(out.items()))
