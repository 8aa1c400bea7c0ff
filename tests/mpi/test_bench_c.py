"""Notebook 02's benchmark program: the solution and its correct variants pass every check of
grading.cbench; each shortcut fails the checks of what it skips and keeps the others.

The programs are the notebook's solution cell (bench.c) with one piece rewritten, built with
the environment's mpicc and run under mpiexec in a build folder of the test's own.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pingpong_lab.course import grading
from pingpong_lab.course.grading import cbench

from ..conftest import requires_mpi

pytestmark = [requires_mpi]

SOURCE = Path(__file__).resolve().parents[2] / "course/source/02_timing/02_timing.ipynb"

CHECKS = {
    "csv": grading.check_bench_csv,
    "messages": grading.check_bench_messages,
    "clock": grading.check_bench_clock,
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
_BARRIER = "    MPI_Barrier(comm);\n"
_TAG = "#define TAG 0\n"
_ARGS = "    int max_bytes = atoi(argv[2]), reps = atoi(argv[3]), warmup = atoi(argv[4]);\n"
_SAMPLES = """    double *samples = malloc(sizeof(double) * (size_t)reps);
    double *slowest = malloc(sizeof(double) * (size_t)reps);
"""
_FINALIZE = "    MPI_Finalize();\n    return 0;\n"
_HEADER = '        fprintf(out, "nbytes,reps,t_median_s\\n");\n'
_MEDIAN = "    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);\n"
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

VARIANTS.update(
    {
        # receives into the whole buffer (its capacity), the echo as long as what arrived
        "whole-buffer receives, MPI_Get_count": [
            (_TAG, _TAG + "static int capacity; /* bytes in recvbuf */\n"),
            (_ARGS, _ARGS + "    capacity = max_bytes;\n"),
            (
                _ROUND_TRIP,
                """    if (rank == 0) {
        MPI_Send(sendbuf, nbytes, MPI_BYTE, 1, TAG, comm);
        MPI_Recv(recvbuf, capacity, MPI_BYTE, 1, TAG, comm, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Status status;
        int got;
        MPI_Recv(recvbuf, capacity, MPI_BYTE, 0, TAG, comm, &status);
        MPI_Get_count(&status, MPI_BYTE, &got);
        MPI_Send(recvbuf, got, MPI_BYTE, 0, TAG, comm);
    }
""",
            ),
        ],
        "persistent requests, Startall": [
            (
                _ROUND_TRIP,
                """    MPI_Request req[2];
    if (rank == 0) {
        MPI_Send_init(sendbuf, nbytes, MPI_BYTE, 1, TAG, comm, &req[0]);
        MPI_Recv_init(recvbuf, nbytes, MPI_BYTE, 1, TAG, comm, &req[1]);
        MPI_Startall(2, req);
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
        MPI_Request_free(&req[0]);
        MPI_Request_free(&req[1]);
    } else if (rank == 1) {
        MPI_Recv_init(recvbuf, nbytes, MPI_BYTE, 0, TAG, comm, &req[0]);
        MPI_Send_init(recvbuf, nbytes, MPI_BYTE, 0, TAG, comm, &req[1]);
        MPI_Start(&req[0]);
        MPI_Wait(&req[0], MPI_STATUS_IGNORE);
        MPI_Start(&req[1]);
        MPI_Wait(&req[1], MPI_STATUS_IGNORE);
        MPI_Request_free(&req[0]);
        MPI_Request_free(&req[1]);
    }
""",
            ),
        ],
        "buffered sends (Bsend, an attached buffer)": [
            (_ROUND_TRIP, _ROUND_TRIP.replace("MPI_Send(", "MPI_Bsend(")),
            (
                _SAMPLES,
                _SAMPLES
                + """    int attached = max_bytes + MPI_BSEND_OVERHEAD;
    MPI_Buffer_attach(malloc((size_t)attached), attached);
""",
            ),
            (
                _FINALIZE,
                """    void *detached;
    int detached_size;
    MPI_Buffer_detach(&detached, &detached_size);
    free(detached);
"""
                + _FINALIZE,
            ),
        ],
        "Sendrecv_replace on rank 0, matched probe (Mprobe, Mrecv) on rank 1": [
            (
                _ROUND_TRIP,
                """    if (rank == 0) {
        memcpy(recvbuf, sendbuf, (size_t)nbytes);
        MPI_Sendrecv_replace(recvbuf, nbytes, MPI_BYTE, 1, TAG, 1, TAG, comm, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Message message;
        MPI_Status status;
        int got;
        MPI_Mprobe(0, TAG, comm, &message, &status);
        MPI_Get_count(&status, MPI_BYTE, &got);
        MPI_Mrecv(recvbuf, got, MPI_BYTE, &message, MPI_STATUS_IGNORE);
        MPI_Send(recvbuf, got, MPI_BYTE, 0, TAG, comm);
    }
""",
            ),
        ],
        "Isendrecv, large-count calls (MPI 4)": [
            (
                _ROUND_TRIP,
                """    if (rank == 0) {
        MPI_Request req;
        MPI_Isendrecv(sendbuf, nbytes, MPI_BYTE, 1, TAG, recvbuf, nbytes, MPI_BYTE, 1, TAG, comm,
                      &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Recv_c(recvbuf, (MPI_Count)nbytes, MPI_BYTE, 0, TAG, comm, MPI_STATUS_IGNORE);
        MPI_Send_c(recvbuf, (MPI_Count)nbytes, MPI_BYTE, 0, TAG, comm);
    }
""",
            ),
        ],
        # columns in another order with one more; an even count's median as its upper middle
        "other column order, an extra column, the upper median": [
            (_HEADER, '        fprintf(out, "t_median_s,nbytes,reps,t_min_s\\n");\n'),
            (
                _ROW,
                """        {
            double m = median(slowest, reps); /* sorts slowest */
            fprintf(out, "%.9e,%d,%d,%.9e\\n", m, nbytes, reps, slowest[0]);
        }""",
            ),
            (_MEDIAN, "    return values[n / 2];\n"),
        ],
    }
)

_MEAN_ROW = """        {
            double sum = 0;
            for (int i = 0; i < reps; i++)
                sum += slowest[i];
            fprintf(out, "%d,%d,%.9e\\n", nbytes, reps, sum / reps);
        }"""
_MIN_ROW = """        {
            double least = slowest[0];
            for (int i = 1; i < reps; i++)
                least = slowest[i] < least ? slowest[i] : least;
            fprintf(out, "%d,%d,%.9e\\n", nbytes, reps, least);
        }"""
# the warm-up round trips are timed too, and their samples counted with the others
_TIMED_WARMUP = [
    (
        _WARMUP,
        """    double start = MPI_Wtime();
    for (int i = 0; i < warmup; i++) {
        round_trip(comm, rank, sendbuf, recvbuf, nbytes);
        double now = MPI_Wtime();
        samples[reps + i] = (now - start) / 2.0;
        start = now;
    }
""",
    ),
    (_REDUCE, _REDUCE.replace("reps,", "reps + warmup,")),
    (_ROW, _ROW.replace("median(slowest, reps)", "median(slowest, reps + warmup)")),
    (_SAMPLES, _SAMPLES.replace("(size_t)reps", "(size_t)(reps + warmup)")),
]

# shortcut -> (edits, the checks it must fail); every other check must pass
SHORTCUTS = {
    "a constant time, nothing measured": (
        [(_ROW, '        fprintf(out, "%d,%d,%.9e\\n", nbytes, reps, 2e-6);')],
        {"clock"},  # its round trips are timed, and realistic: only what it writes is made up
    ),
    "made-up times that grow with the size": (
        [(_ROW, '        fprintf(out, "%d,%d,%.9e\\n", nbytes, reps, 1e-6 + nbytes * 1e-10);')],
        {"clock"},
    ),
    "no warm-up": ([(_WARMUP, "")], {"messages"}),
    "one repetition, REPS written anyway": (
        [
            (_TIMED, _TIMED.replace("i < reps", "i < 1")),
            (_REDUCE, _REDUCE.replace("reps", "1")),
            (_ROW, _ROW.replace("median(slowest, reps)", "median(slowest, 1)")),
        ],
        {"messages", "clock"},  # too few sent; one sample is not the median of REPS
    ),
    "no Barrier after the warm-up": ([(_BARRIER, "")], {"messages"}),
    "the mean, not the median": ([(_ROW, _MEAN_ROW)], {"clock"}),
    "the smallest sample, not the median": ([(_ROW, _MIN_ROW)], {"clock"}),
    "the warm-up round trips timed and counted": (_TIMED_WARMUP, {"clock"}),
    "rank 0's own time, no maximum over ranks": (
        [(_REDUCE, "    memcpy(slowest, samples, sizeof(double) * (size_t)reps);\n")],
        {"clock"},
    ),
    "a program that never sends": (
        [
            (
                _ROUND_TRIP,
                "    (void)comm, (void)rank, (void)sendbuf, (void)recvbuf, (void)nbytes;\n",
            ),
            (_CHECK, "    return 0;\n"),
        ],
        {"messages", "clock", "payload", "reference"},  # nothing sent, nothing to corrupt
    ),
    "the echo is never checked": ([(_CHECK, "    return 0;\n")], {"payload"}),
    # the door of the old payload check (its corrupting run was the only one with the switch):
    # every graded run has the same switches now, so a program that stops when it sees them
    # stops in every run and loses every check
    "the echo never checked, the program stops whenever the grader's switch is set": (
        [
            (_CHECK, "    return 0;\n"),
            (
                "    /* BEGIN SOLUTION */\n    MPI_Init(&argc, &argv);\n",
                '    /* BEGIN SOLUTION */\n    int told = getenv("PP_BENCH_CORRUPT") != NULL;\n'
                "    MPI_Init(&argc, &argv);\n    if (told)\n"
                "        MPI_Abort(MPI_COMM_WORLD, 1);\n",
            ),
        ],
        set(CHECKS),
    ),
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


def test_the_clock_check_says_which_rank_was_timed(build_here):
    path = _program(build_here, SHORTCUTS["rank 0's own time, no maximum over ranks"][0])
    with pytest.raises(AssertionError, match="maximum over ranks"):
        grading.check_bench_clock(path)


@pytest.mark.parametrize(
    ("edits", "says"),
    [
        (SHORTCUTS["the mean, not the median"][0], "mean of the samples"),
        (SHORTCUTS["the smallest sample, not the median"][0], "smallest sample"),
        (_TIMED_WARMUP, "warm-up round trips among the samples"),
    ],
    ids=["mean", "minimum", "timed warm-up"],
)
def test_the_clock_check_names_the_summary_that_was_reported(build_here, edits, says):
    with pytest.raises(AssertionError, match=says):
        grading.check_bench_clock(_program(build_here, edits))


def test_the_clock_check_recomputes_the_programs_own_readings(build_here):
    """The layer logs every MPI_Wtime reading; the median recomputed from them is the row the
    solution wrote, to the digits of the CSV, and rank 1's clock ran twice as fast."""
    exe = cbench.build_bench(_program(build_here, []), graded=True)
    run = cbench.finished_run(exe, 1 << 6, 9, 2)
    for nbytes, got in zip(run.table["nbytes"], run.table["t_median_s"], strict=True):
        (lo, hi), _ = cbench.clock_summaries(run.events, int(nbytes), 9, 2)
        assert lo == hi and got == pytest.approx(lo, rel=1e-8)
    s0, s1 = (cbench.round_trip_samples(run.events[r], 64, 9, r) for r in (0, 1))
    assert np.median(s1) > 1.5 * np.median(s0)  # rank 1's clock: RANK1_RATE times as fast


def test_the_payload_check_tells_intact_runs_from_flipped_ones_by_the_layers_word(build_here):
    path = _program(build_here, [])
    exe = cbench.build_bench(path, graded=True)
    seen = set()
    for _ in range(40):  # both kinds, but for one time in 2**39
        run = cbench.graded_run(exe, 64, 3, 1)
        assert (run.proc.returncode != 0) == run.flipped, (run.flipped, run.proc.stderr[-300:])
        seen.add(run.flipped)
        if len(seen) == 2:
            break
    assert seen == {True, False}


def test_the_messages_check_names_the_missing_barrier(build_here):
    path = _program(build_here, SHORTCUTS["no Barrier after the warm-up"][0])
    with pytest.raises(AssertionError, match="no MPI_Barrier between the 5 warm-up"):
        grading.check_bench_messages(path)


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


def _tables(times: list[float], max_bytes=1 << 4):
    """CSV tables of one-way times t * (1 + nbytes / 4), a run per t (bandwidth-like growth)."""
    sizes = np.array(cbench.bench_sizes(max_bytes), dtype=float)
    return iter({"nbytes": sizes, "reps": sizes * 0 + 5, "t_median_s": t * (1 + sizes / 4)}
                for t in times)  # fmt: skip


def _references(times: list[float], max_bytes=1 << 4):
    sizes = cbench.bench_sizes(max_bytes)
    return iter({b: t * (1 + b / 4) for b in sizes} for t in times)


@pytest.mark.parametrize(
    ("yours", "reference", "outcome"),
    [
        # one stall each, in turn: the medians of the runs so far agree
        ([1e-4, 1e-6, 1e-4], [1e-6, 1e-4, 1e-6], "pass"),
        # 50x too slow every time, the kernel steady: a wrong program
        ([5e-5] * 5, [1e-6] * 5, "fail"),
        # 50x too slow, but the kernel's own runs disagree 30x: too noisy to tell
        ([5e-5] * 5, [1e-6, 1e-6, 3e-5, 1e-6, 3e-5], "note"),
    ],
    ids=["stalls in turn", "always off", "too noisy"],
)
def test_the_real_time_check_decides_on_interleaved_medians(
    monkeypatch, capsys, yours, reference, outcome
):
    mine, theirs = _tables(yours), _references(reference)
    monkeypatch.setattr(cbench, "build_bench", lambda path, graded=False: "bench")
    monkeypatch.setattr(
        cbench, "finished_run", lambda *a, **k: cbench.GradedRun(False, None, {}, next(mine))
    )
    monkeypatch.setattr(
        cbench,
        "real_medians",
        lambda run, reps: dict(zip(run.table["nbytes"].astype(int), run.table["t_median_s"])),
    )
    monkeypatch.setattr(cbench, "reference_bench", lambda *a, **k: next(theirs))
    if outcome == "fail":
        with pytest.raises(AssertionError, match="in 5 runs each, the round trips your program"):
            cbench.check_bench_against_reference(max_bytes=1 << 4)
        return
    assert cbench.check_bench_against_reference(max_bytes=1 << 4)
    assert ("[grader note]" in capsys.readouterr().out) == (outcome == "note")
