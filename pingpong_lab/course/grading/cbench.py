"""Notebook 02's own benchmark program: build it, run it under mpiexec, read and grade its CSV.

The learner writes a whole C program (bench.c) that is run as

    mpiexec -n 2 ./bench OUT.csv MAX_BYTES REPS WARMUP

and writes one CSV row per size 1, 2, 4, ... MAX_BYTES with at least the columns nbytes, reps
and t_median_s (one-way seconds: the median over round trips of the per-round-trip maximum
over ranks). The checks run it in separate processes (mpicc, mpiexec), each with a deadline.
Every graded run is the same to the program: it is linked with kernels_c/grading/bench_graded.c,
a profiling layer that logs every message sent (by any send call), every call that synchronises
the ranks and every MPI_Wtime reading, runs rank 1's clock RANK1_RATE times as fast, and flips
a byte of every echo in a run or not, as it draws at random out of the program's sight
(GradedRun). Each check judges its runs by what the layer saw:

- check_bench_csv         exit status 0, the columns, every size, positive times;
- check_bench_messages    each rank sent every size WARMUP + REPS times and synchronised (a
                          Barrier) between the warm-up and the timed ones;
- check_bench_clock       each row is the median, over the timed round trips, of the slower
                          rank's one-way time, computed from the clock readings the program
                          made in that run: a mean, a minimum, rank 0's own time or warm-up
                          round trips among the samples give other numbers;
- check_bench_payload     a run with intact echoes ends with 0, one with flipped echoes does
                          not;
- check_bench_against_reference  the round trips the program timed, interleaved with runs of
                          the course's C kernel (echo buffers, same sizes and counts): times
                          that grow with size and a ratio in a wide band; on a machine too
                          noisy to tell (the runs of either disagree by more than the band), it
                          passes with a note.

The program's process writes the layer's log, so native code that set out to could rewrite
it: what that would take, and gain, is in docs/GRADING.md.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import CompileError
from ...mpi import environment
from ...mpi.ckernels import build_cached, kernels_build_dir
from ...mpi.processes import run_group
from .cbuild import GRADING_C, NOT_IMPLEMENTED, _learner_source
from .mode import MPIEXEC_TIMEOUT_S, undecided

COLUMNS = ("nbytes", "reps", "t_median_s")
FLAGS = ("-O2", "-Wall", "-Wextra")
RANK1_RATE = 2.0  # bench_graded.c: rank 1's MPI_Wtime runs this many times as fast as the real one
NOT_IMPLEMENTED_STATUS = NOT_IMPLEMENTED & 0xFF  # main returning NOT_IMPLEMENTED: exit status 157
UNFINISHED = "bench.c is not implemented yet (its main returned NOT_IMPLEMENTED)"


def bench_sizes(max_bytes: int) -> list[int]:
    """1, 2, 4, ... up to max_bytes: the sizes the program must measure."""
    sizes, n = [], 1
    while n <= int(max_bytes):
        sizes.append(n)
        n *= 2
    return sizes


def build_bench(path="bench.c", graded=False, show_warnings=False) -> str:
    """Compile the learner's program with the environment's mpicc; the executable's path.

    graded: link the profiling layer of kernels_c/grading/bench_graded.c as well. Compiler
    errors raise AssertionError quoting them; warnings are printed only with show_warnings.
    """
    source_path = _learner_source(path)
    extra = [GRADING_C / "bench_graded.c"] if graded else []
    try:
        with (
            contextlib.nullcontext() if show_warnings else contextlib.redirect_stdout(io.StringIO())
        ):
            exe = build_cached(
                "bench_checked" if graded else "bench",
                source_path.read_text(),
                compiler=environment.mpicc(),
                flags=list(FLAGS),
                extra=extra,
                shared=False,
            )
    except CompileError as exc:
        raise AssertionError(
            str(exc)
            .replace("bench_checked.c", source_path.name)
            .replace("bench.c", source_path.name)
        ) from None
    return str(exe)


def run_bench(
    exe, out_csv, max_bytes, reps, warmup, nranks=2, env=None, timeout=MPIEXEC_TIMEOUT_S
) -> subprocess.CompletedProcess:
    """`mpiexec -n nranks exe out_csv max_bytes reps warmup`, killed whole at the deadline.

    A deadline overrun raises AssertionError; the exit status is the caller's to judge.
    """
    cmd = [environment.mpiexec(), "-n", str(int(nranks)), str(exe), str(out_csv),
           str(int(max_bytes)), str(int(reps)), str(int(warmup))]  # fmt: skip
    try:
        return run_group(cmd, timeout, env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"the benchmark did not finish within {timeout:g} s (a deadlock? a rank waiting for "
            "a message that never comes, or ranks that disagree on the number of round trips?)"
        ) from None


def _tail(text: str, lines=6) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def read_bench_csv(path) -> dict:
    """The CSV as arrays {column: array}; AssertionError when it is missing or unreadable."""
    path = Path(path)
    if not path.is_file():
        raise AssertionError(f"the program wrote no CSV file at {path.name} (its first argument)")
    with open(path, newline="") as f:
        rows = list(csv.reader(line for line in f if line.strip()))
    if not rows:
        raise AssertionError(f"{path.name} is empty: write a header line, then one row per size")
    header = [h.strip() for h in rows[0]]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise AssertionError(
            f"{path.name}: the header {','.join(header)!r} lacks {', '.join(missing)} (expected at "
            f"least {','.join(COLUMNS)})"
        )
    table = {}
    for column in COLUMNS:
        k = header.index(column)
        try:
            table[column] = np.array([float(row[k]) for row in rows[1:]], dtype=float)
        except (IndexError, ValueError):
            raise AssertionError(
                f"{path.name}: column {column} has a missing or non-number value"
            ) from None
    return table


def _run_and_read(exe, max_bytes, reps, warmup, env=None, what="the benchmark") -> dict:
    """The CSV of one run of the program (the learner's own view: no layer, no switch)."""
    with tempfile.TemporaryDirectory(prefix="pp-bench-") as tmp:
        out = Path(tmp) / "bench.csv"
        proc = run_bench(exe, out, max_bytes, reps, warmup, env=env)
        _raise_unless_ok(proc, what)
        return read_bench_csv(out)


def _raise_unless_ok(proc, what="the benchmark") -> None:
    if proc.returncode == NOT_IMPLEMENTED_STATUS:
        raise AssertionError(UNFINISHED)
    if proc.returncode != 0:
        raise AssertionError(
            f"{what} ended with exit status {proc.returncode}:\n{_tail(proc.stderr)}"
        )


def _check_table(table, max_bytes, what="the CSV") -> None:
    sizes = bench_sizes(max_bytes)
    got = [int(n) for n in table["nbytes"]]
    if got != sizes:
        raise AssertionError(
            f"{what}: expected one row per size {sizes[0]}, {sizes[1]}, ... {sizes[-1]} bytes, "
            f"in order; got nbytes {got[:8]}{' ...' if len(got) > 8 else ''}"
        )
    t = table["t_median_s"]
    if not np.all(np.isfinite(t) & (t > 0)):
        raise AssertionError(f"{what}: every t_median_s must be a positive number of seconds")


# -- graded runs: every one the same to the program ---------------------------------------------
@dataclass
class GradedRun:
    """One run of the program linked with the layer, as grading makes every run: the layer logs
    every message, synchronising call and clock reading, and rank 1's layer decides at random,
    out of the program's sight, whether to flip a byte of every echo.

    events: {rank: [int (bytes of a message sent) | "sync" | float (an MPI_Wtime reading)]}.
    table: the CSV, when the program ended with 0 and wrote one (else None)."""

    flipped: bool
    proc: subprocess.CompletedProcess
    events: dict
    table: dict | None


def graded_run(exe, max_bytes, reps, warmup, timeout=MPIEXEC_TIMEOUT_S) -> GradedRun:
    """Run the program built with the layer once, as every graded run is (see GradedRun)."""
    with tempfile.TemporaryDirectory(prefix="pp-bench-run-") as tmp:
        log, out = Path(tmp) / "log", Path(tmp) / "bench.csv"
        env = {"PP_BENCH_CORRUPT": "maybe", "PP_BENCH_LOG": str(log)}
        proc = run_bench(exe, out, max_bytes, reps, warmup, env=env, timeout=timeout)
        events = {rank: _read_events(Path(f"{log}.rank{rank}")) for rank in (0, 1)}
        table = read_bench_csv(out) if proc.returncode == 0 and out.exists() else None
        return GradedRun(Path(f"{log}.rank1.corrupted").exists(), proc, events, table)


def _read_events(file: Path) -> list:
    events: list = []
    for line in file.read_text().split("\n") if file.exists() else []:
        word, _, value = line.partition(" ")
        if word == "send":
            events.append(int(value))
        elif word == "clock":
            events.append(float(value))
        elif word:
            events.append(word)
    return events


def finished_run(exe, max_bytes, reps, warmup, what="the benchmark", tries=20) -> GradedRun:
    """The first graded run that ends with exit status 0 and writes its CSV.

    A run whose echoes were flipped may end otherwise (it should: the program noticed), and is
    run again; a run with intact echoes that fails is the program's error."""
    for _ in range(tries):
        run = graded_run(exe, max_bytes, reps, warmup)
        if run.proc.returncode == 0 and run.table is None:
            raise AssertionError(f"{what} ended with exit status 0 but wrote no CSV")
        if run.table is not None:
            return run
        if not run.flipped:
            _raise_unless_ok(run.proc, what)
    raise AssertionError(
        f"in {tries} runs, {what} never ended with exit status 0 (it stops on intact echoes?)"
    )


def check_bench_csv(path="bench.c", max_bytes=1 << 12, reps=20, warmup=3) -> bool:
    """A run exits with 0 and writes the columns, every size in order, positive times."""
    run = finished_run(build_bench(path, graded=True), max_bytes, reps, warmup)
    _check_table(run.table, max_bytes)
    return True


def message_log(path="bench.c", max_bytes=1 << 10, reps=12, warmup=5):
    """(the CSV, {rank: events}) of one graded run that finished (see GradedRun)."""
    run = finished_run(build_bench(path, graded=True), max_bytes, reps, warmup)
    return run.table, run.events


def sent_counts(events) -> dict:
    """{nbytes: messages of that size} of one rank's events."""
    counts: dict = {}
    for event in events:
        if type(event) is int:
            counts[event] = counts.get(event, 0) + 1
    return counts


def synchronised_after_warmup(events, nbytes, warmup) -> bool:
    """Whether a synchronising call comes after this rank's warm-up messages of nbytes and
    before its first timed one (with no warm-up: after the message it sent before that)."""
    sends = [i for i, e in enumerate(events) if type(e) is int and e == nbytes]
    if len(sends) <= warmup:
        return False
    end = sends[warmup]
    if warmup:
        start = sends[warmup - 1]
    else:
        start = max((i for i, e in enumerate(events[:end]) if type(e) is int), default=-1)
    return "sync" in events[start + 1 : end]


def check_bench_messages(path="bench.c", max_bytes=1 << 10, reps=12, warmup=5) -> bool:
    """Each rank sent every size at least warmup + reps times, with a Barrier between the
    warm-up and the timed round trips, and the CSV says reps."""
    table, events = message_log(path, max_bytes, reps, warmup)
    for rank in (0, 1):
        sent = sent_counts(events[rank])
        for nbytes in bench_sizes(max_bytes):
            count = sent.get(nbytes, 0)
            if count == 0:
                raise AssertionError(f"rank {rank} never sent a message of {nbytes} bytes")
            if count < reps + warmup:
                raise AssertionError(
                    f"rank {rank} sent {count} messages of {nbytes} bytes; with REPS={reps} and "
                    f"WARMUP={warmup} expected {reps + warmup} (every warm-up and every timed "
                    "round trip)"
                )
    got = sorted({int(r) for r in table["reps"]})
    if got != [reps]:
        raise AssertionError(f"the reps column should be {reps} (REPS) for every size, got {got}")
    for rank in (0, 1):
        for nbytes in bench_sizes(max_bytes):
            if not synchronised_after_warmup(events[rank], nbytes, warmup):
                raise AssertionError(
                    f"rank {rank}, {nbytes} bytes: no MPI_Barrier between the {warmup} warm-up "
                    "round trips and the first timed one. Without it a rank starts its clock "
                    "while the other is still busy, and the first samples measure that wait"
                )
    return True


# -- the clock: what the program should report, from the readings it made -----------------------
def round_trip_samples(events, nbytes, count, rank=0) -> np.ndarray:
    """This rank's one-way samples of its last `count` round trips of nbytes, from its log:
    half the time between the clock reading just before each message it sent and the one just
    after it (the readings that bracket the round trip, however the loop reads the clock)."""
    sends = [i for i, e in enumerate(events) if type(e) is int and e == nbytes]
    if len(sends) < count:
        raise AssertionError(
            f"rank {rank} sent {len(sends)} messages of {nbytes} bytes: fewer than the "
            f"{count} timed round trips that the median is taken over"
        )
    clocks = [i for i, e in enumerate(events) if type(e) is float]
    samples = []
    for k, j in enumerate(sends[len(sends) - count :]):
        at = np.searchsorted(clocks, j)
        if at == 0 or at == len(clocks):
            side = "before" if at == 0 else "after"
            raise AssertionError(
                f"rank {rank} read no MPI_Wtime() {side} its timed round trip {k + 1} of "
                f"{nbytes} bytes: every rank times every round trip (read the clock before "
                "and after each one)"
            )
        samples.append((events[clocks[at]] - events[clocks[at - 1]]) / 2)
    return np.array(samples)


def clock_summaries(events, nbytes, reps, warmup) -> tuple[tuple[float, float], dict]:
    """((lowest, highest) median, {hint: value} of some wrong summaries) at nbytes: what the
    program should report from the readings of its own clock (the median over the timed
    round trips of the per-round-trip maximum over ranks), and what some mistakes give."""
    s0, s1 = (round_trip_samples(events[r], nbytes, reps, r) for r in (0, 1))
    slowest = np.sort(np.maximum(s0, s1))
    lo, hi = float(slowest[(reps - 1) // 2]), float(slowest[reps // 2])
    wrong = {
        "That is rank 0's own time: a round trip lasts as long as its slowest rank, so take "
        "the maximum over ranks (MPI_Reduce or MPI_Allreduce with MPI_MAX).": np.median(s0),
        "That is a whole round trip: one way is half of it.": lo + hi,
        "That is the mean of the samples: report their median.": slowest.mean(),
        "That is the smallest sample: report their median.": slowest.min(),
    }
    if warmup:
        try:
            both = [round_trip_samples(events[r], nbytes, reps + warmup, r) for r in (0, 1)]
        except AssertionError:
            both = None
        if both is not None:
            wrong[
                "That is the median with the warm-up round trips among the samples: time only "
                "the REPS round trips after the Barrier."
            ] = np.median(np.maximum(*both))
    return (lo, hi), wrong


def clock_verdicts(run: GradedRun, reps, warmup, rtol=1e-6) -> list[tuple[int, float, str]]:
    """[(nbytes, reported, "" when right else why)] for every row of a finished run's CSV."""
    out = []
    for n, got in zip(run.table["nbytes"], run.table["t_median_s"], strict=True):
        n = int(n)
        try:
            (lo, hi), wrong = clock_summaries(run.events, n, reps, warmup)
        except AssertionError as exc:
            out.append((n, float(got), str(exc)))
            continue
        if lo * (1 - rtol) <= got <= hi * (1 + rtol):
            out.append((n, float(got), ""))
            continue
        # every mistake that gives this number (two can coincide in a short run)
        hint = " Or: ".join(t for t, value in wrong.items() if np.isclose(got, value, rtol=rtol))
        hint = " " + hint if hint else ""
        want = f"{lo:.9g} s" if lo == hi else f"{lo:.9g} .. {hi:.9g} s"
        out.append(
            (n, float(got), f"{n} bytes: from the MPI_Wtime readings of this run the median over "
             f"the timed round trips of the slower rank's one-way time is {want}; the CSV says "
             f"{float(got):.9g} s.{hint}")
        )  # fmt: skip
    return out


def check_bench_clock(path="bench.c", max_bytes=1 << 10, reps=10, warmup=2) -> bool:
    """Every size reports the median of the per-round-trip maximum over ranks of the one-way
    times, computed from the very clock readings the program made in that run (the layer logs
    them): exact on any machine, quiet or busy. Rank 1's clock runs RANK1_RATE times as fast
    in every graded run, so the maximum over ranks is told from rank 0's own time; the mean,
    the smallest sample and timed warm-ups give other numbers."""
    run = finished_run(build_bench(path, graded=True), max_bytes, reps, warmup)
    _check_table(run.table, max_bytes)
    wrong = [why for _, _, why in clock_verdicts(run, reps, warmup) if why]
    if wrong:
        raise AssertionError(wrong[0])
    return True


def corrupted_run(path="bench.c", max_bytes=1 << 8, reps=5, warmup=2):
    """The program run while every echo has one byte flipped: its CompletedProcess (what the
    notebook shows a learner; grading uses graded_run, where the program cannot tell)."""
    exe = build_bench(path, graded=True)
    with tempfile.TemporaryDirectory(prefix="pp-bench-bad-") as tmp:
        return run_bench(exe, Path(tmp) / "bench.csv", max_bytes, reps, warmup,
                         env={"PP_BENCH_CORRUPT": "1"})  # fmt: skip


def check_bench_payload(path="bench.c", max_bytes=1 << 8, reps=5, warmup=2, runs=20) -> bool:
    """Intact echoes: exit status 0; every echo with a byte flipped: the program must fail.

    Every run is the same to the program: the profiling layer itself decides, at random and
    where the program cannot see it, whether this run's echoes come back flipped. The program
    runs until both kinds were seen (at most `runs` times; a correct program misses one kind
    once in 2**(runs - 1)), and each run is judged by what it was: a program that stops
    whenever it is being checked fails the intact runs, one that never checks fails the
    flipped ones, and one whose rank 1 never echoes has nothing flipped to notice.
    """
    exe = build_bench(path, graded=True)
    seen = set()
    for _ in range(runs):
        run = graded_run(exe, max_bytes, reps, warmup)
        flipped, proc = run.flipped, run.proc
        if proc.returncode == NOT_IMPLEMENTED_STATUS:
            raise AssertionError(UNFINISHED)
        if flipped and proc.returncode == 0:
            raise AssertionError(
                "every echo came back with one byte changed, and the program still ended with "
                "exit status 0: compare the echo with what was sent, and on a difference print "
                "an error and call MPI_Abort(comm, 1)"
            )
        if not flipped and proc.returncode != 0:
            raise AssertionError(
                f"with intact echoes the program ended with exit status {proc.returncode} "
                f"(it must end with 0 when every echo is right):\n{_tail(proc.stderr)}"
            )
        seen.add(flipped)
        if len(seen) == 2:
            return True
    raise AssertionError(
        f"in {runs} runs, rank 1 never sent rank 0 an echo that could be changed"
        if True not in seen else
        f"in {runs} runs every echo came back changed and the program noticed each time; "
        "no run had intact echoes to pass (run the check again)"
    )  # fmt: skip


def reference_bench(max_bytes, reps, warmup, timeout=MPIEXEC_TIMEOUT_S) -> dict:
    """The course's C kernel (pp_blocking, echo buffers) run the same way: {nbytes: median s}."""
    exe = kernels_build_dir() / "pp_blocking"
    if not exe.exists():
        raise AssertionError(f"the course's C kernel {exe.name} is not built: run `make kernels`")
    cmd = [environment.mpiexec(), "-n", "2", str(exe), "-m", f"1:{int(max_bytes)}",
           "-i", str(int(reps)), "-x", str(int(warmup)), "-s"]  # fmt: skip
    try:
        proc = run_group(cmd, timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the course's C kernel did not finish within {timeout:g} s") from None
    if proc.returncode != 0:
        raise AssertionError(f"the course's C kernel failed:\n{_tail(proc.stderr)}")
    rows = [line.split() for line in proc.stdout.splitlines() if line and line[0].isdigit()]
    return {int(r[0]): float(r[2]) * 1e-6 for r in rows}


def compare_with_reference(table, reference) -> tuple[float, float]:
    """(median over sizes of yours / the reference's time, your time at the largest size over
    your time at a quarter of it)."""
    n = [int(b) for b in table["nbytes"]]
    t = dict(zip(n, table["t_median_s"], strict=True))
    ratio = float(np.median([t[b] / reference[b] for b in n if b in reference]))
    growth = float(t[n[-1]] / t[n[-3]])
    return ratio, growth


def _pooled(runs: list[dict]) -> dict:
    """{nbytes: median over runs} of runs that each map nbytes to seconds."""
    return {b: float(np.median([run[b] for run in runs])) for b in runs[0]}


def real_medians(run: GradedRun, reps) -> dict:
    """{nbytes: seconds} of a finished run: the median over its timed round trips of the
    slower rank's one-way time by the real clock (rank 1's readings slowed back by RANK1_RATE),
    from the clock readings the program made."""
    out = {}
    for n in (int(b) for b in run.table["nbytes"]):
        # the round trips it timed: REPS, or those after its last Barrier if it made fewer
        timed = max(1, min([int(reps)] + [_after_last_sync(run.events[r], n) for r in (0, 1)]))
        s0, s1 = (round_trip_samples(run.events[r], n, timed, r) for r in (0, 1))
        out[n] = float(np.median(np.maximum(s0, s1 / RANK1_RATE)))
    return out


def _after_last_sync(events, nbytes) -> int:
    """How many messages of nbytes this rank sent after the last synchronising call before its
    last one of that size (all of them, when it never synchronised)."""
    sends = [i for i, e in enumerate(events) if type(e) is int and e == nbytes]
    if not sends:
        return 0
    syncs = [i for i, e in enumerate(events[: sends[-1]]) if e == "sync"]
    return sum(i > syncs[-1] for i in sends) if syncs else len(sends)


def check_bench_against_reference(path="bench.c", max_bytes=1 << 20, reps=50, warmup=5,
                                  low=0.2, high=5.0, tries=5) -> bool:  # fmt: skip
    """The round trips the program timed (by its own clock readings, which the layer logs)
    take times that grow with size at large sizes, within [low, high] x the course's kernel
    (median of the per-size ratios).

    Your program and the kernel run in turns, up to `tries` times each; after each turn the
    per-size medians of all the runs so far are compared, so one stall of a shared machine does
    not decide it. When the machine is too noisy to tell (the runs of either program disagree
    with each other by more than the band), the check passes with a note for the instructor:
    the noise, not the program, would decide a failure.
    """
    exe = build_bench(path, graded=True)
    yours, reference = [], []
    for _ in range(tries):
        run = finished_run(exe, max_bytes, reps, warmup)
        _check_table(run.table, max_bytes)
        yours.append(real_medians(run, reps))
        reference.append(reference_bench(max_bytes, reps, warmup))
        mine = _pooled(yours)
        pooled = {"nbytes": np.array(list(mine)), "t_median_s": np.array(list(mine.values()))}
        ratio, growth = compare_with_reference(pooled, _pooled(reference))
        if low <= ratio <= high and growth > 1.5:
            return True
    spread = max(_run_spread(yours), _run_spread(reference))
    if spread > min(high, 1 / low):
        undecided(
            f"bench.c against the course's kernel: {ratio:.3g}x, growing {growth:.3g}x over the "
            f"last quarter of the sizes, but runs of the same program disagreed by up to "
            f"{spread:.3g}x"
        )
        return True
    raise AssertionError(
        f"in {tries} runs each, the round trips your program timed took {ratio:.3g}x the "
        f"course's kernel (medians per size, by the clock readings of your program), and "
        f"{growth:.3g}x from a quarter of the largest size to it. Expected between {low:g}x and "
        f"{high:g}x the course's kernel, and a time at {max_bytes} bytes more than 1.5x that at "
        "a quarter of it (large messages are limited by bandwidth)"
    )


def _run_spread(runs: list[dict]) -> float:
    """How far apart runs of one program were: the largest over sizes of max / min."""
    if len(runs) < 2:
        return 1.0
    return max(max(r[b] for r in runs) / min(r[b] for r in runs) for b in runs[0])
