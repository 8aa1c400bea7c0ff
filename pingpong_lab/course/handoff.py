"""What one notebook measures, the next one reads: no numbers typed in by hand.

A notebook saves its results under a name; a later notebook loads them by that name:

    handoff.save("02_sweep", nbytes=sizes, t_median_s=t, kernel="student C")
    data = handoff.load("02_sweep", fallback=handoff.shipped("02_sweep"))

Files live in ``my_results/`` beside the notebooks' folders (exercises/my_results/ when the
course is worked from exercises/), or wherever PINGPONG_LAB_RESULTS points. Each result is one
``.npz`` (arrays) with a ``.json`` beside it (plain values: kernel, units, date), both written
to a temporary name and renamed, so a crash never leaves half a result.

``load`` says in one line what it uses: your result, which notebook wrote it and when; or, and
it never raises for a missing or unreadable file, which file it looked for, which notebook
writes it and that it uses the fallback instead (and returns the fallback).
While nbgrader grades (grading mode) it always returns the fallback, so a grade
never depends on what some earlier run left on disk.
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path

import numpy as np

from .. import runtime
from ..data.schema import COL
from .grading.mode import grading_mode

__all__ = ["Loaded", "load", "results_dir", "save", "shipped"]

RESULTS_ENV = "PINGPONG_LAB_RESULTS"
SHIPPED_DIR = Path(__file__).resolve().parent / "shipped"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
OLD_MEDIAN = "t_one_way_s"  # the median one-way time's name in results saved before 2026-11


class Loaded(dict):
    """The arrays and values of a result, plus where they came from (`source`)."""

    def __init__(self, values, source: str):
        super().__init__(values)
        self.source = source

    def __repr__(self):
        return f"Loaded({sorted(self)}, source={self.source!r})"


def results_dir() -> Path:
    """PINGPONG_LAB_RESULTS, else my_results/ in the parent of the working directory."""
    env = runtime.setting(RESULTS_ENV)
    return Path(env) if env else Path.cwd().parent / "my_results"


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
    npz = folder / f"{name}.npz"
    with runtime.atomic_file(npz) as f:  # the arrays first: a reader needs both files
        np.savez_compressed(f, **arrays)
    runtime.atomic_write(
        folder / f"{name}.json", json.dumps(plain, indent=1, sort_keys=True) + "\n"
    )
    return npz


def _read(folder: Path, name: str) -> dict:
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
    return Loaded(_read(SHIPPED_DIR, name), source=f"shipped dataset {name}")


def load(name: str, fallback, writer: str = "an earlier notebook", directory=None) -> Loaded:
    """Result `name` as saved by `writer`; `fallback` (a dict or a callable) when there is none.

    In grading mode the fallback is always used. The message says which file was missing.
    """
    _check_name(name)
    folder = Path(directory) if directory is not None else results_dir()

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
        values = _read(folder, name)
    except (OSError, ValueError, json.JSONDecodeError) as error:
        return use_fallback(f"Could not read {path}: {error}")
    loaded = Loaded(values, source=f"your result {path.name} (saved {values.get('_saved', '?')})")
    print(f"Using {loaded.source}, written by {writer}.")
    return loaded
