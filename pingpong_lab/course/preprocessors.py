"""nbgrader preprocessors of the course (loaded by course/nbgrader_config.py)."""

from __future__ import annotations

import nbformat
from nbgrader.preprocessors import ClearSolutions, NbGraderPreprocessor
from traitlets import Unicode

from .audit import audit_notebook
from .cells import is_c_cell, is_test

# -- the C-aware stub -------------------------------------------------------------------------
C_STUB = (
    "/* YOUR CODE HERE */\nreturn NOT_IMPLEMENTED; /* delete this line when your code is above */"
)


class ClearSolutionsC(ClearSolutions):
    """nbgrader's ClearSolutions, with a C stub in solution regions of C cells.

    C cells mark their regions with `/* BEGIN SOLUTION */` ... `/* END SOLUTION */` (nbgrader
    only looks for the words BEGIN SOLUTION / END SOLUTION on a line). Every such region must
    be the body (or the end of the body) of a function returning int, and the cell must define
    NOT_IMPLEMENTED, so that the released stub compiles and reports "not implemented".
    """

    c_stub = Unicode(C_STUB, help="The stub that replaces solution regions in C cells").tag(
        config=True
    )

    def _replace_solution_region(self, cell, language):
        if cell.cell_type == "code" and is_c_cell(cell.source):
            saved = self.code_stub
            self.code_stub = {**saved, "c": self.c_stub}
            try:
                replaced = super()._replace_solution_region(cell, "c")
            finally:
                self.code_stub = saved
            if not replaced and cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
                raise RuntimeError(
                    "a C solution cell needs a /* BEGIN SOLUTION */ ... /* END SOLUTION */ "
                    "region (a whole-cell Python stub would not compile):\n" + cell.source
                )
            return replaced
        return super()._replace_solution_region(cell, language)


# -- the tamper audit -------------------------------------------------------------------------
TAMPER_ERROR = "GraderChanged"


class AuditSubmission(NbGraderPreprocessor):
    """After the notebook ran: a test cell that runs after a learner's cell changed the grader
    scores 0, with a note that says which line did it (see pingpong_lab/course/audit.py).

    The audit reads the cells in nbgrader's own process, so nothing the learner's code did while
    it ran can hide it. Test cells before the first such cell keep their points.
    """

    def preprocess(self, nb, resources):
        findings = audit_notebook(nb.cells)
        if not findings:
            return nb, resources
        first = min(f.cell for f in findings)
        lines = "\n".join(f"  - {f}" for f in findings)
        note = (
            "A cell of this submission changes what the tests use, so the tests that run after "
            f"it (from cell {first} on) score 0:\n{lines}\n"
            "No answer in this course needs these. If this is a mistake, ask your instructor "
            "to look at it (the notebook was graded as submitted, nothing was removed)."
        )
        self.log.warning("grader changed: %s", "; ".join(map(str, findings)))
        for index, cell in enumerate(nb.cells):
            if index < first or cell.cell_type != "code" or not is_test(cell):
                continue
            cell.outputs.append(
                nbformat.v4.new_output(
                    "error", ename=TAMPER_ERROR, evalue=note, traceback=[f"{TAMPER_ERROR}: {note}"]
                )
            )
        for f in {f.cell for f in findings}:
            nb.cells[f].outputs.append(
                nbformat.v4.new_output("stream", name="stdout", text=f"[grader] {note}\n")
            )
        return nb, resources
