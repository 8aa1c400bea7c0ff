"""The nbgrader course end to end: release, submit, autograde, feedback (real nbgrader runs).

Everything runs in a temporary copy of course/ so that the repository is never touched. One
module-scoped fixture generates every assignment in course/source (so new notebooks are
included automatically), submits, per assignment, the solution, the untouched release and a
partly correct submission (one of which deadlocks), for 01 and 02 a submission that fills only
the exercises of the earlier course (no C timing loop, no interpretation), and for 01 correct
variants and submissions that change the grader; it autogrades them all once, as a class
(students in parallel, each in a sandbox where bubblewrap works); the tests then read the
gradebook, the graded notebooks, course/grades.csv and the process table.
"""

from __future__ import annotations

import csv
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pingpong_lab.grader import build, sandbox

from ..conftest import requires_mpi
from . import vandals
from .corpus import CASES, CORPUS, corpus_case
from .submissions import (
    cell_score,
    grade_cells,
    grading_env,
    notebook,
    processes_left,
    scratch_course,
    submit,
    submit_notebook,
)

ROOT = Path(__file__).resolve().parents[2]
COURSE = ROOT / "course"
ASSIGNMENTS = build.assignments(COURSE)
# submissions that attack files run only where the grading sandbox hides the class from them
ISOLATED = sandbox.problem() is None

pytestmark = [requires_mpi, pytest.mark.nbgrader, pytest.mark.timeout(900)]


def _edit(text: str, old: str, new: str) -> str:
    assert old in text, f"the partial-submission edit no longer applies: {old!r}"
    return text.replace(old, new)


_SEND = "        comm.Send(sendbuf, dest=1, tag=TAG)\n"
_RECV = "        comm.Recv(recvbuf, source=1, tag=TAG)\n"

# Partly correct submissions: the solution with one part broken, and the score it must get.
PARTIAL = {
    "00_setup": (
        lambda s: _edit(
            s, 'ordered = sorted(results, key=lambda r: r["rank"])', "ordered = results"
        ),
        {"test_by_rank": 0},
    ),
    # rank 0 receives before it sends: a deadlock on the engines (and a clear message on fakes)
    "01_pingpong": (
        lambda s: _edit(s, _SEND + _RECV, _RECV + _SEND),
        {"test_pingpong_calls": 0, "test_pingpong_engines": 0},
    ),
    "02_timing": (
        lambda s: _edit(
            s, "return int(comm.allreduce(reps, op=MPI.MAX))", "return int(reps)  # no agreement"
        ),
        {"test_choose_reps": 0},
    ),
    # the population standard deviation instead of the sample one
    "03_variability": (
        lambda s: _edit(
            s,
            '"std": float(x.std(ddof=1)) if x.size > 1 else 0.0,',
            '"std": float(x.std()) if x.size > 1 else 0.0,',
        ),
        {"test_describe": 0},
    ),
    # R^2 against zero instead of against the mean
    "04_model": (
        lambda s: _edit(s, "ss_tot = np.sum((t - t.mean()) ** 2)", "ss_tot = np.sum(t**2)"),
        {"test_r_squared": 0},
    ),
    # every pair counted twice (once from each end)
    "05_contention": (
        lambda s: _edit(
            s,
            "for r in range(size // 2))",
            "for r in range(size))",
        ),
        {"test_crossing_pairs": 0},
    ),
}


# Submissions that fill only the stubs the course had before the C timing loop and the answers
# graded by hand: the solution with these cells put back as released, and the graded cells
# that must then score 0.
OLD_STUBS = {
    "01_pingpong": ({"predict_deadlocks", "explain_deadlocks"}, {"explain_deadlocks"}),
    "02_timing": (
        {"time_pingpong_c", "predict_flat", "defend_numbers"},
        {"test_c_timing_calls", "test_c_timing_engines", "defend_numbers"},
    ),
}


def _with_released_cells(solution: dict, exercise: dict, grade_ids) -> dict:
    """The solution notebook with the cells `grade_ids` as the release has them (stubs)."""
    released = {
        c["metadata"]["nbgrader"]["grade_id"]: c["source"]
        for c in exercise["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade_id") in grade_ids
    }
    assert set(released) == set(grade_ids), f"not in the release: {set(grade_ids) - set(released)}"
    for cell in solution["cells"]:
        gid = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if gid in released:
            cell["source"] = released[gid]
    return solution


def manual_points(nb: dict) -> dict:
    """grade_id -> points of the answers graded by hand (markdown answer cells)."""
    return {
        gid: c["metadata"]["nbgrader"]["points"]
        for gid, c in grade_cells(nb).items()
        if c["cell_type"] == "markdown"
    }


# Submissions that change the grader instead of answering (01_pingpong): the learner's cell
# where it happens, what it adds, and the parts that keep their points (tests before the cell).
_STUB = "    raise NotImplementedError()\n"
TAMPERED = {
    # the answer is missing, and the checks are replaced in the answer cell itself
    "tamper_checks": (
        "pingpong_python",
        "grading.check_pingpong = lambda *a, **k: None\n"
        "grading.check_pingpong_on_engines = lambda *a, **k: None\n",
        set(),
    ),
    # after two correct parts, a cell makes quiet() swallow failures; the C answer is missing
    "tamper_quiet": (
        "test_pingpong_engines",
        "class Swallow:\n    def __enter__(self):\n        return self\n\n"
        "    def __exit__(self, *exc):\n        return True\n\n\n"
        "q = grading\nq.quiet = Swallow\n",
        {"test_pingpong_calls", "test_pingpong_engines"},
    ),
    # two doors a deny-list left open: the object's own __setattr__, the module's __dict__
    "tamper_setattr": (
        "pingpong_python",
        "f = lambda *a, **k: None\n"
        'object.__setattr__(grading, "check_pingpong", f)\n'
        'object.__setattr__(grading, "check_pingpong_on_engines", f)\n',
        set(),
    ),
    "tamper_dict": (
        "pingpong_python",
        "f = lambda *a, **k: None\n"
        "grading.__dict__.update(check_pingpong=f, check_pingpong_on_engines=f)\n",
        set(),
    ),
}


# Correct variants of 01_pingpong's solution that the text allows: each student must score full
# marks. Two students keep the autograde run short: every variant is in one of them.
_PY_SOLUTION = """\
    if rank == 0:
        comm.Send(sendbuf, dest=1, tag=TAG)
        comm.Recv(recvbuf, source=1, tag=TAG)
    elif rank == 1:
        comm.Recv(recvbuf, source=0, tag=TAG)
        comm.Send(recvbuf, dest=0, tag=TAG)
"""
_C_SOLUTION = """\
    if (rank == 0) {
        MPI_Send(sendbuf, nbytes, MPI_BYTE, 1, TAG, comm);
        MPI_Recv(recvbuf, nbytes, MPI_BYTE, 1, TAG, comm, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Recv(recvbuf, nbytes, MPI_BYTE, 0, TAG, comm, MPI_STATUS_IGNORE);
        MPI_Send(recvbuf, nbytes, MPI_BYTE, 0, TAG, comm);
    }
"""
VARIANTS = {
    # wildcard receives; rank 1 replies to the source and tag in the status (Python and C)
    "variant_wildcards": (
        (
            _PY_SOLUTION,
            """\
    if rank == 0:
        comm.Send(sendbuf, dest=1, tag=TAG)
        comm.Recv(recvbuf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)
    elif rank == 1:
        status = MPI.Status()
        comm.Recv(recvbuf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
        comm.Send(recvbuf, dest=status.Get_source(), tag=status.Get_tag())
""",
        ),
        (
            _C_SOLUTION,
            """\
    if (rank == 0) {
        MPI_Send(sendbuf, nbytes, MPI_BYTE, 1, TAG, comm);
        MPI_Recv(recvbuf, nbytes, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Status status;
        MPI_Recv(recvbuf, nbytes, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &status);
        MPI_Send(recvbuf, nbytes, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, comm);
    }
""",
        ),
    ),
    # synchronous sends (Python and C) and typed buffer specs (Python)
    "variant_ssend_typed": (
        (
            _PY_SOLUTION,
            """\
    if rank == 0:
        comm.Ssend([sendbuf, MPI.BYTE], dest=1, tag=TAG)
        comm.Recv([recvbuf, len(recvbuf), MPI.BYTE], source=1, tag=TAG)
    elif rank == 1:
        comm.Recv((recvbuf, MPI.BYTE), source=0, tag=TAG)
        comm.Ssend([recvbuf, len(recvbuf), 0, MPI.BYTE], dest=0, tag=TAG)
""",
        ),
        (_C_SOLUTION, _C_SOLUTION.replace("MPI_Send(", "MPI_Ssend(")),
    ),
}
# the cells that grade the ping-pong itself
PINGPONG_CELLS = (
    "test_pingpong_calls",
    "test_pingpong_engines",
    "test_pingpong_c_calls",
    "test_pingpong_c_payload",
)


def _replacing(pairs):
    """An edit for submit: every (old, new) pair replaced wherever it occurs."""

    def apply(text):
        for old, new in pairs:
            text = text.replace(old, new)
        return text

    return apply


def _tampered(nb: dict, student: str) -> dict:
    after, code, _ = TAMPERED[student]
    cells = nb["cells"]
    at = next(
        i for i, c in enumerate(cells) if c["metadata"].get("nbgrader", {}).get("grade_id") == after
    )
    if after == "pingpong_python":  # no answer: the body is the release's stub
        body = "".join(cells[at]["source"])
        start, end = body.index("    rank = comm.Get_rank()"), body.rindex("comm.Send(recvbuf")
        cells[at]["source"] = body[:start] + _STUB + body[body.index("\n", end) + 1 :] + "\n" + code
    else:
        cells.insert(
            at + 1,
            {
                "cell_type": "code",
                "metadata": {},
                "source": code,
                "outputs": [],
                "execution_count": None,
            },
        )
        for cell in cells:  # the C answer is missing
            text = "".join(cell["source"])
            if text.startswith("%%writefile pingpong.c"):
                cell["source"] = text.replace(
                    "    MPI_Comm_rank(comm, &rank);",
                    "    return NOT_IMPLEMENTED;\n    MPI_Comm_rank(comm, &rank);",
                )
    return nb


def hand_graded(name: str) -> dict:
    """grade_id -> points of the cells an instructor grades by hand (tasks, manual answers)."""
    nb = notebook(COURSE / "source" / name / f"{name}.ipynb")
    meta = [c["metadata"].get("nbgrader", {}) for c in nb["cells"]]
    return {
        m["grade_id"]: m.get("points", 0)
        for m in meta
        if m.get("task") or (m.get("grade") and m.get("solution"))
    }


def _partial_edit(name):
    edit, _ = PARTIAL[name]

    def apply(text):
        try:
            return edit(text)
        except AssertionError:
            return text

    return apply


def _files(folder: Path) -> dict:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A generated, submitted and autograded copy of the course."""
    root = tmp_path_factory.mktemp("course-pipeline")
    course = scratch_course(root, COURSE)
    tag, env = grading_env(root)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pingpong_lab.grader", "release"],
        cwd=course,
        env=env,
        check=True,
        capture_output=True,
    )
    release_s = time.perf_counter() - start
    for name in ASSIGNMENTS:
        solution = root / "solutions" / name / f"{name}.ipynb"
        submit(course, "solution", name, solution)
        submit(course, "untouched", name, root / "exercises" / name / f"{name}.ipynb")
        if name in PARTIAL:
            submit(course, "partial", name, solution, _partial_edit(name))
        for student, by_name in CORPUS.items():
            if name in by_name:
                submit_notebook(course, student, name, corpus_case(student, name, solution))
        if name == "01_pingpong":
            cells = ["".join(c["source"]) for c in notebook(solution)["cells"]]
            for student, pairs in VARIANTS.items():
                for old, _ in pairs:  # else the "variant" would be the solution itself
                    assert any(old in cell for cell in cells), f"{student}: {old!r} is gone"
                submit(course, student, name, solution, _replacing(pairs))
    for name, (grade_ids, _) in OLD_STUBS.items():
        if name in ASSIGNMENTS:
            nb = _with_released_cells(
                notebook(root / "solutions" / name / f"{name}.ipynb"),
                notebook(root / "exercises" / name / f"{name}.ipynb"),
                grade_ids,
            )
            submit_notebook(course, "old_stubs", name, nb)
    if "01_pingpong" in ASSIGNMENTS:
        solution = root / "solutions" / "01_pingpong" / "01_pingpong.ipynb"
        for student in TAMPERED:
            submit_notebook(course, student, "01_pingpong", _tampered(notebook(solution), student))
        if ISOLATED:
            for student in vandals.WRECKERS:
                nb = vandals.with_cell(notebook(solution), vandals.WRECK, "pingpong_python")
                submit_notebook(course, student, "01_pingpong", nb)
            release = root / "exercises" / "01_pingpong" / "01_pingpong.ipynb"
            nb = vandals.with_cell(notebook(release), vandals.FORGE)
            submit_notebook(course, vandals.FORGER, "01_pingpong", nb)
    sources = {p: p.read_bytes() for p in sorted((course / "source").rglob("*")) if p.is_file()}
    submitted = {
        p: p.read_bytes() for p in sorted((course / "submitted").rglob("*")) if p.is_file()
    }
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pingpong_lab.grader", "autograde"],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
    )
    autograde_s = time.perf_counter() - start
    assert proc.returncode == 0, proc.stdout + proc.stderr
    print(f"\nrelease {release_s:.0f} s, autograde {autograde_s:.0f} s\n{proc.stdout}")
    return {
        "root": root,
        "course": course,
        "tag": tag,
        "env": env,
        # max_score here is what autograde can give: without the points graded by hand
        "scores": {
            (a, s): (score, mx - sum(hand_graded(a).values()))
            for a, s, score, mx in build.scores(course)
        },
        "log": proc.stdout,
        "sources": sources,
        "submitted": submitted,
    }


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


@pytest.mark.parametrize("name", sorted(OLD_STUBS))
def test_answers_graded_by_hand_wait_for_the_instructor_with_the_mark_scheme_beside_them(
    graded, name
):
    """Formgrader shows the graded notebook: the mark scheme (removed from the release) is back
    in the task cell above each answer. Once the instructor gives the model answers their
    points, the solution has full marks."""
    from nbgrader.api import Gradebook

    if name not in ASSIGNMENTS:
        pytest.skip(f"{name} is not in course/source")
    course = graded["course"]
    nb = _graded_nb(course, "solution", name)
    manual = manual_points(nb)
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
    with Gradebook("sqlite:///" + str(graded["course"] / "gradebook.db")) as gb:
        sub = gb.find_submission_notebook(name, name, "solution")
        grades = {g.name: g for g in sub.grades}
        assert sub.needs_manual_grade, f"{name}: written answers must await a manual grade"
        for gid, points in manual.items():
            assert grades[gid].needs_manual_grade and grades[gid].max_score == points, gid
            assert not grades[gid].score, f"{gid}: autograde gave points for a written answer"
        auto = graded["scores"][(name, "solution")][1]
        assert sub.max_score == auto + sum(manual.values())


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


def test_the_class_gradebook_was_copied_aside_before_grading(graded):
    (saved,) = (graded["course"] / "gradebook-backups").glob("gradebook-*.db")
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(saved)) as gb:
        assert gb.students == []  # as it was: released, nobody graded yet


def test_the_class_is_graded_in_parallel_into_one_gradebook_and_a_summary(graded):
    """`build autograde` grades the students at once (one worker per core), and every score
    lands in the one gradebook (the scores above) and in grades.csv."""
    assert "at a time" in graded["log"] and "submission(s) in" in graded["log"]
    with (graded["course"] / "grades.csv").open() as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    students = {s for (_, s) in graded["scores"]}
    assert set(rows) == students
    for student, row in rows.items():
        assert row["status"] == "ok", row
        expected = sum(sc for (a, s), (sc, _) in graded["scores"].items() if s == student)
        assert float(row["total"]) == expected


def test_no_engine_controller_or_mpiexec_outlives_the_grading(graded):
    left = processes_left(graded["tag"])
    assert not left, "processes left behind by autograding:\n" + "\n".join(left)


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
    after = {(a, s): (sc, mx) for a, s, sc, mx in build.scores(graded["course"])}
    assert after[(name, student)] == before


def test_committed_exercises_and_solutions_match_a_fresh_generation(graded):
    problems = build.compare_generated(graded["root"], ROOT, ASSIGNMENTS)
    assert not problems, "regenerate with `make release`: " + ", ".join(problems)
