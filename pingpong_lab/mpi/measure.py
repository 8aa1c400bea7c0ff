"""Measuring: choose repetitions, run a kernel on every rank, keep every sample, summarise.

All functions here run on every rank of `comm` at once (SPMD): under plain mpiexec (`sweep_job`,
a job of mpi.jobs) or on ipyparallel engines (`MPICluster.run(sweep, ...)`).
Ranks agree on repetition counts (Allreduce MAX) and on failures (no rank is left waiting in a
kernel when another gave up). Rank 0 gets the results; the other ranks get None.
"""

from __future__ import annotations

import json
import math
import sys
import time

import numpy as np

from ..analysis import stats
from ..data import results
from ..data.schema import SweepRow
from ..errors import KernelError, PayloadError, PingPongLabError
from . import environment, jobs, kernels
from .settings import BUDGET_S, KINDS, MAX_REPS, MIN_REPS, MODES, REL_CI, TARGET_S, SweepSettings

__all__ = [
    "BUDGET_S",
    "KINDS",
    "MAX_REPS",
    "MIN_REPS",
    "MODES",
    "REL_CI",
    "TARGET_S",
    "SweepSettings",
    "gather_one_way",
    "get_kernel",
    "interleaved_rows",
    "measure_size",
    "message_sizes",
    "one_way_tick",
    "plan",
    "run_agreed",
    "run_kernel",
    "sweep",
    "sweep_job",
    "sweep_rows",
    "timer_resolution",
    "warmup_for",
]

CALIBRATION_REPS = 5
MAX_WARMUP = 200
BLOCK_FACTOR = 100  # a timed block must last at least 100x the timer's resolution


def message_sizes(min_bytes: int, max_bytes: int) -> list[int]:
    """Powers of two from min_bytes to max_bytes (0 is allowed and followed by 1)."""
    if min_bytes < 0 or max_bytes < min_bytes:
        raise ValueError(f"need 0 <= min_bytes <= max_bytes, got {min_bytes} and {max_bytes}")
    sizes, n = [], min_bytes
    while n <= max_bytes:
        sizes.append(n)
        n = 2 * n if n else 1
    return sizes


def get_kernel(kind: str, mode: str, library=None):
    """The kernel callable for ('c' | 'python', mode)."""
    if kind == "python":
        if mode not in kernels.PYTHON_KERNELS:
            raise ValueError(
                f"unknown Python kernel {mode!r}; one of {sorted(kernels.PYTHON_KERNELS)}"
            )
        return kernels.PYTHON_KERNELS[mode]
    if kind == "c":
        from . import ckernels

        if mode == "pickle":
            raise ValueError("'pickle' is a Python-only kernel (it pickles Python objects)")
        return ckernels.c_kernel(mode, library or ckernels.DEFAULT_LIBRARY)
    raise ValueError(f"unknown kernel kind {kind!r}; choose 'c' or 'python'")


def run_kernel(
    kind: str,
    mode: str,
    nbytes: int,
    warmup: int,
    iters: int,
    *,
    shared_buffer: bool = False,
    corrupt_echo: bool = False,
    library=None,
    comm=None,
):
    """Run one kernel once on this rank (call on every rank): (samples, n_corrupt), unchecked.

    Handy on engines: cluster.run(measure.run_kernel, "c", "blocking", 1024, 10, 100).
    """
    comm = comm if comm is not None else _mpi().COMM_WORLD
    kernel = get_kernel(kind, mode, library)
    return kernel(
        comm, nbytes, warmup, iters, shared_buffer=shared_buffer, corrupt_echo=corrupt_echo
    )


def run_agreed(comm, kernel, nbytes, warmup, iters, **options) -> np.ndarray:
    """Run a kernel on every rank; raise the same error on every rank if any rank failed."""
    try:
        samples, corrupt = kernel(comm, nbytes, warmup, iters, **options)
        status, message = (1, f"{corrupt} corrupted echo(es)") if corrupt else (0, "")
    except KernelError as exc:
        samples, status, message = None, 2, str(exc)
    worst = comm.allreduce(status, op=_mpi().MAX)
    if worst:
        messages = [m for m in comm.allgather(message) if m]
        text = f"{getattr(kernel, '__name__', 'kernel')} at {nbytes} B: " + "; ".join(
            dict.fromkeys(messages)
        )
        if worst == 1:
            raise PayloadError(text + " - the echo must send back exactly the bytes it received")
        raise KernelError(text)
    return samples


def _mpi():
    from mpi4py import MPI

    return MPI


def timer_resolution(comm) -> float:
    """The MPI_Wtime resolution as measured (not only Wtick), the worst over ranks."""
    MPI = _mpi()
    return comm.allreduce(stats.measured_timer_resolution(MPI.Wtime, n=50), op=MPI.MAX)


def plan(comm, kernel, nbytes, settings: SweepSettings, resolution_s=1e-9) -> tuple[int, int]:
    """(reps, batch) for one size from a short calibration run; every rank gets the same.

    batch (round trips per timed sample) is the smallest that makes a timed block last
    BLOCK_FACTOR x the timer resolution; reps make the first round last about
    settings.target_s, within settings.min_reps..max_reps. Ranks that do not time propose the
    minimum, and the maximum over ranks wins (Allreduce MAX). A fixed settings.batch whose
    block would be too short for the timer is refused.
    """
    MPI = _mpi()
    options = settings.kernel_options
    samples = run_agreed(comm, kernel, nbytes, 1, CALIBRATION_REPS, **options)
    timed = samples[~np.isnan(samples)] if samples is not None else np.array([])
    auto_batch, reps = 1, settings.min_reps
    if timed.size:
        round_trip = max(float(np.median(timed)), 1e-9)
        auto_batch = max(1, math.ceil(BLOCK_FACTOR * resolution_s / float(np.min(timed))))
        wanted = math.ceil(settings.target_s / (round_trip * auto_batch))
        reps = int(min(settings.max_reps, max(settings.min_reps, wanted)))
    auto_batch = comm.allreduce(auto_batch, op=MPI.MAX)
    reps = comm.allreduce(reps, op=MPI.MAX)
    if settings.batch is not None:
        shortest = comm.allreduce(float(np.min(timed)) if timed.size else math.inf, op=MPI.MIN)
        stats.check_timed_block(shortest * settings.batch, resolution_s, BLOCK_FACTOR)
        return reps, settings.batch
    return reps, auto_batch


def warmup_for(reps: int) -> int:
    """Warm-up iterations (not timed): a tenth of the timed ones, at least 2."""
    return max(2, min(MAX_WARMUP, reps // 10))


def gather_one_way(comm, samples) -> np.ndarray | None:
    """On rank 0: a (ranks x reps) array of one-way times (half round trips), NaN = not timed."""
    rows = comm.gather(samples, root=0)
    if comm.Get_rank() != 0:
        return None
    return np.vstack(rows) / 2.0


def one_way_tick(resolution_s: float, batch: int) -> float:
    """The clock's resolution as seen in one one-way sample: a batched round trip, halved."""
    return resolution_s / (2.0 * max(1, batch))


def measure_size(comm, kernel, nbytes, settings: SweepSettings, resolution_s=1e-9):
    """Measure one size in rounds until the median's CI is narrow enough or the budget is spent.

    Every round's samples are kept. Rank 0 decides whether to stop and broadcasts it, so all
    ranks run the same rounds. On rank 0 returns (SweepRow, one_way (ranks x all reps)); else
    None. The row's stop_reason says why it stopped: "ci" (precision reached), "budget" (time
    ran out first) or "fixed" (reps given, or no rel_ci: one round). Precision is judged with
    the CI half-width floored at the timer's resolution, so a target finer than the clock runs
    to the budget.
    """
    start = time.perf_counter()
    planned, batch = plan(comm, kernel, nbytes, settings, resolution_s)
    fixed = settings.reps is not None or settings.rel_ci is None
    n = settings.reps if settings.reps is not None else planned
    warmup = warmup_for(n)
    tick = one_way_tick(resolution_s, batch)
    options = settings.kernel_options
    rounds = []
    while True:
        samples = run_agreed(comm, kernel, nbytes, warmup, n, batch=batch, **options)
        one_way = gather_one_way(comm, samples)
        decision = None
        if comm.Get_rank() == 0:
            rounds.append(one_way)
            s = stats.summarize(stats.max_across_ranks(np.hstack(rounds)), n_boot=0)
            if fixed:
                decision = "fixed"
            elif stats.ci_half_width(s, tick) <= settings.rel_ci:
                decision = "ci"
            elif time.perf_counter() - start >= settings.budget_s:
                decision = "budget"
        decision = comm.bcast(decision, root=0)
        if decision is not None:
            break
    if comm.Get_rank() != 0:
        return None
    everything = np.hstack(rounds)
    row = stats.summary_row(
        nbytes,
        everything.shape[1],
        warmup,
        stats.max_across_ranks(everything),
        tick_s=tick,
        batch=batch,
        rounds=len(rounds),
        stop_reason=decision,
        timer_resolution_s=resolution_s,
    )
    return row, everything


def sweep_rows(settings: SweepSettings, comm=None, progress=None, on_round=None):
    """Measure every size of `settings`; on rank 0 (rows, raw), on other ranks None.

    rows: one data.schema.SweepRow per size; raw[nbytes] = one-way seconds (ranks x reps).
    Each size is measured as measure_size says, or, with settings.rounds, in interleaved
    rounds (see interleaved_rows). `progress(index, total, row, seconds)` is called on rank 0
    after each size; `on_round(index, total, seconds)` after each interleaved round.
    """
    comm = comm if comm is not None else _mpi().COMM_WORLD
    kernel = get_kernel(settings.kind, settings.mode, settings.library)
    resolution = timer_resolution(comm)
    if settings.rounds is not None:
        return interleaved_rows(settings, comm, kernel, resolution, progress, on_round)
    rows: list[SweepRow] = []
    raw = {}
    for index, nbytes in enumerate(settings.sizes):
        start = time.perf_counter()
        out = measure_size(comm, kernel, nbytes, settings, resolution)
        if out is not None:
            row, raw[nbytes] = out
            rows.append(row)
            if progress is not None:
                progress(index, len(settings.sizes), row, time.perf_counter() - start)
    if comm.Get_rank() != 0:
        return None
    return rows, raw


def interleaved_rows(
    settings: SweepSettings, comm, kernel, resolution_s=1e-9, progress=None, on_round=None
):
    """Measure every size in settings.rounds interleaved rounds; on rank 0 (rows, raw).

    Repetitions and batch are planned per size first (plan: settings.reps, or a round of
    about settings.target_s). Then each round runs every size once with its own warm-up,
    ascending in even rounds and descending in odd ones, so that a burst of load on a busy
    machine falls on a few rounds of many sizes rather than on all repetitions of one size,
    and drift does not follow the size. raw[nbytes] holds the rounds one after the other
    (ranks x rounds*reps), so round k is the k-th of `rounds` equal blocks of columns. Rows say
    rounds = settings.rounds and stop_reason "fixed". Rank 0 calls `on_round(index, total,
    seconds)` after each round and `progress(index, total, row, seconds)` for each size at the
    end (seconds spent on that size over all rounds).
    """
    sizes = settings.sizes
    options = settings.kernel_options
    plans = []
    for nbytes in sizes:
        reps, batch = plan(comm, kernel, nbytes, settings, resolution_s)
        plans.append((settings.reps if settings.reps is not None else reps, batch))
    rank0 = comm.Get_rank() == 0
    collected: list[list] = [[] for _ in sizes]
    spent = [0.0] * len(sizes)
    for r in range(settings.rounds):
        round_start = time.perf_counter()
        order = range(len(sizes)) if r % 2 == 0 else range(len(sizes) - 1, -1, -1)
        for i in order:
            n, batch = plans[i]
            start = time.perf_counter()
            samples = run_agreed(comm, kernel, sizes[i], warmup_for(n), n, batch=batch, **options)
            one_way = gather_one_way(comm, samples)
            spent[i] += time.perf_counter() - start
            if rank0:
                collected[i].append(one_way)
        if rank0 and on_round is not None:
            on_round(r, settings.rounds, time.perf_counter() - round_start)
    if not rank0:
        return None
    rows: list[SweepRow] = []
    raw = {}
    for i, nbytes in enumerate(sizes):
        n, batch = plans[i]
        everything = np.hstack(collected[i])
        row = stats.summary_row(
            nbytes,
            everything.shape[1],
            warmup_for(n),
            stats.max_across_ranks(everything),
            tick_s=one_way_tick(resolution_s, batch),
            batch=batch,
            rounds=settings.rounds,
            stop_reason="fixed",
            timer_resolution_s=resolution_s,
        )
        rows.append(row)
        raw[nbytes] = everything
        if progress is not None:
            progress(i, len(sizes), row, spent[i])
    return rows, raw


def sweep(kind: str, mode: str, sizes, *, comm=None, progress=None, **settings):
    """Measure every size; on rank 0 return (rows, raw) where raw[nbytes] = (ranks x reps).

    `settings` are SweepSettings keywords (reps, rel_ci, budget_s, target_s, batch,
    shared_buffer, library, ...); sweep_rows takes them as one object. By default each size is
    measured adaptively (see measure_size): +/- rel_ci precision of the median or budget_s
    seconds, whichever comes first. `reps` fixes the repetitions (one round). rows are dicts
    (SweepRow.to_dict()). `progress(index, total, row, seconds)` is called on rank 0 after each
    size.
    """
    settings = SweepSettings(kind=kind, mode=mode, sizes=sizes, **settings)
    report = None
    if progress is not None:

        def report(index, total, row, seconds):
            progress(index, total, row.to_dict(), seconds)

    out = sweep_rows(settings, comm=comm, progress=report)
    if out is None:
        return None
    rows, raw = out
    return [row.to_dict() for row in rows], raw


# -- the sweep job (`pingpong-lab sweep` under mpiexec) ----------------------------------------
def _print_progress(index, total, row: SweepRow, seconds, counter: bool = True):
    print(
        (f"[{index + 1:>2}/{total}]" if counter else " " * (2 * len(str(total)) + 3))
        + f" {row.nbytes:>10} B  median {row.t_median_s * 1e6:10.2f} us"
        f" +/-{row.ci_rel_halfwidth * 100:5.2f}%  min {row.t_min_s * 1e6:10.2f} us"
        f"  reps {row.reps:>6} x{row.batch}  {row.stop_reason:<6} ({seconds:.2f} s)",
        flush=True,
    )


def emit_event(path, **event) -> None:
    """Append one progress event (a JSON line) to `path`, the file the launcher reads; nothing
    when there is none. Events, not printed text, are what a launcher's progress bar follows."""
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(event) + "\n")


def read_events(path, start: int = 0) -> tuple[list[dict], int]:
    """The complete events of `path` from byte offset `start`, and the offset after them."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read()
    except FileNotFoundError:
        return [], start
    whole = data[: data.rfind(b"\n") + 1]  # a line still being written waits for next time
    return [json.loads(line) for line in whole.splitlines() if line.strip()], start + len(whole)


@jobs.job
def sweep_job(spec: dict, comm) -> int:
    """The "sweep" job (every rank): measure, then rank 0 writes the results.

    spec: SweepSettings.to_dict() plus "out", the CSV path, and optionally "events", a file
    where rank 0 appends {"done": k, "total": n} after each size (each round when interleaved)
    for the launcher's progress bar. Rank 0 also prints one line per size; an error is printed
    as one line on stderr by rank 0 and every rank returns 1 (no rank is left waiting).
    """
    try:
        spec = dict(spec)
        out_path = spec.pop("out", None)
        events = spec.pop("events", None)
        if not out_path:
            raise ValueError("the sweep job needs 'out', the CSV file to write")
        settings = SweepSettings.from_dict(spec)
        interleaved = settings.rounds is not None
        if interleaved:  # "[k/n]" counts rounds; the sizes follow at the end

            def progress(index, total, row, seconds):
                _print_progress(index, total, row, seconds, counter=False)

            def on_round(index, total, seconds):
                n = len(settings.sizes)
                print(f"[{index + 1:>2}/{total}] round: {n} sizes in {seconds:.2f} s", flush=True)
                emit_event(events, done=index + 1, total=total)

            out = sweep_rows(settings, comm=comm, progress=progress, on_round=on_round)
            precision = {"rounds": settings.rounds, "target_s_per_round": settings.target_s}
        else:

            def progress(index, total, row, seconds):
                _print_progress(index, total, row, seconds)
                emit_event(events, done=index + 1, total=total)

            out = sweep_rows(settings, comm=comm, progress=progress)
            precision = {"rel_ci": settings.rel_ci, "budget_s_per_size": settings.budget_s}
        info = environment.provenance(
            comm,
            kernel=settings.kind,
            mode=settings.mode,
            sizes=list(settings.sizes),
            buffers="shared" if settings.shared_buffer else "separate",
            launcher="mpiexec",
            precision=precision,
            interleaved=interleaved,
            transport=settings.transport,
            settings=settings.to_dict(),
        )
        if comm.Get_rank() == 0:
            rows, raw = out
            info["repetitions"] = {str(r.nbytes): r.reps for r in rows}
            info["stop_reasons"] = {str(r.nbytes): r.stop_reason for r in rows}
            if interleaved:
                info["rounds"] = settings.rounds
                info["round_order"] = "ascending sizes in even rounds, descending in odd ones"
                print(f"measured in {settings.rounds} interleaved rounds", flush=True)
            else:
                met = sum(r.stop_reason in ("ci", "fixed") for r in rows)
                print(f"precision target met at {met} of {len(rows)} sizes", flush=True)
            results.write_results(out_path, rows, info, raw)
            print(f"wrote {out_path} ({len(rows)} sizes)", flush=True)
        return 0
    except (PingPongLabError, OSError, ValueError) as exc:
        if comm.Get_rank() == 0:
            print(f"pingpong-lab sweep: error: {exc}", file=sys.stderr, flush=True)
        return 1
