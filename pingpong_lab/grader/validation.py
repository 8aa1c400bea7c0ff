"""Validate a learner's notebook as the grader will run it: `make validate [NB=03_variability]`
and the student lab's Validate button share these settings.

nbgrader's own `validate` uses nbgrader's defaults outside the course directory: a 30 s cell
timeout and full-size measurements. Here validation takes the course's settings from
course/nbgrader_config.py (cell timeout, memory limit, exchange, course id) and runs the
notebook's kernel in grading mode (PINGPONG_LAB_GRADING=1, small sweeps). Grading mode goes to the
validating kernel only: reading the course's settings leaves this process's environment as it
was, so a Jupyter server that validates keeps starting the learner's own kernels at full size.

    python -m pingpong_lab.grader.validation [NOTEBOOK_OR_NAME ...]    (from the repository)

prints one verdict per notebook (passed, or which lines the course's audit refuses and which
tests fail and why) and exits 1 when any fails.

The audit (audit.py) runs here as it does when grading: each line it refuses is listed with
the reason, a notebook with one does not pass, and the test cells after it fail with the
`GraderChanged` error that grading gives them, in `make validate` and in the lab's Validate
button alike (hooks of nbgrader's Execute, set by course_config).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .audit import Finding, audit_notebook
from .preprocessors import (
    NOT_RUN,
    MemoryLimitedKernelManager,
    cells_after_refusal,
    tamper_note,
    tamper_output,
    unreadable_cells,
)

REPO = Path(__file__).resolve().parents[2]
COURSE = REPO / "course"
EXERCISES = REPO / "exercises"
GRADING_VAR = "PINGPONG_LAB_GRADING"


class GradingModeKernelManager(MemoryLimitedKernelManager):
    """The course's kernel manager (memory limit), starting the kernel in grading mode and in
    a copy of the notebook's folder (`apart`): what validating writes (its small grading-mode
    sweeps, C files, results) lands in the copy, removed afterwards, and the learner's own
    files stay as their notebook left them."""

    _apart: str | None = None

    async def _async_pre_start_kernel(self, **kw):
        # nbgrader's Validator runs in the notebook's folder (it changes directory to it)
        folder = Path(kw.get("cwd") or os.getcwd()).resolve()
        if self._apart is None:
            self._apart = tempfile.mkdtemp(prefix="pingpong-lab-validate-")
            apart(folder, Path(self._apart))
        kw["cwd"] = str(Path(self._apart) / folder.name)  # a restart: the same copy
        return await super()._async_pre_start_kernel(**kw)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart and self._apart is not None:
            shutil.rmtree(self._apart, ignore_errors=True)
            self._apart = None

    def format_kernel_cmd(self, extra_arguments=None):
        cmd = super().format_kernel_cmd(extra_arguments)
        return [shutil.which("env") or "env", f"{GRADING_VAR}=1", *cmd]


def apart(folder: Path, scratch: Path) -> Path:
    """A copy of a notebook's `folder` in `scratch`, with its siblings' my_results/ (what the
    notebook may read from the notebooks before it); the copy's path."""
    from ..course.handoff import RESULTS_FOLDER

    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "*.so", "*.o", "__pycache__")
    copy = scratch / folder.name
    shutil.copytree(folder, copy, symlinks=True, ignore=ignore)
    for results in folder.parent.glob(f"*/{RESULTS_FOLDER}"):
        if results.parent != folder and results.is_dir():
            shutil.copytree(results, scratch / results.parent.name / RESULTS_FOLDER, symlinks=True)
    return copy


# Notebooks being validated that have refused lines: their cells, and the indices of the test
# cells still to mark -> the note. nbclient gives its hooks the cell, not the notebook, so a
# cell is matched by identity; the hooks must be plain functions (nbgrader copies its config).
_RUNS: list[tuple[list, dict[int, str]]] = []


def audit_at_start(notebook, **_) -> None:
    """nbclient's on_notebook_start: audit the notebook about to run, as grading will. A cell
    the audit cannot read is not run, as when grading (its output says why instead)."""
    for index, finding in unreadable_cells(notebook.cells).items():
        notebook.cells[index].source = f"raise SyntaxError({NOT_RUN + ': ' + str(finding)!r})"
    findings = [f for f in audit_notebook(notebook.cells) if not f.unreadable]
    if findings:
        note = tamper_note(findings)
        marks = dict.fromkeys(cells_after_refusal(notebook.cells, findings), note)
        _RUNS.append((notebook.cells, marks))


def mark_refused_tests(cell, cell_index, **_) -> None:
    """nbclient's on_cell_start: the test cells above this one have run, and those after a
    refused line get the GraderChanged error that grading gives them (AuditSubmission).

    (nbgrader's Execute keeps on_cell_executed for itself, and the hook after the last cell
    is not run by nbconvert: a test cell is marked when the next cell starts. Every course
    notebook ends with a markdown cell; tests/unit/test_audit.py checks it.)"""
    for run in list(_RUNS):
        cells, marks = run
        if cell_index < len(cells) and cells[cell_index] is cell:
            for index in sorted(i for i in marks if i < cell_index):
                cells[index].outputs.append(tamper_output(marks.pop(index)))
            if not marks:
                _RUNS.remove(run)


def course_config(course: Path = COURSE):
    """The course's nbgrader settings, read without changing this process's environment, and
    with validation in grading mode and the course's audit."""
    from traitlets.config.loader import PyFileConfigLoader

    config_file = Path(course) / "nbgrader_config.py"
    if not config_file.is_file():
        raise FileNotFoundError(f"no nbgrader_config.py in {course}: is this the course folder?")
    saved = dict(os.environ)
    try:
        config = PyFileConfigLoader(config_file.name, path=str(config_file.parent)).load_config()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    config.Execute.kernel_manager_class = GradingModeKernelManager
    config.Execute.on_notebook_start = audit_at_start
    config.Execute.on_cell_start = mark_refused_tests
    return config


def notebooks(names: list[str], exercises: Path = EXERCISES) -> list[Path]:
    """Notebook paths for names (`03_variability`) or paths; every exercise when none."""
    if not names:
        found = sorted(exercises.glob("*/*.ipynb"))
        if not found:
            raise FileNotFoundError(f"no notebooks under {exercises} (run `make release`)")
        return found
    paths = []
    for name in names:
        path = Path(name)
        if path.suffix != ".ipynb":
            path = exercises / name / f"{name}.ipynb"
        if not path.is_file():
            known = ", ".join(sorted(p.name for p in exercises.iterdir() if p.is_dir()))
            raise FileNotFoundError(f"no notebook {path} (the exercises are: {known})")
        paths.append(path)
    return paths


def _grade_ids(path: Path) -> dict[str, str]:
    """A cell's source -> its grade_id, for the graded cells of the notebook."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    return {
        cell.source.strip(): cell.metadata.nbgrader.get("grade_id", "?")
        for cell in nb.cells
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade")
    }


def _last_line(error: str) -> str:
    """The line of a test's error that says what failed (the exception, without colours)."""
    from nbconvert.filters import strip_ansi

    lines = [line.strip() for line in strip_ansi(error).splitlines() if line.strip()]
    last = lines[-1] if lines else "no output"
    if last.rstrip(":") == "NotImplementedError":
        return "not done yet (the code it tests still raises NotImplementedError)"
    return last


def refused(path: Path) -> list[Finding]:
    """The lines of a notebook that the course's audit refuses (audit.py)."""
    import nbformat

    return audit_notebook(nbformat.read(str(path), as_version=4).cells)


def verdict(path: Path, results: dict, findings=()) -> tuple[bool, str]:
    """(passed, text) for one notebook from nbgrader Validator.validate's results and the lines
    the audit refuses."""
    name = path.stem
    if results.get("type_changed"):
        return False, f"{name}: FAILED - the type of {len(results['type_changed'])} cell(s) changed"
    if results.get("changed"):
        count = len(results["changed"])
        return False, f"{name}: FAILED - {count} read-only course cell(s) were edited"
    failed = results.get("failed", [])
    if not failed and not findings:
        return True, f"{name}: passed"
    what = [f"{len(findings)} line(s) refused"] if findings else []
    what += [f"{len(failed)} test(s) fail"] if failed else []
    lines = [f"{name}: FAILED - {', '.join(what)}"]
    if findings:
        lines.append("  refused (the tests after the first one score 0 when graded):")
        lines += [f"    {f}" for f in findings]
    ids = _grade_ids(path)
    for cell in failed:
        grade_id = ids.get(cell["source"].strip(), "a cell")
        lines.append(f"  {grade_id}: {_last_line(cell['raw_error'])}")
    return False, "\n".join(lines)


def validate(path: Path, config=None) -> tuple[bool, str]:
    """Run one notebook as the grader will (the file itself is not changed)."""
    from nbgrader.validator import Validator

    validator = Validator(config=config if config is not None else course_config())
    return verdict(path, validator.validate(str(path)), refused(path))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pingpong_lab.grader.validation",
        description="Validate notebooks with the course's settings, in grading mode.",
    )
    parser.add_argument("notebooks", nargs="*", help="names (03_variability) or .ipynb paths")
    args = parser.parse_args(argv)
    try:
        paths = notebooks(args.notebooks)
        config = course_config()
    except FileNotFoundError as exc:
        print(f"validate: {exc}", file=sys.stderr)
        return 2
    all_passed = True
    for path in paths:
        print(f"validating {path.relative_to(REPO) if path.is_relative_to(REPO) else path} ...")
        for finding in refused(path):  # before the run, which takes a while
            print(f"  refused: {finding}", flush=True)
        passed, text = validate(path, config)
        print(text, flush=True)
        all_passed &= passed
    return 0 if all_passed else 1


if __name__ == "__main__":
    sys.exit(main())
