"""The nbgrader course end to end: release, submit, autograde, feedback (real nbgrader runs).

Everything runs in a temporary copy of course/ so that the repository is never touched. One
module-scoped fixture generates every assignment in course/source (so new notebooks are
included automatically), submits, per assignment, the solution, the untouched release and a
partly correct submission (one of which deadlocks), and for 01 correct variants and submissions
that change the grader; it autogrades them all once, as a class (students in parallel, each in
a sandbox where bubblewrap works); the tests then read the gradebook, the graded notebooks,
course/grades.csv and the process table.
"""

from __future__ import annotations

import csv
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pingpong_lab.course import build

from ..conftest import requires_mpi
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
    if student == "tamper_checks":  # no answer: the body is the release's stub
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


def _partial_edit(name):
    edit, _ = PARTIAL[name]

    def apply(text):
        try:
            return edit(text)
        except AssertionError:
            return text

    return apply


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A generated, submitted and autograded copy of the course."""
    root = tmp_path_factory.mktemp("course-pipeline")
    course = scratch_course(root, COURSE)
    tag, env = grading_env(root)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pingpong_lab.course.build", "release"],
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
        if name == "01_pingpong":
            cells = ["".join(c["source"]) for c in notebook(solution)["cells"]]
            for student, pairs in VARIANTS.items():
                for old, _ in pairs:  # else the "variant" would be the solution itself
                    assert any(old in cell for cell in cells), f"{student}: {old!r} is gone"
                submit(course, student, name, solution, _replacing(pairs))
    if "01_pingpong" in ASSIGNMENTS:
        solution = root / "solutions" / "01_pingpong" / "01_pingpong.ipynb"
        for student in TAMPERED:
            submit_notebook(course, student, "01_pingpong", _tampered(notebook(solution), student))
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pingpong_lab.course.build", "autograde"],
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
        "scores": {(a, s): (score, mx) for a, s, score, mx in build.scores(course)},
        "log": proc.stdout,
    }


def _failing_cells(course: Path, student: str, name: str) -> dict:
    """grade_id: the errors or stderr of every grade cell that failed, from the graded notebook."""
    nb = notebook(course / "autograded" / student / name / f"{name}.ipynb")
    return {
        gid: [o.get("ename") or o.get("text", "")[:200] for o in c.get("outputs", [])]
        for gid, c in grade_cells(nb).items()
        if any(o["output_type"] == "error" or o.get("name") == "stderr" for o in c["outputs"])
    }


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_the_solution_submitted_as_a_student_scores_full_marks(graded, name):
    score, max_score = graded["scores"][(name, "solution")]
    assert max_score > 0
    if score != max_score:
        failing = _failing_cells(graded["course"], "solution", name)
        pytest.fail(f"{name}: solution scored {score}/{max_score}; failing cells: {failing}")


@pytest.mark.parametrize("student", sorted(VARIANTS))
def test_a_correct_variant_of_the_pingpong_scores_full_marks(graded, student):
    name = "01_pingpong"
    if name not in ASSIGNMENTS:
        pytest.skip(f"{name} is not in course/source")
    course = graded["course"]
    score, max_score = graded["scores"][(name, student)]
    failing = _failing_cells(course, student, name)
    assert score == max_score, f"{student} scored {score}/{max_score}; failing cells: {failing}"
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
