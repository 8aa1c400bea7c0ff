"""Does a submission change the grader? A static audit of the cells a learner can edit.

nbgrader runs a learner's cells and the test cells in one Python process, so a learner's cell
could replace what a test cell relies on: `grading.check_pingpong = lambda *a, **k: None`, a
`quiet()` whose `__exit__` swallows the failure, an IPython hook that rewrites later cells. No
check inside that process can be trusted once such code has run. This audit runs in the
grader's own process instead (course/preprocessors.py calls it during `nbgrader autograde`),
reads the learner's cells without running them, and reports each place that:

- rebinds or deletes a name that the course's locked cells bind (`grading`, `notebook`,
  `cluster`, `np`, ...) or the names `builtins`/`__builtins__`;
- assigns to or deletes an attribute or item of such a name, of a module, or of an alias of one
  (`g = grading; g.quiet = ...`), or any dunder attribute (`f.__code__ = ...`);
- reaches the interpreter's machinery: `setattr`, `delattr`, `exec`, `eval`, `compile`,
  `__import__`, `globals`, `vars`, `sys.modules`, `sys.settrace`, `gc`, `importlib.reload`,
  `unittest.mock`, code objects and frames (`__code__`, `__globals__`, `f_globals`, ...);
- uses IPython's hooks (`get_ipython()`, shell escapes `!cmd`) beyond the magics the course
  uses (`%%writefile`, `%matplotlib`, `%time`, `%timeit`).

A ping-pong, a timing loop or a fit never needs any of these, so a correct answer is never
flagged (tests run the audit on every solution cell of the course). docs/GRADING.md gives the
threat model: what this stops, and what it cannot (a learner who reads the hidden tests,
obfuscation that computes names at run time, code that escapes the sandbox).
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

from ..course.cells import is_c_cell, is_locked, is_test

# Calls that reach the interpreter's machinery; no answer in this course needs them.
FORBIDDEN_CALLS = frozenset(
    {"setattr", "delattr", "exec", "eval", "compile", "__import__", "globals", "vars"}
)
# Attributes that expose code, frames and namespaces.
FORBIDDEN_ATTRIBUTES = frozenset(
    {
        "__code__",
        "__globals__",
        "__closure__",
        "__builtins__",
        "__subclasses__",
        "__bases__",
        "__mro__",
        "__defaults__",
        "__kwdefaults__",
        "f_globals",
        "f_locals",
        "f_back",
        "f_builtins",
        "gi_frame",
        "tb_frame",
        "modules",  # sys.modules
        "settrace",
        "setprofile",
        "_getframe",
        "meta_path",
        "path_hooks",
        "reload",  # importlib.reload
        "patch",  # unittest.mock.patch
    }
)
# Modules whose only use here would be to change the grader.
# (ctypes stays allowed: learners load their own C; docs/GRADING.md says what that leaves open)
FORBIDDEN_MODULES = frozenset({"builtins", "gc", "importlib", "unittest", "inspect", "sqlite3"})
# Magics the course's own cells use; anything else through get_ipython() is reported.
ALLOWED_MAGICS = frozenset({"writefile", "matplotlib", "time", "timeit"})
# Attributes of module aliases a learner may set (plot styling, the environment).
ALLOWED_TARGETS = frozenset({"plt.rcParams", "matplotlib.rcParams", "mpl.rcParams", "os.environ"})


@dataclass(frozen=True)
class Finding:
    """One place in one cell: `cell` is the notebook cell index, `line` the line in it."""

    cell: int
    line: int
    code: str
    why: str

    def __str__(self) -> str:
        return f"cell {self.cell}, line {self.line}: `{self.code}` {self.why}"


def to_python(source: str) -> str:
    """A cell's source as plain Python (IPython's magics and `!cmd` turned into calls)."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


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
    `getattr(a, "b").c` -> {getattr, a}."""
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
    return set()


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _refers_to(value: ast.AST, names: set[str]) -> bool:
    """True when `value` is one of `names`, reached from one, or a container holding one.

    A call's result counts only when the call is on one of `names` (`getattr(grading, ..)`):
    `t = notebook.run(...)` is a measurement and `float(np.median(x))` a number, not a handle on
    the grader."""
    if isinstance(value, ast.Tuple | ast.List | ast.Set):
        return any(_refers_to(e, names) for e in value.elts)
    if isinstance(value, ast.Dict):
        return any(_refers_to(v, names) for v in value.values if v is not None)
    base = value
    while isinstance(base, ast.Attribute | ast.Subscript | ast.Starred):
        base = base.value
    if isinstance(base, ast.Call):
        direct = {a for arg in base.args if not isinstance(arg, ast.Call) for a in _roots(arg)}
        return bool(direct & names) and isinstance(base.func, ast.Name)
    return bool(_roots(value) & names)


class _CellAudit(ast.NodeVisitor):
    def __init__(self, cell: int, source: str, protected: dict, handles: set[str]):
        self.cell, self.lines = cell, source.splitlines()
        self.protected, self.handles = protected, handles
        self.findings: list[Finding] = []
        self.global_names: set[str] = set()
        self.local_names: set[str] = set()  # names local to the enclosing functions
        self.depth = 0

    def report(self, node: ast.AST, why: str) -> None:
        line = getattr(node, "lineno", 1)
        code = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        self.findings.append(Finding(self.cell, line, code[:80], why))

    # -- scopes
    def _function(self, node):
        if self.depth == 0:
            self._rebind(node.name, node)
        self.depth += 1
        saved, saved_locals = self.global_names, self.local_names
        self.global_names = {
            name for n in ast.walk(node) if isinstance(n, ast.Global) for name in n.names
        }
        if not isinstance(node, ast.ClassDef):  # a local `summary[k] = v` is not the module's
            mine = set().union(*map(_stores, node.body))  # not the parameters: f(grading)
            self.local_names = (saved_locals | mine) - self.global_names
        self.generic_visit(node)
        self.global_names, self.local_names = saved, saved_locals
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _function

    # -- bindings
    def _rebind(self, name: str, node: ast.AST) -> None:
        module_scope = self.depth == 0 or name in self.global_names
        if name in ("builtins", "__builtins__") or (module_scope and name in self.protected):
            self.report(node, f"replaces `{name}`, which the course's cells and tests use")

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store | ast.Del):
            self._rebind(node.id, node)
        elif node.id == "__builtins__":
            self.report(node, "reaches the interpreter's builtins")
        elif node.id == "get_ipython":
            self.report(node, "reaches IPython's shell, which the grader does not allow")

    def visit_alias(self, node: ast.alias) -> None:
        if node.name.split(".")[0] in FORBIDDEN_MODULES:
            self.report(node, f"imports `{node.name}`, which no answer here needs")

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            bound = _bound(alias)
            same = self.protected.get(bound) == _origin(node, alias)  # a harmless re-import
            if not same and (self.depth == 0 or bound in self.global_names):
                self._rebind(bound, node)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and node.module.split(".")[0] in FORBIDDEN_MODULES:
            self.report(node, f"imports from `{node.module}`, which no answer here needs")
        self.visit_Import(node)

    def _assign_value(self, targets, value):
        """`alias = grading` makes `alias` a handle on the grader too."""
        if value is not None and _refers_to(value, self.handles | set(self.protected)):
            for target in targets:
                for n in ast.walk(target):
                    if isinstance(n, ast.Name):
                        self.handles.add(n.id)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assign_value(node.targets, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._assign_value([node.target], node.value)
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._assign_value([node.target], node.value)
        self.generic_visit(node)

    def _mutates(self, node: ast.Attribute | ast.Subscript) -> None:
        dotted = _dotted(node.value if isinstance(node, ast.Subscript) else node)
        if any(dotted == t or dotted.startswith(t + ".") for t in ALLOWED_TARGETS):
            return
        found = _roots(node)
        roots = (found & set(self.protected)) - self.local_names | (found & self.handles)
        if roots:
            what = _dotted(node) or min(roots)
            self.report(node, f"changes `{what}`, part of what the tests use")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("__"):
            self.report(node, f"changes `{node.attr}`")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Store | ast.Del):
            self._mutates(node)
        elif node.attr in FORBIDDEN_ATTRIBUTES:
            self.report(node, f"reaches `{node.attr}`, the interpreter's machinery")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Store | ast.Del):
            self._mutates(node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in FORBIDDEN_CALLS:
            self.report(node, f"calls `{func.id}`, which no answer here needs")
        if _is_shell(getattr(func, "value", None)):  # get_ipython().<method>(...)
            self._ipython(node, func.attr)
            for part in (*node.args, *node.keywords):
                self.visit(part)
            return
        self.generic_visit(node)

    def _ipython(self, node: ast.Call, method: str) -> None:
        """Only get_ipython().run_line_magic/run_cell_magic with a magic the course uses."""
        first = node.args[0] if node.args else None
        magic = first.value if isinstance(first, ast.Constant) else None
        if method in ("run_line_magic", "run_cell_magic") and magic in ALLOWED_MAGICS:
            return
        if method == "system" or method == "getoutput":
            what = "a shell command (`!...`)"
        elif magic:
            what = f"the `%{magic}` magic"
        else:
            what = f"IPython's `{method}`"
        self.report(node, f"runs {what}, which the grader does not allow")


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
    """Findings in one learner cell. `handles` (the learner's imports and aliases of what the
    tests use) grows as cells are read, since a name bound in one cell is used in the next."""
    tree = parse(source)
    if tree is None:
        return []
    handles |= imported_names(tree) - set(dir(builtins))
    visitor = _CellAudit(index, to_python(source), protected, handles)
    visitor.visit(tree)
    return visitor.findings


def audit_notebook(cells) -> list[Finding]:
    """Findings in every code cell a learner can edit; `cells` are nbformat cells in order.

    A cell is the course's own when nbgrader locked it (or it is a graded test cell): nbgrader
    restores those from its database before grading, so only the other code cells are read.
    """
    code = [c for c in cells if c.cell_type == "code"]
    tests = [c.source for c in code if is_test(c)]
    protected = protected_names([c.source for c in code if is_locked(c)], tests)
    handles: set[str] = set()
    findings: list[Finding] = []
    for index, cell in enumerate(cells):
        if cell.cell_type == "code" and not is_locked(cell):
            findings += audit_cell(index, cell.source, protected, handles)
    return findings
