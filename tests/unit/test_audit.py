"""The tamper audit: every cheat we know of is found, no correct answer is flagged."""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

from pingpong_lab.course import cells
from pingpong_lab.grader import audit

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "solutions").glob("*/*.ipynb")) + sorted(
    (ROOT / "exercises").glob("*/*.ipynb")
)


def _notebook(name="01_pingpong"):
    return nbformat.read(ROOT / "solutions" / name / f"{name}.ipynb", as_version=4)


def _with_cell(source: str, name="01_pingpong"):
    """The solution notebook with a learner's cell added after its first answer cell."""
    nb = _notebook(name)
    first = next(
        i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("solution")
    )
    nb.cells.insert(first + 1, nbformat.v4.new_code_cell(source))
    return nb, first + 1


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_course_notebooks_are_clean(path):
    nb = nbformat.read(path, as_version=4)
    assert audit.audit_notebook(nb.cells) == []


CHEATS = {
    "replace a check": "grading.check_pingpong = lambda *a, **k: None",
    "replace quiet": (
        "class Q:\n    def __enter__(self): pass\n    def __exit__(self, *a): return True\n"
        "grading.quiet = Q"
    ),
    "alias then replace": "g = grading\ng.check_pingpong_on_engines = print",
    "alias in a tuple": "a, b = grading, 1\na.quiet = None",
    "own import of the checks": (
        "import pingpong_lab.course.grading as g\ng.check_pingpong = lambda *a, **k: None"
    ),
    "submodule": "from pingpong_lab.course.grading import trace as t\nt.check_pingpong = print",
    "setattr": "setattr(grading, 'check_pingpong', print)",
    "exec": "exec('grading.check_pingpong = print')",
    "eval": "eval('1')",
    "dunder import": "__import__('pingpong_lab').x = 1",
    "globals": "globals()['grading'] = None",
    "rebind": "grading = None",
    "rebind by import": "import fake_grading as grading",
    "rebind by def": "def cluster():\n    pass",
    "rebind by loop": "for notebook in range(2):\n    pass",
    "delete": "del grading",
    "global in a function": "def f():\n    global grading\n    grading = 1\nf()",
    "code object swap": "f = print\nf.__code__ = (lambda: 0).__code__",
    "module attribute": "import numpy\nnumpy.array_equal = lambda *a: True",
    "mpi4py attribute": "from mpi4py import MPI\nMPI.ANY_SOURCE = 1",
    "sys.modules": "import sys\nsys.modules['pingpong_lab.course.grading'] = None",
    "builtins": "import builtins\nbuiltins.print = None",
    "__builtins__": "__builtins__['AssertionError'] = Exception",
    "builtin used by tests": "print = lambda *a, **k: None",
    "ipython hook": "get_ipython().input_transformers_cleanup.append(lambda lines: [])",
    "ipython exc": "ip = get_ipython()\nip.set_custom_exc((Exception,), lambda *a: None)",
    "shell escape": "!rm -rf ../../course",
    "pip magic": "%pip install fake",
    "mock": "from unittest import mock\nmock.patch.object(grading, 'quiet').start()",
    "gc": "import gc\ngc.get_objects()",
    "gradebook": "import sqlite3\nsqlite3.connect('../../../gradebook.db')",
    "trace": "import sys\nsys.settrace(None)",
    "frames": "import sys\nsys._getframe(0).f_globals['grading'] = None",
    "importlib": "import importlib\nimportlib.reload(grading)",
    "walrus": "(g := grading).quiet = None",
    "alias in a function": "def f():\n    g = grading\n    g.quiet = None\nf()",
    "parameter": "def f(grading):\n    grading.quiet = None\nf(grading)",
}


@pytest.mark.parametrize("source", CHEATS.values(), ids=CHEATS.keys())
def test_cheats_are_found(source):
    nb, index = _with_cell(source)
    found = audit.audit_notebook(nb.cells)
    assert found, f"not found:\n{source}"
    assert all(f.cell == index for f in found)
    assert str(found[0]).startswith(f"cell {index}, line ")


FINE = {
    "re-import": (
        "import numpy as np\nfrom mpi4py import MPI\nfrom pingpong_lab.course import grading"
    ),
    "own helper": "def helper(comm):\n    return comm.Get_rank()",
    "local name": "def f():\n    grading = 1\n    return grading",
    "redefine the answer": "def pingpong(comm, sendbuf, recvbuf):\n    pass",
    "plot style": "import matplotlib.pyplot as plt\nplt.rcParams['figure.figsize'] = (8, 4)",
    "environment": "import os\nos.environ['OMP_NUM_THREADS'] = '1'",
    "comprehension": "rows = {r: r * 2 for r in range(4)}\nd = [x for x in rows]",
    "magics": "%matplotlib inline\n%timeit sum(range(10))",
    "c cell": "%%writefile other.c\nint main(void) { exec(); setattr(); return 0; }",
    "own C through ctypes": "import ctypes\nlib = ctypes.CDLL(None)\nlib.getpid()",
    "own attributes": "class Box:\n    pass\nbox = Box()\nbox.value = 3",
    "arrays": "import numpy as np\nx = np.zeros(4)\nx[0] = 1.0\nx[1:] += 2",
    "use the checks": "grading.check_pingpong(pingpong, size=2, nbytes=8)",
    "syntax error": "def broken(:\n    pass",
    "a variable named like a builtin no test reads": "sum_ = 1\nmax_rank = 3",
    # a local dict that shares its name with a course helper (05's contention_summary)
    "values computed with numpy": (
        "def f(x):\n    out = {}\n    m = float(np.median(x))\n    out[0] = {'m': m}\n"
        "    return out"
    ),
    "local container": (
        "def f(rows):\n    notebook = {}\n    notebook[1] = rows\n    return notebook"
    ),
    "results of numpy calls in a tuple": (
        "t, u = np.asarray([1.0]), np.asarray([2.0])\nd = {}\nd[0] = (t, u)\nt[0] = 3.0"
    ),
}


@pytest.mark.parametrize("source", FINE.values(), ids=FINE.keys())
def test_correct_code_is_not_flagged(source):
    nb, _ = _with_cell(source)
    assert audit.audit_notebook(nb.cells) == []


def test_tests_before_the_cell_are_not_affected_and_locked_cells_are_trusted():
    nb = _notebook()
    # the course's locked cells may do anything (05 uses __globals__ to ship a function)
    locked = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("locked"))
    locked.source += "\nsetattr(grading, 'x', 1)"
    assert audit.audit_notebook(nb.cells) == []


def test_free_names_follow_scopes():
    tree = ast.parse(
        "x = f(x)\n"
        "for i in range(n):\n    y = i + z\n"
        "def g(a, b=default):\n    return a + outer\n"
        "c = [k * m for k in ks]\n"
        "with open(p) as h:\n    h.read()\n"
    )
    expected = {"f", "x", "range", "n", "z", "default", "outer", "ks", "m", "open", "p"}
    assert audit.free_names(tree) == expected


def test_protected_names_are_what_tests_read_and_the_course_binds():
    nb = _notebook()
    names = audit.protected_names(
        [c.source for c in nb.cells if c.cell_type == "code" and cells.is_locked(c)],
        [c.source for c in nb.cells if c.cell_type == "code" and cells.is_test(c)],
    )
    assert {"grading", "cluster", "notebook", "print"} <= set(names)
    assert "pingpong" not in names  # the learner's answer
    assert names["grading"] == "pingpong_lab.course.grading"


def test_every_course_cell_that_defines_what_tests_read_is_locked():
    """Otherwise a learner could edit it (nbgrader restores locked cells only)."""
    for path in sorted((ROOT / "course" / "source").glob("*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        tests = [audit.parse(c.source) for c in code if cells.is_test(c)]
        read = set().union(*(audit.free_names(t) for t in tests if t is not None))
        for i, cell in enumerate(nb.cells):
            meta = cell.metadata.get("nbgrader", {})
            tree = audit.parse(cell.source) if cell.cell_type == "code" else None
            if tree is None or meta.get("solution") or cells.is_locked(cell):
                continue
            defines = any(
                isinstance(n, ast.Import | ast.ImportFrom | ast.FunctionDef) for n in tree.body
            )
            assert not defines, f"{path.name} cell {i} defines course code but is not locked"
            assert not set(audit.bindings(tree)) & read, f"{path.name} cell {i} is not locked"
