"""nbgrader preprocessors of the course (loaded by course/nbgrader_config.py)."""

from __future__ import annotations

import re

from nbgrader.preprocessors import ClearSolutions
from traitlets import Unicode

# -- the C-aware stub -------------------------------------------------------------------------
C_CELL = re.compile(r"^\s*%%writefile\s+(?:-a\s+|--append\s+)?\S+\.(?:c|h)\s*$")
C_STUB = (
    "/* YOUR CODE HERE */\nreturn NOT_IMPLEMENTED; /* delete this line when your code is above */"
)


def is_c_cell(source: str) -> bool:
    """True for a code cell that writes a C source or header file (`%%writefile x.c`)."""
    first = source.lstrip("\n").split("\n", 1)[0]
    return bool(C_CELL.match(first))


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
