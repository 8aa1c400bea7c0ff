"""The instructor's view of the class: each student's measured numbers beside their answers.

    python -m pingpong_lab cohort course [--out course/cohort]     # or: make cohort

Every submission carries the results its notebooks saved (handoff.save) in
``course/submitted/<student>/<assignment>/my_results/``. `collect` reads them into one row per
student: latency alpha (us) and bandwidth 1/beta (GiB/s) of the model fit (04_fit), the
breakpoint, the first deadlocking message size (01_deadlock), the contention slowdown
(05_contention: the slowdown at the largest message size measured, most pairs against one
pair), the machine (CPU model, cores, host) and what is missing. It also raises flags:

- "implausible fit": alpha <= 0 or above 1 ms, beta <= 0, or 1/beta below 0.01 GiB/s or above
  1000 GiB/s;
- "missing results: ...": a result of the five is absent (or cannot be read);
- "identical raw samples with <student>": two students' 02_samples hold the same arrays, and
  "identical sweep with <student>" for 02_sweep. The digests are computed again here from the
  arrays (handoff.samples_digest): an edited JSON cannot hide a copy. Two independent
  measurements never share one.

`csv_text` gives ``cohort.csv`` (one row per student, lists joined with "; "); cohort_pages.py
writes it with ``cohort.html`` (the table with flagged rows highlighted, the class's alpha and
1/beta per CPU model as inline PNG strip plots) and ``students/<student>.html`` (numbers and
provenance beside the written answers and the mark scheme from course/source/).
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np

from ..course import handoff

# result name -> the assignment folder whose notebook saves it
RESULTS = {
    "01_deadlock": "01_pingpong",
    "02_sweep": "02_timing",
    "02_samples": "02_timing",
    "04_fit": "04_model",
    "05_contention": "05_contention",
}
COPY_CHECKS = {"02_samples": "identical raw samples", "02_sweep": "identical sweep"}
MAX_ALPHA_S = 1e-3
BANDWIDTH_GIBPS = (0.01, 1000.0)
GIB = 2**30
COLUMNS = [
    "student",
    "alpha_us",
    "bandwidth_GiBps",
    "breakpoint_bytes",
    "deadlock_bytes",
    "contention_slowdown",
    "machine",
    "cpu",
    "cores",
    "host",
    "missing",
    "flags",
]
PROVENANCE = ("_saved", "_host", "_cpu", "_cores", "_mpi", "_sha256")


def check_course(course) -> Path:
    course = Path(course)
    if not course.is_dir():
        raise FileNotFoundError(f"{course}: no such course folder (the folder of nbgrader_config)")
    if not (course / "submitted").is_dir():
        raise FileNotFoundError(
            f"{course / 'submitted'}: no submissions in this course (nbgrader collect puts them "
            "in submitted/<student>/<assignment>/)"
        )
    return course


def students(course: Path) -> list[str]:
    """The students with a folder in course/submitted/, sorted."""
    folder = check_course(course) / "submitted"
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def arrays_of(values: dict) -> dict:
    """The arrays of a result as read (the plain values of its JSON left out)."""
    return {k: v for k, v in values.items() if isinstance(v, np.ndarray)}


def read_results(course: Path, student: str) -> tuple[dict, dict]:
    """({result: values}, {result: why it is missing}) of one student's submission."""
    found, missing = {}, {}
    for name, assignment in RESULTS.items():
        folder = course / "submitted" / student / assignment / handoff.RESULTS_FOLDER
        try:
            found[name] = handoff.read(folder, name)
        except FileNotFoundError:
            missing[name] = "missing"
        except (OSError, ValueError, KeyError) as exc:  # a damaged .npz or .json
            missing[name] = f"unreadable ({type(exc).__name__}: {exc})"
    return found, missing


def _number(values: dict | None, key: str) -> float | None:
    if values is None or key not in values:
        return None
    try:
        x = float(np.asarray(values[key]).reshape(-1)[0])
    except (TypeError, ValueError, IndexError):
        return None
    return x if math.isfinite(x) else None


def _whole(values: dict | None, key: str) -> int | None:
    x = _number(values, key)
    return None if x is None else int(x)


def fit_numbers(fit: dict | None) -> dict:
    """alpha in us and 1/beta in GiB/s of a 04_fit result (None where it cannot say)."""
    alpha, beta = _number(fit, "alpha_s"), _number(fit, "beta_s_per_byte")
    return {
        "alpha_us": None if alpha is None else alpha * 1e6,
        "bandwidth_GiBps": None if not beta or beta <= 0 else 1.0 / beta / GIB,
        "breakpoint_bytes": _whole(fit, "breakpoint_bytes"),
    }


def contention_slowdown(result: dict | None) -> float | None:
    """The slowdown at the largest message size of a 05_contention result."""
    if result is None or "slowdown" not in result:
        return None
    slowdown = np.asarray(result["slowdown"], dtype=float).reshape(-1)
    sizes = np.asarray(result.get("nbytes", np.arange(slowdown.size)), dtype=float).reshape(-1)
    if slowdown.size == 0 or sizes.size != slowdown.size:
        return None
    x = float(slowdown[int(np.argmax(sizes))])
    return x if math.isfinite(x) else None


def fit_problem(fit: dict | None) -> str | None:
    """Why a 04_fit result is implausible, or None when it is plausible (or absent)."""
    if fit is None:
        return None
    alpha, beta = _number(fit, "alpha_s"), _number(fit, "beta_s_per_byte")
    if alpha is None or beta is None:
        return "implausible fit: alpha_s or beta_s_per_byte is not a finite number"
    if alpha <= 0 or alpha > MAX_ALPHA_S:
        return f"implausible fit: alpha = {alpha * 1e6:.4g} us (expected 0 .. 1000 us)"
    if beta <= 0:
        return f"implausible fit: beta = {beta:.4g} s/byte (must be positive)"
    gibps = 1.0 / beta / GIB
    lo, hi = BANDWIDTH_GIBPS
    if not lo <= gibps <= hi:
        return f"implausible fit: 1/beta = {gibps:.4g} GiB/s (expected {lo:g} .. {hi:g} GiB/s)"
    return None


def machine_of(found: dict) -> dict:
    """CPU model, cores and host of the first result that says (the sweep's first)."""
    for name in ("02_sweep", "02_samples", "04_fit", "05_contention", "01_deadlock"):
        values = found.get(name)
        if values is not None and "_cpu" in values:
            cpu = str(values.get("_cpu", "?"))
            cores, host = str(values.get("_cores", "?")), str(values.get("_host", "?"))
            return {"cpu": cpu, "cores": cores, "host": host,
                    "machine": f"{cpu}, {cores} cores, on {host}"}  # fmt: skip
    return {"cpu": "unknown", "cores": "", "host": "", "machine": "unknown (no provenance)"}


def _row(course: Path, student: str) -> tuple[dict, dict]:
    found, missing = read_results(course, student)
    row = {"student": student, **fit_numbers(found.get("04_fit"))}
    row["deadlock_bytes"] = _whole(found.get("01_deadlock"), "first_deadlock_bytes")
    row["contention_slowdown"] = contention_slowdown(found.get("05_contention"))
    row.update(machine_of(found))
    row["missing"] = sorted(missing)
    row["flags"] = []
    problem = fit_problem(found.get("04_fit"))
    if problem:
        row["flags"].append(problem)
    if missing:
        why = [n if w == "missing" else f"{n} {w}" for n, w in sorted(missing.items())]
        row["flags"].append("missing results: " + ", ".join(why))
    return row, found


def _flag_copies(rows: list[dict], found: dict[str, dict]) -> None:
    """Flag every pair of students whose result arrays are the same (digests recomputed)."""
    for name, label in COPY_CHECKS.items():
        by_digest: dict[str, list[str]] = {}
        for student, results in found.items():
            if name in results:
                digest = handoff.samples_digest(arrays_of(results[name]))
                by_digest.setdefault(digest, []).append(student)
        for group in by_digest.values():
            for row in rows:
                if row["student"] in group and len(group) > 1:
                    others = [s for s in group if s != row["student"]]
                    row["flags"].append(f"{label} with " + ", ".join(others))


def collect_with_results(course) -> tuple[list[dict], dict[str, dict]]:
    """The rows of `collect` and every student's results as read ({student: {name: values}})."""
    course = check_course(course)
    rows, found = [], {}
    for student in students(course):
        row, found[student] = _row(course, student)
        rows.append(row)
    _flag_copies(rows, found)
    return rows, found


def collect(course) -> list[dict]:
    """One row per student found in course/submitted/ (see the module's docstring)."""
    return collect_with_results(course)[0]


# ---- the CSV ----


def cell_text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return "; ".join(map(str, value))
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def csv_text(rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow([cell_text(row.get(c)) for c in COLUMNS])
    return out.getvalue()
