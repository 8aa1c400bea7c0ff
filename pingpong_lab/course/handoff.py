"""What one notebook measures, the next one reads: no numbers typed in by hand.

A notebook saves its results under a name; a later notebook loads them by that name:

    handoff.save("02_sweep", nbytes=sizes, t_median_s=t, kernel="student C")
    data = handoff.load("02_sweep", fallback=handoff.shipped("02_sweep"))

Files live in ``my_results/`` inside the folder of the notebook that writes them
(exercises/02_timing/my_results/02_sweep.npz), so that they are part of that assignment's
submission and an instructor sees the numbers each student measured; a later notebook reads
them from its sibling folder (../02_timing/my_results/). PINGPONG_LAB_RESULTS puts every result
in one folder instead. Each result is one ``.npz`` (arrays) with a ``.json`` beside it (plain
values: kernel, units, date, and the provenance: host, CPU, cores, MPI and a SHA-256 of the
arrays, which no two independent measurements share), both written atomically.

``load`` says in one line what it uses: your result, which notebook wrote it and when; or, and
it never raises for a missing or unreadable file, which file it looked for, which notebook
writes it and that it uses the fallback instead (and returns the fallback).
While nbgrader grades (grading mode) it always returns the fallback, so a grade
never depends on what some earlier run left on disk.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
from pathlib import Path

import numpy as np

from .. import runtime
from ..data.schema import COL
from .grading.mode import grading_mode

__all__ = [
    "Loaded",
    "load",
    "provenance",
    "read",
    "results_dir",
    "samples_digest",
    "save",
    "shipped",
]

RESULTS_ENV = "PINGPONG_LAB_RESULTS"
RESULTS_FOLDER = "my_results"
_NOTEBOOK = re.compile(r"^\d\d_[A-Za-z0-9_]+$")  # an assignment folder: 02_timing
SHIPPED_DIR = Path(__file__).resolve().parent / "shipped"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
OLD_MEDIAN = "t_one_way_s"  # the median one-way time's name in results saved before 2026-11


class Loaded(dict):
    """The arrays and values of a result, plus where they came from (`source`) and whether
    they are the learner's own (`yours`: False for a shipped or fallback dataset)."""

    def __init__(self, values, source: str, yours: bool = False):
        super().__init__(values)
        self.source = source
        self.yours = yours

    def __repr__(self):
        return f"Loaded({sorted(self)}, source={self.source!r})"


def results_dir(writer: str | None = None) -> Path:
    """Where results live: PINGPONG_LAB_RESULTS when set (one folder for all); else my_results/
    in the working directory (the notebook's own folder) when `writer` is None or this
    notebook, and in the sibling folder ../<writer>/ for another notebook's results."""
    env = runtime.setting(RESULTS_ENV)
    if env:
        return Path(env)
    here = Path.cwd()
    if writer is None or writer == here.name:
        return here / RESULTS_FOLDER
    return here.parent / writer / RESULTS_FOLDER


def _folders(writer: str) -> list[Path]:
    """Where to look for a result of `writer`: its folder, then where older versions of the
    course kept every result (my_results/ beside the notebooks' folders)."""
    if runtime.setting(RESULTS_ENV):
        return [results_dir()]
    if not _NOTEBOOK.match(writer):
        return [Path.cwd().parent / RESULTS_FOLDER]
    return [results_dir(writer), Path.cwd().parent / RESULTS_FOLDER]


def samples_digest(arrays: dict) -> str:
    """SHA-256 of a result's arrays (names, dtypes, shapes and bytes): equal only for equal data."""
    digest = hashlib.sha256()
    for key in sorted(arrays):
        a = np.ascontiguousarray(arrays[key])
        digest.update(f"{key}:{a.dtype.str}:{a.shape};".encode())
        digest.update(a.tobytes())
    return digest.hexdigest()


def provenance(arrays: dict) -> dict:
    """Where and from what a result was measured, stored with it: host, CPU model, usable
    cores, MPI library, and the digest of its arrays."""
    from ..mpi import environment

    try:
        where = environment.machine()
    except Exception as exc:  # an environment that cannot say: the result is still saved
        where = {"host": f"unknown ({exc})"}
    return {
        "_host": where.get("host", "?"),
        "_cpu": where.get("cpu", "?"),
        "_cores": where.get("cores_usable", 0),
        "_mpi": where.get("mpi_vendor", "?"),
        "_sha256": samples_digest(arrays),
    }


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"result name {name!r}: use letters, digits, '_', '-' or '.', e.g. '02_sweep'"
        )
    return name


def _split(values: dict) -> tuple[dict, dict]:
    arrays, plain = {}, {}
    for key, value in values.items():
        if isinstance(value, (str, bool, type(None))) or (
            isinstance(value, (int, float)) and not isinstance(value, np.generic)
        ):
            plain[key] = value
        else:
            array = np.asarray(value)
            if array.dtype == object:
                raise TypeError(
                    f"{key}: save numbers, arrays or strings, not {type(value).__name__}"
                )
            arrays[key] = array
    return arrays, plain


def save(name: str, directory=None, **values) -> Path:
    """Save arrays and plain values (str, int, float, bool, None) as result `name`."""
    _check_name(name)
    if not values:
        raise ValueError("save() needs at least one value, e.g. save(name, nbytes=sizes)")
    arrays, plain = _split(values)
    folder = Path(directory) if directory is not None else results_dir()
    folder.mkdir(parents=True, exist_ok=True)
    plain["_saved"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    plain.update(provenance(arrays))
    npz = folder / f"{name}.npz"
    with runtime.atomic_file(npz) as f:  # the arrays first: a reader needs both files
        np.savez_compressed(f, **arrays)
    runtime.atomic_write(
        folder / f"{name}.json", json.dumps(plain, indent=1, sort_keys=True) + "\n"
    )
    return npz


def read(folder, name: str) -> dict:
    """The arrays and plain values of result `name` in `folder` (FileNotFoundError if absent),
    as saved: no message, no fallback, also while grading (the class view reads submissions)."""
    folder = Path(folder)
    values = {}
    with np.load(folder / f"{name}.npz", allow_pickle=False) as data:
        for key in data.files:
            values[key] = data[key]
    if OLD_MEDIAN in values:  # saved before the column took the results schema's name
        values.setdefault(COL.t_median_s, values.pop(OLD_MEDIAN))
    meta = folder / f"{name}.json"
    if meta.exists():
        values.update(json.loads(meta.read_text()))
    return values


def shipped(name: str) -> Loaded:
    """A dataset shipped with the course under `name` (measured once; see its 'about')."""
    _check_name(name)
    if not (SHIPPED_DIR / f"{name}.npz").exists():
        have = sorted(p.stem for p in SHIPPED_DIR.glob("*.npz"))
        raise FileNotFoundError(f"no shipped dataset {name!r}; the course ships {have}")
    return Loaded(read(SHIPPED_DIR, name), source=f"shipped dataset {name}")


def load(name: str, fallback, writer: str = "an earlier notebook", directory=None) -> Loaded:
    """Result `name` as saved by `writer`; `fallback` (a dict or a callable) when there is none.

    In grading mode the fallback is always used. The message says which file was missing.
    """
    _check_name(name)
    folders = [Path(directory)] if directory is not None else _folders(writer)
    folder = next((f for f in folders if (f / f"{name}.npz").exists()), folders[0])

    def use_fallback(why: str) -> Loaded:
        values = fallback() if callable(fallback) else fallback
        source = getattr(values, "source", "the fallback dataset")
        if why:
            print(f"{why}; using {source} instead.")
        return Loaded(values, source=source)

    if grading_mode():
        return use_fallback("")
    path = folder / f"{name}.npz"
    if not path.exists():
        return use_fallback(f"No saved result {path.name} in {folder} (written by {writer})")
    try:
        values = read(folder, name)
    except (OSError, ValueError, json.JSONDecodeError) as error:
        return use_fallback(f"Could not read {path}: {error}")
    saved = values.get("_saved", "?")
    loaded = Loaded(values, source=f"your result {path.name} (saved {saved})", yours=True)
    print(f"Using {loaded.source}, written by {writer}.")
    return loaded
