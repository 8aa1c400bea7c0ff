"""Notebooks 01 (ping-pong) to 05 (contention): structure and execution.

The structure tests read the source notebooks only (fast). The execution tests read the
solutions and the untouched releases as the grader executed them in grading mode (the class of
tests/course/classroom.py, graded once per session) and check that no cell of a solution fails,
that no graded cell writes to stderr (nbgrader would give it 0 points), and that a release left
unanswered fails only where an answer is missing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import requires_mpi

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "course" / "source"
NOTEBOOKS = ["01_pingpong", "02_timing", "03_variability", "04_model", "05_contention"]
NEXT = {
    "01_pingpong": "02_timing",
    "02_timing": "03_variability",
    "03_variability": "04_model",
    "04_model": "05_contention",
    "05_contention": None,
}
PART = re.compile(r"^## Part ([A-Z])\b.*\((\d+) points?\)", re.MULTILINE)


def load(name: str) -> dict:
    return json.loads((SOURCE / name / f"{name}.ipynb").read_text())


def meta(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def text(cell: dict) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def graded(nb: dict) -> list[tuple[int, dict]]:
    """The autograded test cells (code); manually graded answers are markdown."""
    return [
        (i, c)
        for i, c in enumerate(nb["cells"])
        if meta(c).get("grade") and c["cell_type"] == "code"
    ]


def tasks(nb: dict) -> list[tuple[int, dict]]:
    """The manually graded task cells (nbgrader 'task': points, graded by hand)."""
    return [(i, c) for i, c in enumerate(nb["cells"]) if meta(c).get("task")]


@pytest.fixture(params=NOTEBOOKS)
def name(request) -> str:
    return request.param


def test_the_notebook_opens_with_questions_objectives_and_a_time_estimate(name):
    first = load(name)["cells"][0]
    assert first["cell_type"] == "markdown"
    src = text(first)
    assert src.startswith("# " + name[:2]), "the title names the notebook number"
    for needed in ("## Questions", "## Objectives", "**Time:**"):
        assert needed in src, f"{name}: the first cell lacks {needed!r}"
    assert src.index("## Questions") < src.index("## Objectives")


def test_the_notebook_closes_with_key_points_and_a_link_onwards(name):
    last = text(load(name)["cells"][-1])
    assert "## Key points" in last
    nxt = NEXT[name]
    if nxt:
        assert f"../{nxt}/{nxt}.ipynb" in last, f"{name} must link to {nxt}"
    else:
        assert "](" in last, "the last notebook links somewhere to go next"


def test_source_notebooks_carry_no_outputs(name):
    for i, cell in enumerate(load(name)["cells"]):
        if cell["cell_type"] == "code":
            assert not cell.get("outputs") and cell.get("execution_count") is None, f"cell {i}"


def test_grade_ids_are_unique_and_descriptive(name):
    ids = [meta(c)["grade_id"] for c in load(name)["cells"] if meta(c)]
    assert len(ids) == len(set(ids)), f"duplicate grade_id in {name}: {ids}"
    for gid in ids:
        assert re.fullmatch(r"[a-z][a-z0-9_]{3,}", gid), f"grade_id {gid!r} is not descriptive"


def test_every_graded_cell_follows_a_visible_check_cell(name):
    cells = load(name)["cells"]
    for i, _ in graded(load(name)):
        prev = next(j for j in range(i - 1, -1, -1) if cells[j]["cell_type"] == "code")
        check = meta(cells[prev])  # a plain cell, or a read-only course cell (locked)
        assert not check.get("solution") and not check.get("grade"), (
            f"{name} cell {i}: the code cell before a test is a check"
        )
        assert any(meta(c).get("solution") for c in cells[:prev]), (
            f"{name} cell {i}: a test needs a solution cell above it"
        )


def test_test_cells_have_a_docstring_hidden_tests_and_no_stderr(name):
    for i, cell in graded(load(name)):
        src = text(cell)
        assert re.match(r'"""[^\n]+"""\n', src), f"{name} cell {i}: one-line docstring first"
        assert "with grading.quiet():" in src, f"{name} cell {i}: work runs inside quiet()"
        assert meta(cell).get("locked") and meta(cell).get("points", 0) > 0
    assert any("### BEGIN HIDDEN TESTS" in text(c) for _, c in graded(load(name)))
    for _, c in graded(load(name)):
        src = text(c)
        assert src.count("### BEGIN HIDDEN TESTS") == src.count("### END HIDDEN TESTS")


def test_solution_cells_are_stubs_with_docstrings(name):
    cells = [c for c in load(name)["cells"] if meta(c).get("solution") and c["cell_type"] == "code"]
    assert cells, f"{name} has no exercise"
    for cell in cells:
        src = text(cell)
        c_cell = src.lstrip().startswith("%%writefile")
        begin, end = (
            ("/* BEGIN SOLUTION */", "/* END SOLUTION */")
            if c_cell
            else (
                "### BEGIN SOLUTION",
                "### END SOLUTION",
            )
        )
        assert begin in src and end in src, f"solution region missing in:\n{src[:200]}"
        if c_cell:
            assert "#define NOT_IMPLEMENTED" in src, "C cells define NOT_IMPLEMENTED for the stub"
        else:
            assert '"""' in src.split(begin)[0], "the stub keeps a docstring above the solution"


def test_part_points_add_up_to_the_graded_points(name):
    nb = load(name)
    cells = nb["cells"]
    parts = []  # (letter, points, index of header cell)
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "markdown":
            for letter, pts in PART.findall(text(cell)):
                parts.append((letter, int(pts), i))
    assert parts, f"{name} has no '## Part X (N points)' sections"
    letters = [p[0] for p in parts]
    assert letters == [chr(ord("A") + k) for k in range(len(parts))], letters
    bounds = [p[2] for p in parts] + [len(cells)]
    for (letter, pts, start), end in zip(parts, bounds[1:], strict=True):
        got = sum(
            meta(c).get("points", 0)
            for c in cells[start:end]
            if meta(c).get("grade") or meta(c).get("task")  # task: scored by hand
        )
        assert got == pts, f"{name} Part {letter}: header says {pts}, tests give {got}"
        before = text(cells[start - 1]).strip() if start else ""
        assert before.startswith("---") or text(cells[start]).startswith("---"), (
            f"{name} Part {letter} is not separated by ---"
        )


MANUAL = ["04_model", "05_contention"]
EXERCISES = ROOT / "exercises"


@pytest.mark.parametrize("nb_name", MANUAL)
def test_written_answers_are_tasks_with_a_mark_scheme_that_the_release_removes(nb_name):
    source = tasks(load(nb_name))
    assert 1 <= len(source) <= 3, f"{nb_name}: one to three written answers"
    for i, cell in source:
        m, src = meta(cell), text(cell)
        assert cell["cell_type"] == "markdown" and m.get("locked") and not m.get("grade")
        assert 2 <= m.get("points", 0) <= 3, f"{nb_name} cell {i}: 2-3 points"
        assert src.count("=== BEGIN MARK SCHEME ===") == 1 == src.count("=== END MARK SCHEME ===")
        assert "Rubric" in src.split("=== BEGIN MARK SCHEME ===")[1]
        answer = load(nb_name)["cells"][i + 1]
        assert answer["cell_type"] == "markdown" and not meta(answer), (
            f"{nb_name} cell {i}: an editable answer cell follows the task"
        )
    for folder in (EXERCISES, ROOT / "solutions"):
        released = json.loads((folder / nb_name / f"{nb_name}.ipynb").read_text())
        ids = {meta(c)["grade_id"]: text(c) for _, c in tasks(released)}
        assert set(ids) == {meta(c)["grade_id"] for _, c in source}, "make release is out of date"
        for gid, src in ids.items():
            assert "MARK SCHEME" not in src and "Rubric" not in src, f"{folder.name}: {gid}"
            assert re.match(r"\*\*[A-Z]\d \(", src), f"{folder.name}: {gid} keeps its question"


def test_every_name_a_code_cell_reads_is_defined_above_it(name):
    """A name from another notebook (02 once used 01's TAG) is a NameError for the learner."""
    import builtins

    from pingpong_lab.grader import audit

    known = set(dir(builtins)) | {"get_ipython", "display"}
    for i, cell in enumerate(load(name)["cells"]):
        tree = audit.parse(text(cell)) if cell["cell_type"] == "code" else None
        if tree is None:
            continue
        missing = audit.free_names(tree) - known
        assert not missing, f"{name} cell {i} reads {sorted(missing)}, defined nowhere above it"
        known |= set(audit.bindings(tree))


def _notebook_scope_names(tree) -> set[str]:
    """The names a cell binds in the notebook's namespace (not those local to a function, a
    lambda or a comprehension)."""
    import ast

    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
              ast.SetComp, ast.DictComp, ast.GeneratorExp)  # fmt: skip
    names, todo = set(), [tree]
    while todo:
        for child in ast.iter_child_nodes(todo.pop()):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(child.name)
            elif isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                names.add(child.id)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                names |= {(a.asname or a.name).split(".")[0] for a in child.names}
            if not isinstance(child, scopes):
                todo.append(child)
    return names


def test_no_test_cell_rebinds_a_name_of_the_learners_cells(name):
    """Where test cells run in the learner's kernel (the lab, Validate), a test that assigns
    `t_c` or `alpha` would replace the learner's own for every cell below it."""
    from pingpong_lab.grader import audit

    def is_test(cell):
        return meta(cell).get("grade") and not meta(cell).get("solution")

    cells = [(c, audit.parse(text(c))) for c in load(name)["cells"] if c["cell_type"] == "code"]
    learners = set().union(
        *(_notebook_scope_names(tree) for c, tree in cells if tree and not is_test(c))
    )
    for cell, tree in cells:
        if tree is not None and is_test(cell):
            shared = _notebook_scope_names(tree) & learners - {"np", "_"}
            assert not shared, f"{name} {meta(cell)['grade_id']} rebinds {sorted(shared)}"


def manual_answers(nb: dict) -> list[int]:
    return [
        i
        for i, c in enumerate(nb["cells"])
        if meta(c).get("grade") and c["cell_type"] == "markdown"
    ]


def test_a_manually_graded_answer_follows_its_question_and_mark_scheme(name):
    """The rubric lives in a read-only task cell just above the answer: nbgrader keeps it in the
    gradebook (the instructor sees it in Formgrader) and removes it from the release."""
    cells = load(name)["cells"]
    for i in manual_answers(load(name)):
        assert meta(cells[i]).get("solution") and 2 <= meta(cells[i])["points"] <= 3, i
        task = cells[i - 1]
        assert meta(task).get("task") and meta(task).get("locked"), f"{name} cell {i - 1}"
        rubric = text(task)
        assert rubric.index("BEGIN MARK SCHEME") < rubric.index("END MARK SCHEME"), i
        assert "point" in rubric.split("BEGIN MARK SCHEME")[1], "the scheme gives points"


@pytest.mark.parametrize("nb_name", ["01_pingpong", "02_timing"])
def test_interpretation_is_graded_by_hand_and_the_release_hides_rubric_and_model_answer(nb_name):
    source = load(nb_name)
    answers = manual_answers(source)
    assert answers, f"{nb_name} has no manually graded answer"
    for folder in ("exercises", "solutions"):
        released = json.loads((ROOT / folder / nb_name / f"{nb_name}.ipynb").read_text())
        assert not any("MARK SCHEME" in text(c) for c in released["cells"]), folder
    exercise = json.loads((ROOT / "exercises" / nb_name / f"{nb_name}.ipynb").read_text())
    for i in manual_answers(exercise):
        assert text(exercise["cells"][i]).strip() == "YOUR ANSWER HERE", i


def test_published_latencies_of_head_to_head_exchanges_are_not_called_ping_pong(name):
    """The AGH report's 0.19 us / 0.77 us were timed with both ranks sending first."""
    for i, cell in enumerate(load(name)["cells"]):
        src = text(cell)
        if "AGH" in src and ("0.19 us" in src or "0.77 us" in src):
            assert "head-to-head" in src or "head to head" in src, f"{name} cell {i}"


@pytest.mark.parametrize("nb_name", ["01_pingpong", "02_timing"])
def test_bandwidth_is_plotted_in_gib_per_s_and_says_how_it_was_measured(nb_name):
    plotted = 0
    for i, cell in enumerate(load(nb_name)["cells"]):
        src = text(cell)
        if cell["cell_type"] == "code" and "plots.bandwidth_plot(" in src:
            plotted += 1
            assert "label=" in src and "(GB/s)" not in src, f"{nb_name} cell {i}"
        assert "(GB/s)" not in src, f"{nb_name} cell {i}: bandwidth in GiB/s (and Gbit/s)"
    assert plotted or nb_name != "02_timing"


# -- execution ---------------------------------------------------------------------------------
# The class that tests/course/classroom.py grades once per session holds, for every notebook, the
# solution and the untouched release, each executed by the grader in grading mode; these tests
# read those executed notebooks instead of running them again.
def executed(graded_class, student: str, name: str):
    import nbformat

    path = graded_class["course"] / "autograded" / student / name / f"{name}.ipynb"
    return nbformat.read(path, as_version=4)


@requires_mpi
@pytest.mark.parametrize("nb_name", NOTEBOOKS)
def test_the_solution_notebook_runs_cleanly_in_grading_mode(nb_name, graded_class):
    nb = executed(graded_class, "solution", nb_name)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, f"{nb_name} cell {i} failed: {errors[0].ename}: {errors[0].evalue}"
        if meta(cell).get("grade"):
            stderr = [o for o in cell.outputs if o.output_type == "stream" and o.name == "stderr"]
            assert not stderr, f"{nb_name} graded cell {i} wrote to stderr: {stderr[0].text[:300]}"
    ran = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    assert all(c.get("execution_count") for c in ran), f"{nb_name}: a code cell was not run"


@requires_mpi
@pytest.mark.parametrize("nb_name", MANUAL)
def test_the_released_notebook_with_no_answers_runs_on_without_name_errors(nb_name, graded_class):
    """A learner who skips a part still gets every later course cell: no NameError outside tests."""
    nb = executed(graded_class, "untouched", nb_name)
    failed = {}
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or meta(cell).get("grade"):
            continue
        for out in cell.outputs:
            if out.output_type == "error":
                failed[i] = f"{out.ename}: {out.evalue}"
    assert failed, f"{nb_name}: the release has stubs, so some check cell must fail"
    assert not [e for e in failed.values() if e.startswith("NameError")], (
        f"{nb_name}: a later cell needs what an unfinished answer did not define: {failed}"
    )
    unfinished = [
        e
        for e in failed.values()
        if e.startswith("NotImplementedError") or "not implemented yet" in e  # C stubs
    ]
    assert unfinished == list(failed.values()), (
        f"{nb_name}: cells fail for another reason than an unfinished answer: {failed}"
    )
