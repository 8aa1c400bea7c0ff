"""nbgrader configuration of the course (run nbgrader from this directory, course/).

Layout (nbgrader's defaults, made explicit):
    source/<NN_topic>/<NN_topic>.ipynb     master notebooks (the only files anyone edits)
    release/  submitted/  autograded/  feedback/  gradebook.db  exchange/   (git-ignored)
`python -m pingpong_lab.course.build release` also copies release/ to ../exercises/ and the
solution notebooks to ../solutions/ (see pingpong_lab/course/build.py).

Grading mode
------------
This file sets the environment variable PINGPONG_LAB_GRADING=1 (unless it is already set), so
every kernel that nbgrader starts (generate_solution, autograde, validate) inherits it. The
notebooks read it through `pingpong_lab.course.grading.GRADING` and `grading.scale(normal, grading)`
and shrink their sweeps and repetition counts, so that a whole submission grades in minutes.
Run `PINGPONG_LAB_GRADING=0 nbgrader ...` to grade with the full-size measurements.

Deadlines
---------
ExecutePreprocessor.timeout is the per-cell limit. Every test cell that sends work to the MPI
engines gives `cluster.run(...)` a shorter deadline (grading.ENGINE_TIMEOUT_S), so a deadlocked
ping-pong fails *that* cell with DeadlockError, the engines are restarted, and the rest of the
notebook is still graded. The cell timeout is only the last line of defence.

Changing the grader
-------------------
nbgrader runs a learner's cells and the test cells in one kernel, so a learner's cell could
replace what a test uses (`grading.check_pingpong = lambda *a, **k: None`). AuditSubmission
reads the learner's cells in nbgrader's own process after the notebook ran; a test that runs
after a cell that changes the grader scores 0, and its output says which line did it. The
course's own code cells (imports, the engines, helpers) are locked, so nbgrader restores them
before grading. Threat model: docs/GRADING.md.

C exercises
-----------
nbgrader's ClearSolutions puts the notebook language's stub (Python) in every solution region,
even inside a `%%writefile pingpong.c` cell. We use ClearSolutionsC (from
pingpong_lab.course.preprocessors), which recognises C cells (first line `%%writefile <name>.c`
or `.h`) and writes a C stub there: a `/* YOUR CODE HERE */` comment and
`return NOT_IMPLEMENTED;`. So the released C compiles (every C solution region sits in a
function returning int, and the cell defines NOT_IMPLEMENTED), and the tests then fail with a
readable "not implemented yet" message.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # pingpong_lab, even without `pip install -e .`

from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402
from nbgrader.preprocessors import (  # noqa: E402
    AssignLatePenalties,
    CheckCellMetadata,
    ClearHiddenTests,
    ClearMarkScheme,
    ClearOutput,
    ComputeChecksums,
    Execute,
    IgnorePattern,
    IncludeHeaderFooter,
    InstantiateTests,
    LimitOutput,
    LockCells,
    SaveAutoGrades,
    SaveCells,
)

from pingpong_lab.course.preprocessors import AuditSubmission, ClearSolutionsC  # noqa: E402

os.environ.setdefault("PINGPONG_LAB_GRADING", "1")

c = get_config()  # noqa: F821 (nbgrader provides get_config)

c.CourseDirectory.course_id = "mpi-pingpong"
c.CourseDirectory.root = HERE
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
c.CourseDirectory.solution_directory = "solution"
# Parallel graders (`make autograde JOBS=N`) share this gradebook: SQLite lets one writer in at
# a time and the others wait up to `timeout` seconds for it.
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(HERE, "gradebook.db") + "?timeout=120"
# Build products of learners' C never travel with a submission.
c.CourseDirectory.ignore = [
    ".ipynb_checkpoints",
    "*.pyc",
    "__pycache__",
    "feedback",
    "*.so",
    "*.o",
]

# The exchange (nbgrader's release/fetch/submit between users) in a writable directory.
c.Exchange.root = os.environ.get("PINGPONG_LAB_EXCHANGE", os.path.join(HERE, "exchange"))
os.makedirs(c.Exchange.root, exist_ok=True)

# Per-cell limit (nbgrader's default is 30 s). Engine start (~7 s, more on a loaded machine),
# one engine restart after a deadlock and a small grading sweep fit in it with room to spare.
c.ExecutePreprocessor.timeout = 150
c.Execute.timeout = 150
c.Execute.interrupt_on_timeout = True

# The C-aware stub (see above), in the same place in the pipeline as nbgrader's ClearSolutions.
c.GenerateAssignment.preprocessors = [
    IncludeHeaderFooter,
    InstantiateTests,
    LockCells,
    ClearSolutionsC,
    ClearOutput,
    CheckCellMetadata,
    ComputeChecksums,
    SaveCells,
    ClearHiddenTests,
    ClearMarkScheme,
    ComputeChecksums,
    CheckCellMetadata,
]
c.ClearSolutions.code_stub = {
    "python": "# YOUR CODE HERE\nraise NotImplementedError()",
}
# nbgrader's autograde steps, with the tamper audit (see above) just before the scores are saved.
c.Autograde.autograde_preprocessors = [
    Execute,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    AuditSubmission,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]
# Solution notebooks are generated without running them (outputs hold timings, which change
# every run); `course_build solutions` executes them separately and writes HTML.
c.GenerateSolution.preprocessors = [IncludeHeaderFooter, LockCells, ClearOutput, ClearMarkScheme]
