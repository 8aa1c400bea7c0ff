"""Course tooling without nbgrader runs: C stubs, notebook hygiene, the course config."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from pingpong_lab.course import grading
from pingpong_lab.grader import build, preprocessors

ROOT = Path(__file__).resolve().parents[2]
COURSE = ROOT / "course"
ASSIGNMENTS = build.assignments(COURSE)


def _cell(source, solution=True):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {
        "grade": False,
        "grade_id": "x",
        "locked": False,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    return cell


C_CELL = """%%writefile pp.c
#include <mpi.h>
#define NOT_IMPLEMENTED (-99)
int f(MPI_Comm comm)
{
    /* BEGIN SOLUTION */
    int rank;
    MPI_Comm_rank(comm, &rank);
    return rank;
    /* END SOLUTION */
}"""


def test_a_c_cell_gets_a_c_stub_and_a_python_cell_the_python_stub():
    pre = preprocessors.ClearSolutionsC()
    c_cell, py_cell = (
        _cell(C_CELL),
        _cell("def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION"),
    )
    resources = {"language": "python"}
    pre.preprocess_cell(c_cell, resources, 0)
    pre.preprocess_cell(py_cell, resources, 1)
    assert "    /* YOUR CODE HERE */\n    return NOT_IMPLEMENTED;" in c_cell.source
    assert "raise NotImplementedError" not in c_cell.source and "MPI_Comm_rank" not in c_cell.source
    assert "    # YOUR CODE HERE\n    raise NotImplementedError()" in py_cell.source


def test_a_c_solution_cell_without_a_region_is_refused():
    pre = preprocessors.ClearSolutionsC()
    with pytest.raises(RuntimeError, match="BEGIN SOLUTION"):
        pre.preprocess_cell(
            _cell("%%writefile x.c\nint f(void) { return 0; }"), {"language": "python"}, 0
        )


@pytest.mark.parametrize(
    "first", ["%%writefile a.c", "%%writefile -a dir/b.h", "  %%writefile x.c  "]
)
def test_c_cells_are_recognised_by_their_writefile_line(first):
    assert preprocessors.is_c_cell(first + "\nint x;")


@pytest.mark.parametrize("first", ["%%writefile a.py", "x = 1", "# %%writefile a.c"])
def test_other_cells_are_not_c_cells(first):
    assert not preprocessors.is_c_cell(first + "\n")


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_source_notebooks_are_committed_without_outputs(name):
    nb = json.loads((COURSE / "source" / name / f"{name}.ipynb").read_text())
    dirty = [
        i
        for i, c in enumerate(nb["cells"])
        if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))
    ]
    assert not dirty, f"{name}: cells {dirty} have outputs; clear them before committing"


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_every_notebook_has_hidden_tests_parts_and_a_check_before_each_graded_cell(name):
    nb = json.loads((COURSE / "source" / name / f"{name}.ipynb").read_text())
    text = ["".join(c["source"]) for c in nb["cells"]]
    assert any("### BEGIN HIDDEN TESTS" in t for t in text), f"{name} has no hidden tests"
    assert any(re.search(r"^## Part [A-Z].*\(\d+ points?\)", t, re.M) for t in text)
    assert any("Key points" in t for t in text)


@pytest.mark.parametrize("name", ["00_setup", "01_pingpong", "02_timing"])
def test_course_notebooks_shrink_in_grading_mode_and_stop_their_engines(name):
    if name not in ASSIGNMENTS:
        pytest.skip(f"{name} not in course/source")
    nb = json.loads((COURSE / "source" / name / f"{name}.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "cluster.stop()" in code
    assert "grading.quiet()" in code


@pytest.mark.parametrize("name", ["01_pingpong", "02_timing"])
def test_the_released_c_stub_compiles_and_reports_not_implemented(name):
    nb = json.loads((ROOT / "exercises" / name / f"{name}.ipynb").read_text())
    c_cells = [
        "".join(c["source"]) for c in nb["cells"] if preprocessors.is_c_cell("".join(c["source"]))
    ]
    assert c_cells and all("/* YOUR CODE HERE */" in c for c in c_cells)
    from pingpong_lab.mpi.ckernels import compile_c

    for source in c_cells:
        lib = compile_c(source.split("\n", 1)[1], name="stubcheck")
        assert Path(lib).is_file()


def test_normalising_a_notebook_is_idempotent_and_drops_volatile_metadata(tmp_path):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x = 1")
    cell.metadata["execution"] = {"iopub.execute_input": "2025-01-01"}
    cell.outputs = [nbformat.v4.new_output("stream", text="1")]
    nb.cells.append(cell)
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.7"}
    nb.metadata["widgets"] = {}
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, path)
    build.normalise_notebook(path)
    first = path.read_bytes()
    build.normalise_notebook(path)
    assert path.read_bytes() == first
    data = json.loads(first)
    assert data["metadata"] == {"language_info": {"name": "python"}}
    assert data["cells"][0]["metadata"] == {} and data["cells"][0]["outputs"] == []


def test_the_course_config_sets_grading_mode_timeouts_limits_and_crash_tolerant_autograde(
    monkeypatch,
):
    from traitlets.config import Config

    monkeypatch.delenv("PINGPONG_LAB_GRADING", raising=False)
    config = Config()
    namespace = {"get_config": lambda: config, "__file__": str(COURSE / "nbgrader_config.py")}
    exec(
        compile((COURSE / "nbgrader_config.py").read_text(), "nbgrader_config.py", "exec"),
        namespace,
    )
    import os

    # grading mode goes to the kernels, never into the environment of the reading process
    assert "PINGPONG_LAB_GRADING" not in os.environ
    assert config.Execute.kernel_manager_class is preprocessors.MemoryLimitedKernelManager
    assert config.Execute.timeout > grading.ENGINE_TIMEOUT_S + 60  # a deadlock + engine restart
    assert config.Exchange.root
    assert preprocessors.CrashTolerantExecute in config.Autograde.autograde_preprocessors
    assert config.CrashTolerantExecute.notebook_timeout > 2 * config.Execute.timeout
    assert config.MemoryLimitedKernelManager.memory_limit_mb >= 1024
