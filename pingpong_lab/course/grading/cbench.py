"""Notebook 02's own benchmark program: build it, run it under mpiexec, read and grade its CSV.

The learner writes a whole C program (bench.c) that is run as

    mpiexec -n 2 ./bench OUT.csv MAX_BYTES REPS WARMUP

and writes one CSV row per size 1, 2, 4, ... MAX_BYTES with at least the columns nbytes, reps
and t_median_s (one-way seconds: the median over round trips of the per-round-trip maximum
over ranks). The checks run it in separate processes (mpicc, mpiexec), each with a deadline:

- check_bench_csv         a real run: exit status 0, the columns, every size, positive times;
- check_bench_messages    rank 0 sent every size WARMUP + REPS times (warm-up, repetitions);
- check_bench_fake_clock  linked with kernels_c/grading/bench_graded.c, whose MPI_Wtime only
                          point-to-point calls move (on rank 1 twice as far per message as on
                          rank 0, at rates drawn for each check): the program must report
                          exactly rank 1's one-way time, the slower rank's;
- check_bench_payload     the same layer flips a byte of every echo: the program must fail;
- check_bench_against_reference  a real run next to the course's C kernel (echo buffers, same
                          sizes and counts): times that grow with size and a ratio in a wide band.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from ...errors import CompileError
from ...mpi import environment
from ...mpi.ckernels import build_cached, kernels_build_dir
from ...mpi.processes import run_group
from .cbuild import GRADING_C, NOT_IMPLEMENTED, _learner_source
from .mode import MPIEXEC_TIMEOUT_S

COLUMNS = ("nbytes", "reps", "t_median_s")
FLAGS = ("-O2", "-Wall", "-Wextra")
# bench_graded.c's fake clock: what one message sent or received adds, times (rank + 1)
FAKE_LATENCY_S = 1e-6
FAKE_S_PER_BYTE = 1e-9
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
    with tempfile.TemporaryDirectory(prefix="pp-bench-") as tmp:
        out = Path(tmp) / "bench.csv"
        proc = run_bench(exe, out, max_bytes, reps, warmup, env=env)
        if proc.returncode == NOT_IMPLEMENTED_STATUS:
            raise AssertionError(UNFINISHED)
        if proc.returncode != 0:
            raise AssertionError(
                f"{what} ended with exit status {proc.returncode}:\n{_tail(proc.stderr)}"
            )
        return read_bench_csv(out)


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


def check_bench_csv(path="bench.c", max_bytes=1 << 12, reps=20, warmup=3) -> bool:
    """A real run exits with 0 and writes the columns, every size in order, positive times."""
    exe = build_bench(path)
    table = _run_and_read(exe, max_bytes, reps, warmup)
    _check_table(table, max_bytes)
    return True


def message_counts(path="bench.c", max_bytes=1 << 10, reps=12, warmup=5):
    """(the CSV, {nbytes: messages rank 0 sent of that size}) of one run with the layer."""
    exe = build_bench(path, graded=True)
    with tempfile.TemporaryDirectory(prefix="pp-bench-log-") as tmp:
        log = Path(tmp) / "log"
        table = _run_and_read(exe, max_bytes, reps, warmup, env={"PP_BENCH_LOG": str(log)})
        rank0 = Path(f"{log}.rank0")
        words = rank0.read_text().split() if rank0.exists() else []
    sent = {int(words[i + 1]): int(words[i + 2]) for i in range(0, len(words) - 2, 3)}
    return table, sent


def check_bench_messages(path="bench.c", max_bytes=1 << 10, reps=12, warmup=5) -> bool:
    """Rank 0 sent every size at least warmup + reps times, and the CSV says reps."""
    table, sent = message_counts(path, max_bytes, reps, warmup)
    for nbytes in bench_sizes(max_bytes):
        count = sent.get(nbytes, 0)
        if count == 0:
            raise AssertionError(f"rank 0 never sent a message of {nbytes} bytes")
        if count < reps + warmup:
            raise AssertionError(
                f"rank 0 sent {count} messages of {nbytes} bytes; with REPS={reps} and "
                f"WARMUP={warmup} expected {reps + warmup} (every warm-up and every timed round "
                "trip)"
            )
    got = sorted({int(r) for r in table["reps"]})
    if got != [reps]:
        raise AssertionError(f"the reps column should be {reps} (REPS) for every size, got {got}")
    return True


def fake_one_way_s(nbytes, nranks=2, latency_s=FAKE_LATENCY_S, s_per_byte=FAKE_S_PER_BYTE):
    """What a correct program reports under bench_graded.c's fake clock: the slowest rank's
    one-way time, nranks * (latency_s + nbytes * s_per_byte)."""
    return nranks * (latency_s + np.asarray(nbytes, dtype=float) * s_per_byte)


def fake_clock_table(path="bench.c", max_bytes=1 << 10, reps=10, warmup=2,
                     latency_s=FAKE_LATENCY_S, s_per_byte=FAKE_S_PER_BYTE) -> dict:  # fmt: skip
    """The CSV of a run under bench_graded.c's fake clock (latency_s + nbytes * s_per_byte per
    message on rank 0, twice that on rank 1)."""
    exe = build_bench(path, graded=True)
    clock = f"{latency_s!r},{s_per_byte!r}"
    return _run_and_read(exe, max_bytes, reps, warmup, env={"PP_BENCH_FAKE_CLOCK": clock},
                         what="the benchmark under the fake clock")  # fmt: skip


def check_bench_fake_clock(path="bench.c", max_bytes=1 << 10, reps=10, warmup=2, seed=None):
    """Under the fake clock every size reports the slower rank's one-way time, exactly.

    The clock's rates are drawn at random for each check (seed), so no constant passes.
    """
    rng = np.random.default_rng(seed)
    latency_s = float(rng.uniform(0.5e-6, 3e-6))
    s_per_byte = float(rng.uniform(0.2e-9, 2e-9))
    table = fake_clock_table(path, max_bytes, reps, warmup, latency_s, s_per_byte)
    _check_table(table, max_bytes, what="the CSV under the fake clock")
    want = fake_one_way_s(table["nbytes"], 2, latency_s, s_per_byte)
    got = table["t_median_s"]
    if np.allclose(got, want, rtol=1e-3, atol=0):
        return True
    k = int(np.argmax(np.abs(got / want - 1)))
    n = int(table["nbytes"][k])
    hint = ""
    if np.isclose(got[k], want[k] / 2, rtol=1e-3):
        hint = (
            " That is rank 0's own time: a round trip lasts as long as its slowest rank, so "
            "take the maximum over ranks (MPI_Reduce or MPI_Allreduce with MPI_MAX)."
        )
    elif np.isclose(got[k], 2 * want[k], rtol=1e-3):
        hint = " That is a whole round trip: one way is half of it."
    raise AssertionError(
        "with a fake MPI_Wtime that moves only when messages are sent or received (on rank 1 "
        f"twice as far per message as on rank 0), {n} bytes should report {want[k]:.6g} s one way, "
        f"got {got[k]:.6g} s.{hint}"
    )


def corrupted_run(path="bench.c", max_bytes=1 << 8, reps=5, warmup=2):
    """The program run while every echo has one byte flipped: its CompletedProcess."""
    exe = build_bench(path, graded=True)
    with tempfile.TemporaryDirectory(prefix="pp-bench-bad-") as tmp:
        return run_bench(exe, Path(tmp) / "bench.csv", max_bytes, reps, warmup,
                         env={"PP_BENCH_CORRUPT": "1"})  # fmt: skip


def check_bench_payload(path="bench.c", max_bytes=1 << 8, reps=5, warmup=2) -> bool:
    """Intact echoes: exit status 0; every echo with a byte flipped: the program must fail."""
    exe = build_bench(path, graded=True)
    _run_and_read(exe, max_bytes, reps, warmup, what="the benchmark with intact echoes")
    proc = corrupted_run(path, max_bytes, reps, warmup)
    if proc.returncode == 0:
        raise AssertionError(
            "every echo came back with one byte changed, and the program still ended with exit "
            "status 0: compare the echo with what was sent, and on a difference print an error "
            "and call MPI_Abort(comm, 1)"
        )
    return True


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


def check_bench_against_reference(path="bench.c", max_bytes=1 << 20, reps=50, warmup=5,
                                  low=0.2, high=5.0, tries=3) -> bool:  # fmt: skip
    """Real times that grow with size at large sizes, and within [low, high] x the course's
    kernel measured right after (median of the per-size ratios); up to `tries` pairs of runs,
    so one stall of a shared machine does not decide it."""
    exe = build_bench(path)
    seen = []
    for _ in range(tries):
        table = _run_and_read(exe, max_bytes, reps, warmup)
        _check_table(table, max_bytes)
        ratio, growth = compare_with_reference(table, reference_bench(max_bytes, reps, warmup))
        if low <= ratio <= high and growth > 1.5:
            return True
        seen.append((ratio, growth))
    shown = "; ".join(
        f"{r:.3g}x the reference, {g:.3g}x from a quarter of the size" for r, g in seen
    )
    raise AssertionError(
        f"in {tries} runs, your times were {shown}. Expected between {low:g}x and {high:g}x the "
        f"course's kernel, and a time at {max_bytes} bytes more than 1.5x that at a quarter of "
        "it (large messages are limited by bandwidth)"
    )
