"""The command-line apps stay readable: no function in pingpong_lab/apps/ is longer than
MAX_LINES (from its `def`, decorators left out, to its last line), so a long step is split into
small named steps rather than grown in place.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APPS = Path(__file__).resolve().parents[2] / "pingpong_lab" / "apps"
MAX_LINES = 60


def _functions(path: Path):
    """(name, first line, number of lines) of every function and method in one file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node.lineno, node.end_lineno - node.lineno + 1


def _long_functions(root: Path, limit: int) -> list[str]:
    return [
        f"{path.relative_to(root.parent)}:{line} {name} ({length} lines)"
        for path in sorted(root.rglob("*.py"))
        for name, line, length in _functions(path)
        if length > limit
    ]


def test_the_apps_have_python_files():
    assert len(list(APPS.rglob("*.py"))) >= 10


def test_no_function_in_the_apps_is_longer_than_the_limit():
    too_long = _long_functions(APPS, MAX_LINES)
    assert not too_long, f"split these into smaller functions (at most {MAX_LINES} lines):\n" + (
        "\n".join(too_long)
    )


@pytest.mark.parametrize("length, caught", [(MAX_LINES, False), (MAX_LINES + 1, True)])
def test_the_check_catches_one_line_too_many(tmp_path, length, caught):
    body = "\n".join(f"    x{i} = {i}" for i in range(length - 1))
    (tmp_path / "m.py").write_text(f"def long_one():\n{body}\n")
    assert bool(_long_functions(tmp_path, MAX_LINES)) is caught
