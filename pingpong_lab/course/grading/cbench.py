"""Notebook 02's own benchmark program: build it, run it under mpiexec, read and grade its CSV.

The learner writes a whole C program (bench.c) that is run as

    mpiexec -n 2 ./bench OUT.csv MAX_BYTES REPS WARMUP

and writes one CSV row per size 1, 2, 4, ... MAX_BYTES with at least the columns nbytes, reps
and t_median_s (one-way seconds: the median over round trips of the per-round-trip maximum
over ranks). The checks run it in separate processes (mpicc, mpiexec), each with a deadline:

- check_bench_csv         a real run: exit status 0, the columns, every size, positive times;
- check_bench_messages    linked with kernels_c/grading/bench_graded.c, a profiling layer that
                          logs every message sent (by any send call) and every call that
                          synchronises the ranks: each rank sent every size WARMUP + REPS times
                          and synchronised (a Barrier) between the warm-up and the timed ones;
- check_bench_fake_clock  the same layer's MPI_Wtime only sends move (on rank 1 twice as far
                          per message as on rank 0, and by a different amount for each of its
                          messages, at rates drawn for each check): the program must report
                          the median of rank 1's one-way times, the slower rank's; a mean, a
                          minimum or warm-up round trips among the samples give other numbers;
- check_bench_payload     the same layer flips a byte of every echo: the program must fail;
- check_bench_against_reference  real runs interleaved with the course's C kernel (echo
                          buffers, same sizes and counts): times that grow with size and a
                          ratio in a wide band; on a machine too noisy to tell (the runs of
                          either disagree by more than the band), it passes with a note.
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
from .mode import MPIEXEC_TIMEOUT_S, undecided

COLUMNS = ("nbytes", "reps", "t_median_s")
FLAGS = ("-O2", "-Wall", "-Wextra")
# bench_graded.c's fake clock: a message of b bytes sent adds 2 (rank + 1) (L + b B) seconds,
# on rank 1 times (1 + jitter) with a jitter in [0, FAKE_JITTER) for each of its messages
FAKE_LATENCY_S = 1e-6
FAKE_S_PER_BYTE = 1e-9
FAKE_JITTER = 0.5
_MASK64 = (1 << 64) - 1
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


def _logged_run(exe, max_bytes, reps, warmup, env=None, what="the benchmark"):
    """(the CSV, {rank: events}) of one run of a program built with the layer: each rank's
    events in order, the bytes of a message it sent (an int) or "sync" (a Barrier or another
    synchronising call)."""
    with tempfile.TemporaryDirectory(prefix="pp-bench-log-") as tmp:
        log = Path(tmp) / "log"
        env = {**(env or {}), "PP_BENCH_LOG": str(log)}
        table = _run_and_read(exe, max_bytes, reps, warmup, env=env, what=what)
        events = {}
        for rank in (0, 1):
            file = Path(f"{log}.rank{rank}")
            lines = file.read_text().split("\n") if file.exists() else []
            events[rank] = [int(x.split()[1]) if x.startswith("send ") else x for x in lines if x]
    return table, events


def message_log(path="bench.c", max_bytes=1 << 10, reps=12, warmup=5):
    """(the CSV, {rank: events}) of one run with the layer's log (see _logged_run)."""
    return _logged_run(build_bench(path, graded=True), max_bytes, reps, warmup)


def sent_counts(events) -> dict:
    """{nbytes: messages of that size} of one rank's events."""
    counts = {}
    for event in events:
        if isinstance(event, int):
            counts[event] = counts.get(event, 0) + 1
    return counts


def message_counts(path="bench.c", max_bytes=1 << 10, reps=12, warmup=5):
    """(the CSV, {nbytes: messages rank 0 sent of that size}) of one run with the layer."""
    table, events = message_log(path, max_bytes, reps, warmup)
    return table, sent_counts(events[0])


def synchronised_after_warmup(events, nbytes, warmup) -> bool:
    """Whether a synchronising call comes after this rank's warm-up messages of nbytes and
    before its first timed one (with no warm-up: after the message it sent before that)."""
    sends = [i for i, e in enumerate(events) if e == nbytes]
    if len(sends) <= warmup:
        return False
    end = sends[warmup]
    if warmup:
        start = sends[warmup - 1]
    else:
        start = max((i for i, e in enumerate(events[:end]) if isinstance(e, int)), default=-1)
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


def fake_jitter(seed: int, k) -> np.ndarray:
    """bench_graded.c's jitter() of rank 1's k-th message of a size: in [0, FAKE_JITTER)."""
    out = []
    for i in np.atleast_1d(k):
        z = (int(seed) + int(i) * 0x9E3779B97F4A7C15) & _MASK64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        z ^= z >> 31
        out.append((z >> 11) * (1.0 / (1 << 53)) * FAKE_JITTER)
    return np.array(out)


class FakeClock:
    """One run of bench_graded.c's fake clock: its rates and seed, and what each way of summing
    up the samples gives (per size, seconds one way).

    `first` is the index, among rank 1's messages of a size, of its first timed one: the run's
    log says it (how many it sent, less REPS), so that a program is judged on the messages it
    timed, whatever it did before them (warmup when it did exactly what was asked).
    """

    def __init__(self, latency_s, s_per_byte, seed, reps, warmup):
        self.latency_s, self.s_per_byte, self.seed = latency_s, s_per_byte, int(seed)
        self.reps, self.warmup = int(reps), int(warmup)

    @property
    def env(self) -> dict[str, str]:
        return {"PP_BENCH_FAKE_CLOCK": f"{self.latency_s!r},{self.s_per_byte!r},{self.seed}"}

    def rank0(self, nbytes):
        """Rank 0's one-way time (the faster rank; every message the same)."""
        return self.latency_s + np.asarray(nbytes, dtype=float) * self.s_per_byte

    def _factors(self, first, before=0) -> np.ndarray:
        """1 + jitter of rank 1's messages first - before .. first + reps - 1."""
        start = max(0, int(first) - int(before))
        return 1 + fake_jitter(self.seed, range(start, int(first) + self.reps))

    def medians(self, nbytes, first) -> tuple[np.ndarray, np.ndarray]:
        """The lowest and highest median of rank 1's timed one-way samples (the two middle
        values for an even count; equal for an odd one): what a correct program reports."""
        x = np.sort(self._factors(first))
        lo, hi = x[(x.size - 1) // 2], x[x.size // 2]
        return 2 * self.rank0(nbytes) * lo, 2 * self.rank0(nbytes) * hi

    def others(self, nbytes, first) -> dict[str, np.ndarray]:
        """What some wrong summaries report, with the hint that each deserves."""
        base = 2 * self.rank0(nbytes)
        lo, hi = self.medians(nbytes, first)
        timed = self._factors(first)
        slowest = (
            "That is rank 0's own time: a round trip lasts as long as its slowest rank, so take "
            "the maximum over ranks (MPI_Reduce or MPI_Allreduce with MPI_MAX)."
        )
        wrong = {
            slowest: self.rank0(nbytes),
            "That is a whole round trip: one way is half of it.": lo + hi,
            "That is the mean of the samples: report their median.": base * timed.mean(),
            "That is the smallest sample: report their median.": base * timed.min(),
        }
        if self.warmup and first >= self.warmup:
            wrong[
                "That is the median with the warm-up round trips among the samples: time only "
                "the REPS round trips after the Barrier."
            ] = base * np.median(self._factors(first, before=self.warmup))
        return wrong

    def distinct(self, rtol=2e-3) -> bool:
        """Whether every wrong summary is told apart from the median (a seed where they are)."""
        lo, hi = self.medians(1.0, self.warmup)
        return all(
            not (lo * (1 - rtol) <= float(v) <= hi * (1 + rtol))
            for v in self.others(1.0, self.warmup).values()
        )


def draw_fake_clock(reps, warmup, seed=None) -> FakeClock:
    """A fake clock with rates and a jitter drawn at random (so that no constant passes), where
    the median is told apart from the other summaries for these reps and warmup."""
    rng = np.random.default_rng(seed)
    latency_s = float(rng.uniform(0.5e-6, 3e-6))
    s_per_byte = float(rng.uniform(0.2e-9, 2e-9))
    for _ in range(1000):  # with 3 or more repetitions a few draws find one
        clock = FakeClock(latency_s, s_per_byte, int(rng.integers(1, 1 << 62)), reps, warmup)
        if reps < 3 or clock.distinct():  # of 1 or 2 samples the mean and minimum are medians
            break
    return clock


def fake_clock_run(path="bench.c", max_bytes=1 << 10, reps=10, warmup=2, clock=None):
    """(the CSV, the first timed message of each size on rank 1) of a run under bench_graded.c's
    fake clock (drawn for reps and warmup if None). The timed messages are the last REPS that
    rank 1 sent of that size (negative: it sent fewer)."""
    clock = clock or draw_fake_clock(reps, warmup)
    exe = build_bench(path, graded=True)
    table, events = _logged_run(exe, max_bytes, reps, warmup, env=clock.env,
                                what="the benchmark under the fake clock")  # fmt: skip
    sent = sent_counts(events[1])
    first = np.array([sent.get(int(n), 0) - int(reps) for n in table["nbytes"]])
    return table, first


def check_bench_fake_clock(path="bench.c", max_bytes=1 << 10, reps=10, warmup=2, seed=None):
    """Under the fake clock every size reports the median of the slower rank's one-way times.

    The clock's rates and its jitter are drawn at random for each check (seed), so no constant
    passes, and so that the mean, the minimum and timed warm-ups each give another number.
    """
    clock = draw_fake_clock(reps, warmup, seed)
    table, first = fake_clock_run(path, max_bytes, reps, warmup, clock)
    _check_table(table, max_bytes, what="the CSV under the fake clock")
    for k, (n, got) in enumerate(zip(table["nbytes"], table["t_median_s"], strict=True)):
        if first[k] < 0:
            raise AssertionError(
                f"rank 1 sent {first[k] + reps} messages of {int(n)} bytes: fewer than the "
                f"REPS={reps} timed round trips that the median is taken over"
            )
        lo, hi = clock.medians(n, first[k])
        if lo * (1 - 1e-3) <= got <= hi * (1 + 1e-3):
            continue
        hint = next(
            (" " + text for text, value in clock.others(n, first[k]).items()
             if np.isclose(got, value, rtol=1e-3)),
            "",
        )  # fmt: skip
        want = f"{lo:.6g} s" if np.isclose(lo, hi) else f"{lo:.6g} .. {hi:.6g} s"
        raise AssertionError(
            "with a fake MPI_Wtime that moves only when messages are sent (on rank 1 twice as "
            "far per message as on rank 0, and by a different amount each time), "
            f"{int(n)} bytes should report {want} one way (the median over the timed round "
            f"trips of the slower rank's time), got {got:.6g} s.{hint}"
        )
    return True


def corrupted_run(path="bench.c", max_bytes=1 << 8, reps=5, warmup=2):
    """The program run while every echo has one byte flipped: its CompletedProcess (what the
    notebook shows a learner; grading uses payload_run, where the program cannot tell)."""
    exe = build_bench(path, graded=True)
    with tempfile.TemporaryDirectory(prefix="pp-bench-bad-") as tmp:
        return run_bench(exe, Path(tmp) / "bench.csv", max_bytes, reps, warmup,
                         env={"PP_BENCH_CORRUPT": "1"})  # fmt: skip


def payload_run(exe, max_bytes, reps, warmup) -> tuple[bool, subprocess.CompletedProcess]:
    """(whether the layer flipped the echoes, the CompletedProcess) of one run in which rank 1's
    layer decides at random, out of the program's sight, to flip a byte of every echo or not."""
    with tempfile.TemporaryDirectory(prefix="pp-bench-maybe-") as tmp:
        log = Path(tmp) / "log"
        env = {"PP_BENCH_CORRUPT": "maybe", "PP_BENCH_LOG": str(log)}
        proc = run_bench(exe, Path(tmp) / "bench.csv", max_bytes, reps, warmup, env=env)
        return Path(f"{log}.rank1.corrupted").exists(), proc


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
        flipped, proc = payload_run(exe, max_bytes, reps, warmup)
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


def check_bench_against_reference(path="bench.c", max_bytes=1 << 20, reps=50, warmup=5,
                                  low=0.2, high=5.0, tries=5) -> bool:  # fmt: skip
    """Real times that grow with size at large sizes, and within [low, high] x the course's
    kernel (median of the per-size ratios).

    Your program and the kernel run in turns, up to `tries` times each; after each turn the
    per-size medians of all the runs so far are compared, so one stall of a shared machine does
    not decide it. When the machine is too noisy to tell (the runs of either program disagree
    with each other by more than the band), the check passes with a note for the instructor:
    the noise, not the program, would decide a failure.
    """
    exe = build_bench(path)
    yours, reference = [], []
    for _ in range(tries):
        table = _run_and_read(exe, max_bytes, reps, warmup)
        _check_table(table, max_bytes)
        yours.append(dict(zip((int(b) for b in table["nbytes"]), table["t_median_s"], strict=True)))
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
        f"in {tries} runs each, your times were {ratio:.3g}x the course's kernel (medians per "
        f"size), and {growth:.3g}x from a quarter of the largest size to it. Expected between "
        f"{low:g}x and {high:g}x the course's kernel, and a time at {max_bytes} bytes more than "
        "1.5x that at a quarter of it (large messages are limited by bandwidth)"
    )


def _run_spread(runs: list[dict]) -> float:
    """How far apart runs of one program were: the largest over sizes of max / min."""
    if len(runs) < 2:
        return 1.0
    return max(max(r[b] for r in runs) / min(r[b] for r in runs) for b in runs[0])
