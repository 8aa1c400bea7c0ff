"""The course's audit in the student's kernel: a refused cell is not run, and says why.

Grading refuses lines that step outside what the course's answers need (audit.py) and gives 0
to the tests after them. A learner should hear it when running the cell, not from the grade.
This IPython extension audits each cell before it runs: for a learner's cell with refused
lines it prints which line, what is refused and what to do instead, and does not run the cell.
The course's own cells (those that are locked or tests in the notebooks of the kernel's folder,
the folder of the notebook it runs) are run as they are.

It is loaded by the student lab's kernel (jupyter/student/share/kernels/python3: `--ext
pingpong_lab.grader.labcheck`), which `make lab` and Binder's start script put first on
JUPYTER_PATH; the notebooks and pingpong_lab.course know nothing of it. Grading never relies on
it: a learner's code can remove it from its own kernel, and autograde's kernels do not load it.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

from IPython.core.error import InputRejected

from ..course.cells import is_locked, is_test
from .audit import Notebook

SESSION_VAR = "JPY_SESSION_NAME"  # the notebook a Jupyter server started this kernel for


class RefusedCell(InputRejected):
    """The cell was not run: what the audit refuses in it, line by line."""

    def __init__(self, findings):
        self.findings = findings
        super().__init__(self.message())

    def message(self) -> str:
        lines = [
            "This cell was not run: the course's grader refuses these lines (when graded, the "
            "tests after such a cell score 0):"
        ]
        lines += [f"  line {f.line}: `{f.code}` {f.why}" for f in self.findings]
        lines.append("Change them as each line says, then run the cell again.")
        return "\n".join(lines)

    def _render_traceback_(self):  # IPython shows this instead of a traceback
        return [f"RefusedCell: {self.message()}"]


def course_notebooks(folder: Path | None = None, session: str | None = None) -> list[Path]:
    """The course notebooks a kernel may run: the one it was started for, and those beside it."""
    folder = Path.cwd() if folder is None else folder
    found = sorted(folder.glob("*.ipynb"))
    session = os.environ.get(SESSION_VAR) if session is None else session
    if session and session.endswith(".ipynb") and Path(session).is_file():
        found.insert(0, Path(session))
    return found


def course_cells(paths) -> tuple[list[str], list[str]]:
    """(locked sources, test sources) of the code cells of the notebooks at `paths`."""
    locked, tests = [], []
    for path in paths:
        try:
            cells = json.loads(Path(path).read_text()).get("cells", [])
        except (OSError, ValueError):
            continue
        for cell in cells:
            if cell.get("cell_type") != "code":
                continue
            source = cell.get("source", "")
            source = "".join(source) if isinstance(source, list) else source
            if is_locked(cell):
                locked.append(source)
            if is_test(cell):
                tests.append(source)
    return locked, tests


class LabCheck(ast.NodeTransformer):
    """An AST transformer that refuses a learner's cell with refused lines (and changes none).

    IPython runs `pre_run_cell` before it transforms a cell: the raw cell (with its magics) is
    kept then, and the transformer audits it as the grader will read it.
    """

    def __init__(self, locked_sources, test_sources):
        super().__init__()
        self.course = {s.strip() for s in locked_sources}
        self.audit = Notebook(locked_sources, test_sources)
        self.raw: str | None = None
        self.count = 0

    def pre_run_cell(self, info) -> None:
        self.raw = info.raw_cell

    def post_run_cell(self, result) -> None:
        self.raw = None

    def visit(self, node):
        if not isinstance(node, ast.Module):
            return node
        source, self.raw = (self.raw if self.raw is not None else ast.unparse(node)), None
        if source.strip() in self.course:
            return node
        self.count += 1
        findings = self.audit.audit(self.count, source)
        if findings:
            raise RefusedCell(findings)
        return node


_loaded: dict[int, LabCheck] = {}


def load_ipython_extension(ip) -> None:
    """Audit every cell of this kernel (`%load_ext pingpong_lab.grader.labcheck`, or `--ext`).

    Nothing is done where no course notebook is found: a kernel outside the course's folders
    runs as usual."""
    locked, tests = course_cells(course_notebooks())
    if not locked or id(ip) in _loaded:
        return
    check = LabCheck(locked, tests)
    ip.events.register("pre_run_cell", check.pre_run_cell)
    ip.events.register("post_run_cell", check.post_run_cell)
    ip.ast_transformers.append(check)
    _loaded[id(ip)] = check


def unload_ipython_extension(ip) -> None:
    check = _loaded.pop(id(ip), None)
    if check is not None:
        ip.events.unregister("pre_run_cell", check.pre_run_cell)
        ip.events.unregister("post_run_cell", check.post_run_cell)
        if check in ip.ast_transformers:
            ip.ast_transformers.remove(check)
