"""Measuring: choose repetitions, run a kernel on every rank, keep every sample, summarise.

All functions here run on every rank of `comm` at once (SPMD): under plain mpiexec
(`python -m pingpong_lab.sweep_job`) or on ipyparallel engines (`MPICluster.run(sweep, ...)`).
Ranks agree on repetition counts (Allreduce MAX) and on failures (no rank is left waiting in a
kernel when another gave up). Rank 0 gets the results; the other ranks get None.
"""

from __future__ import annotations

import math
import time

import numpy as np

from . import kernels, stats
from .errors import KernelError, PayloadError

KINDS = ("c", "python")
MODES = ("blocking", "nonblocking", "pairwise", "pickle")
TARGET_S = 0.25  # measured time per message size
MIN_REPS = 20
MAX_REPS = 100_000
CALIBRATION_REPS = 5
MAX_WARMUP = 200


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


def choose_reps(
    comm, kernel, nbytes, target_s=TARGET_S, min_reps=MIN_REPS, max_reps=MAX_REPS, **options
) -> int:
    """Repetitions so that one size takes about target_s, from a short calibration run.

    The calibration's round trips are extrapolated; ranks that do not time (NaN) propose
    min_reps, and the maximum over ranks wins, so every rank runs the same count.
    """
    samples = run_agreed(comm, kernel, nbytes, 1, CALIBRATION_REPS, **options)
    timed = samples[~np.isnan(samples)] if samples is not None else np.array([])
    if timed.size:
        per_rep = max(float(np.median(timed)), 1e-9)
        reps = int(min(max_reps, max(min_reps, math.ceil(target_s / per_rep))))
    else:
        reps = min_reps
    return comm.allreduce(reps, op=_mpi().MAX)


def warmup_for(reps: int) -> int:
    """Warm-up iterations (not timed): a tenth of the timed ones, at least 2."""
    return max(2, min(MAX_WARMUP, reps // 10))


def gather_one_way(comm, samples) -> np.ndarray | None:
    """On rank 0: a (ranks x reps) array of one-way times (half round trips), NaN = not timed."""
    rows = comm.gather(samples, root=0)
    if comm.Get_rank() != 0:
        return None
    return np.vstack(rows) / 2.0


def summary_row(nbytes: int, reps: int, warmup: int, t: np.ndarray) -> dict:
    """The tidy CSV row of one message size from its per-iteration one-way times t."""
    s = stats.summarize(t, n_boot=0)  # the order-statistics CI; bootstrap on demand
    return {
        "nbytes": int(nbytes),
        "reps": int(reps),
        "warmup": int(warmup),
        "t_median_s": s.median,
        "t_min_s": s.min,
        "t_mean_s": s.mean,
        "t_max_s": s.max,
        "t_std_s": s.std,
        "t_p90_s": s.p90,
        "t_p99_s": s.p99,
        "ci_lo_s": s.ci_lo,
        "ci_hi_s": s.ci_hi,
        "bandwidth_Bps": (nbytes / s.median) if s.median > 0 else float("nan"),
    }


def sweep(
    kind: str,
    mode: str,
    sizes,
    *,
    target_s: float = TARGET_S,
    min_reps: int = MIN_REPS,
    max_reps: int = MAX_REPS,
    reps: int | None = None,
    shared_buffer: bool = False,
    library=None,
    comm=None,
    progress=None,
):
    """Measure every size; on rank 0 return (rows, raw) where raw[nbytes] = (ranks x reps).

    `reps` fixes the repetitions; otherwise they come from a calibration run per size.
    `progress(index, total, row, seconds)` is called on rank 0 after each size.
    """
    MPI = _mpi()
    comm = comm if comm is not None else MPI.COMM_WORLD
    kernel = get_kernel(kind, mode, library)
    options = {"shared_buffer": shared_buffer}
    rows, raw = [], {}
    sizes = list(sizes)
    for index, nbytes in enumerate(sizes):
        start = time.perf_counter()
        n = (
            reps
            if reps is not None
            else choose_reps(comm, kernel, nbytes, target_s, min_reps, max_reps, **options)
        )
        warmup = warmup_for(n)
        samples = run_agreed(comm, kernel, nbytes, warmup, n, **options)
        one_way = gather_one_way(comm, samples)
        if comm.Get_rank() == 0:
            raw[nbytes] = one_way
            row = summary_row(nbytes, n, warmup, stats.max_across_ranks(one_way))
            rows.append(row)
            if progress is not None:
                progress(index, len(sizes), row, time.perf_counter() - start)
    if comm.Get_rank() != 0:
        return None
    return rows, raw
