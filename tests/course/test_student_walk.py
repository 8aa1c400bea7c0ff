"""A learner walks the released course from 00 to 05, every answer cell filled in, in order.

What each notebook saves, the next ones load: this test answers the released notebooks
(exercises/) with the solutions' cells, runs them one after the other in one folder as a
learner would (not in grading mode: results are saved and loaded; a dry run,
PINGPONG_LAB_QUICK=1, keeps every measurement small) and checks that each notebook ran to the
end and loaded the results of the notebook that writes them, never the shipped fallback, from
the writer's own folder (<notebook>/my_results/, which nbgrader submits with it).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from pingpong_lab.engines.pool import EnginePool
from pingpong_lab.grader.preprocessors import engine_sizes

ROOT = Path(__file__).resolve().parents[2]
NAMES = sorted(p.name for p in (ROOT / "course" / "source").iterdir() if p.is_dir())
CELL_TIMEOUT_S = 600  # a deadline for a hung cell, not a speed target

_LOAD = re.compile(r"handoff\.load\(\s*\"([^\"]+)\"")
_SAVE = re.compile(r"(?:save_result|handoff\.save)\(\s*\"([^\"]+)\"")


def answered(name: str) -> nbformat.NotebookNode:
    """The released notebook `name` with every answer cell as the solution writes it."""
    released = nbformat.read(ROOT / "exercises" / name / f"{name}.ipynb", as_version=4)
    solution = nbformat.read(ROOT / "solutions" / name / f"{name}.ipynb", as_version=4)
    answers = {
        c.metadata["nbgrader"]["grade_id"]: c.source
        for c in solution.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }
    for cell in released.cells:
        grade = cell.metadata.get("nbgrader", {})
        if grade.get("solution"):
            cell.source = answers[grade["grade_id"]]
    return released


def _code(nb) -> str:
    return "\n".join(c.source for c in nb.cells if c.cell_type == "code")


def _text_out(nb) -> str:
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream":
                out.append(o["text"])
            elif "data" in o and "text/plain" in o["data"]:
                out.append(o["data"]["text/plain"])
    return "".join(out)


@pytest.fixture(scope="module")
def walked(tmp_path_factory):
    """{name: executed notebook} of the whole course, walked in order, each notebook in its
    own folder under one root as in exercises/; and the root."""
    root = tmp_path_factory.mktemp("walk")
    env = {
        "PINGPONG_LAB_QUICK": "1",
        "PINGPONG_LAB_GRADING": "0",
        "PINGPONG_LAB_RESULTS": "",  # the default: each notebook's own my_results/
        "PINGPONG_LAB_PROGRESS": "0",
        "MPLBACKEND": "Agg",
    }
    saved_env = {k: os.environ.get(k) for k in env}
    done = {}
    with EnginePool() as pool:
        os.environ.update(env | pool.env)
        try:
            for name in NAMES:
                nb = answered(name)
                folder = root / name
                folder.mkdir()
                pool.ready(sorted(engine_sizes(nb.cells)))
                client = NotebookClient(
                    nb,
                    timeout=CELL_TIMEOUT_S,
                    kernel_name="python3",
                    resources={"metadata": {"path": str(folder)}},
                    allow_errors=True,
                )
                client.execute()
                (folder / f"{name}.ipynb").write_text(json.dumps(nb, indent=1))
                done[name] = nb
        finally:
            for k, v in saved_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            os.environ.pop("PINGPONG_LAB_ENGINE_POOL", None)
    return done, root


@pytest.mark.parametrize("name", NAMES)
def test_the_answered_release_runs_to_the_end_without_an_error(walked, name):
    done, _ = walked
    errors = [
        f"cell {i}: {o.get('ename')}: {o.get('evalue')}"
        for i, cell in enumerate(done[name].cells)
        for o in cell.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert errors == []


@pytest.mark.parametrize("name", NAMES)
def test_each_notebook_loads_what_the_earlier_ones_saved_not_the_shipped_data(walked, name):
    done, root = walked
    nb = done[name]
    out = _text_out(nb)
    assert "No saved result" not in out and "Could not read" not in out
    for loaded in _LOAD.findall(_code(nb)):
        writers = [n for n in NAMES if n < name and loaded in _SAVE.findall(_code(done[n]))]
        assert writers, f"{name} loads {loaded!r}, which no earlier notebook saves"
        assert f"Using your result {loaded}.npz" in out, f"{name} did not use its own {loaded}"
        assert (root / writers[-1] / "my_results" / f"{loaded}.npz").is_file()


def test_every_result_is_kept_in_its_notebooks_folder_with_where_it_was_measured(walked):
    from pingpong_lab.course import handoff

    done, root = walked
    saved = {n: _SAVE.findall(_code(done[n])) for n in NAMES}
    assert saved["05_contention"] == ["05_contention"], saved
    for name, results in saved.items():
        for result in results:
            data = handoff.load(result, fallback={}, directory=root / name / "my_results")
            assert data["_host"] and data["_cpu"] and data["_mpi"] and len(data["_sha256"]) == 64
    assert not (root / "my_results").exists()


def test_every_name_a_released_cell_reads_is_given_to_the_learner():
    """A name that a later cell reads is defined outside the answer blocks (`x = None` to
    replace, a function's signature), so the released notebook says what to call it.

    ruff's undefined-name check on exercises/ (answer blocks are empty there) finds any that
    only the solution defines."""
    import shutil
    import subprocess

    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (make setup installs it)")
    run = subprocess.run(
        [ruff, "check", "--select", "F821", "--output-format", "concise", "--no-cache",
         str(ROOT / "exercises")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout


def test_each_load_names_the_notebook_that_saves_that_result():
    source = {
        n: _code(nbformat.read(ROOT / "course" / "source" / n / f"{n}.ipynb", as_version=4))
        for n in NAMES
    }
    loads = re.compile(r"handoff\.load\(\s*\"([^\"]+)\".*?writer=\"([^\"]+)\"", re.S)
    found = [
        (name, result, writer) for name in NAMES for result, writer in loads.findall(source[name])
    ]
    assert found, "no notebook loads a result"
    for name, result, writer in found:
        assert writer in source, f"{name} names an unknown writer {writer!r} for {result}"
        assert result in _SAVE.findall(source[writer]), f"{writer} does not save {result}"
        assert writer < name, f"{name} loads {result} from a later notebook, {writer}"


def test_no_notebook_counts_cores_with_os_cpu_count():
    """os.cpu_count() counts the machine's cores, not the ones a job may use (affinity, cgroup
    quota): the notebooks use notebook.usable_cores() or environment.cpu_count()."""
    for name in NAMES:
        nb = nbformat.read(ROOT / "course" / "source" / name / f"{name}.ipynb", as_version=4)
        assert "os.cpu_count()" not in _code(nb), name


def test_the_release_holds_only_what_course_source_tracks():
    """Running a master notebook in place writes files beside it (C sources, sweeps): they are
    git-ignored there and must not reach exercises/ or solutions/ through a release."""
    import subprocess

    tracked = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "course/source", "exercises", "solutions"],
        capture_output=True, text=True, check=False,
    ).stdout.split()  # fmt: skip
    if not tracked:
        pytest.skip("not a git checkout")
    source = {p.split("/", 2)[2] for p in tracked if p.startswith("course/source/")}
    released = {p.split("/", 1)[1] for p in tracked if p.startswith(("exercises/", "solutions/"))}
    assert released <= source, sorted(released - source)
