"""The class that the course tests grade once, as `make autograde` does, and then read.

Per assignment: the solution, the untouched release and a partly correct submission (one of
which deadlocks); for 01 and 02 a submission that fills only the exercises of the earlier
course (no C timing loop, no interpretation); for 02-05 the corpus (tests/course/corpus.py:
correct variants and shortcuts); for 01 correct variants, submissions that change the grader,
and, where the grading sandbox works, submissions that wreck files or forge their scores
(tests/course/vandals.py), and submissions that crash (a kernel that aborts or segfaults, a
MemoryError, SystemExit). Everything runs in a scratch copy of course/, so the repository is
never touched. tests/course/conftest.py grades it once per session (`graded_class`);
test_autograde.py checks the scores and test_notebooks.py reads the executed notebooks.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from pingpong_lab.grader import build, gradebook, sandbox

from . import vandals
from .corpus import CORPUS, corpus_case
from .submissions import (
    grade_cells,
    grading_env,
    notebook,
    scratch_course,
    submit,
    submit_notebook,
)

ROOT = Path(__file__).resolve().parents[2]
COURSE = ROOT / "course"
ASSIGNMENTS = build.assignments(COURSE)
# submissions that attack files run only where the grading sandbox hides the class from them
ISOLATED = sandbox.problem() is None


CRASH_NAME = "01_pingpong"
PART_A = ("test_pingpong_calls", "test_pingpong_engines")  # needs pingpong
PART_B = ("test_pingpong_c_calls", "test_pingpong_c_payload")  # needs the C pingpong
PART_C = ("test_pingpong_pickle",)  # needs pingpong_pickle

_PICKLE_DEF = "def pingpong_pickle(comm, obj):\n"
_PINGPONG_BODY = "    rank = comm.Get_rank()\n    if rank == 0:\n        comm.Send("
_PICKLE_BODY = "    rank = comm.Get_rank()\n    if rank == 0:\n        comm.send("
_TAG = "TAG = 0  # any tag works, as long as sender and receiver agree\n"

# Submissions of 01 that crash, each by means an answer may use (the audit allows them):
# student -> (the text replaced in the solution, its replacement, the test cells that score 0)
CRASHES = {
    # the kernel aborts MPI (and so exits) while defining pingpong_pickle
    "abort": (_PICKLE_DEF, "MPI.COMM_WORLD.Abort(1)\n\n\n" + _PICKLE_DEF, PART_C),
    # the C ping-pong segfaults: it runs on the MPI engines and in the checks' own processes,
    # never in the kernel (an answer cannot crash the kernel's C: the audit refuses ctypes)
    "segfault_c": (
        "    MPI_Comm_rank(comm, &rank);",
        "    *(volatile int *)0 = 0;\n    MPI_Comm_rank(comm, &rank);",
        PART_B,
    ),
    # pingpong_pickle asks for 8 GiB, over the kernel's and the engines' memory limit: MemoryError
    # (and a fresh kernel for the cells after the test cell where the kernel raised it)
    "memory": (
        _PICKLE_BODY,
        "    import numpy\n\n    numpy.zeros(8 << 30, dtype=numpy.uint8)\n" + _PICKLE_BODY,
        PART_C,
    ),
    # SystemExit after TAG is defined and before pingpong is
    "sys_exit": (_TAG, _TAG + "\nraise SystemExit(1)\n", PART_A),
}
KERNEL_DEATHS = ("abort",)


# A student who answers 03's written questions, graded by hand in test_manual_grading.py
MANUAL_STUDENT = "manual_student"
ANSWER_PROMPT = "*Your answer (replace this line):*"
WRITTEN = [
    "WRITTEN-MEAN: at 8 B my mean is 24 % above my median because of a few slow iterations.",
    "WRITTEN-DRIFT: my runs were 19 % apart, each interval was about 1 % wide.",
]


def _written_answers():
    answers = iter(WRITTEN)

    def write(text: str) -> str:
        return next(answers) if text.strip() == ANSWER_PROMPT else text

    return write, answers


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
    "01_pingpong": (
        {"predict_deadlocks", "explain_deadlocks", "safe_exchange"},
        {"explain_deadlocks", "test_safe_exchange"},
    ),
    "02_timing": (
        {"time_pingpong_c", "bench_c", "predict_flat", "defend_numbers"},
        {
            "test_c_timing_calls",
            "test_c_timing_engines",
            "test_bench_csv",
            "test_bench_messages",
            "test_bench_clock",
            "test_bench_payload",
            "test_bench_vs_reference",
            "defend_numbers",
        },
    ),
    "05_contention": ({"pair_timing"}, {"test_pair_timing"}),
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
_SAFE_SOLUTION = (
    "    comm.Sendrecv(sendbuf, dest=peer, sendtag=TAG, "
    "recvbuf=recvbuf, source=peer, recvtag=TAG)\n"
)
VARIANTS = {
    # wildcard receives; rank 1 replies to the source and tag in the status (Python and C);
    # the safe exchange with its receive posted first
    "variant_wildcards": (
        (
            _SAFE_SOLUTION,
            """\
    request = comm.Irecv(recvbuf, source=peer, tag=TAG)
    comm.Send(sendbuf, dest=peer, tag=TAG)
    request.Wait()
""",
        ),
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
    # synchronous sends (Python and C) and typed buffer specs (Python); the safe exchange with
    # a non-blocking send
    "variant_ssend_typed": (
        (
            _SAFE_SOLUTION,
            """\
    request = comm.Isend([sendbuf, MPI.BYTE], dest=peer, tag=TAG)
    comm.Recv([recvbuf, MPI.BYTE], source=peer, tag=TAG)
    MPI.Request.Waitall([request])
""",
        ),
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


def written_answers(name: str) -> dict:
    """grade_id -> points of the written answers (markdown answer cells, graded by hand)."""
    nb = notebook(COURSE / "source" / name / f"{name}.ipynb")
    return manual_points(
        {"cells": [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("solution")]}
    )


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


def _grader(course: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    """`python -m pingpong_lab.grader <args>` in the course, as make release/autograde run it."""
    cmd = [sys.executable, "-m", "pingpong_lab.grader", *args]
    return subprocess.run(cmd, cwd=course, env=env, capture_output=True, text=True)


def _files(folder: Path) -> dict:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def grade_the_class(root: Path) -> dict:
    """Release a scratch copy of the course under root, submit the class described above and
    autograde it once, as `make autograde` does; what the tests read about it."""
    course = scratch_course(root, COURSE)
    tag, env = grading_env(root)
    start = time.perf_counter()
    proc = _grader(course, env, "release")
    assert proc.returncode == 0, proc.stdout + proc.stderr
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
    if "03_variability" in ASSIGNMENTS:
        write, answers = _written_answers()
        solution = root / "solutions" / "03_variability" / "03_variability.ipynb"
        submit(course, MANUAL_STUDENT, "03_variability", solution, write)
        assert next(answers, None) is None, "03 no longer has two written answers"
    if "01_pingpong" in ASSIGNMENTS:
        solution = root / "solutions" / "01_pingpong" / "01_pingpong.ipynb"
        text = "".join("".join(c["source"]) for c in notebook(solution)["cells"])
        for student, (old, new, _) in CRASHES.items():
            assert old in text, f"the {student} edit no longer applies: {old!r}"
            submit(course, student, "01_pingpong", solution, _replacing([(old, new)]))
        for student in TAMPERED:
            submit_notebook(course, student, "01_pingpong", _tampered(notebook(solution), student))
        if ISOLATED:
            for student in vandals.WRECKERS:
                nb = vandals.with_cell(notebook(solution), vandals.WRECK, "pingpong_python")
                submit_notebook(course, student, "01_pingpong", nb)
            release = root / "exercises" / "01_pingpong" / "01_pingpong.ipynb"
            nb = vandals.with_cell(notebook(release), vandals.FORGE)
            submit_notebook(course, vandals.FORGER, "01_pingpong", nb)
            nb = vandals.doorman(notebook(release))
            submit_notebook(course, vandals.DOORMAN, "01_pingpong", nb)
    sources, submitted = _files(course / "source"), _files(course / "submitted")
    start = time.perf_counter()
    proc = _grader(course, env, "autograde")
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
            for a, s, score, mx in gradebook.scores(course)
        },
        "log": proc.stdout,
        "sources": sources,
        "submitted": submitted,
    }
