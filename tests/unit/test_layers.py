"""The package's floors: imports go down, never round in a circle, and settings have one home.

Read from the source (every `import`, also inside functions), so that the graph a reader draws
is the graph that runs.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pingpong_lab import runtime

PACKAGE = Path(__file__).resolve().parents[2] / "pingpong_lab"
ROOT = PACKAGE.parent

# the floors, lowest first; a module may import its own floor and the ones below
FLOORS = {
    "runtime": 0,
    "errors": 0,
    "data": 1,
    "analysis": 1,
    "progress": 2,
    "mpi": 2,
    "engines": 3,
    "course": 4,
    "grader": 5,
    "apps": 5,
    "__main__": 6,
}


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in MODULES else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _floor(module: str) -> int:
    return FLOORS[module.split(".")[1]]


def test_every_part_of_the_package_has_a_floor():
    assert {m.split(".")[1] for m in MODULES if "." in m} <= set(FLOORS)


def test_imports_only_go_down():
    up = [
        f"{m} -> {t}" for m, targets in GRAPH.items() if "." in m for t in targets
        if "." in t and _floor(t) > _floor(m)
    ]  # fmt: skip
    assert up == []


def test_no_module_imports_itself_round_a_circle():
    """No cycle of modules, apart from a package and the modules it gathers."""

    def reaches(start: str, goal: str) -> list[str] | None:
        todo, seen = [(start, [start])], {start}
        while todo:
            node, path = todo.pop()
            for nxt in GRAPH[node]:
                if nxt == goal:
                    return [*path, goal]
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append((nxt, [*path, nxt]))
        return None

    circles = []
    for m in GRAPH:
        for t in GRAPH[m]:
            if t.startswith(m + ".") or m.startswith(t + "."):
                continue  # a package importing its own modules (or they their package)
            back = reaches(t, m)
            if back and not any(a.startswith(b + ".") for a, b in zip(back, back[1:])):
                circles.append(" -> ".join([m, *back]))
    assert circles == []


def test_no_module_is_imported_by_a_string_that_the_graph_cannot_see():
    by_name = re.compile(r"import_module\(\s*[\"']pingpong_lab")
    hidden = [str(p.relative_to(ROOT)) for p in MODULES.values() if by_name.search(p.read_text())]
    assert hidden == []


def test_every_setting_is_read_in_runtime_and_listed_there():
    used = set()
    reads = re.compile(r"(?:environ\.get|getenv|environ\[)\(?\s*[\"'](PINGPONG_LAB_\w+)")
    readers = []
    for path in list(MODULES.values()):
        text = path.read_text()
        used.update(re.findall(r"PINGPONG_LAB_[A-Z_]+", text))
        names = re.findall(r"^(\w+)\s*=\s*[\"']PINGPONG_LAB_\w+[\"']", text, flags=re.M)
        by_name = [rf"(?:environ\.get|getenv|environ\[)\(?\s*{n}\b" for n in names]
        if path.name != "runtime.py" and (
            reads.search(text) or any(re.search(b, text) for b in by_name)
        ):
            readers.append(str(path.relative_to(ROOT)))
    for folder in ("slurm", "tests", "course", "binder"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in ("", ".py", ".sh", ".sbatch"):
                used.update(re.findall(r"PINGPONG_LAB_[A-Z_]+", path.read_text(errors="ignore")))
    assert readers == []
    assert used <= set(runtime.VARIABLES), sorted(used - set(runtime.VARIABLES))


def test_the_settings_table_in_the_docs_is_the_one_in_runtime():
    text = (ROOT / "docs" / "developing.md").read_text()
    rows = re.findall(r"^\| `(PINGPONG_LAB_\w+)` \| (.+) \|$", text, flags=re.M)
    assert dict(rows) == runtime.VARIABLES
