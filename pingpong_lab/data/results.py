"""One tidy format for every measurement: CSV rows + a JSON provenance sidecar + raw samples.

    results.csv               one row per message size (nbytes, reps, t_median_s, ...)
    results.csv.json          provenance (mpi.environment.provenance): MPI library, hosts,
                              rank -> host/core, kernel, sizes, repetitions, timer resolution,
                              transport settings, date
    results.samples.npz       every raw one-way sample: array "n<nbytes>" of shape (ranks, reps)

Files are written to a temporary name and renamed, so a crash never leaves half a result.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import numpy as np


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


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_results(path, rows: list[dict], info: dict, raw: dict | None = None) -> Path:
    """Write the CSV, its JSON sidecar and (if given) the raw samples, each atomically."""
    path = check_writable(path)
    if not rows:
        raise ValueError("no rows to write")
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in row.items()})
    if raw:
        npz = io.BytesIO()
        np.savez_compressed(npz, **{f"n{n}": a for n, a in raw.items()})
        _atomic_write_bytes(samples_path(path), npz.getvalue())
        info = {**info, "samples_file": samples_path(path).name}
    _atomic_write_bytes(sidecar_path(path), json.dumps(info, indent=2, default=str).encode())
    _atomic_write_bytes(path, buf.getvalue().encode())
    return path


def read_results(path) -> tuple[list[dict], dict]:
    """Rows (numbers parsed) and provenance ({} when the sidecar is missing)."""
    path = Path(path)
    with open(path, newline="") as f:
        lines = [ln for ln in f if not ln.startswith("#")]
    rows = []
    for rec in csv.DictReader(lines):
        rows.append({k: _number(v) for k, v in rec.items()})
    side = sidecar_path(path)
    info = json.loads(side.read_text()) if side.exists() else {}
    return rows, info


def _number(text: str):
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text
