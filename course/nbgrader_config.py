"""nbgrader configuration of the course (run nbgrader from this directory, course/).

Layout (nbgrader's defaults, made explicit):
    source/<NN_topic>/<NN_topic>.ipynb     master notebooks (the only files anyone edits)
    release/  submitted/  autograded/  feedback/  gradebook.db  exchange/   (git-ignored)
`python -m pingpong_lab.grader.build release` also copies release/ to ../exercises/ and the
solution notebooks to ../solutions/ (see pingpong_lab/grader/build.py).

Grading mode
------------
Every kernel that nbgrader starts with this course's settings (autograde, validate) runs with
PINGPONG_LAB_GRADING=1 (MemoryLimitedKernelManager sets it on the kernel's command line, unless
it is set otherwise already); this file leaves the environment of the process that reads it
(a Jupyter server with Formgrader, say) as it was. The notebooks read it through
`pingpong_lab.course.grading.GRADING` and `grading.scale(normal, grading)`
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
Autograde runs the test cells in a judge kernel of their own (CrashTolerantExecute.judge), which
reaches the learner's variables and functions only through a data-only channel
(pingpong_lab/grader/judge.py): what the learner's kernel changes, the judge does not run.
The course's traces run there on the judge's fakes, and the learner's C programs are built and
run from the judge; only checks that need the learner's MPI engines still run in the learner's
kernel, so a learner's cell could try to replace what they use (`grading.check_pingpong = ...`).
AuditSubmission reads the learner's cells in nbgrader's own process after the notebook ran and
allows only what a course answer needs (pingpong_lab/grader/audit.py); a test that runs after a
refused line scores 0, and its output says which line and why. The course's own code cells (imports,
the engines, helpers) are locked, so nbgrader restores them before grading. Each kernel and
its engines are confined so that they cannot write the course folder but the student's
autograded/ folder (CrashTolerantExecute.confine), and `make autograde` grades every
submission in a sandbox of its own (pingpong_lab/grader/sandbox.py). Threat model:
docs/GRADING.md.

A crash costs only its cell
---------------------------
Autograde runs CrashTolerantExecute (pingpong_lab.grader.preprocessors) in place of nbgrader's
Execute. With plain Execute, a cell that kills the kernel (os._exit, a segfault in the notebook
process, the OOM killer) aborts the notebook and every part scores 0. Instead:
- that cell gets a KernelDiedError output saying how the kernel ended (exit status or signal);
  it is in the autograded notebook and the feedback, and it zeroes the cell if it is a test;
- a fresh kernel runs the code cells above it again (except cells that killed a kernel),
  keeping their first outputs so that their grades do not change, then grading goes on with
  the next cell. Tests that need what the dead cell should have defined fail by
  themselves (NameError); every other part is graded as usual. A restart costs a kernel start
  (~1 s) plus the cells above: 8-14 s in 01_pingpong, where they start the MPI engines.
- a cell that raises MemoryError (see Limits) is treated the same way after its own error:
  what it allocated may still be held by its variables and would starve the cells below;
- a cell that runs past the per-cell timeout is interrupted; a kernel that has not answered
  within CrashTolerantExecute.interrupt_grace (5 s; a cell that ignores SIGINT, a loop in C,
  any confined kernel) is killed with every process it started and replaced as after a death.
  The cell gets a CellTimeoutError output that says which; the cells after it are graded.
  (With plain Execute, a kernel that does not answer the interrupt fails the whole notebook.)
- a cell is never run again after it killed a kernel, ran out of memory or ran past its
  timeout, so a notebook has at most one restart per code cell: no endless loop.
The death is blamed on the cell that was running when the kernel was found dead (a thread that
an earlier cell left behind could kill the kernel later; that cell would then be blamed).
sys.exit() in a cell is caught by IPython (SystemExit: the cell fails, the kernel lives); exit()
and quit() do nothing when a notebook is run by nbgrader. A crash in the MPI engines (C code)
is not a kernel death: MPICluster reports it as EngineCrashError and restarts the engines. The
engines of a dead kernel are ended by their watchdog (pingpong_lab.engines.watchdog).

Limits
------
CrashTolerantExecute.notebook_timeout (default 900 s) bounds a whole notebook, restarts
included: each cell's timeout is cut to the time left, and the cells after the deadline are not
run and score 0 (NotebookTimeoutError). 0 switches it off. A notebook grades in ~20-60 s here,
a deadlock or a restart adds 10-30 s: raise the limit when grading full-size measurements
(PINGPONG_LAB_GRADING=0).

MemoryLimitedKernelManager.memory_limit_mb (default 4096 MiB) limits the memory each kernel
process may allocate (RLIMIT_DATA, set just before the kernel starts). Children inherit it, so
each MPI engine, mpiexec and ipcontroller gets the same limit of its own. A cell that asks for
more gets MemoryError, instead of swapping or starving the grading machine. 0 switches it off.
Why RLIMIT_DATA: it counts only private writable memory (what a process really allocates), not
the address space that MPI reserves or maps shared. Measured with MPICH 5 (UCX): an engine
reaches ~1.2 GB of address space but ~350 MB of data after a 64 MiB ping-pong; RLIMIT_AS at
1 GiB made that ping-pong hang until its deadline, RLIMIT_DATA at 1 GiB did not. A cgroup
limit (systemd-run --user --scope -p MemoryMax=...) would bound the kernel and its engines
together, but needs a user systemd, which grading machines and containers often lack.

C exercises
-----------
nbgrader's ClearSolutions puts the notebook language's stub (Python) in every solution region,
even inside a `%%writefile pingpong.c` cell. We use ClearSolutionsC (from
pingpong_lab.grader.preprocessors), which recognises C cells (first line `%%writefile <name>.c`
or `.h`) and writes a C stub there: a `/* YOUR CODE HERE */` comment and
`return NOT_IMPLEMENTED;`. So the released C compiles (every C solution region sits in a
function returning int, and the cell defines NOT_IMPLEMENTED), and the tests then fail with a
readable "not implemented yet" message.

Learners' HTML
--------------
The feedback pages and Formgrader's manual-grading view are HTML made from the graded notebook
by nbconvert's HTMLExporter, and a learner writes part of that notebook: markdown answers (which
may hold raw HTML and links), the outputs of their code, raw cells. The HTMLExporter lines below
make all of it inert, in both (Formgrader builds its exporter from this file too, when the lab is
started in course/ as `make instructor` does): `sanitize_html` drops JavaScript and widget
outputs and cleans HTML outputs and raw cells, and two filters of pingpong_lab.grader.sanitise
clean the HTML of every markdown cell after it is rendered (nbgrader's templates would show it
as written) with a bleach allow-list. Tables, math, images (data: URIs), code, links to
http(s), <details>, <sub> and the like still show; a script, an event handler, a javascript:
URL, an iframe or a <style> shows as escaped text or not at all. Headings lose their anchor ids
(an id could take the score box of a grade cell in Formgrader), so no anchor links are drawn.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # pingpong_lab, even without `pip install -e .`

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor  # noqa: E402
from nbgrader.preprocessors import (  # noqa: E402
    CheckCellMetadata,
    ClearHiddenTests,
    ClearMarkScheme,
    ClearOutput,
    ComputeChecksums,
    GetGrades,
    IncludeHeaderFooter,
    InstantiateTests,
    LockCells,
    SaveCells,
)

from pingpong_lab import runtime  # noqa: E402
from pingpong_lab.grader.feedback_release import ReleaseFeedback  # noqa: E402
from pingpong_lab.grader.preprocessors import (  # noqa: E402
    ClearHiddenTestOutputs,
    ClearSolutionsC,
    MemoryLimitedKernelManager,
    autograde_preprocessors,
)
from pingpong_lab.grader.zipcollect import CourseCollector  # noqa: E402

# nbgrader runs `alembic` by name: `.venv/bin/nbgrader ...` works without the environment
# activated (its bin folder goes first on PATH, for nbgrader and what it starts)
runtime.own_tools_on_path()

c = get_config()  # noqa: F821 (nbgrader provides get_config)

c.CourseDirectory.course_id = "mpi-pingpong"
c.CourseDirectory.root = HERE
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
c.CourseDirectory.solution_directory = "solution"
# `make autograde` grades each submission into a gradebook of its own and merges the checked
# scores here (pingpong_lab/grader/gradebook.py); Formgrader and the merges wait up to
# `timeout` seconds for one another.
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

# `nbgrader zip_collect NN_topic`: one archive per student (named by the student's id) in
# downloaded/NN_topic/archive/, with the notebook, its C files and my_results/ (see
# pingpong_lab/grader/zipcollect.py); every collected student gets a timestamp.txt.
c.ZipCollectApp.collector_plugin = CourseCollector
# `nbgrader release_feedback` releases the exchange's students and names the LMS ones (their
# feedback goes back through the platform) instead of failing at the first of them.
c.ExchangeFactory.release_feedback = ReleaseFeedback

# The exchange (nbgrader's release/fetch/submit between users) in a writable directory.
c.Exchange.root = os.environ.get("PINGPONG_LAB_EXCHANGE", os.path.join(HERE, "exchange"))
os.makedirs(c.Exchange.root, exist_ok=True)

# Per-cell limit (nbgrader's default is 30 s). Engine start (~7 s, more on a loaded machine),
# one engine restart after a deadlock and a small grading sweep fit in it with room to spare.
c.ExecutePreprocessor.timeout = 150
c.Execute.timeout = 150
c.Execute.interrupt_on_timeout = True
# kernels in grading mode, with the memory limit below (validate as well as autograde)
c.Execute.kernel_manager_class = MemoryLimitedKernelManager

# A kernel death costs only its cell; limits on a notebook's time and a kernel's memory; the
# tamper audit just before the scores are saved (all above).
c.Autograde.autograde_preprocessors = autograde_preprocessors()
c.CrashTolerantExecute.notebook_timeout = 900
c.MemoryLimitedKernelManager.memory_limit_mb = 4096

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
# Solution notebooks are generated without running them (outputs hold timings, which change
# every run); `course_build solutions` executes them separately and writes HTML.
c.GenerateSolution.preprocessors = [IncludeHeaderFooter, LockCells, ClearOutput, ClearMarkScheme]
# Feedback shows learners their answers, scores and the grader's comments; the hidden tests'
# code and the mark schemes of the parts graded by hand (task cells) stay with the instructor,
# who sees them in Formgrader. The lines of a failed test's traceback that quote hidden tests
# are replaced by a mark (ClearHiddenTestOutputs); the error's message still shows.
c.GenerateFeedback.preprocessors = [
    GetGrades,
    ClearHiddenTestOutputs,
    ClearHiddenTests,
    CSSHTMLHeaderPreprocessor,
    ClearMarkScheme,
]
# What learners wrote is shown inert, in the feedback and in Formgrader (see above).
c.HTMLExporter.sanitize_html = True
c.HTMLExporter.exclude_anchor_links = True
c.HTMLExporter.filters = {
    "markdown2html": "pingpong_lab.grader.sanitise.SanitisedMarkdown",
    "clean_html": "pingpong_lab.grader.sanitise.clean_html",
}
# `nbgrader export` writes grades-export.csv: one row per student, assignment and notebook with
# autograded, manual, maximum and total points and a status (graded, needs manual grading,
# missing, failed); see pingpong_lab/grader/export.py.
c.ExportApp.plugin_class = "pingpong_lab.grader.export.ClassExport"
