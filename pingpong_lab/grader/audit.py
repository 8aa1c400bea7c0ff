"""Does a submission change the grader? A static allow-list audit of the cells a learner edits.

nbgrader runs a learner's cells and the test cells in one Python process, so a learner's cell
could replace what a test cell relies on: `grading.check_pingpong = lambda *a, **k: None`, a
`quiet()` whose `__exit__` swallows the failure, an IPython hook that rewrites later cells. No
check inside that process can be trusted once such code has run. This audit runs in the
grader's own process instead (`AuditSubmission` in preprocessors.py, during `nbgrader
autograde`; validation.py and the lab's Validate button run it too), reads the learner's cells
without running them, and reports every line that steps outside what the course's answers use.

It is an allow-list, not a list of known tricks: a deny-list of names (`setattr`, `sys.modules`,
...) was walked around by short cheats through other doors of the standard library
(`object.__setattr__`, `grading.__dict__.update`, `vars`, `operator.setitem`, `ctypes`, ...).
What a learner's cell may do:

- import only the modules in ALLOWED_MODULES (what the answers need, each with its reason);
- use no name or attribute that starts with `_` (`x.__dict__`, `__class__`, `__import__`,
  `_private`): every door into the interpreter's machinery has such a name. Two exceptions:
  `_` as a throwaway variable, and reading `.__name__` (the course prints `type(exc).__name__`).
  The same holds inside format strings (`"{0.__class__}".format(x)`) and for string constants
  that spell a dunder name (`type("X", (), {"__eq__": ...})`). A learner's class may define
  `__init__`, `__post_init__`, `__repr__` and `__str__`, no other special method (an `__eq__`
  that is always True would pass any `assert answer == expected`);
- use every builtin but those that reach into namespaces or run code from text
  (REFUSED_BUILTINS: `getattr`, `vars`, `eval`, `open`, ...); `type(x)` only as
  `type(x).__name__` or in a comparison;
- set attributes only on `self` inside its own classes' methods, and change items only of its
  own containers: never of a name the course's locked cells bind, of a module, or of an alias
  of one (`g = grading; g.quiet = ...`), and never call a container's mutating method (`update`,
  `append`, ...) on one of those, or through a class (`dict.update(course_dict, ...)`);
- not rebind a name the tests read from the notebook (`grading`, `notebook`, `np`, builtins
  such as `print`), as the deny-list audit did;
- reach no module outside the allow-list through an attribute (`statistics.sys`,
  `np.ctypeslib`, DOOR_ATTRIBUTES), no frame (`gen.gi_frame.f_globals`) and no raw memory
  (`arr.ctypes`, `MPI.buffer.fromaddress`), and load no pickle (`allow_pickle=`);
- use the names the course imports for its own cells (`os`, `sys`, `subprocess`, `Path`) only
  as those cells do (COURSE_ONLY_USES);
- use IPython only for `%matplotlib <backend>`, `%time`/`%timeit` (whose code is audited too),
  `obj?` help, and `%%writefile` of a C source (C cells are not Python and are not read).

No answer of the course needs anything else: a test runs the audit on every cell of every
solution and exercise notebook, and on strong-student variants of the answers, so a correct
answer is never flagged. docs/GRADING.md gives the threat model: what this stops, and what it
cannot (a learner who reads the hidden tests, code that escapes the sandbox).

Why not RestrictedPython. Its `compile_restricted` was tried on this course (version 9.0): as a
compile-time check it refuses names and attributes that start with `_`, `exec`/`eval` calls and
some syntax, and nothing else on its own: `setattr`, `getattr`, `vars`, imports, stores into
modules and format-string lookups are left to guards it installs when it runs the code itself
(`_getattr_`, `_write_`, safe builtins), and nbgrader runs the notebook in a plain kernel. It
also refused two correct course cells (`type(exc).__name__`; `heavy[mask] *= 8`, an augmented
item assignment of a numpy array) and ordinary Python a strong student writes (`x: float = 1`,
`nonlocal`, `match`), and it let `def __eq__(self, other): return True` through. Its one rule
that helps (underscores) is a few lines here, so the audit stays a focused AST allow-list with
no new dependency.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import functools
import re
import string
from dataclasses import dataclass, replace
from types import SimpleNamespace

from ..course.cells import is_c_cell, is_locked, is_test

# -- what a learner's cell may import ---------------------------------------------------------
# Each entry: the reason a course answer (or a strong student's way of writing it) needs it. The
# solutions themselves import only `math`; the course's locked cells bind numpy, mpi4py's MPI,
# matplotlib.pyplot, time and math, and learners re-import those in their own cells.
ALLOWED_MODULES = {
    "numpy": "arrays, statistics and fits in every notebook (the course imports it as np)",
    "numpy.linalg": "least squares for the model fits of 04 (np.linalg.lstsq)",
    "numpy.random": "seeded samples and bootstrap draws in 03 (np.random.default_rng)",
    "numpy.polynomial": "polynomial fits, another way to write 04's fits",
    "math": "math.inf, math.ceil, math.comb in the solutions of 02 and 03",
    "statistics": "median and quantiles of timing samples in plain Python (03)",
    "time": "time.perf_counter, the clock 02 compares with MPI.Wtime",
    "mpi4py.MPI": "MPI.MAX, MPI.IN_PLACE, MPI.ANY_SOURCE, requests: every MPI answer",
    "matplotlib": "matplotlib.rcParams, to style one's own plots",
    "matplotlib.pyplot": "one's own plots of the measurements",
    "matplotlib.ticker": "axis formatters for byte sizes on one's own plots",
    "collections": "Counter, defaultdict, namedtuple to group samples by size or pair",
    "itertools": "pairs, products and running sums over sweeps",
    "dataclasses": "a small record type for one's own results",
}
# Everything else is refused. On purpose, among others: ctypes, pickle, marshal (run or write
# anything in the process), operator, functools (setattr/setitem without the syntax the audit
# reads), threading, multiprocessing (code running beside the tests), os, sys, importlib,
# builtins, gc, inspect, types (the interpreter's machinery), typing (get_type_hints evaluates
# text), unittest (mock.patch), sqlite3 (the gradebook), subprocess, io, pathlib (files; the
# course's cells use `os`, `sys`, `subprocess` and `Path` themselves: COURSE_ONLY_USES).
# Modules a learner might reach for, and what to do instead (the message says it).
INSTEAD = {
    "os": "the course's cells already ask the machine what they need (notebook.usable_cores())",
    "sys": "print() writes where the notebook shows it",
    "subprocess": "the course's cells run the command-line tools where a notebook needs them",
    "pathlib": "the course's cells read the files a notebook needs",
    "io": "keep the data in variables or numpy arrays",
    "shutil": "the course's cells manage files",
    "typing": "annotations need no import: write list[float], dict[int, float], float | None",
    "random": "use np.random.default_rng(seed)",
    "functools": "write a small function (def or lambda) instead",
    "operator": "write the operation itself (a + b, d[k] = v on your own dict, lambda)",
    "ctypes": "C code of yours runs on the MPI engines through the course's compile_c",
    "pingpong_lab": "use the names the course's cells bound (grading, notebook, ...)",
}

# -- attributes that lead out of the allowed modules ------------------------------------------
# Public attributes of allowed modules (and of the course's) that are modules a learner may not
# import (found by walking numpy, matplotlib, statistics, dataclasses, ...), frames and code,
# raw memory, and pickles.
DOOR_ATTRIBUTES = {
    **dict.fromkeys(
        (
            "builtins sys os importlib inspect functools operator threading types subprocess "
            "pickle marshal gc ctypeslib f2py lib testing core distutils extbuild unittest "
            "pathlib shutil io tempfile"
        ).split(),
        "leads to a module that no answer here needs: use the functions of the module you imported",
    ),
    **dict.fromkeys(
        (
            "gi_frame gi_code cr_frame cr_code ag_frame ag_code f_globals f_locals f_back "
            "f_builtins f_code tb_frame tb_next co_code"
        ).split(),
        "leads to the interpreter's frames and code: no answer here needs them",
    ),
    **dict.fromkeys(
        "ctypes fromaddress as_strided".split(),
        "reaches raw memory of the Python process: use numpy arrays and slices",
    ),
    # mpi4py's own (un)pickler, apart from the one its lower-case calls use while grading
    "Pickle": "loads pickles, which can run code while they load: send and receive plain data",
}

# -- builtins ---------------------------------------------------------------------------------
# Every builtin may be used except these (each with what to do instead). `memoryview` stays:
# it reaches nothing a numpy array does not, and MPI buffers are often passed as one. `super`
# stays: a learner's class may extend another. `type` is allowed as `type(x).__name__` and in
# comparisons only (see _CellAudit._type_use).
_BY_NAME = "reaches objects by names given as text, around the checks on what a cell changes"
_FROM_TEXT = "runs code given as text, which no check can read"
_UNATTENDED = "waits for someone at the keyboard, and a graded notebook runs unattended"
REFUSED_BUILTINS = {  # name -> (why, what to do instead)
    "getattr": (_BY_NAME, "read the attribute directly (obj.name)"),
    "setattr": (_BY_NAME, "set attributes on self in your own class's methods"),
    "delattr": (_BY_NAME, "leave the attribute as it is"),
    "vars": (_BY_NAME, "keep your values in a dict of your own"),
    "globals": (_BY_NAME, "use the variable by its name"),
    "locals": (_BY_NAME, "use the variable by its name"),
    "dir": (_BY_NAME, "read the documentation with `obj?` in a scratch cell"),
    "eval": (_FROM_TEXT, "write the expression as code"),
    "exec": (_FROM_TEXT, "write the statements as code"),
    "compile": (_FROM_TEXT, "write the statements as code"),
    "open": ("it reads and writes files", "no answer needs to; the course's cells do that"),
    "breakpoint": (_UNATTENDED, "debug in a scratch cell and remove it before submitting"),
    "input": (_UNATTENDED, "use a variable"),
    "help": (_UNATTENDED, "use `obj?` in a scratch cell"),
    "exit": ("it ends the kernel the tests run in", "let the cell end"),
    "quit": ("it ends the kernel the tests run in", "let the cell end"),
}
# Special methods a learner's own class may define: construction and printing only.
ALLOWED_DUNDER_METHODS = frozenset({"__init__", "__post_init__", "__repr__", "__str__"})
# Underscore attributes that may be read: a name is only a string.
ALLOWED_DUNDER_READS = frozenset({"__name__"})
# Names the course imports for its own (unlocked) cells from modules a learner may not import,
# and the only attributes those cells use. `pathlib.Path` is called first: Path(f).read_text().
COURSE_ONLY_USES = {
    "os": frozenset({"cpu_count"}),
    "sys": frozenset({"executable"}),
    # none: a program it starts runs code no audit reads (05's run of the command-line sweep
    # is a locked cell)
    "subprocess": frozenset(),
    "pathlib.Path": frozenset({"read_text"}),  # 01, 02 read the learner's C file to compile it
}
# Methods that change a container in place: never on the course's objects.
MUTATORS = frozenset(
    "append extend insert remove pop popitem clear update setdefault add discard sort reverse "
    "difference_update intersection_update symmetric_difference_update".split()
)
# Builtins whose result is (or holds) what they are given: `next(iter([grading]))`.
PASS_THROUGH = frozenset(
    "next iter max min reversed sorted list tuple filter map enumerate zip".split()
)
BUILTIN_CONTAINERS = frozenset({"dict", "list", "set", "bytearray", "object", "type"})
# Items of a module a learner may change: plot styling. No test reads it.
ALLOWED_STORE_TARGETS = frozenset({"plt.rcParams", "matplotlib.rcParams", "mpl.rcParams"})
# IPython magics a learner's cell may use (the course's own cells use these).
ALLOWED_MAGICS = frozenset({"matplotlib", "time", "timeit", "pinfo", "pinfo2"})
MATPLOTLIB_BACKEND = re.compile(r"^\s*(?:[a-z][a-z0-9]*)?\s*$")
DOTTED_NAME = re.compile(r"^\s*[A-Za-z][A-Za-z0-9]*(?:\.[A-Za-z][A-Za-z0-9_]*)*\s*$")
DUNDER_TEXT = re.compile(r"^__\w+__$")


@dataclass(frozen=True)
class Finding:
    """One place in one cell: `cell` is the notebook cell index, `line` the line in it."""

    cell: int
    line: int
    code: str
    why: str
    # the kernel would run this cell in a way the audit cannot read (not Python after IPython's
    # transformations, or Python inside a magic's line): grading does not run it at all
    unreadable: bool = False

    def __str__(self) -> str:
        return f"cell {self.cell}, line {self.line}: `{self.code}` {self.why}"


def to_python(source: str) -> str:
    """A cell's source as the Python the kernel runs: IPython's input transformations (magics,
    `!cmd`, `name?` turned into calls), as in a kernel started with automagic off (grading and
    the student lab start theirs so: KERNEL_ARGS)."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


# How every kernel of the course is started (grading, Validate, the student lab): with
# automagic on, IPython runs a one-line cell whose first word names a magic (`time ...`,
# `env`, `autocall`) as that magic, depending on the names the kernel holds at that moment;
# off, a cell runs as the Python that to_python gives, which is what the audit reads. No history
# database is written either (nothing of one kernel is kept for the next).
KERNEL_ARGS = ("--InteractiveShell.automagic=False", "--HistoryManager.enabled=False")
# `%%writefile <name>`: IPython evaluates `{expr}` and `$name` in a magic's line as Python
MAGIC_LINE_EXPANSION = re.compile(r"[{}$]")


# ipykernel's own line magics (ipykernel.zmqshell.KernelMagics; importing it here would make
# tqdm and others take this process for a notebook kernel)
IPYKERNEL_LINE_MAGICS = {
    *("autosave", "clear", "connect_info", "edit", "less", "man", "more", "qtconsole"),
    "subshell",
}


@functools.cache
def line_magic_names() -> frozenset[str]:
    """The line magics (and shell aliases) of an IPython kernel: IPython's and ipykernel's."""
    from IPython.core import magics
    from IPython.core.alias import default_aliases
    from IPython.core.magic import Magics

    names = {alias for alias, _ in default_aliases()} | IPYKERNEL_LINE_MAGICS
    for cls in (getattr(magics, n) for n in dir(magics)):
        if isinstance(cls, type) and issubclass(cls, Magics) and hasattr(cls, "magics"):
            names |= set(cls.magics.get("line", {}))
    return frozenset(names)


def unreadable(source: str) -> Finding | None:
    """Why the kernel would run this cell in a way the audit cannot read, or None.

    A cell that is not Python after IPython's transformations is not run by the kernel either
    when automagic is off (a SyntaxError), but grading does not rely on how the kernel was
    started: it never sends such a cell. The first line of a `%%writefile` cell is evaluated
    by IPython where it holds `{...}` or `$name`."""
    stripped = source.lstrip("\n")
    first = stripped.split("\n", 1)[0]
    offset = len(source) - len(stripped)
    line = source[:offset].count("\n") + 1
    if first.lstrip().startswith("%") and MAGIC_LINE_EXPANSION.search(first):
        return Finding(
            0,
            line,
            first.strip()[:80],
            "has `{...}` or `$` in a magic's line, which IPython evaluates as Python before the "
            "magic runs: write the file name as it is (`%%writefile bench.c`)",
            unreadable=True,
        )
    if is_c_cell(source) or not source.strip():
        return None
    try:
        ast.parse(to_python(source))
    except SyntaxError as exc:
        where = exc.lineno or 1
        lines = source.splitlines()
        code = lines[where - 1].strip() if 0 < where <= len(lines) else ""
        return Finding(
            0,
            where,
            code[:80],
            f"is not Python the grader can read ({exc.msg}), so this cell was not run: fix the "
            "line (a magic is written with its `%`: `%time f(x)`, not `time f(x)`)",
            unreadable=True,
        )
    return None


def automagic_line(source: str, bound: set[str]) -> str | None:
    """The magic a one-line cell would run if the kernel had automagic on (`env`, `autocall`,
    `time f()`), unless its first word is a name the notebook binds; else None."""
    lines = [line for line in source.strip().splitlines() if line.strip()]
    if len(lines) != 1:
        return None
    match = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)(?:\s|$)", lines[0])
    if not match or match.group(1) in bound or match.group(1) not in line_magic_names():
        return None
    rest = lines[0][match.end() :].lstrip()
    if rest[:1] in ("=", "(", "[", ".", ",") or rest[:2] in ("+=", "-=", "*=", "/="):
        return None  # Python: `time = 3`, `time(...)`: IPython's automagic leaves it alone
    return match.group(1)


def bindings(tree: ast.AST) -> dict[str, str | None]:
    """Top-level names a cell binds -> the module they import ("numpy"), None for the rest."""
    names: dict[str, str | None] = {}
    for node in _top_level(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names[node.id] = None
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names[node.name] = None
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                names[_bound(alias)] = _origin(node, alias)
    return names


def _bound(alias: ast.alias) -> str:
    return (alias.asname or alias.name).split(".")[0]


def _origin(node: ast.Import | ast.ImportFrom, alias: ast.alias) -> str:
    """What an import binds: `import numpy as np` -> numpy, `from a import b` -> a.b."""
    if isinstance(node, ast.ImportFrom):
        return f"{'.' * node.level}{node.module or ''}.{alias.name}"
    return alias.name if alias.asname else alias.name.split(".")[0]


def imported_names(tree: ast.AST) -> set[str]:
    """Names that any import in the cell binds (modules and names from modules)."""
    return {
        _bound(alias)
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }


def free_names(tree: ast.Module) -> set[str]:
    """Names a cell reads before (or without) binding them itself: what it takes from earlier
    cells. Function, lambda and comprehension scopes keep their own names."""
    free: set[str] = set()
    _scan(tree.body, set(), free)
    return free


def _scan(statements, bound: set[str], free: set[str]) -> None:
    for stmt in statements:
        if isinstance(stmt, ast.For | ast.AsyncFor):
            free |= _loads(stmt.iter) - bound
            bound |= _stores(stmt.target)
            _scan(stmt.body + stmt.orelse, bound, free)
        elif isinstance(stmt, ast.While | ast.If):
            free |= _loads(stmt.test) - bound
            _scan(stmt.body + stmt.orelse, bound, free)
        elif isinstance(stmt, ast.With | ast.AsyncWith):
            for item in stmt.items:
                free |= _loads(item.context_expr) - bound
                if item.optional_vars is not None:
                    bound |= _stores(item.optional_vars)
            _scan(stmt.body, bound, free)
        elif isinstance(stmt, ast.Try):
            _scan(stmt.body, bound, free)
            for handler in stmt.handlers:
                if handler.type is not None:
                    free |= _loads(handler.type) - bound
                if handler.name:
                    bound.add(handler.name)
                _scan(handler.body, bound, free)
            _scan(stmt.orelse + stmt.finalbody, bound, free)
        else:
            free |= _loads(stmt) - bound
            bound |= _stores(stmt)


def _loads(node: ast.AST) -> set[str]:
    """Names read in node, leaving out those that a nested scope binds for itself."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        outer = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
        outer += getattr(node, "decorator_list", [])
        inner: set[str] = set()
        body = node.body if isinstance(node.body, list) else [ast.Expr(node.body)]
        _scan(body, _arguments(node.args), inner)
        return inner.union(*map(_loads, outer))
    if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
        local = set().union(*(_stores(g.target) for g in node.generators))
        parts = [g.iter for g in node.generators] + [c for g in node.generators for c in g.ifs]
        parts += [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        first = _loads(node.generators[0].iter)  # evaluated in the enclosing scope
        return first | (set().union(*map(_loads, parts[1:])) - local)
    if isinstance(node, ast.Name):
        return {node.id} if isinstance(node.ctx, ast.Load) else set()
    return set().union(*map(_loads, ast.iter_child_nodes(node)))


def _stores(node: ast.AST) -> set[str]:
    """Names a statement binds in its own scope."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {_bound(alias) for alias in node.names}
    if isinstance(node, ast.Name):
        return {node.id} if isinstance(node.ctx, ast.Store | ast.Del) else set()
    if isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
        return {node.name} | set().union(*map(_stores, ast.iter_child_nodes(node)))
    if isinstance(node, ast.MatchMapping) and node.rest:
        return {node.rest} | set().union(*map(_stores, ast.iter_child_nodes(node)))
    if isinstance(node, ast.Lambda | ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
        return set()
    return set().union(*map(_stores, ast.iter_child_nodes(node)))


def _arguments(args: ast.arguments) -> set[str]:
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {a.arg for a in every if a is not None}


def _top_level(tree: ast.AST):
    """Nodes of the module scope (function and class bodies left out, their names kept)."""
    todo = list(ast.iter_child_nodes(tree))
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        todo.extend(ast.iter_child_nodes(node))


def _roots(node: ast.AST) -> set[str]:
    """The names an object expression starts from: `a.b[c].d` -> {a}, `(g := a).x` -> {g, a},
    `f(a).c` -> {f, a}."""
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Starred):
        node = node.value
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.NamedExpr):
        return {node.target.id} | _roots(node.value)
    if isinstance(node, ast.Call):
        return _roots(node.func).union(*map(_roots, node.args))
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return set().union(*map(_roots, node.elts))
    if isinstance(node, ast.Dict):
        return set().union(*(_roots(v) for v in node.values if v is not None))
    if isinstance(node, ast.IfExp | ast.BoolOp):
        parts = [node.body, node.orelse] if isinstance(node, ast.IfExp) else node.values
        return set().union(*map(_roots, parts))
    if isinstance(node, ast.Lambda):
        return _roots(node.body)
    return set()


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _refers_to(value: ast.AST, names: set[str], hand_out: set[str] = frozenset()) -> bool:
    """True when `value` is one of `names`, reached from one, or a container holding one.

    A call's result counts only when a builtin that hands back what it is given is called on
    one of `names` (`next(iter([grading]))`, `max(...)`), or the call is of a function in
    `hand_out` (a learner's function that returns `grading.x`): `t = notebook.run(...)` is a
    measurement and `float(np.median(x))` a number, not a handle on the grader."""
    parts: list = []
    if isinstance(value, ast.Tuple | ast.List | ast.Set):
        parts = value.elts
    elif isinstance(value, ast.Dict):
        parts = [v for v in value.values if v is not None]
    elif isinstance(value, ast.IfExp):
        parts = [value.body, value.orelse]
    elif isinstance(value, ast.BoolOp):
        parts = value.values
    elif isinstance(value, ast.Lambda):
        parts = [value.body]
    if parts:
        return any(_refers_to(p, names, hand_out) for p in parts)
    base = value
    while isinstance(base, ast.Attribute | ast.Subscript | ast.Starred):
        base = base.value
    if isinstance(base, ast.Call):
        direct = {a for arg in base.args if not isinstance(arg, ast.Call) for a in _roots(arg)}
        if not isinstance(base.func, ast.Name):
            return False
        func = base.func.id
        return (func in PASS_THROUGH and bool(direct & names)) or func in hand_out
    return bool(_roots(value) & names)


def _format_fields(text: str):
    """The field names of a format string, nested ones included; none if it is not one."""
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        return
    for _, field, spec, _ in parsed:
        if field is not None:
            yield field
        if spec and "{" in spec:
            yield from _format_fields(spec)


def _close_module(name: str) -> str:
    known = sorted({m.split(".")[0] for m in ALLOWED_MODULES})
    close = difflib.get_close_matches(name.split(".")[0], known, n=1)
    return f" Did you mean `{close[0]}`?" if close else ""


def _allowed_list() -> str:
    return ", ".join(sorted({m.split(".")[0] for m in ALLOWED_MODULES}))


def _why_import(module: str) -> str:
    top = module.split(".")[0]
    if not module or module.startswith("."):
        return "imports relative to a package: a notebook is not one. Import a module by its name"
    if top.startswith("_"):
        if top == "__future__":
            return "imports from `__future__`: a notebook here needs no such import"
        return f"imports `{module}`, a private module: import the public module instead"
    advice = INSTEAD.get(top)
    instead = f"; {advice}" if advice else ""
    return (
        f"imports `{module}`, which no answer here needs{instead}. A cell may import: "
        f"{_allowed_list()}.{_close_module(module)}"
    )


def _module_allowed(module: str) -> bool:
    """True for a module in ALLOWED_MODULES or a submodule of an allowed package entry
    (numpy.polynomial.polynomial)."""
    if module in ALLOWED_MODULES:
        return True
    return any(module.startswith(f"{m}.") for m in ("numpy.polynomial", "numpy.random"))


class _Scope:
    """A function, lambda, comprehension or class body: the names it binds for itself."""

    def __init__(self, kind: str, names: set[str], global_names=(), self_name=None):
        self.kind, self.names, self.global_names = kind, set(names), set(global_names)
        self.self_name = self_name  # `self` of a method, while it is not rebound
        self.methods: set[str] = set()  # for a class: its methods called with a self


class Notebook:
    """What the audit knows of one notebook while it reads the learner's cells in order.

    `course`: every name a locked cell binds -> its import (None for other values); `protected`:
    those of them a test reads, and the builtins tests read (rebinding them is refused);
    `handles`: learner names that alias the course's objects; `learner`: what the learner's
    cells bound at the top level so far -> its import; `classes`: the learner's classes -> their
    methods that take a self.
    """

    def __init__(self, locked_sources=(), test_sources=(), protected=None):
        self.course: dict[str, str | None] = {}
        for tree in filter(None, map(parse, locked_sources)):
            self.course.update(bindings(tree))
        if protected is None:
            protected = protected_names(locked_sources, test_sources)
        self.protected: dict[str, str | None] = dict(protected)
        for name, origin in self.protected.items():
            if origin != "builtins":
                self.course.setdefault(name, origin)
        self.handles: set[str] = set()
        self.learner: dict[str, str | None] = {}
        self.classes: dict[str, set[str]] = {}

    @classmethod
    def of(cls, cells) -> Notebook:
        code = [c for c in cells if c.cell_type == "code"]
        return cls([c.source for c in code if is_locked(c)], [c.source for c in code if is_test(c)])

    def audit(self, index: int, source: str) -> list[Finding]:
        """Findings in one learner cell; what it binds is remembered for the next cells."""
        refused = unreadable(source)
        if refused is not None:
            return [replace(refused, cell=index)]
        magic = automagic_line(source, {*self.course, *self.learner, *dir(builtins)})
        if magic is not None:
            number, line = next((n, t) for n, t in enumerate(source.splitlines(), 1) if t.strip())
            why = (
                f"would run IPython's `%{magic}` magic in a kernel with automagic on: write "
                "plain Python, or the magics the course uses (%matplotlib, %time, %timeit) "
                "with their `%`"
            )
            return [Finding(index, number, line.strip()[:80], why)]
        tree = parse(source)
        if tree is None:
            return []
        visitor = _CellAudit(index, source, self)  # quotes the cell's own lines
        self.learner.update(bindings(tree))
        visitor.visit(tree)
        return visitor.findings


class _CellAudit(ast.NodeVisitor):
    def __init__(self, cell: int, source: str, notebook: Notebook, line_offset: int = 0):
        self.cell, self.lines, self.nb = cell, source.splitlines(), notebook
        self.line_offset = line_offset
        self.findings: list[Finding] = []
        self.scopes: list[_Scope] = []
        self.parents: dict[ast.AST, ast.AST] = {}

    def visit(self, node):
        if isinstance(node, ast.Module) and not self.parents:
            for parent in ast.walk(node):
                for child in ast.iter_child_nodes(parent):
                    self.parents[child] = parent
        return super().visit(node)

    def report(self, node: ast.AST, why: str) -> None:
        line = getattr(node, "lineno", 1)
        code = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        finding = Finding(self.cell, line + self.line_offset, code[:80], why)
        if finding not in self.findings:
            self.findings.append(finding)

    # -- where a name comes from
    def _local(self, name: str) -> bool:
        """True when a function, lambda or comprehension around here binds `name` itself."""
        for scope in reversed(self.scopes):
            if scope.kind == "class":
                continue
            if name in scope.global_names:
                return False
            if name in scope.names:
                return True
        return False

    def _module_scope(self, name: str) -> bool:
        return not self.scopes or (
            not self._local(name) and any(name in s.global_names for s in self.scopes)
        )

    def _origin(self, name: str) -> tuple[str, str | None]:
        """(kind, import) of a name read here: local, learner, course, builtin or unknown."""
        if self._local(name):
            return "local", None
        if name in self.nb.learner:
            return "learner", self.nb.learner[name]
        if name in self.nb.course:
            return "course", self.nb.course[name]
        if hasattr(builtins, name):
            return "builtin", None
        return "unknown", None

    def _owned_by_course(self, name: str) -> bool:
        """A name for the course's objects: bound by a locked cell, an import, an alias."""
        if self._local(name):
            return False
        kind, origin = self._origin(name)
        return (
            kind == "course"
            or (kind == "learner" and origin is not None)
            or (name in self.nb.handles)
        )

    # -- scopes
    def _function(self, node) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
        self._arguments(node.args)
        in_class = bool(self.scopes) and self.scopes[-1].kind == "class"
        if node.name.startswith("_") and not (in_class and node.name in ALLOWED_DUNDER_METHODS):
            if in_class and node.name.startswith("__"):
                self.report(
                    node,
                    f"defines `{node.name}`: a class of yours may define `__init__`, `__repr__`"
                    " and `__str__` only (special methods change how Python treats your objects "
                    "in the tests). Write an ordinary method instead",
                )
            else:
                self._underscore(node, node.name)
        if not self.scopes or self._module_scope(node.name):
            self._rebind(node.name, node)
        plain = {"staticmethod", "classmethod"}.isdisjoint(
            d.id for d in node.decorator_list if isinstance(d, ast.Name)
        )
        params = [*node.args.posonlyargs, *node.args.args]
        self_name = params[0].arg if in_class and plain and params else None
        if in_class and plain:
            self.scopes[-1].methods.add(node.name)
        global_names = {n for s in ast.walk(node) if isinstance(s, ast.Global) for n in s.names}
        names = _arguments(node.args) | set().union(*map(_stores, node.body))
        if self_name in set().union(*map(_stores, node.body)):
            self_name = None  # `self = other` inside: no longer the method's own object
        self.scopes.append(_Scope("function", names - global_names, global_names, self_name))
        for stmt in node.body:
            self.visit(stmt)
        hands_out = [
            r.value
            for r in ast.walk(node)
            if isinstance(r, ast.Return | ast.Yield | ast.YieldFrom) and r.value is not None
        ]
        if not in_class and any(map(self._aliases_course, hands_out)):
            self.nb.handles.add(node.name)  # `def g(): return grading.x` then `g()[k] = v`
        self.scopes.pop()
        if node.returns is not None:
            self.visit(node.returns)

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def _arguments(self, args: ast.arguments) -> None:
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        for a in every:
            if a is not None:
                if a.arg.startswith("_") and a.arg != "_":
                    self._underscore(a, a.arg)
                if a.annotation is not None:
                    self.visit(a.annotation)
        for default in [*args.defaults, *args.kw_defaults]:
            if default is not None:
                self.visit(default)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._arguments(node.args)
        self.scopes.append(_Scope("function", _arguments(node.args)))
        self.visit(node.body)
        self.scopes.pop()

    def _comprehension(self, node) -> None:
        first, *rest = node.generators
        self.visit(first.iter)  # evaluated in the enclosing scope
        targets = set().union(*(_stores(g.target) for g in node.generators))
        self.scopes.append(_Scope("comprehension", targets))
        for g in node.generators:
            self.visit(g.target)
            if g is not first:
                self.visit(g.iter)
            for condition in g.ifs:
                self.visit(condition)
        for part in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
            self.visit(part)
        self.scopes.pop()

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for part in [*node.decorator_list, *node.bases]:
            self.visit(part)
        for keyword in node.keywords:
            if keyword.arg == "metaclass":
                self.report(
                    keyword.value,
                    "gives a class a metaclass, which runs code of its own when classes are "
                    "made: no answer here needs one. Use a plain class",
                )
            self.visit(keyword.value)
        if node.name.startswith("_"):
            self._underscore(node, node.name)
        if not self.scopes or self._module_scope(node.name):
            self._rebind(node.name, node)
        scope = _Scope("class", set().union(*map(_stores, node.body)))
        inherited = [
            self.nb.classes.get(b.id, set()) for b in node.bases if isinstance(b, ast.Name)
        ]
        scope.methods = set().union(*inherited)
        if not self.scopes:  # known before its body is read: `A.m(other)` in a method of A
            self.nb.classes[node.name] = scope.methods
        self.scopes.append(scope)
        for stmt in node.body:
            self.visit(stmt)
        self.scopes.pop()

    def visit_Global(self, node: ast.Global | ast.Nonlocal) -> None:
        for name in node.names:
            if name.startswith("_"):
                self._underscore(node, name)

    visit_Nonlocal = visit_Global

    # -- names
    def _underscore(self, node: ast.AST, name: str) -> None:
        if name.startswith("__") and name.endswith("__"):
            what = f"`{name}`, one of Python's special names"
        else:
            what = f"`{name}`, which starts with `_`"
        self.report(
            node,
            f"uses the name {what}: names that start with `_` can reach Python's internals, so "
            f"no cell here may use one. Rename it (e.g. `{name.strip('_') or 'value'}`)",
        )

    def _rebind(self, name: str, node: ast.AST) -> None:
        if name in ("builtins", "__builtins__") or name in self.nb.protected:
            self.report(
                node,
                f"replaces `{name}`, which the course's cells and tests use. Choose another "
                "name for your own variable or function",
            )

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if name.startswith("_") and name != "_":
            self._underscore(node, name)
            return
        if isinstance(node.ctx, ast.Store | ast.Del):
            if self._module_scope(name):
                self._rebind(name, node)
            return
        kind, origin = self._origin(name)
        if kind in ("builtin", "unknown"):
            if name in REFUSED_BUILTINS:
                why, instead = REFUSED_BUILTINS[name]
                why = why if why.startswith("it ") else f"it {why}"
                self.report(node, f"uses `{name}`: {why}. Instead, {instead}")
            elif name == "type":
                self._type_use(node)
            elif name == "get_ipython":
                self.report(
                    node,
                    "reaches IPython's shell, which can change how later cells run. Use the "
                    "magics the course uses (%matplotlib, %time, %timeit) as they are",
                )
        elif kind == "course" and origin in COURSE_ONLY_USES:
            self._course_only(node, origin)

    def _type_use(self, node: ast.Name) -> None:
        call = self.parents.get(node)
        if isinstance(call, ast.Call) and call.func is node and len(call.args) == 1:
            outer = self.parents.get(call)
            if isinstance(outer, ast.Attribute) and outer.attr == "__name__":
                return
            if isinstance(outer, ast.Compare):
                return
        self.report(
            node,
            "uses `type` other than as `type(x).__name__` or in a comparison: with it, a cell "
            "can make classes and reach their methods behind the audit. Use isinstance(x, ...)",
        )

    def _course_only(self, node: ast.Name, origin: str) -> None:
        uses = COURSE_ONLY_USES[origin]
        parent = self.parents.get(node)
        if origin == "pathlib.Path":
            grand = self.parents.get(parent)
            fine = isinstance(parent, ast.Call) and parent.func is node
            fine = fine and isinstance(grand, ast.Attribute) and grand.attr in uses
        else:
            fine = isinstance(parent, ast.Attribute) and parent.attr in uses
        if not fine:
            shown = ", ".join(
                f"{node.id}(...).{u}()" if origin == "pathlib.Path" else f"{node.id}.{u}"
                for u in sorted(uses)
            )
            top = origin.split(".")[0]
            what = (
                f"beyond what the course's own cells do with it ({shown})"
                if uses
                else ("which only the course's own cells use")
            )
            self.report(
                node,
                f"uses `{node.id}` {what}; {INSTEAD.get(top, 'no answer here needs more of it')}",
            )

    # -- attributes and items
    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if attr.startswith("_"):
            if not (isinstance(node.ctx, ast.Load) and self._dunder_read(node)):
                self.report(
                    node,
                    f"uses the attribute `{attr}`: attributes that start with `_` reach Python's "
                    "internals or a module's private parts, so no cell here may use one. Use "
                    "the public functions and attributes",
                )
        elif attr in DOOR_ATTRIBUTES:
            self.report(node, f"uses `.{attr}`, which {DOOR_ATTRIBUTES[attr]}")
        if isinstance(node.ctx, ast.Store | ast.Del):
            self._set_attribute(node)
        elif attr in MUTATORS:
            self._mutator(node)
        self._class_method(node)
        self.generic_visit(node)

    @staticmethod
    def _dunder_read(node: ast.Attribute) -> bool:
        """`.__name__`, and `super().__init__(...)` in a class of one's own."""
        if node.attr in ALLOWED_DUNDER_READS:
            return True
        value = node.value
        return (
            node.attr in ALLOWED_DUNDER_METHODS
            and isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "super"
        )

    def _class_method(self, node: ast.Attribute) -> None:
        """`MyClass.method(other, ...)` runs a method with any object as its self."""
        value = node.value
        if isinstance(value, ast.Name) and not self._local(value.id):
            if node.attr in self.nb.classes.get(value.id, set()):
                self.report(
                    node,
                    f"calls the method `{node.attr}` through its class `{value.id}`, so any "
                    "object could be its self: call it on an object of yours "
                    f"(`obj.{node.attr}(...)`)",
                )

    def _set_attribute(self, node: ast.Attribute) -> None:
        value = node.value
        if isinstance(value, ast.Name):
            for scope in reversed(self.scopes):
                if scope.kind == "function":
                    if scope.self_name is not None and value.id == scope.self_name:
                        return
                    break
        verb = "deletes" if isinstance(node.ctx, ast.Del) else "sets"
        owned = sorted(r for r in _roots(node) if self._owned_by_course(r))
        if owned:
            self.report(
                node,
                f"{verb} `{_dotted(node) or node.attr}`, which belongs to the course (its tests "
                "use it as it is). Change your own functions instead",
            )
        else:
            self.report(
                node,
                f"{verb} the attribute `{node.attr}` of `{_dotted(value) or 'an object'}`: here "
                "a cell may set attributes only on `self`, in a method of its own class. Keep "
                "the value in a variable or a dict, or set it in your class's methods",
            )

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Store | ast.Del) and not self._allowed_target(node.value):
            owned = sorted(r for r in _roots(node) if self._owned_by_course(r))
            if owned:
                verb = "deletes" if isinstance(node.ctx, ast.Del) else "changes"
                self.report(
                    node,
                    f"{verb} an item of `{_dotted(node.value) or owned[0]}`, which belongs to the "
                    "course or a module (the tests use it as it is). Copy it into a container "
                    "of your own and change that (`mine = dict(...)`)",
                )
        self.generic_visit(node)

    def _allowed_target(self, node: ast.AST) -> bool:
        dotted = _dotted(node)
        return dotted in ALLOWED_STORE_TARGETS

    def _mutator(self, node: ast.Attribute) -> None:
        """`x.update(...)`, `x.append`: never on the course's containers."""
        receiver = node.value
        if self._allowed_target(receiver):
            return
        if isinstance(receiver, ast.Name):
            kind, origin = self._origin(receiver.id)
            if kind == "builtin" and receiver.id in BUILTIN_CONTAINERS:
                why = f"through the type `{receiver.id}`, so it could change any container"
            elif receiver.id in self.nb.handles and not self._local(receiver.id):
                why = "on an alias of the course's objects"
            elif kind in ("course", "learner") and origin and "." in origin.lstrip("."):
                why = f"through `{receiver.id}`, a class or object the course or a module owns"
            else:
                return
        elif any(self._owned_by_course(r) for r in _roots(receiver)):
            owner = _dotted(receiver) or "an object"
            why = f"on `{owner}`, which belongs to the course or a module"
        else:
            return
        self.report(
            node,
            f"uses `.{node.attr}`, which changes a container in place, {why}. Copy it into "
            "a container of your own and change that",
        )

    # -- imports
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if not _module_allowed(alias.name):
                self.report(node, _why_import(alias.name))
            self._import_binding(node, alias)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = f"{'.' * node.level}{node.module or ''}"
        for alias in node.names:
            if alias.name == "*":
                self.report(
                    node,
                    f"imports every name of `{module}` at once, which can hide names the tests "
                    f"use: import the names you need (`from {module} import ...`)",
                )
                continue
            whole = f"{module}.{alias.name}"
            if _module_allowed(whole):
                pass
            elif not _module_allowed(module):
                self.report(node, _why_import(module))
            elif alias.name.startswith("_"):
                self._underscore(node, alias.name)
            elif alias.name in DOOR_ATTRIBUTES:
                self.report(node, f"imports `{whole}`, which {DOOR_ATTRIBUTES[alias.name]}")
            self._import_binding(node, alias)

    def _import_binding(self, node, alias: ast.alias) -> None:
        bound = _bound(alias)
        if alias.asname and alias.asname.startswith("_"):
            self._underscore(node, alias.asname)
        same = self.nb.protected.get(bound) == _origin(node, alias)  # a harmless re-import
        if not same and self._module_scope(bound):
            self._rebind(bound, node)

    # -- values that alias the course's objects
    def _assign_value(self, targets, value) -> None:
        """`alias = grading` makes `alias` a handle on the grader too."""
        if value is not None and self._aliases_course(value):
            for target in targets:
                if isinstance(target, ast.Attribute | ast.Subscript):
                    self.nb.handles |= _roots(target) - set().union(*map(_roots, [value]))
                    continue
                for n in ast.walk(target):
                    if isinstance(n, ast.Name):
                        self.nb.handles.add(n.id)

    def _aliases_course(self, value: ast.AST) -> bool:
        owned = {n for n in _names_in(value) if self._owned_by_course(n)}
        return _refers_to(value, owned, self.nb.handles)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assign_value(node.targets, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._assign_value([node.target], node.value)
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._assign_value([node.target], node.value)
        self.generic_visit(node)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self._assign_value([node.target], node.iter)
        self.generic_visit(node)

    visit_AsyncFor = visit_For

    def visit_withitem(self, node: ast.withitem) -> None:
        if node.optional_vars is not None:
            self._assign_value([node.optional_vars], node.context_expr)
        self.generic_visit(node)

    # -- match statements bind names without Name nodes
    def visit_MatchAs(self, node: ast.MatchAs | ast.MatchStar) -> None:
        if node.name:
            if node.name.startswith("_"):
                self._underscore(node, node.name)
            elif self._module_scope(node.name):
                self._rebind(node.name, node)
        self.generic_visit(node)

    visit_MatchStar = visit_MatchAs

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        if node.rest and self._module_scope(node.rest):
            self._rebind(node.rest, node)
        self.generic_visit(node)

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        for attr in node.kwd_attrs:
            if attr.startswith("_"):
                self._underscore(node, attr)
        self.generic_visit(node)

    # -- constants: format strings and dunder names
    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str):
            return
        if DUNDER_TEXT.match(node.value):
            self.report(
                node,
                f"spells the special name `{node.value}` as text, with which a cell can reach "
                "Python's internals: no answer here needs it",
            )
        elif "{" in node.value:
            for field in _format_fields(node.value):
                if any(p.startswith("_") for p in re.findall(r"\.([^.\[]*)", field)):
                    self.report(
                        node,
                        f"has the format field `{{{field}}}`, which reads an attribute that "
                        "starts with `_` when formatted: use only public attributes",
                    )
                    break

    # -- calls
    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if _is_shell(getattr(func, "value", None)) and not self._local("get_ipython"):
            self._ipython(node, func.attr)
            return
        for keyword in node.keywords:
            if keyword.arg and keyword.arg.startswith("_"):
                self._underscore(keyword.value, keyword.arg)
            if keyword.arg == "allow_pickle" and not (
                isinstance(keyword.value, ast.Constant) and keyword.value.value is False
            ):
                self.report(
                    node,
                    "loads with `allow_pickle`, which can run code stored in the file: "
                    "save and load plain arrays (np.savez, np.load without allow_pickle)",
                )
        if isinstance(func, ast.Attribute) and func.attr == "load" and len(node.args) >= 3:
            if isinstance(func.value, ast.Name) and self._origin(func.value.id)[1] == "numpy":
                self.report(node, "loads a numpy file with pickles allowed (third argument)")
        self.generic_visit(node)

    def _ipython(self, node: ast.Call, method: str) -> None:
        """Only get_ipython().run_line_magic/run_cell_magic with a magic the course uses."""
        args = [a.value if isinstance(a, ast.Constant) else None for a in node.args]
        magic = args[0] if args else None
        line = args[1] if len(args) > 1 else None
        body = args[2] if len(args) > 2 else None
        cell_magic = method == "run_cell_magic"
        if method in ("run_line_magic", "run_cell_magic") and magic in ALLOWED_MAGICS:
            if isinstance(line, str) and (body is None or isinstance(body, str)):
                self._magic(node, magic, line, body if cell_magic else None)
                return
        if method in ("system", "getoutput"):
            what = "a shell command (`!...`), which runs outside Python where no check can see"
            instead = "the course's cells run the tools a notebook needs"
        elif magic == "writefile":
            what = "`%%writefile` for a file that is not C source (.c or .h)"
            instead = "keep Python code in the notebook's cells"
        elif magic:
            what = f"the `%{magic}` magic, which the course does not use"
            instead = "use %matplotlib, %time or %timeit, or plain Python"
        else:
            what = f"IPython's `{method}`, which can change how later cells run"
            instead = "use the magics the course uses (%matplotlib, %time, %timeit)"
        self.report(node, f"runs {what}: {instead}")

    def _magic(self, node, magic: str, line: str, body: str | None) -> None:
        if magic == "matplotlib":
            if not MATPLOTLIB_BACKEND.match(line):
                self.report(
                    node, "asks %matplotlib for a backend by path: use `%matplotlib inline`"
                )
        elif magic in ("pinfo", "pinfo2"):
            if not DOTTED_NAME.match(line):
                self.report(node, "asks for help on something other than a name: use `name?`")
        else:  # %time, %timeit: the statement (and a cell magic's body) is Python: audit it too
            code = _timed_statement(magic, line)
            if code is None:
                self.report(
                    node,
                    f"gives %{magic} options it parses itself (what follows them runs as code "
                    "the audit cannot read): use "
                    + ("`%time stmt`" if magic == "time" else "`%timeit [-n N] [-r R] stmt`"),
                )
                return
            offset = node.lineno - 1 + self.line_offset
            for text, extra in ((code, 0), (body, 1)):
                if text and text.strip():
                    self._nested(node, text, offset + extra)

    def _nested(self, node, text: str, offset: int) -> None:
        try:
            tree = ast.parse(to_python(text))
        except SyntaxError as exc:
            self.report(node, f"times code that is not Python the grader can read ({exc.msg})")
            return
        inner = _CellAudit(self.cell, to_python(text), self.nb, offset)
        inner.scopes = list(self.scopes)
        inner.visit(tree)
        for finding in inner.findings:
            if finding not in self.findings:
                self.findings.append(finding)


def _names_in(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


# %timeit's options a learner may give: the number of loops and of repeats
TIMEIT_OPTIONS = frozenset("nr")


def _timed_statement(magic: str, line: str) -> str | None:
    """The statement that `%time line` or `%timeit line` runs, read with IPython's own
    parsers of their options; None when the line gives an option other than %timeit's -n and
    -r (`%time --n stmt` anywhere in the line, `%%timeit -v name`): what IPython then runs is
    not what the line reads as."""
    from IPython.core import magic_arguments
    from IPython.core.magic import Magics
    from IPython.core.magics.execution import ExecutionMagics

    try:
        if magic == "time":
            args, rest = magic_arguments.parse_argstring(ExecutionMagics.time, line, partial=True)
            return None if args.no_raise_error else " ".join(rest)
        table = SimpleNamespace(options_table={})  # what Magics.parse_options reads of self
        options, statement = Magics.parse_options(
            table, line, "n:r:tcp:qov:", posix=False, strict=False, preserve_non_opts=True
        )
    except Exception:  # IPython's UsageError, getopt's errors: the magic would fail too
        return None
    return None if set(options) - TIMEIT_OPTIONS else statement


def _is_shell(node) -> bool:
    """True for the call `get_ipython()`."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "get_ipython"
    )


def protected_names(locked_sources, test_sources) -> dict[str, str | None]:
    """The names the tests take from the notebook and the course defines -> their import.

    A name a test cell reads without binding it (`grading`, `cluster`, `np`, `abs`) and that a
    locked cell binds, or a builtin: rebinding it changes what the test does. The names the
    learner is asked to define (`pingpong`) are bound by solution cells only, so stay free.
    """
    bound: dict[str, str | None] = {name: "builtins" for name in dir(builtins)}
    for tree in filter(None, map(parse, locked_sources)):
        bound.update(bindings(tree))
    read = set().union(*(free_names(t) for t in filter(None, map(parse, test_sources))))
    return {name: bound[name] for name in read if name in bound}


def parse(source: str) -> ast.Module | None:
    """The cell as a Python syntax tree; None for C cells, empty cells and syntax errors."""
    if is_c_cell(source) or not source.strip():
        return None
    try:
        return ast.parse(to_python(source))
    except SyntaxError:
        return None  # it fails when it runs, and costs its own tests only


def audit_cell(index: int, source: str, protected: dict, handles: set[str]) -> list[Finding]:
    """Findings in one learner cell, given the names the tests read (`protected`) and the
    learner's aliases of them so far (`handles`, grown by this cell)."""
    notebook = Notebook(protected=protected)
    notebook.handles = handles
    return notebook.audit(index, source)


def audit_notebook(cells) -> list[Finding]:
    """Findings in every code cell a learner can edit; `cells` are nbformat cells in order.

    A cell is the course's own when nbgrader locked it (or it is a graded test cell): nbgrader
    restores those from its database before grading, so only the other code cells are read.
    """
    notebook = Notebook.of(cells)
    findings: list[Finding] = []
    for index, cell in enumerate(cells):
        if cell.cell_type == "code" and not is_locked(cell):
            findings += notebook.audit(index, cell.source)
    return findings
