"""What kind of cell is this? C cells and nbgrader's cell types, as the course tells them apart."""

from __future__ import annotations

import re

C_CELL = re.compile(r"^\s*%%writefile\s+(?:-a\s+|--append\s+)?\S+\.(?:c|h)\s*$")


def is_c_cell(source: str) -> bool:
    """True for a code cell that writes a C source or header file (`%%writefile x.c`)."""
    first = source.lstrip("\n").split("\n", 1)[0]
    return bool(C_CELL.match(first))


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def is_test(cell) -> bool:
    """A graded test cell (nbgrader's autograder tests)."""
    meta = _nbgrader(cell)
    return bool(meta.get("grade")) and not meta.get("solution")


def is_locked(cell) -> bool:
    """A cell nbgrader restores from its database before grading: locked, or a test cell."""
    return bool(_nbgrader(cell).get("locked")) or is_test(cell)
