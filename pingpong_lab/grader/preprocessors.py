"""nbgrader preprocessors of the course (loaded by course/nbgrader_config.py)."""

from __future__ import annotations

import ast
import atexit
import math
import os
import re
import shutil
import signal
import sys
import tempfile
from dataclasses import replace
from queue import Empty
from time import monotonic

import nbformat
import psutil
from jupyter_client.manager import AsyncKernelManager
from jupyter_client.utils import ensure_async, run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import ClearSolutions, Execute, NbGraderPreprocessor, SaveAutoGrades
from traitlets import Bool, Dict, DottedObjectName, Integer, List, Type, Unicode

from .. import runtime
from ..course.cells import is_c_cell, is_locked, is_test
from ..engines.pool import EnginePool
from ..engines.watchdog import wait_ended
from .audit import KERNEL_ARGS, audit_notebook, to_python, unreadable
from .judge_kernel import JudgeError, JudgeKernel, learner_reply, names_read
from .kernel_client import ReadyClient
from .sandbox import NOT_DUMPABLE_LINE, REPO, can_confine, confine_prefix

GRADING_VAR = "PINGPONG_LAB_GRADING"

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


# -- feedback without the hidden tests ----------------------------------------------------------
_BEGIN_HIDDEN, _END_HIDDEN = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"
# a source line as an IPython traceback shows it: an optional arrow, its number, the code
_TRACEBACK_LINE = re.compile(r"^\s*(?:-*>)?\s*\d+\s(.*)$")


def hidden_lines(source: str) -> set[str]:
    """The stripped lines of a test cell's hidden tests, their markers included."""
    hidden, inside = set(), False
    for line in source.splitlines():
        if _BEGIN_HIDDEN in line:
            inside = True
        if inside and line.strip():
            hidden.add(line.strip())
        if _END_HIDDEN in line:
            inside = False
    return hidden


def without_hidden_lines(text: str, hidden: set[str]) -> str:
    """A traceback's text with every line that quotes a hidden test replaced by one mark."""
    from nbconvert.filters import strip_ansi

    out, skipping = [], False
    for line in text.split("\n"):
        shown = _TRACEBACK_LINE.match(strip_ansi(line))
        if shown and shown.group(1).strip() in hidden:
            if not skipping:
                out.append("      ...   (hidden tests)")
            skipping = True
            continue
        skipping = False
        out.append(line)
    return "\n".join(out)


class ClearHiddenTestOutputs(NbGraderPreprocessor):
    """For feedback, before nbgrader's ClearHiddenTests: the tracebacks of a failed test cell
    quote the lines around the failure, hidden tests included; those lines are replaced by a
    mark. The error's name and message stay, so the learner still sees what failed."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and is_test(cell) and _BEGIN_HIDDEN in cell.source:
            hidden = hidden_lines(cell.source)
            for out in cell.outputs:
                if out.get("output_type") == "error":
                    out["traceback"] = [without_hidden_lines(t, hidden) for t in out["traceback"]]
        return cell, resources


# -- the tamper audit -------------------------------------------------------------------------
TAMPER_ERROR = "GraderChanged"


def tamper_note(findings) -> str:
    """What a test cell after a refused line says (AuditSubmission, and validation)."""
    first = min(f.cell for f in findings)
    lines = "\n".join(f"  - {f}" for f in findings)
    return (
        "A cell of this submission changes what the tests use or steps outside what the "
        "course's answers need (see pingpong_lab/grader/audit.py), so the tests that run after "
        f"it (from cell {first} on) score 0:\n{lines}\n"
        "Change those lines as each says (no answer in this course needs them). If this is a "
        "mistake, ask your instructor to look at it (the notebook was graded as submitted, "
        "nothing was removed)."
    )


def tamper_output(note: str):
    """The error output a test cell gets: the note, then one line that says what happened."""
    last = f"{TAMPER_ERROR}: a cell above this test is refused by the course's audit (see above)"
    return nbformat.v4.new_output(
        "error", ename=TAMPER_ERROR, evalue=note, traceback=[f"{TAMPER_ERROR}: {note}", last]
    )


def cells_after_refusal(cells, findings) -> list[int]:
    """Indices of the test cells that run after the first refused line."""
    if not findings:
        return []
    first = min(f.cell for f in findings)
    return [
        i
        for i, cell in enumerate(cells)
        if i >= first and cell.cell_type == "code" and is_test(cell)
    ]


NOT_RUN = "UnreadableCellError"
JUDGE_ERROR = "JudgeError"
RESOURCES_KEY = "pingpong_lab"  # what CrashTolerantExecute tells the later preprocessors


def unreadable_cells(cells) -> dict:
    """Index -> Finding of each learner code cell that the kernel would run in a way the audit
    cannot read (audit.unreadable): grading does not run it at all."""
    found = {}
    for index, cell in enumerate(cells):
        if cell.cell_type == "code" and not is_locked(cell):
            finding = unreadable(cell.source)
            if finding is not None:
                found[index] = replace(finding, cell=index)
    return found


class AuditSubmission(NbGraderPreprocessor):
    """After the notebook ran: a test cell that runs after a learner's cell with a refused line
    scores 0, with a note that says which line did it (see pingpong_lab/grader/audit.py).

    The audit reads the cells in nbgrader's own process, so nothing the learner's code did while
    it ran can hide it. Test cells before the first such cell keep their points.
    """

    def preprocess(self, nb, resources):
        # a cell that could not be read and was never run (CrashTolerantExecute) changed
        # nothing: it costs what it should have defined, and its own output says why
        not_run = set((resources or {}).get(RESOURCES_KEY, {}).get("not_run", ()))
        findings = [f for f in audit_notebook(nb.cells) if not (f.unreadable and f.cell in not_run)]
        if not findings:
            return nb, resources
        note = tamper_note(findings)
        self.log.warning("grader changed: %s", "; ".join(map(str, findings)))
        for index in cells_after_refusal(nb.cells, findings):
            nb.cells[index].outputs.append(tamper_output(note))
        for f in {f.cell for f in findings}:
            nb.cells[f].outputs.append(
                nbformat.v4.new_output("stream", name="stdout", text=f"[grader] {note}\n")
            )
        return nb, resources


# -- grading that survives a crash ------------------------------------------------------------
KERNEL_DIED = "KernelDiedError"
NOTEBOOK_TIMEOUT = "NotebookTimeoutError"
CELL_TIMEOUT = "CellTimeoutError"

# Run as `python -c SET_DATA_LIMIT_AND_EXEC <MiB> <kernel command...>`: the kernel process, and
# every process it starts (MPI engines included), may allocate at most <MiB> of private memory.
SET_DATA_LIMIT_AND_EXEC = (
    "import os, resource, sys; limit = int(sys.argv[1]) << 20; "
    "resource.setrlimit(resource.RLIMIT_DATA, (limit, limit)); "
    "os.execvp(sys.argv[2], sys.argv[2:])"
)


def cells_to_replay(cells, crashed_at: int, skip, judged: bool = False) -> list[int]:
    """Indexes of the code cells above `crashed_at` that a fresh kernel runs again.

    All of them (a test cell may define names that later cells use) except those in `skip`:
    the cells that killed a kernel, ran out of memory or ran past their time limit; and the
    test cells when they ran in the judge (judged), not in the learner's kernel.
    """
    return [
        i
        for i, cell in enumerate(cells[:crashed_at])
        if cell.cell_type == "code"
        and cell.source.strip()
        and i not in skip
        and not (judged and is_test(cell))
    ]


def describe_exit(status) -> str:
    """How a process ended, from its Popen returncode (negative: killed by that signal)."""
    if status is None:
        return "its exit status is unknown"
    if status > 128 and status - 128 in signal.valid_signals():
        status = 128 - status  # through a sandbox (or a shell): 128 + the signal's number
    if status < 0:
        try:
            name, what = signal.Signals(-status).name, signal.strsignal(-status)
        except ValueError:
            name, what = f"signal {-status}", "unknown signal"
        hint = " (out of memory, most often)" if -status == signal.SIGKILL else ""
        return f"killed by {name}, {what}{hint}"
    return f"it exited with status {status}"


def error_output(ename: str, message: str):
    """An nbformat error output: it shows in the notebook and feedback, and zeroes a test cell."""
    return nbformat.v4.new_output(
        "error", ename=ename, evalue=message, traceback=[f"\x1b[0;31m{ename}\x1b[0m: {message}"]
    )


def kernel_died_output(status):
    return error_output(
        KERNEL_DIED,
        f"the kernel died while running this cell ({describe_exit(status)}): this cell's points "
        "are lost, and so are those of tests that need what it should have defined. The cells "
        "after it were run in a fresh kernel (the cells above it were run there again first).",
    )


def cell_timeout_message(limit, ended: bool, time_up: bool = False, cut: bool = False) -> str:
    """What a cell stopped at its time limit says.

    limit: its limit in seconds (None: its reply came but its output never ended); ended: the
    kernel did not answer the interrupt and was killed (the cells after it ran in a fresh one);
    time_up: the notebook's time was up (the cells after it did not run); cut: the notebook's
    deadline made the limit shorter than the cell timeout.
    """
    if limit is None:
        said = "this cell's output did not end after its reply: the kernel was killed"
    else:
        left = ", what was left of the notebook's time" if cut else ""
        said = f"this cell ran past its time limit ({limit:g} s{left}) and was stopped"
        said += ": the kernel did not answer the interrupt and was killed" if ended else ""
    said += " with every process it had started" if ended else " by an interrupt"
    said += (
        ". Its points are lost, and so are those of tests that need what it should have "
        "defined; it is not run again."
    )
    if time_up:
        return said + " The notebook's time was up: the cells after it were not run."
    if ended:
        return said + (
            " The cells after it were run in a fresh kernel (the cells above it were run there "
            "again first)."
        )
    return said + " The cells after it ran in the same kernel."


def cell_timeout_output(limit, ended: bool, time_up: bool = False, cut: bool = False):
    return error_output(CELL_TIMEOUT, cell_timeout_message(limit, ended, time_up, cut))


def end_process_tree(process, pgid: int | None, wait_s: float = 3.0) -> None:
    """Kill a kernel at once: every process of its group (pgid), and every process it started
    that is still its descendant (one that left the group, as with setsid, too).

    Never our own group (a kernel started without a session of its own shares it)."""
    procs = []
    if process is not None and process.poll() is None:
        try:
            leader = psutil.Process(process.pid)
            procs = [leader, *leader.children(recursive=True)]
        except psutil.Error:
            procs = []
    if pgid and pgid != os.getpgrp():
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass  # the group is empty already
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            pass
    wait_ended(procs, wait_s)  # a zombie has ended: whoever adopted it reaps it when it will


class KernelStuck(Exception):
    """The kernel did not answer the interrupt sent after a cell ran past its time limit."""


RESTARTED_AFTER_MEMORY_ERROR = (
    "(the kernel was restarted after this MemoryError: the cells below ran in a fresh one)\n"
)


def grading_env() -> dict[str, str]:
    """Grading mode for the kernels and engines that grading starts: PINGPONG_LAB_GRADING as
    this process has it (`PINGPONG_LAB_GRADING=0 nbgrader ...` grades at full size), 1 when
    unset. Set on their command line, never in this process's environment, so that a Jupyter
    server running Formgrader or Validate starts its other kernels as they were."""
    return {GRADING_VAR: runtime.setting(GRADING_VAR, "1")}


def memory_limit_prefix(limit_mb: int) -> list[str]:
    """The command that runs the command after it with at most limit_mb MiB of private memory
    per process (nothing when limit_mb is 0)."""
    return [sys.executable, "-c", SET_DATA_LIMIT_AND_EXEC, str(limit_mb)] if limit_mb else []


def _removed_at_exit(prefix: str) -> str:
    """A new temporary folder of this grading process, removed when it exits."""
    folder = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, True)
    return folder


class MemoryLimitedKernelManager(AsyncKernelManager):
    """nbgrader's kernel manager, starting the kernel with a limit on its memory (RLIMIT_DATA)
    and, when grading a class, confined (sandbox.confine_prefix).

    The limit is per process and inherited: the kernel, and each MPI engine, mpiexec and
    controller it starts, may each allocate at most memory_limit_mb of private memory. A cell
    that asks for more gets MemoryError instead of swapping the grading machine.

    confine_readonly: folders the kernel (and the engines lent to it) see read-only, except the
    confine_writable folders inside them (CrashTolerantExecute sets them to the course folder
    and the student's autograded/ folder), so that a learner's code cannot write the gradebook
    that nbgrader records its scores in.
    """

    client_class = DottedObjectName("pingpong_lab.grader.kernel_client.ReadyClient")
    client_factory = Type(klass=ReadyClient)

    memory_limit_mb = Integer(
        4096, help="Private memory each kernel process may allocate, in MiB (0: no limit)"
    ).tag(config=True)
    confine_readonly = List(
        Unicode(), help="Folders the kernel and its engines may read but not write"
    ).tag(config=True)
    confine_writable = List(
        Unicode(), help="Folders inside confine_readonly that stay writable"
    ).tag(config=True)
    confine_hidden = List(
        Unicode(), help="Folders the kernel and its engines see empty (the judge's)"
    ).tag(config=True)
    # variables for this kernel only (the engines lent to it); never this process's environment
    kernel_env = Dict(Unicode(), help="Environment variables added for the kernel alone")

    def command_prefix(self) -> list[str]:
        """What the kernel's command (and the lent engines' mpiexec) is started through: the
        confinement, the memory limit, and grading mode set for that process alone. The
        kernel's connection file stays readable in the confinement's empty home."""
        keep = [os.path.dirname(self.connection_file)] if self.connection_file else []
        confine = confine_prefix(
            list(self.confine_readonly), list(self.confine_writable), keep,
            list(self.confine_hidden),
        )  # fmt: skip
        variables = {**grading_env(), **self.kernel_env}
        setting = [shutil.which("env") or "env", *(f"{k}={v}" for k, v in variables.items())]
        return confine + memory_limit_prefix(self.memory_limit_mb) + setting

    def format_kernel_cmd(self, extra_arguments=None):
        command = super().format_kernel_cmd(extra_arguments)
        if any("ipykernel" in part for part in command):  # IPython runs what the audit reads
            command += [arg for arg in KERNEL_ARGS if arg not in command]
            # and no program a learner's code starts can trace the kernel or read its memory
            command.append(f"--IPKernelApp.exec_lines={NOT_DUMPABLE_LINE}")
        return self.command_prefix() + command


# -- MPI engines shared by the notebooks of one submission ------------------------------------
# `MPICluster(n=2)`, `MPICluster(4, ...)`: the engine sizes a notebook starts
_CLUSTER_SIZE = re.compile(r"\bMPICluster\(\s*(?:n\s*=\s*)?(\d+)")


def engine_sizes(cells) -> set[int]:
    """The numbers of engines that the learner's code cells of a notebook start when graded (a
    test cell runs in the judge, which borrows no engines). Engines started only under
    `if not grading.GRADING:` (an experiment that is not graded) are not counted: starting
    them for nothing costs a submission a controller and its engines."""
    return {
        n
        for cell in cells
        if cell.cell_type == "code" and not is_test(cell)
        for n in _graded_cluster_sizes(cell.source)
    }


def _graded_cluster_sizes(source: str) -> set[int]:
    """The sizes of the MPICluster(...) calls of a cell that grading runs (every one found in
    the text when the cell is not Python the audit can read)."""
    try:
        tree = ast.parse(to_python(source))
    except SyntaxError:
        return {int(n) for n in _CLUSTER_SIZE.findall(source)}
    skipped = {  # the calls inside `if not grading.GRADING:` blocks
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and _not_grading(block.test)
        for stmt in block.body
        for node in ast.walk(stmt)
    }
    sizes = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and id(node) not in skipped:
            name = node.func.id if isinstance(node.func, ast.Name) else ""
            given = [*node.args[:1], *(k.value for k in node.keywords if k.arg == "n")]
            if name == "MPICluster":
                sizes |= {g.value for g in given if isinstance(g, ast.Constant)}
    return sizes


def _not_grading(test) -> bool:
    """Whether an `if` test is `not grading.GRADING` (the course's grading-mode flag)."""
    return (
        isinstance(test, ast.UnaryOp)
        and isinstance(test.op, ast.Not)
        and ast.unparse(test.operand) == "grading.GRADING"
    )


class _StudentPool:
    """The engine pool of the student being graded: a new one (and the old one stopped) for
    every other student, so that no state crosses from one submission to another."""

    def __init__(self):
        self.student = None
        self.pool: EnginePool | None = None
        atexit.register(self.close)

    def ready(self, student, sizes, prefix_for) -> None:
        """Engines of `sizes` for this student, their mpiexec started through the prefix that
        `prefix_for()` gives once this student's pool exists (the confinement names the pool's
        own folder); a student unknown (None) shares with no one."""
        if self.pool is None or student is None or student != self.student:
            self.close()
            self.pool = EnginePool()
            self.student = student
            self.pool.mpiexec_prefix = list(prefix_for())
        self.pool.ready(sizes)

    @property
    def env(self) -> dict[str, str]:
        """What a kernel needs to borrow the pool's engines (nothing without a pool)."""
        return self.pool.env if self.pool is not None else {}

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        self.pool = self.student = None


ENGINE_POOL = _StudentPool()


class CrashTolerantExecute(Execute):
    """nbgrader's Execute, where a kernel death costs only the cell that caused it.

    When the kernel dies during a cell (os._exit, a segfault in the notebook process, the OOM
    killer), that cell gets a KernelDiedError output (so it scores 0 if it is a test), a fresh
    kernel runs the code cells above it again, keeping their first outputs (so their grades do
    not change), and execution goes on with the next cell. A cell that raises MemoryError is
    treated the same way (after its own error), since what it allocated may still be held.

    Such a cell is never run again, so a notebook restarts its kernel at most once per code
    cell. A kernel death while the cells above are run again puts that cell on the skip list
    too, and the replay starts over in another fresh kernel.

    A cell that runs past its timeout costs only itself too: the kernel is interrupted; when it
    does not answer within interrupt_grace seconds (a cell that ignores SIGINT, an endless loop
    in C, a confined kernel that the interrupt cannot reach), it is killed with every process of
    its group and every process it started, and restarted as after a death (killed at once,
    without an interrupt, when interrupt_on_timeout is off). The cell gets a CellTimeoutError
    output saying which, and it is never run again either.

    notebook_timeout bounds the whole notebook, restarts included: each cell's timeout is cut to
    the time left, and the cells after the deadline are not run (NotebookTimeoutError).

    With judge (the default), every test cell runs in a second kernel, the judge, which never
    runs a learner's line: it reads the learner's variables as data and calls the learner's
    functions through a data-only channel (judge.py). A judge that dies or runs past the time
    costs that test cell; a learner's function that does not return is interrupted (the
    learner's kernel killed and restarted if it does not answer), as for a stuck cell.

    With engine_pool, the MPI engines that the notebook starts (`MPICluster(n=...)` in its code)
    are started before its kernel and lent to it (pingpong_lab/engines/pool.py): new engines
    for every notebook and after a kernel death, those lent before ended (a learner's code ran
    on them). Another student gets another pool.
    """

    engine_pool = Bool(
        True, help="Lend pre-started MPI engines to the kernels of one student's notebooks"
    ).tag(config=True)

    notebook_timeout = Integer(
        900, help="Seconds for executing one whole notebook, restarts included (0: no limit)"
    ).tag(config=True)

    interrupt_grace = Integer(
        5,
        help="Seconds a kernel has to answer the interrupt sent when a cell runs past its "
        "timeout; then it is killed (with every process it started) and restarted",
    ).tag(config=True)

    confine = Bool(
        True,
        help="Start kernels and engines with the course folder read-only, except the student's "
        "autograded/ folder (needs bubblewrap; without it they are not confined)",
    ).tag(config=True)

    judge = Bool(
        True,
        help="Run test cells in a judge kernel of their own, which reaches the learner's "
        "variables and functions only through a data-only channel (pingpong_lab/grader/judge.py)",
    ).tag(config=True)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", MemoryLimitedKernelManager)
        super().__init__(*args, **kwargs)
        self._deadline = None
        self._skip: set[int] = set()  # cells never run again
        self._ran_over = None  # the time limit of the cell that ran past it (set while it runs)

    def preprocess(self, nb, resources=None, km=None):
        runtime.write_bytecode()  # `nbgrader autograde` run directly: see runtime
        # learner cells the audit cannot read are never sent to a kernel (not replayed either)
        self._unreadable = unreadable_cells(nb.cells)
        if resources is not None:
            resources.setdefault(RESOURCES_KEY, {})["not_run"] = sorted(self._unreadable)
        self._skip = set(self._unreadable)
        self._deadline = monotonic() + self.notebook_timeout if self.notebook_timeout else None
        self._student = ((resources or {}).get("nbgrader") or {}).get("student")
        self._sizes = engine_sizes(nb.cells) if self.engine_pool else set()
        self._engines_ready()
        self._judge_kernel = None
        if self.judge and any(c.cell_type == "code" and is_test(c) for c in nb.cells):
            self._launch_judge(resources)  # it boots while the learner's first cells run
        try:
            return super().preprocess(nb, resources, km)
        finally:
            self._stop_judge()

    def _confined(self, km: MemoryLimitedKernelManager) -> MemoryLimitedKernelManager:
        """km, confined to the student's autograded/ folder when `confine` is on: the course
        folder (its gradebook, every submission) and the temporary folder (the engine pool's
        entries, the engines' profiles) are read-only for the learner's code, but for the
        student's folder and the pool's given-up/ (sandbox.confine_prefix gives each process a
        temporary folder of its own)."""
        if self.confine and self._student and not can_confine():
            self.log.warning("kernels not confined: bubblewrap cannot start here")
        elif self.confine and self._student:
            course = CourseDirectory(config=self.config)
            temporary = os.path.realpath(tempfile.gettempdir())
            km.confine_readonly = [os.path.abspath(course.root)]
            if temporary != "/":
                km.confine_readonly.append(temporary)
            km.confine_readonly += [str(REPO), os.path.realpath(sys.prefix)]  # the code it runs
            mine = os.path.join(course.root, course.autograded_directory, self._student)
            km.confine_writable = [os.path.abspath(mine), self._c_build()]
            if ENGINE_POOL.pool is not None:
                km.confine_writable.append(str(ENGINE_POOL.pool.given_up))
            km.kernel_env = {**km.kernel_env, "PINGPONG_LAB_BUILD": self._c_build()}
            if self.judge:
                km.confine_hidden = [self._judges()]
        return km

    def _judges(self) -> str:
        """Where the judges' connection files are: a folder of this grading process that the
        learner's kernel and engines see empty (a connection file lets whoever reads it run
        code in that kernel), removed at exit."""
        if getattr(self, "_judges_dir", None) is None:
            self._judges_dir = _removed_at_exit("pingpong-lab-judges-")
        return self._judges_dir

    def _c_build(self) -> str:
        """Where confined kernels build learners' C (their home is read-only, and the engines
        load the libraries from there): a folder of this grading process, removed at exit."""
        if getattr(self, "_c_build_dir", None) is None:
            self._c_build_dir = _removed_at_exit("pingpong-lab-c-build-")
        return self._c_build_dir

    def create_kernel_manager(self):
        km = self._confined(super().create_kernel_manager())
        if self.engine_pool and isinstance(km, MemoryLimitedKernelManager):
            km.kernel_env = {**km.kernel_env, **ENGINE_POOL.env}  # it borrows the pool's engines
        return km

    def _engines_ready(self) -> None:
        """Cleared, answering pool engines for this notebook (and none of another student's)."""
        if not self.engine_pool:
            ENGINE_POOL.close()
            return

        def prefix():  # after the switch to this student's pool, whose folder it names
            return self._confined(MemoryLimitedKernelManager(parent=self)).command_prefix()

        started = monotonic()
        ENGINE_POOL.ready(self._student, self._sizes, prefix)
        self.log.info("engines %s ready in %.1f s", sorted(self._sizes), monotonic() - started)

    def _time_left(self) -> float | None:
        return None if self._deadline is None else self._deadline - monotonic()

    def _get_timeout(self, cell):
        timeout = super()._get_timeout(cell)
        left = self._time_left()
        if left is None:
            return timeout
        left = max(1, math.ceil(left))
        return left if timeout is None else min(timeout, left)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not cell.source.strip():
            return super().preprocess_cell(cell, resources, index)
        left = self._time_left()
        if left is not None and left <= 0:
            cell.outputs = [
                error_output(
                    NOTEBOOK_TIMEOUT,
                    f"not run: the {self.notebook_timeout} s allowed for grading this notebook "
                    "were used up by the cells above",
                )
            ]
            return cell, self.resources
        if index in self._unreadable:
            cell.outputs = [error_output(NOT_RUN, str(self._unreadable[index]))]
            return cell, self.resources
        self._ran_over = None
        if self.judge and is_test(cell):
            return self._judged_cell(cell, resources, index)
        try:
            super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            status = self._kernel_exit_status()
            self.log.warning("the kernel died in cell %d (%s)", index, describe_exit(status))
            cell.outputs.append(kernel_died_output(status))
            self._skip.add(index)
            self._restart_and_replay(index)
            return cell, self.resources
        except (KernelStuck, CellTimeoutError):
            # KernelStuck: no answer to the interrupt; nbclient's CellTimeoutError: the reply
            # came but the output never ended (the kernel is busy again, or gone)
            self.log.warning("cell %d ran past its time: killing the kernel", index)
            self._kill_kernel()
            self._skip.add(index)
            cell.outputs.append(self._timeout_output(cell, ended=True))
            if not self._time_up():  # else no cell runs any more: no kernel needed
                self._restart_and_replay(index)
            return cell, self.resources
        if self._ran_over is not None:
            # the kernel answered the interrupt: it goes on, without this cell ever again
            self._skip.add(index)
            cell.outputs = [o for o in cell.outputs if o.get("ename") != CELL_TIMEOUT]
            cell.outputs.append(self._timeout_output(cell, ended=False))
            return cell, self.resources
        if any(out.get("ename") == "MemoryError" for out in cell.outputs):
            # what the cell allocated may still be held by its variables, starving the cells
            # below: they run in a fresh kernel, as after a crash
            self.log.warning("MemoryError in cell %d: restarting the kernel", index)
            cell.outputs.append(
                nbformat.v4.new_output("stream", name="stdout", text=RESTARTED_AFTER_MEMORY_ERROR)
            )
            self._skip.add(index)
            self._restart_and_replay(index)
        return cell, self.resources

    # -- the judge -------------------------------------------------------------------------
    def _judged_cell(self, cell, resources, index):
        """Run a test cell in the judge while the learner's kernel serves it (judge.py)."""
        judge = self._judge()
        if judge is None:
            cell.outputs = [error_output(JUDGE_ERROR, "the judge's kernel could not start")]
            return cell, self.resources
        timeout = self._get_timeout(cell) or 600
        serving = self.kc.execute(judge.serve_code, silent=True, store_history=False)
        try:
            judge.begin(names_read(cell.source), timeout=min(timeout, 60))
        except JudgeError as exc:
            cell.outputs = [error_output(JUDGE_ERROR, str(exc))]
            judge.end()
            self._learner_served(serving, index)
            return cell, self.resources
        learner = self.km, self.kc
        self.km, self.kc = judge.km, judge.kc
        try:
            super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            self.km, self.kc = learner
            cell.outputs.append(error_output(JUDGE_ERROR, "the judge's kernel died in this test"))
            self._stop_judge()
        except (KernelStuck, CellTimeoutError):
            self.km, self.kc = learner
            cell.outputs.append(self._timeout_output(cell, ended=True))
            self._stop_judge()
        finally:
            self.km, self.kc = learner
        if self._ran_over is not None:
            cell.outputs = [o for o in cell.outputs if o.get("ename") != CELL_TIMEOUT]
            cell.outputs.append(self._timeout_output(cell, ended=False))
        if self._judge_kernel is not None:
            self._judge_kernel.end()
        self._learner_served(serving, index)
        return cell, self.resources

    def _judge(self) -> JudgeKernel | None:
        """The notebook's judge, started at its first test cell (None if it cannot start)."""
        if self._judge_kernel is not None and not self._judge_kernel.alive():
            self._stop_judge()
        if self._judge_kernel is None:
            self._launch_judge(self.resources)
        judge = self._judge_kernel
        if judge is None:
            return None
        try:
            judge.connect()
        except Exception as exc:
            self.log.error("the judge's kernel did not start: %s", exc)
            self._stop_judge()
            return None
        return judge

    def _launch_judge(self, resources) -> None:
        """Start the judge's kernel process (connected at its first test cell)."""
        named = {"kernel_name": self.kernel_name} if self.kernel_name else {}
        km = self.kernel_manager_class(config=self.config, **named)
        judge = JudgeKernel(self._judge_confined(km), self.startup_timeout)
        path = (resources or {}).get("metadata", {}).get("path") or None
        try:
            judge.launch(path, self.extra_arguments)
        except Exception as exc:
            self.log.error("the judge's kernel did not start: %s", exc)
            judge.stop()
            return
        self._judge_kernel = judge

    def _judge_confined(self, km):
        """The judge sees the course, the code and the learner's folder read-only; it writes
        only a folder of its own (its C builds). It borrows no engines. Its connection file is
        in a folder of its own that the learner's kernel and engines never see (_judges), and
        is removed once the judge answers (JudgeKernel.connect), before any program runs."""
        km.connection_file = os.path.join(tempfile.mkdtemp(dir=self._judges()), "kernel-judge.json")
        if isinstance(km, MemoryLimitedKernelManager) and self._confined(km).confine_readonly:
            judge_dir = _removed_at_exit("pingpong-lab-judge-")
            km.confine_writable = [judge_dir]
            km.confine_hidden = []
            km.kernel_env = {**km.kernel_env, "PINGPONG_LAB_BUILD": judge_dir}
        return km

    def _stop_judge(self) -> None:
        judge, self._judge_kernel = getattr(self, "_judge_kernel", None), None
        if judge is not None:
            provisioner = getattr(judge.km, "provisioner", None)
            process = getattr(provisioner, "process", None)
            judge.stop()
            end_process_tree(process, getattr(provisioner, "pgid", None))

    def _learner_served(self, msg_id: str, index: int) -> None:
        """Wait for the learner's kernel to end servant.serve: interrupted if it hangs in a
        learner's function, killed and restarted (cells above replayed) if it does not answer."""
        if run_sync(learner_reply)(self.kc, msg_id, self.interrupt_grace) is not None:
            return
        try:
            run_sync(ensure_async)(self.km.interrupt_kernel())
        except Exception as exc:
            self.log.warning("cannot interrupt the learner's kernel: %s", exc)
        if run_sync(learner_reply)(self.kc, msg_id, self.interrupt_grace) is not None:
            return
        self.log.warning("the learner's kernel is stuck after test cell %d: restarting it", index)
        self._kill_kernel()
        if not self._time_up():
            self._restart_and_replay(index)

    def _kernel_exit_status(self):
        process = getattr(getattr(self.km, "provisioner", None), "process", None)
        return process.poll() if process is not None else None

    def _time_up(self) -> bool:
        left = self._time_left()
        return left is not None and left <= 0

    def _timeout_output(self, cell, ended: bool):
        limit = self._ran_over
        cut = limit is not None and limit < (super()._get_timeout(cell) or math.inf)
        return cell_timeout_output(limit, ended, self._time_up(), cut)

    async def _async_handle_timeout(self, timeout, cell=None):
        """A cell ran past its timeout (nbclient calls this): interrupt the kernel, and give it
        interrupt_grace seconds to answer. Returns the reply that ends the cell when it did;
        raises KernelStuck when it did not (preprocess_cell then kills it)."""
        if cell is None:  # not a cell (the kernel's info at the start): nbclient's way
            return await super()._async_handle_timeout(timeout, cell)
        self._ran_over = timeout
        self.log.error("a cell ran past its %s s: interrupting the kernel", timeout)
        if not (self.interrupt_on_timeout and await self._async_interrupted()):
            raise KernelStuck(f"no answer to the interrupt within {self.interrupt_grace} s")
        content = {"status": "error", "ename": CELL_TIMEOUT, "evalue": "", "traceback": []}
        return {"content": content}  # its output is written by preprocess_cell

    async def _async_interrupted(self) -> bool:
        """Interrupt the kernel; True when its reply to the running cell came within
        interrupt_grace seconds (the reply is taken here, so that none is left for later)."""
        try:
            await ensure_async(self.km.interrupt_kernel())
        except Exception as exc:  # a kernel that cannot be interrupted is killed instead
            self.log.warning("cannot interrupt the kernel: %s", exc)
            return False
        deadline = monotonic() + self.interrupt_grace
        while (left := deadline - monotonic()) > 0:
            try:
                msg = await ensure_async(self.kc.shell_channel.get_msg(timeout=min(left, 0.5)))
            except Empty:
                if not await ensure_async(self.km.is_alive()):
                    return False  # the interrupt ended it (or its confinement)
                continue
            if msg.get("msg_type") == "execute_reply":
                return True
        return False

    def _kill_kernel(self) -> None:
        """End the kernel now, with every process of its group and every process it started."""
        provisioner = getattr(self.km, "provisioner", None)
        process = getattr(provisioner, "process", None)
        end_process_tree(process, getattr(provisioner, "pgid", None))

    def _restart_and_replay(self, crashed_at: int) -> None:
        """Replace the kernel by a fresh one that has run the cells above crashed_at again."""
        started = monotonic()
        while True:
            if self._kernel_exit_status() is not None:
                self._kill_kernel()  # what the dead kernel left running in its group
            self._cleanup_kernel()  # the dead kernel's connection file and ports
            self._engines_ready()  # engines still busy with the dead kernel's work: replaced
            self.km = self.create_kernel_manager()
            self.start_new_kernel()
            self.start_new_kernel_client()
            died_in = self._replay_cells_above(crashed_at)
            if died_in is None:
                break
            self.log.warning("the kernel died or hung again in cell %d: skipping it", died_in)
            self._skip.add(died_in)
        self.log.info("fresh kernel ready in %.1f s", monotonic() - started)

    def _replay_cells_above(self, crashed_at: int) -> int | None:
        """Run the cells above crashed_at again, keeping their first outputs.

        Returns the index of the cell the kernel died in (or stopped answering in), or None.
        """
        for index in cells_to_replay(self.nb.cells, crashed_at, self._skip, self.judge):
            left = self._time_left()
            if left is not None and left <= 0:
                return None
            cell = self.nb.cells[index]
            kept = cell.outputs, cell.get("execution_count")
            try:
                self.execute_cell(cell, index, store_history=True)
            except DeadKernelError:
                return index
            except (KernelStuck, CellTimeoutError):
                self._kill_kernel()
                return index
            finally:
                cell.outputs, cell.execution_count = kept
        return None


def autograde_preprocessors() -> list:
    """nbgrader's autograde pipeline, with CrashTolerantExecute in place of Execute and the
    tamper audit just before the scores are saved."""
    from nbgrader.converters import Autograde

    default = Autograde.class_traits()["autograde_preprocessors"].default()
    steps = [CrashTolerantExecute if pp is Execute else pp for pp in default]
    at = steps.index(SaveAutoGrades)
    return [*steps[:at], AuditSubmission, *steps[at:]]
