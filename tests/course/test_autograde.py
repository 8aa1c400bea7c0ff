"""The nbgrader course end to end: release, submit, autograde, feedback (real nbgrader runs).

The class of tests/course/classroom.py (solutions, untouched releases, partly correct
submissions, the corpus, variants, cheats and vandals), graded once per session as a class
(students in parallel, each in its own stage and sandbox where bubblewrap works); the tests
read the gradebook, the graded notebooks, course/class-grading.csv and the process table.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from pingpong_lab.grader import build, gradebook, sandbox

from ..conftest import requires_mpi
from . import vandals
from .classroom import (
    ASSIGNMENTS,
    ISOLATED,
    OLD_STUBS,
    PARTIAL,
    PINGPONG_CELLS,
    ROOT,
    TAMPERED,
    VARIANTS,
    hand_graded,
    manual_points,
    written_answers,
)
from .corpus import CASES, CORPUS
from .submissions import cell_score, grade_cells, notebook, processes_left

pytestmark = [requires_mpi, pytest.mark.nbgrader, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def graded(graded_class):
    """The class graded once per session (tests/course/classroom.py)."""
    return graded_class


def _graded_nb(course: Path, student: str, name: str) -> dict:
    return notebook(course / "autograded" / student / name / f"{name}.ipynb")


def _failing_cells(course: Path, student: str, name: str) -> dict:
    """grade_id: the errors or stderr of every grade cell that failed, from the graded notebook."""
    nb = notebook(course / "autograded" / student / name / f"{name}.ipynb")
    return {
        gid: [o.get("ename") or o.get("text", "")[:200] for o in c.get("outputs", [])]
        for gid, c in grade_cells(nb).items()
        if any(
            o["output_type"] == "error" or o.get("name") == "stderr" for o in c.get("outputs", [])
        )
    }


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_the_solution_submitted_as_a_student_scores_full_marks(graded, name):
    """Every autograded point; the answers graded by hand wait for the instructor (below)."""
    score, max_score = graded["scores"][(name, "solution")]
    assert max_score > 0
    if score != max_score:  # max_score: the autograded points (see the fixture)
        failing = _failing_cells(graded["course"], "solution", name)
        pytest.fail(f"{name}: solution scored {score}/{max_score}; failing: {failing}")


WRITTEN = [name for name in ASSIGNMENTS if written_answers(name)]


def test_two_notebooks_ask_for_written_answers_graded_by_hand():
    assert {"01_pingpong", "02_timing"} <= set(WRITTEN), WRITTEN


@pytest.mark.parametrize("name", WRITTEN)
def test_answers_graded_by_hand_wait_for_the_instructor_with_the_mark_scheme_beside_them(
    graded, name
):
    """Formgrader shows the graded notebook: the mark scheme (removed from the release) is back
    in the task cell above each answer. Once the instructor gives the model answers their
    points, the solution has full marks."""
    from nbgrader.api import Gradebook

    course = graded["course"]
    nb = _graded_nb(course, "solution", name)
    manual = manual_points(nb)
    assert set(manual) == set(written_answers(name)), manual
    assert manual and all(2 <= p <= 3 for p in manual.values()), manual
    cells = nb["cells"]
    for i, cell in enumerate(cells):
        if cell["metadata"].get("nbgrader", {}).get("grade_id") in manual:
            assert "BEGIN MARK SCHEME" in "".join(cells[i - 1]["source"]), i
    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        grades = [gb.find_grade(gid, name, name, "solution") for gid in manual]
        assert all(grade.needs_manual_grade for grade in grades), manual
        try:
            for grade in grades:
                grade.manual_score = grade.max_score
            gb.db.commit()
            submission = gb.find_submission(name, "solution")
            assert submission.score == submission.max_score
        finally:  # the other tests read the gradebook as autograde left it
            for grade in grades:
                grade.manual_score = None
            gb.db.commit()


@pytest.mark.parametrize("name", sorted(OLD_STUBS))
def test_the_old_exercises_alone_no_longer_reach_full_marks(graded, name):
    if name not in ASSIGNMENTS:
        pytest.skip(f"{name} is not in course/source")
    course = graded["course"]
    score, max_score = graded["scores"][(name, "old_stubs")]
    _, lost_cells = OLD_STUBS[name]
    cells = grade_cells(_graded_nb(course, "old_stubs", name))
    by_hand = hand_graded(name)  # not in max_score (see the fixture), and they wait: 0 now
    lost = sum(cells[gid]["metadata"]["nbgrader"]["points"] for gid in lost_cells - set(by_hand))
    assert score == max_score - lost, f"{name}: {score}/{max_score}, expected {max_score - lost}"
    for gid in lost_cells:
        assert cell_score(course, "old_stubs", name, gid) == 0, gid


@pytest.mark.parametrize("name", [a for a in ASSIGNMENTS if hand_graded(a)])
def test_written_answers_wait_for_the_instructor_with_their_points(graded, name):
    from nbgrader.api import Gradebook

    manual = hand_graded(name)
    # the solution writes the model answer into each answer cell (01, 02); its tasks (03-05)
    # keep their placeholders (the model answer is in the mark scheme): blank, nothing to read
    written = set(written_answers(name))
    with Gradebook("sqlite:///" + str(graded["course"] / "gradebook.db")) as gb:
        sub = gb.find_submission_notebook(name, name, "solution")
        grades = {g.name: g for g in sub.grades}
        assert sub.needs_manual_grade == bool(written), name
        for gid, points in manual.items():  # a 0-point rubric has nothing to score
            waits = grades[gid].needs_manual_grade
            assert waits == (gid in written) and grades[gid].max_score == points, gid
            assert not grades[gid].score, f"{gid}: autograde gave points for a written answer"
        auto = graded["scores"][(name, "solution")][1]
        assert sub.max_score == auto + sum(manual.values())


@pytest.mark.parametrize("name", [a for a in ASSIGNMENTS if hand_graded(a)])
def test_written_answers_left_blank_score_0_and_wait_for_no_one(graded, name):
    """The untouched release: every written answer is blank, so it scores 0 with a comment
    that says why, and the notebook is graded without anyone opening it."""
    from nbgrader.api import Gradebook

    from pingpong_lab.grader.gradebook import BLANK_COMMENT

    with Gradebook("sqlite:///" + str(graded["course"] / "gradebook.db")) as gb:
        sub = gb.find_submission_notebook(name, name, "untouched")
        grades = {g.name: g for g in sub.grades}
        for gid, points in hand_graded(name).items():
            assert (grades[gid].score, grades[gid].needs_manual_grade) == (0, False), gid
            if points:  # nbgrader's own word for an untouched answer cell, or the course's
                comment = gb.find_comment(gid, name, name, "untouched")
                assert comment.auto_comment in ("No response.", BLANK_COMMENT), gid
        assert not sub.needs_manual_grade


@pytest.mark.parametrize("student", sorted(VARIANTS))
def test_a_correct_variant_of_the_pingpong_scores_full_marks(graded, student):
    name = "01_pingpong"
    if name not in ASSIGNMENTS:
        pytest.skip(f"{name} is not in course/source")
    course = graded["course"]
    score, max_score = graded["scores"][(name, student)]
    failing = _failing_cells(course, student, name)
    assert score == max_score, f"{student} scored {score}/{max_score}; failing: {failing}"
    nb = notebook(course / "autograded" / student / name / f"{name}.ipynb")
    for gid in PINGPONG_CELLS:
        points = grade_cells(nb)[gid]["metadata"]["nbgrader"]["points"]
        assert cell_score(course, student, name, gid) == points, gid


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_the_untouched_release_scores_zero(graded, name):
    score, max_score = graded["scores"][(name, "untouched")]
    assert score == 0, f"{name}: an empty submission got {score}/{max_score}"


@pytest.mark.parametrize("name", sorted(PARTIAL))
def test_a_partly_correct_submission_loses_exactly_the_broken_parts(graded, name):
    if name not in ASSIGNMENTS:
        pytest.skip(f"{name} is not in course/source")
    course = graded["course"]
    score, max_score = graded["scores"][(name, "partial")]
    _, broken = PARTIAL[name]
    nb = notebook(course / "autograded" / "partial" / name / f"{name}.ipynb")
    cells = grade_cells(nb)
    lost = sum(cells[gid]["metadata"]["nbgrader"]["points"] for gid in broken)
    assert 0 < score < max_score
    assert score == max_score - lost, f"{name}: {score}/{max_score}, expected {max_score - lost}"
    for gid in broken:
        assert cell_score(course, "partial", name, gid) == 0


@pytest.mark.parametrize("student, name", CASES)
def test_a_corpus_submission_loses_exactly_the_parts_it_breaks(graded, student, name):
    """tests/course/corpus.py: correct variants keep every point, shortcuts lose their part."""
    if name not in ASSIGNMENTS:
        pytest.skip(f"{name} is not in course/source")
    course = graded["course"]
    _, broken = CORPUS[student][name]
    nb = notebook(course / "autograded" / student / name / f"{name}.ipynb")
    failing = _failing_cells(course, student, name)
    for gid, cell in grade_cells(nb).items():
        meta = cell["metadata"]["nbgrader"]
        if meta.get("solution"):  # manually graded answers are not autograded
            continue
        want = 0 if gid in broken else meta["points"]
        got = cell_score(course, student, name, gid)
        assert got == want, f"{student}/{name}: {gid} scored {got}, expected {want}; {failing}"


def test_a_deadlocked_pingpong_fails_its_cell_by_deadline_and_the_rest_is_graded(graded):
    if "01_pingpong" not in ASSIGNMENTS:
        pytest.skip("no 01_pingpong")
    nb = notebook(graded["course"] / "autograded" / "partial" / "01_pingpong" / "01_pingpong.ipynb")
    cells = grade_cells(nb)
    errors = [o for o in cells["test_pingpong_engines"]["outputs"] if o["output_type"] == "error"]
    assert errors and errors[0]["ename"] == "DeadlockError", errors  # not CellTimeoutError
    for gid in ("test_pingpong_c_calls", "test_pingpong_c_payload", "test_pingpong_pickle"):
        assert cell_score(graded["course"], "partial", "01_pingpong", gid) > 0, gid


@pytest.mark.parametrize("student", sorted(TAMPERED))
def test_changing_the_grader_scores_zero_from_that_cell_on(graded, student):
    if "01_pingpong" not in ASSIGNMENTS:
        pytest.skip("no 01_pingpong")
    course = graded["course"]
    nb = notebook(course / "autograded" / student / "01_pingpong" / "01_pingpong.ipynb")
    _, _, kept = TAMPERED[student]
    for gid, cell in grade_cells(nb).items():
        if cell["metadata"]["nbgrader"].get("solution"):
            continue
        score = cell_score(course, student, "01_pingpong", gid)
        if gid in kept:
            assert score == cell["metadata"]["nbgrader"]["points"], gid
        else:
            assert score == 0, gid
            notes = [o for o in cell["outputs"] if o.get("ename") == "GraderChanged"]
            assert notes and "changes what the tests use" in notes[0]["evalue"], gid
    html = (course / "feedback" / student / "01_pingpong" / "01_pingpong.html").read_text()
    assert "GraderChanged" in html


def _needs_vandals():
    if "01_pingpong" not in ASSIGNMENTS or not ISOLATED:
        pytest.skip(f"no 01_pingpong or no sandbox ({sandbox.problem()})")


def test_submissions_that_wreck_files_change_no_other_students_grades_or_files(graded):
    """Wreckers graded first and last: every other student keeps every score, the gradebook
    keeps every assignment, the course's sources and submissions are as they were."""
    _needs_vandals()
    course = graded["course"]
    students = {s for (_, s) in graded["scores"]}
    assert set(vandals.WRECKERS) <= students
    every = {p.name for p in (course / "submitted").iterdir()}
    assert students == every  # nobody's scores were lost
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        assert sorted(a.name for a in gb.assignments) == ASSIGNMENTS
    for name in ASSIGNMENTS:
        score, max_score = graded["scores"][(name, "solution")]
        assert score == max_score, name
    assert {p: p.read_bytes() for p in graded["sources"]} == graded["sources"]
    assert {p: p.read_bytes() for p in graded["submitted"]} == graded["submitted"]
    for student in vandals.WRECKERS:  # its own refused cell is reported, its own tests lost
        nb = _graded_nb(course, student, "01_pingpong")
        assert any(
            o.get("ename") == "GraderChanged" for c in nb["cells"] for o in c.get("outputs", [])
        ), student


def test_a_process_left_behind_cannot_write_its_own_scores(graded):
    """The forger answers nothing and leaves a process that writes full marks into every
    gradebook it finds while nbgrader records: it scores what the untouched release does."""
    _needs_vandals()
    assert graded["scores"][("01_pingpong", vandals.FORGER)][0] == 0
    assert graded["scores"][("01_pingpong", "solution")][0] > 0


def test_reaching_the_tests_through_ipython_or_a_pickle_scores_what_the_release_scores(graded):
    """The doorman (tests/course/vandals.py): an automagic line and a `%%writefile {expr}` are
    never run, the hand-written pickle is refused as it loads, and the files it plants are
    run by no later kernel; the release's stubs score 0 as they do for everyone."""
    _needs_vandals()
    course = graded["course"]
    score, _ = graded["scores"][("01_pingpong", vandals.DOORMAN)]
    assert score == 0
    nb = notebook(course / "autograded" / vandals.DOORMAN / "01_pingpong" / "01_pingpong.ipynb")
    errors = [o["ename"] for c in nb["cells"] for o in c.get("outputs", []) if "ename" in o]
    assert errors.count("UnreadableCellError") == 2, errors
    assert "UnpicklingError" in errors
    assert "GraderChanged" not in errors  # nothing it ran was refused: no test lost for that


def test_the_class_gradebook_was_copied_aside_before_grading(graded):
    (saved,) = (graded["course"] / "gradebook-backups").glob("gradebook-*.db")
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(saved)) as gb:
        assert gb.students == []  # as it was: released, nobody graded yet


def test_the_class_is_graded_in_parallel_into_one_gradebook_and_a_summary(graded):
    """`build autograde` grades the students at once (one worker per core), and every score
    lands in the one gradebook (the scores above) and in class-grading.csv."""
    assert "at a time" in graded["log"] and "submission(s) in" in graded["log"]
    with (graded["course"] / "class-grading.csv").open() as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    students = {s for (_, s) in graded["scores"]}
    assert set(rows) == students
    for student, row in rows.items():
        assert row["grading"] == "ok", row
        expected = sum(sc for (a, s), (sc, _) in graded["scores"].items() if s == student)
        assert float(row["total"]) == expected


def test_no_engine_controller_or_mpiexec_outlives_the_grading(graded):
    left = processes_left(graded["tag"])
    assert not left, "processes left behind by autograding:\n" + "\n".join(left)


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_feedback_shows_no_hidden_test(graded, name):
    """Neither the test cells nor the tracebacks of failed tests quote a hidden test."""
    import html
    import re

    from pingpong_lab.grader.preprocessors import hidden_lines

    source = notebook(graded["course"] / "source" / name / f"{name}.ipynb")
    hidden, visible = set(), set()
    for cell in source["cells"]:
        text = "".join(cell["source"])
        hidden |= hidden_lines(text)
        inside = False  # the lines outside the hidden regions (some repeat a hidden one)
        for line in text.splitlines():
            inside = inside or "BEGIN HIDDEN TESTS" in line
            if not inside:
                visible.add(line.strip())
            inside = inside and "END HIDDEN TESTS" not in line
    secret = {line for line in hidden - visible if len(line) >= 25}
    if not secret:
        pytest.skip(f"{name} has no hidden tests")
    for student in ("solution", "untouched"):
        page = (graded["course"] / "feedback" / student / name / f"{name}.html").read_text()
        text = html.unescape(re.sub(r"<[^>]+>", "", page))
        assert "HIDDEN TESTS" not in text, (student, name)
        shown = [line for line in secret if line in text]
        assert not shown, (student, name, shown[:3])


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_every_submission_gets_an_html_feedback_report(graded, name):
    for student in ("solution", "untouched") + (("partial",) if name in PARTIAL else ()):
        html = graded["course"] / "feedback" / student / name / f"{name}.html"
        assert html.is_file() and html.stat().st_size > 1000, html


def test_the_same_submission_gets_the_same_score_twice(graded):
    name = "00_setup" if "00_setup" in ASSIGNMENTS else ASSIGNMENTS[0]
    student = "partial" if name in PARTIAL else "solution"
    before = graded["scores"][(name, student)]
    subprocess.run(
        [sys.executable, "-m", "nbgrader", "autograde", name, "--student", student, "--force"],
        cwd=graded["course"],
        env=graded["env"],
        check=True,
        capture_output=True,
    )
    after = {(a, s): (sc, mx) for a, s, sc, mx in gradebook.scores(graded["course"])}
    assert after[(name, student)] == before


def test_committed_exercises_and_solutions_match_a_fresh_generation(graded):
    problems = build.compare_generated(graded["root"], ROOT, ASSIGNMENTS)
    assert not problems, "regenerate with `make release`: " + ", ".join(problems)
