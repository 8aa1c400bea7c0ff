"""Written answers a student left blank: scored 0 when merged, so no one grades them by hand.

Two kinds of written answer in the course, both graded by hand:

- an answer cell (01, 02): a markdown cell that is a solution and a grade cell; the release
  holds nbgrader's stub there ("YOUR ANSWER HERE"). Blank: its text is still the stub, or empty.
- a task (03-05): a markdown task cell with the question, followed in the release by one
  placeholder cell where the answer goes. Blank: in the submission the task is still followed
  by that placeholder, unchanged (or emptied), and then by the cell that followed it in the
  release - nothing written in between. A student who wrote anywhere else around it, or
  changed the placeholder, is graded by hand as before.

Read in the instructor's process from the student's submitted notebook and the release, as
data (JSON). A submission can make an answer look blank (and lose its points) or not blank (and
be read by a person): neither gains anything, so nothing here needs to be trusted.
"""

from __future__ import annotations

import json
from pathlib import Path

STUB = "YOUR ANSWER HERE"  # nbgrader's ClearSolutions.text_stub (the course keeps it)


def _text(cell: dict) -> str:
    source = cell.get("source", "")
    return ("".join(source) if isinstance(source, list) else source).strip()


def _grading(cell: dict) -> dict:
    return (cell.get("metadata") or {}).get("nbgrader") or {}


def _cells(path: Path) -> list[dict]:
    try:
        cells = json.loads(Path(path).read_text(encoding="utf-8")).get("cells", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [c for c in cells if isinstance(c, dict)] if isinstance(cells, list) else []


def blank_cells(submitted: list[dict], released: list[dict]) -> set[str]:
    """The names (grade ids) of the hand-graded answers left blank in `submitted`."""
    out = set()
    ids = [_grading(c).get("grade_id") for c in released]
    for i, cell in enumerate(submitted):
        meta = _grading(cell)
        name = meta.get("grade_id")
        if not name or cell.get("cell_type") != "markdown":
            continue
        if meta.get("grade") and meta.get("solution") and _text(cell) in ("", STUB):
            out.add(name)
        elif meta.get("task"):
            at = ids.index(name) if name in ids else None
            if at is None or at + 1 >= len(released) or i + 1 >= len(submitted):
                continue
            placeholder = released[at + 1]
            if _grading(placeholder) or _text(submitted[i + 1]) not in ("", _text(placeholder)):
                continue
            after = released[at + 2] if at + 2 < len(released) else None
            following = submitted[i + 2] if i + 2 < len(submitted) else None
            if (after is None and following is None) or (
                after is not None and following is not None and _text(after) == _text(following)
            ):
                out.add(name)
    return out


def unanswered(course: Path, student: str, assignments: list[str]) -> set[tuple[str, str]]:
    """(notebook, cell name) of every written answer `student` left blank in `assignments`."""
    out = set()
    for assignment in assignments:
        for path in sorted((Path(course) / "submitted" / student / assignment).glob("*.ipynb")):
            release = Path(course) / "release" / assignment / path.name
            for name in blank_cells(_cells(path), _cells(release)):
                out.add((path.stem, name))
    return out
