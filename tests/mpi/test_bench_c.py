"""Notebook 02's benchmark program: the solution and its correct variants pass every check of
grading.cbench; each shortcut fails the checks of what it skips and keeps the others.

The programs are the notebook's solution cell (bench.c) with one piece rewritten, built with
the environment's mpicc and run under mpiexec in a build folder of the test's own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pingpong_lab.course import grading
from pingpong_lab.course.grading import cbench

from ..conftest import requires_mpi

pytestmark = [requires_mpi]

SOURCE = Path(__file__).resolve().parents[2] / "course/source/02_timing/02_timing.ipynb"

CHECKS = {
    "csv": grading.check_bench_csv,
    "messages": grading.check_bench_messages,
    "fake_clock": grading.check_bench_fake_clock,
    "payload": grading.check_bench_payload,
    "reference": grading.check_bench_against_reference,
}


def solution_bench() -> str:
    """The C of the notebook's bench.c solution cell (without its %%writefile line)."""
    cells = json.loads(SOURCE.read_text())["cells"]
    cell = next(c for c in cells if c["metadata"].get("nbgrader", {}).get("grade_id") == "bench_c")
    return "".join(cell["source"]).split("\n", 1)[1]


def _edit(source: str, old: str, new: str) -> str:
    assert source.count(old) == 1, f"not exactly once in the solution: {old!r}"
    return source.replace(old, new)


_TIMED = """    double before = MPI_Wtime();
    for (int i = 0; i < reps; i++) {
        round_trip(comm, rank, sendbuf, recvbuf, nbytes);
        double after = MPI_Wtime();
        samples[i] = (after - before) / 2.0;
        before = after;
    }
"""
_REDUCE = "    MPI_Reduce(samples, slowest, reps, MPI_DOUBLE, MPI_MAX, 0, comm);\n"
_ROW = '        fprintf(out, "%d,%d,%.9e\\n", nbytes, reps, median(slowest, reps));'
_WARMUP = """    for (int i = 0; i < warmup; i++)
        round_trip(comm, rank, sendbuf, recvbuf, nbytes);
"""
_CHECK = "    return rank == 0 && memcmp(sendbuf, recvbuf, (size_t)nbytes) != 0;\n"
_ROUND_TRIP = """    if (rank == 0) {
        MPI_Send(sendbuf, nbytes, MPI_BYTE, 1, TAG, comm);
        MPI_Recv(recvbuf, nbytes, MPI_BYTE, 1, TAG, comm, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Recv(recvbuf, nbytes, MPI_BYTE, 0, TAG, comm, MPI_STATUS_IGNORE);
        MPI_Send(recvbuf, nbytes, MPI_BYTE, 0, TAG, comm);
    }
"""

VARIANTS = {
    # rank 0 sends and receives in one MPI_Sendrecv; every echo is checked; Allreduce in place;
    # the timed loop counts down and reads the clock at both ends of every round trip
    "Sendrecv, Allreduce in place, every echo checked": [
        (
            _ROUND_TRIP,
            """    if (rank == 0) {
        MPI_Sendrecv(sendbuf, nbytes, MPI_BYTE, 1, 5, recvbuf, nbytes, MPI_BYTE, 1, 5, comm,
                     MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Status status;
        MPI_Recv(recvbuf, nbytes, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &status);
        MPI_Send(recvbuf, nbytes, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, comm);
    }
""",
        ),
        (
            _TIMED,
            """    int bad = 0;
    int left = reps;
    while (left > 0) {
        double t0 = MPI_Wtime();
        round_trip(comm, rank, sendbuf, recvbuf, nbytes);
        double t1 = MPI_Wtime();
        samples[reps - left] = 0.5 * (t1 - t0);
        if (rank == 0 && memcmp(sendbuf, recvbuf, (size_t)nbytes) != 0)
            bad = 1;
        left--;
    }
""",
        ),
        (
            _REDUCE,
            """    MPI_Allreduce(MPI_IN_PLACE, samples, reps, MPI_DOUBLE, MPI_MAX, comm);
    memcpy(slowest, samples, sizeof(double) * (size_t)reps);
""",
        ),
        (_CHECK, "    return bad;\n"),
    ],
    # non-blocking round trip: receive posted first on both ranks
    "Isend/Irecv with Waitall": [
        (
            _ROUND_TRIP,
            """    MPI_Request req[2];
    if (rank == 0) {
        MPI_Irecv(recvbuf, nbytes, MPI_BYTE, 1, TAG, comm, &req[0]);
        MPI_Isend(sendbuf, nbytes, MPI_BYTE, 1, TAG, comm, &req[1]);
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    } else if (rank == 1) {
        MPI_Irecv(recvbuf, nbytes, MPI_BYTE, 0, TAG, comm, &req[0]);
        MPI_Wait(&req[0], MPI_STATUS_IGNORE);
        MPI_Isend(recvbuf, nbytes, MPI_BYTE, 0, TAG, comm, &req[1]);
        MPI_Wait(&req[1], MPI_STATUS_IGNORE);
    }
""",
        ),
    ],
}

# shortcut -> (edits, the checks it must fail); every other check must pass
SHORTCUTS = {
    "a constant time, nothing measured": (
        [(_ROW, '        fprintf(out, "%d,%d,%.9e\\n", nbytes, reps, 2e-6);')],
        {"fake_clock", "reference"},
    ),
    "made-up times that grow with the size": (
        [(_ROW, '        fprintf(out, "%d,%d,%.9e\\n", nbytes, reps, 1e-6 + nbytes * 1e-10);')],
        {"fake_clock"},
    ),
    "no warm-up": ([(_WARMUP, "")], {"messages"}),
    "one repetition, REPS written anyway": (
        [
            (_TIMED, _TIMED.replace("i < reps", "i < 1")),
            (_REDUCE, _REDUCE.replace("reps", "1")),
            (_ROW, _ROW.replace("median(slowest, reps)", "median(slowest, 1)")),
        ],
        {"messages"},
    ),
    "rank 0's own time, no maximum over ranks": (
        [(_REDUCE, "    memcpy(slowest, samples, sizeof(double) * (size_t)reps);\n")],
        {"fake_clock"},
    ),
    "a program that never sends": (
        [
            (
                _ROUND_TRIP,
                "    (void)comm, (void)rank, (void)sendbuf, (void)recvbuf, (void)nbytes;\n",
            ),
            (_CHECK, "    return 0;\n"),
        ],
        {"messages", "fake_clock", "payload", "reference"},  # nothing sent, nothing to corrupt
    ),
    "the echo is never checked": ([(_CHECK, "    return 0;\n")], {"payload"}),
}


@pytest.fixture
def build_here(tmp_path, monkeypatch):
    monkeypatch.setenv("PINGPONG_LAB_BUILD", str(tmp_path / "build"))
    return tmp_path


def _program(folder: Path, edits) -> str:
    source = solution_bench()
    for old, new in edits:
        source = _edit(source, old, new)
    path = folder / "bench.c"
    path.write_text(source)
    return str(path)


def _outcomes(path: str) -> dict:
    failed = {}
    for name, check in CHECKS.items():
        try:
            assert check(path)
        except AssertionError as exc:
            failed[name] = str(exc)
    return failed


def test_the_solution_passes_every_check(build_here):
    assert _outcomes(_program(build_here, [])) == {}


@pytest.mark.parametrize("edits", VARIANTS.values(), ids=VARIANTS.keys())
def test_a_correct_variant_passes_every_check(build_here, edits):
    assert _outcomes(_program(build_here, edits)) == {}


@pytest.mark.parametrize(("edits", "loses"), SHORTCUTS.values(), ids=SHORTCUTS.keys())
def test_a_shortcut_fails_exactly_the_checks_of_what_it_skips(build_here, edits, loses):
    failed = _outcomes(_program(build_here, edits))
    assert set(failed) == loses, failed


def test_the_fake_clock_says_which_rank_was_timed(build_here):
    path = _program(build_here, SHORTCUTS["rank 0's own time, no maximum over ranks"][0])
    with pytest.raises(AssertionError, match="maximum over ranks"):
        grading.check_bench_fake_clock(path)


def test_the_unfinished_program_is_reported_as_not_implemented(build_here):
    source = solution_bench()
    start, end = "/* BEGIN SOLUTION */", "/* END SOLUTION */"
    while start in source:
        a, b = source.index(start), source.index(end) + len(end)
        source = source[:a] + "/* YOUR CODE HERE */\n    return NOT_IMPLEMENTED;" + source[b:]
    path = build_here / "bench.c"
    path.write_text(source)
    for check in CHECKS.values():
        with pytest.raises(AssertionError, match="not implemented yet"):
            check(str(path))


def test_a_program_that_hangs_is_stopped_at_the_deadline(build_here, monkeypatch):
    path = _program(build_here, [(_WARMUP, _WARMUP.replace("rank, sendbuf", "0, sendbuf"))])
    exe = cbench.build_bench(path)
    with pytest.raises(AssertionError, match="did not finish within"):
        cbench.run_bench(exe, build_here / "x.csv", 64, 2, 2, timeout=5)
