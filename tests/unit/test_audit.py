"""The allow-list audit: every cheat and door we know of is found, no correct answer (course,
corpus, strong-student variants) is flagged."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from pingpong_lab.course import cells
from pingpong_lab.grader import audit

from ..course.corpus import CASES, corpus_case

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = [
    *sorted((ROOT / "solutions").glob("*/*.ipynb")),
    *sorted((ROOT / "exercises").glob("*/*.ipynb")),  # the released stubs
    *sorted((ROOT / "course" / "source").glob("*/*.ipynb")),
]


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


def _found(source: str, name="01_pingpong") -> list[audit.Finding]:
    nb, index = _with_cell(source, name)
    found = audit.audit_notebook(nb.cells)
    assert all(f.cell == index for f in found), found
    return found


@pytest.mark.parametrize(
    "path",
    NOTEBOOKS,
    ids=lambda p: f"{p.parent.parent.parent.name}/{p.parent.parent.name}/{p.name}",
)
def test_course_notebooks_are_clean(path):
    nb = nbformat.read(path, as_version=4)
    assert audit.audit_notebook(nb.cells) == []
    # validation marks a test after a refused line when the next cell starts (validation.py)
    assert not cells.is_test(nb.cells[-1]), "a notebook ends with a test cell"


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
    "rebind by def": "def grading():\n    pass",
    "rebind by loop": "for grading in range(2):\n    pass",
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
    # -- the doors of the deny-list audit (the eight first)
    "object.__setattr__": "object.__setattr__(grading, 'check_pingpong', lambda *a, **k: None)",
    "a module's __dict__.update": (
        "f = lambda *a, **k: None\n"
        "grading.__dict__.update(check_pingpong=f, check_pingpong_on_engines=f)"
    ),
    "quiet replaced through vars by one that swallows failures": (
        "class Swallow:\n    def __enter__(self):\n        return self\n"
        "    def __exit__(self, *exc):\n        return True\n"
        "vars(grading)['quiet'] = Swallow"
    ),
    "vars": "vars(grading)['check_pingpong'] = print",
    "type(module).__setattr__": "type(grading).__setattr__(grading, 'check_pingpong', print)",
    "operator.setitem on __dict__": (
        "import operator\noperator.setitem(grading.__dict__, 'check_pingpong', print)"
    ),
    "functools.partial of setattr": (
        "import functools\nfunctools.partial(setattr, grading)('check_pingpong', print)"
    ),
    "operator.attrgetter": (
        "import operator\nd = operator.attrgetter('__dict__')(grading)\nd['quiet'] = print"
    ),
    "getattr __dict__": "getattr(grading, '__dict__')['quiet'] = print",
    "ctypes": "import ctypes\nctypes.pythonapi.PyObject_SetAttrString",
    "ctypes from a name": "from ctypes import pythonapi",
    "pickle": "import pickle\npickle.loads(b'cbuiltins\\nprint\\n.')",
    "marshal": "import marshal\nmarshal.loads(b'')",
    "threading": "import threading\nthreading.settrace(print)",
    "multiprocessing": "import multiprocessing",
    "os": "import os\nos.system('true')",
    "sys by another name": "import sys as system",
    "types.ModuleType": (
        "import types\nclass Sealed(types.ModuleType):\n    pass\ngrading.__class__ = Sealed"
    ),
    "inspect": "import inspect\ninspect.currentframe()",
    "subprocess": "import subprocess\nsubprocess.run(['true'])",
    "io": "import io",
    "pathlib": "from pathlib import Path\nPath('x.py').write_text('')",
    "typing (get_type_hints evaluates text)": "import typing",
    "the course's package": "from pingpong_lab.course import grading",
    "a module reached through an allowed one": (
        "import statistics\nstatistics.sys.modules['pingpong_lab.course.grading'].quiet = 1"
    ),
    "builtins through an allowed module": (
        "import dataclasses\ndataclasses.builtins.setattr(grading, 'quiet', print)"
    ),
    "numpy's ctypes interface": "np.ctypeslib.as_array",
    "an array's raw memory": "np.zeros(4).ctypes.data",
    "raw memory through MPI": "from mpi4py import MPI\nMPI.buffer.fromaddress(id(grading), 64)",
    "pickles through numpy": "np.load('x.npy', allow_pickle=True)",
    "format-string attribute lookup": "'{0.__class__}'.format(grading)",
    "format-string lookup in a nested field": "'{0:{1.__doc__}}'.format(1, grading)",
    "format_map": "'{g.__dict__}'.format_map({'g': grading})",
    "a dunder name as text": "A = type('A', (), {'__eq__': lambda s, o: True})",
    "type with three arguments": "A = type('A', (), {})",
    "private name": "_private = 1",
    "private attribute": "np._core",
    "__class__ assignment": "grading.__class__ = object",
    "with that swallows failures": (
        "class S:\n    def __enter__(self):\n        return self\n"
        "    def __exit__(self, *exc):\n        return True\n"
        "with S():\n    raise AssertionError('hidden')"
    ),
    "an answer equal to anything": (
        "class Anything:\n    def __eq__(self, other):\n        return True\n"
        "def pingpong(comm, sendbuf, recvbuf):\n    return Anything()"
    ),
    "a decorator that swaps a check": (
        "def swap(f):\n    grading.check_pingpong = f\n    return f\n"
        "@swap\ndef mine(*a, **k):\n    pass"
    ),
    "a metaclass": (
        "class Meta(type):\n    def __init__(cls, *args):\n        super().__init__(*args)\n"
        "class A(metaclass=Meta):\n    pass"
    ),
    "a method called with the course as self": (
        "class A:\n    def set(self, value):\n        self.check_pingpong = value\n"
        "A.set(grading, print)"
    ),
    "an attribute set on something else": "f = lambda: grading\nf().quiet = print",
    "a function that hands out a course container": (
        "def kinds():\n    return grading.cbuild.GRADED_KINDS\nkinds()[1] = 'Recv'"
    ),
    "a course container updated": "grading.cbuild.GRADED_KINDS.update({1: 'Recv'})",
    "a course container updated through dict": (
        "dict.update(grading.cbuild.GRADED_KINDS, {1: 'Recv'})"
    ),
    "a course container through an alias": (
        "kinds = grading.cbuild.GRADED_KINDS\nkinds[1] = 'Recv'"
    ),
    "a generator's frame": "def g():\n    yield\nx = g()\nx.gi_frame.f_back.f_globals",
    "star import": "from numpy import *",
    "match rebinds a name": "match 1:\n    case grading:\n        pass",
    "open": "open('../../../gradebook.db', 'wb')",
    "compile": "compile('x', 'x', 'exec')",
    "dir": "dir(grading)",
    "locals": "locals()",
    "breakpoint": "breakpoint()",
    "input": "input()",
    "help": "help(grading)",
    "delattr": "delattr(grading, 'quiet')",
    "user namespace": "get_ipython().user_ns['grading'] = None",
    "a python file written by a magic": "%%writefile sitecustomize.py\nimport os",
    # IPython, not Python: what the kernel would run is not what the text reads as
    "an automagic line whose Python the audit cannot parse": (
        "time get_ipython().input_transformers_post.append(lambda lines: ['pass'])"
    ),
    "a shell alias by automagic": "sx ls",
    "a one-word automagic that turns on autocall": "autocall",
    "a one-word automagic that floods the namespace": "pylab",
    "a one-word automagic that prints the environment": "env",
    "an expression in a C cell's file name": "%%writefile {grading.__dict__.clear()}.c\nint x;",
    "a variable in a C cell's file name": "%%writefile $name.c\nint x;",
    "a magic that re-enables automagic": "%config InteractiveShell.automagic = True",
    # %time and %timeit parse their own options: what follows runs unread
    "%time with an option before code": "%time --n exec('grading.quiet = print')",
    "%time with an option after code": "%time d = notebook --n\nd.clear()",
    "%%timeit saving into a name": "%%timeit -n1 -r1 -v tr exec('x')\npass",
    "%time of text that is not Python": "%time grading.quiet = (",
    "mpi4py's own unpickler": "MPI.Pickle().loads(b'x')",
    "code inside %time": "%time grading.check_pingpong = print",
    "code inside %%timeit": "%%timeit -n 1\ngrading.quiet = print",
    "a backend by path": "%matplotlib module://evil",
    "capture magic": "%%capture\nprint(1)",
    "env magic": "%env PINGPONG_LAB_GRADING=0",
    "load_ext magic": "%load_ext autoreload",
    "config magic": "%config InteractiveShell.ast_transformers = []",
    "a property's setter with the course as self": (
        "class A:\n    @property\n    def p(self):\n        return 1\n"
        "    @p.setter\n    def p(self, value):\n        self.check_pingpong = value\n"
        "A.p.fset(grading, print)"
    ),
    "a misspelled module": "import nunpy as np",
    "a relative import": "from . import grading as g",
}


@pytest.mark.parametrize("source", CHEATS.values(), ids=CHEATS.keys())
def test_cheats_are_found(source):
    nb, index = _with_cell(source)
    found = audit.audit_notebook(nb.cells)
    assert found, f"not found:\n{source}"
    assert all(f.cell == index for f in found)
    assert str(found[0]).startswith(f"cell {index}, line ")


# Names the course imports for its own cells from modules a learner may not import: only those
# cells' uses of them pass.
COURSE_NAMES = {
    # 00 no longer imports os for its own cells: a learner's import of it is refused
    "os.environ (00)": ("00_setup", "import os\nos.environ['PINGPONG_LAB_GRADING'] = '0'"),
    "os.system (00)": ("00_setup", "import os\nos.system('true')"),
    "os itself (00)": ("00_setup", "import os as o"),
    "Path.write_text (01)": ("01_pingpong", "Path('sitecustomize.py').write_text('')"),
    "a Path kept (01)": ("01_pingpong", "p = Path('x')"),
    "sys.modules (05)": ("05_contention", "sys.modules.clear()"),
    "subprocess.Popen (05)": ("05_contention", "subprocess.Popen(['true'])"),
    # a program runs code no audit reads (it could reach the kernel over its own ports)
    "subprocess.run (05)": ("05_contention", "subprocess.run([sys.executable, '-c', 'pass'])"),
}


@pytest.mark.parametrize("case", COURSE_NAMES.values(), ids=COURSE_NAMES.keys())
def test_the_courses_own_imports_are_usable_only_as_its_cells_use_them(case):
    name, source = case
    assert _found(source, name)


FINE = {
    "re-import": "import numpy as np\nfrom mpi4py import MPI",
    "own helper": "def helper(comm):\n    return comm.Get_rank()",
    "local name": "def f():\n    grading = 1\n    return grading",
    "redefine the answer": "def pingpong(comm, sendbuf, recvbuf):\n    pass",
    "plot style": "import matplotlib.pyplot as plt\nplt.rcParams['figure.figsize'] = (8, 4)",
    "plot style at once": "import matplotlib as mpl\nmpl.rcParams.update({'font.size': 9})",
    "comprehension": "rows = {r: r * 2 for r in range(4)}\nd = [x for x in rows]",
    "magics": "%matplotlib inline\n%timeit sum(range(10))",
    "cell magics on clean code": "%%time\ntotal = sum(range(10))",
    "help on a name": "np.polyfit?",
    "c cell": "%%writefile other.c\nint main(void) { exec(); setattr(); return 0; }",
    "own attributes": (
        "class Box:\n    def __init__(self, value):\n        self.value = value\n"
        "    def bump(self):\n        self.value += 1\nbox = Box(3)\nbox.bump()"
    ),
    "arrays": "import numpy as np\nx = np.zeros(4)\nx[0] = 1.0\nx[1:] += 2",
    "use the checks": "grading.check_pingpong(pingpong, size=2, nbytes=8)",
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
    "a parameter named like a refused builtin": "def f(input, dir=1):\n    return input[dir]",
}

# How a strong student writes the answers: every form must pass.
STRONG = {
    "numpy, vectorised": (
        "def timer_resolution(clock, n=20000):\n"
        "    t = np.fromiter((clock() for _ in range(n)), dtype=float, count=n)\n"
        "    d = np.diff(t)\n"
        "    d = d[d > 0]\n"
        "    return float(d.min()) if d.size else math.inf"
    ),
    "list comprehension, f-string, lambda, sorted": (
        "rows = [{'rank': r, 't': 1.0 / (r + 1)} for r in range(4)]\n"
        "rows = sorted(rows, key=lambda row: row['t'])\n"
        "print(f\"{rows[0]['rank']:>4d} {rows[0]['t']:.3e} {len(rows)=}\")"
    ),
    "nested functions with nonlocal": (
        "def counter():\n    count = 0\n    def bump():\n        nonlocal count\n"
        "        count += 1\n        return count\n    return bump\nc = counter()\nc()"
    ),
    "a class of one's own": (
        "class Samples:\n"
        "    unit = 1e-6\n"
        "    def __init__(self, values=None):\n        self.values = list(values or [])\n"
        "    def __repr__(self):\n        return f'Samples({len(self.values)})'\n"
        "    def __str__(self):\n        return repr(self)\n"
        "    def add(self, value):\n        self.values.append(value)\n        return self\n"
        "    @property\n    def median(self):\n        return float(np.median(self.values))\n"
        "    @staticmethod\n    def scale(x):\n        return x * Samples.unit\n"
        "    @classmethod\n    def of(cls, xs):\n        return cls(xs)\n"
        "s = Samples.of([3.0, 1.0]).add(2.0)\nprint(s, s.median, Samples.scale(2))"
    ),
    "a subclass calling super": (
        "class Base:\n    def __init__(self, n):\n        self.n = n\n"
        "class Child(Base):\n    def __init__(self, n):\n        super().__init__(n)\n"
        "        self.twice = 2 * n\nChild(3)"
    ),
    "a dataclass": (
        "from dataclasses import dataclass, field\n"
        "@dataclass\nclass Row:\n    nbytes: int\n    t: float = 0.0\n"
        "    tags: list = field(default_factory=list)\n"
        "    def __post_init__(self):\n        self.t = float(self.t)\n"
        "Row(8, 1e-6)"
    ),
    "try, except, finally, raise from": (
        "def parse(x):\n    try:\n        return float(x)\n    except ValueError as exc:\n"
        "        raise ValueError(f'not a number: {x!r}') from exc\n    finally:\n"
        "        pass\n"
        "try:\n    parse('a')\nexcept ValueError as exc:\n"
        "    print(type(exc).__name__, exc, isinstance(exc, ValueError))"
    ),
    "with on the course's and numpy's context managers": (
        "with grading.quiet():\n    print('checked')\n"
        "with np.errstate(divide='ignore'):\n    r = np.float64(1.0) / 0.0"
    ),
    "MPI: IN_PLACE, Allreduce, requests": (
        "from mpi4py import MPI\n"
        "def agree(comm, value):\n    buf = np.asarray([value], dtype=np.float64)\n"
        "    comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.MAX)\n    return float(buf[0])\n"
        "def exchange(comm, sendbuf, recvbuf):\n"
        "    if comm.Get_rank() == 0:\n"
        "        reqs = [comm.Isend([sendbuf, MPI.BYTE], dest=1, tag=0),\n"
        "                comm.Irecv([recvbuf, MPI.BYTE], source=MPI.ANY_SOURCE, tag=0)]\n"
        "        MPI.Request.Waitall(reqs)\n"
        "    t0 = MPI.Wtime()\n    return MPI.Wtime() - t0"
    ),
    "unpacking": (
        "first, *rest = [1, 2, 3]\n(a, b), c = (1, 2), 3\nd = {**{'x': 1}, 'y': 2}\n"
        "def f(*args, **kwargs):\n    return len(args), sorted(kwargs)\nf(*rest, **d)"
    ),
    "builtins": (
        "xs = [3.0, -1.0, 2.0]\n"
        "print(len(xs), range(3), min(xs), max(xs), sum(xs), abs(xs[1]), round(xs[0], 1))\n"
        "print(list(enumerate(xs)), list(zip(xs, xs)), sorted(xs), list(reversed(xs)))\n"
        "print(float('1'), int(2.0), str(3), dict(a=1), set(xs), tuple(xs), bool(xs))\n"
        "print(any(xs), all(xs), list(map(abs, xs)), list(filter(None, xs)), divmod(7, 2))\n"
        "print(isinstance(xs, list), pow(2, 3), next(iter(xs)), hasattr(xs, 'append'))\n"
        "print(memoryview(bytearray(4)).nbytes, bytes(2), repr(xs), format(1.5, '.2f'))"
    ),
    "time, statistics, collections, itertools": (
        "import time, statistics, itertools\nfrom collections import Counter, defaultdict\n"
        "t0 = time.perf_counter()\nm = statistics.median([1, 3, 2])\n"
        "groups = defaultdict(list)\ngroups[8].append(1.0)\n"
        "Counter('aab').most_common(1)\n"
        "pairs = list(itertools.combinations(range(4), 2))\n"
        "elapsed = time.perf_counter() - t0"
    ),
    "annotations": (
        "def mean(xs: list[float], default: float | None = None) -> float | None:\n"
        "    return sum(xs) / len(xs) if xs else default\nlimit: int = 3"
    ),
    "match": (
        "def kind(x):\n    match x:\n        case {'rank': r}:\n            return r\n"
        "        case [first, *_]:\n            return first\n        case _:\n"
        "            return None"
    ),
    "generators and walrus": (
        "def sizes(top):\n    n = 1\n    while (n := n * 2) <= top:\n        yield n\n"
        "big = [s for s in sizes(1024) if (h := s // 2) > 8]"
    ),
    "a module-level counter of one's own": (
        "count = 0\ndef bump():\n    global count\n    count += 1\nbump()"
    ),
    "format strings with public fields": (
        "'{0.real:.2f} {1[0]} {name:>8}'.format(1.5, [1], name='x')"
    ),
    "math and numpy submodules": (
        "import math\nfrom numpy.linalg import lstsq\nimport numpy.random as npr\n"
        "rng = np.random.default_rng(0)\nx = rng.random(5)\n"
        "A = np.column_stack([np.ones(5), x])\n(a, b), *_ = lstsq(A, x, rcond=None)\n"
        "ok = math.isfinite(a) and math.isclose(b, 1.0)"
    ),
    "a plot": (
        "import matplotlib.pyplot as plt\nfrom matplotlib.ticker import EngFormatter\n"
        "fig, ax = plt.subplots(figsize=(4, 3))\nax.loglog([1, 2], [3, 4], 'o-', label='t')\n"
        "ax.set(xlabel='bytes', ylabel='s')\nax.xaxis.set_major_formatter(EngFormatter())\n"
        "ax.legend()\nfig.tight_layout()\nplt.close(fig)"
    ),
    "own containers changed in place": (
        "rows = []\nrows.append((8, 1.0))\nrows.sort(key=lambda r: r[0])\n"
        "seen = dict.fromkeys([8, 16], 0)\nseen.update({8: 1})\nheavy = np.ones(4)\n"
        "heavy[heavy > 0] *= 8\nkept = {}\nkept.setdefault('a', []).append(1)"
    ),
}


@pytest.mark.parametrize("source", [*FINE.values(), *STRONG.values()], ids=[*FINE, *STRONG])
def test_correct_code_is_not_flagged(source):
    nb, _ = _with_cell(source)
    assert audit.audit_notebook(nb.cells) == []


@pytest.mark.parametrize("case", CASES, ids=["/".join(c) for c in CASES])
def test_every_corpus_submission_passes_the_audit(case):
    """The corpus's variants (full marks) and shortcuts (lose their part, not more)."""
    student, name = case
    solution = ROOT / "solutions" / name / f"{name}.ipynb"
    nb = nbformat.reads(json.dumps(corpus_case(student, name, solution)), as_version=4)
    assert audit.audit_notebook(nb.cells) == []


@pytest.mark.parametrize(
    "source",
    ["def broken(:\n    pass", "time grading.check_pingpong = print", "%%writefile x{1}.c\nint x;"],
)
def test_a_cell_the_audit_cannot_read_is_refused_as_unreadable(source):
    """Grading never sends such a cell to the kernel (CrashTolerantExecute), so it costs only
    what it should have defined; its finding says so and names the line."""
    found = _found(source)
    assert len(found) == 1 and found[0].unreadable, found
    assert found[0].line == 1 and found[0].code in source


@pytest.mark.parametrize(
    "source",
    [
        "import time\ntime.sleep(0)",  # a module named like a magic, used as Python
        "time = 3",
        "who = [1, 2]\nwho",
        "%time x = sum(range(10))",
        "%timeit -n 10 -r 3 sum(range(10))",
        "%%timeit -n1 -r2\nsum(range(10))",
        "%%writefile bench.c\nint x;",
        "%%writefile -a util.h\nint y;",
    ],
)
def test_python_and_magics_named_like_magics_are_readable(source):
    assert _found(source) == []


def test_the_audit_reads_what_a_kernel_with_automagic_off_runs():
    """Every kernel of the course starts with automagic off, so a one-line cell runs as the
    Python the audit reads; the magic names the audit knows are the kernel's."""
    assert "--InteractiveShell.automagic=False" in audit.KERNEL_ARGS
    assert {"time", "env", "autocall", "pylab", "sx", "ls", "config"} <= audit.line_magic_names()
    # ipykernel's, read in another process: importing it here changes how tqdm draws bars
    show = "from ipykernel.zmqshell import KernelMagics as K; print(*K.magics['line'])"
    proc = subprocess.run([sys.executable, "-c", show], capture_output=True, text=True)
    assert proc.returncode == 0 and set(proc.stdout.split()) <= audit.line_magic_names()


def test_a_refusal_names_the_line_what_and_what_to_do_instead():
    found = _found("x = 1\n\nimport os")
    assert [(f.line, f.code) for f in found] == [(3, "import os")]
    why = found[0].why
    assert "imports `os`" in why and "no answer here needs" in why
    assert "A cell may import:" in why and "numpy" in why
    assert "Did you mean `numpy`?" in _found("import nunpy")[0].why
    assert "isinstance" in _found("t = type(1)")[0].why
    assert "Rename it" in _found("_cache = {}")[0].why


def test_a_refusal_inside_a_cell_magic_names_the_line_of_the_cell():
    found = _found("%%timeit -n 1\nx = 1\nvars()")
    assert [f.line for f in found] == [3]
    assert found[0].code == "vars()"


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
    assert {"grading", "print", "range"} <= set(names)
    assert "cluster" not in names  # no test reads the learner's engines any more (fresh ranks)
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
