"""What one round measures on every rank (under mpiexec or on engines), and at which sizes."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np

from ...analysis import stats
from ...data.schema import COL
from ...mpi import environment, jobs, measure
from ...mpi.ckernels import KERNELS_BUILD

KIB, MIB = 1 << 10, 1 << 20
LAUNCH_SIZES = (8, 64 * KIB, MIB, 16 * MIB)
# repetitions per size for the launcher comparison (about 0.05-0.2 s per size)
LAUNCH_REPS = {8: 20000, 64 * KIB: 3000, MIB: 1000, 16 * MIB: 300}
QUICK_LAUNCH_REPS = {8: 500, 64 * KIB: 100, MIB: 20, 16 * MIB: 4}
PY_SIZES = tuple(4**k for k in range(13))  # 1 B .. 16 MiB
QUICK_PY_SIZES = (1, 1024, 64 * KIB)
OSU_SIZE = MIB
FULL_SWEEP = (1, 64 * MIB)
QUICK_SWEEP = (1, 64 * KIB)
PP_BLOCKING = KERNELS_BUILD / "pp_blocking"
JOB_TIMEOUT_S = 300


# -- SPMD pieces: run on every rank (under mpiexec or on engines) ----------------------------
def c_fixed_sizes(sizes_reps, library=None):
    """C blocking kernel, fixed repetitions per size: rank 0 gets {nbytes: stats}, others None.

    The same function runs under mpiexec and on engines, so only the launcher differs.
    """
    out = {}
    for nbytes, reps in sizes_reps:
        res = measure.sweep("c", "blocking", [int(nbytes)], reps=int(reps), library=library)
        if res is not None:
            row = res[0][0]
            out[int(nbytes)] = {
                k: row[k] for k in (COL.t_median_s, COL.t_mean_s, COL.t_min_s, COL.reps)
            }
    return out or None


def _mpi4py_bench_counts(nbytes: int, quick: bool) -> tuple[int, int]:
    """(warm-up, iterations) as mpi4py.bench pingpong chooses them (huge messages: more)."""
    if quick:
        return 5, 50
    if nbytes <= 16 * KIB:
        return 100, 10000
    if nbytes <= MIB:
        return 10, 1000
    return 5, 100  # mpi4py.bench's default is 1 warm-up + 10 iterations: too few to compare


def python_vs_mpi4py_bench(sizes, quick=False):
    """Per size: our Python blocking kernel, then mpi4py.bench pingpong, same counts.

    Rank 0 gets {nbytes: {"ours_mean_s", "ours_median_s", "bench_mean_s", "warmup", "iters"}}.
    Both statistics are the mean of rank 0's half round trips (what mpi4py.bench prints).
    """
    from mpi4py import MPI
    from mpi4py import bench as mpi4py_bench

    comm = MPI.COMM_WORLD
    kernel = measure.get_kernel("python", "blocking")
    out = {}
    for nbytes in sizes:
        warmup, iters = _mpi4py_bench_counts(int(nbytes), quick)
        samples = measure.run_agreed(comm, kernel, int(nbytes), warmup, iters)
        one_way = measure.gather_one_way(comm, samples)
        args = ["-m", str(nbytes), "-n", str(nbytes), "-s", str(warmup), "-l", str(iters)]
        args += ["--large-size", str(1 << 40), "--huge-size", str(1 << 40)]
        theirs = mpi4py_bench.pingpong(comm, args, verbose=False)
        with _written_numpy_empty():
            written = mpi4py_bench.pingpong(comm, args, verbose=False)
        if comm.Get_rank() == 0:
            t = stats.max_across_ranks(one_way)
            out[int(nbytes)] = {
                "ours_mean_s": float(np.nanmean(t)),
                "ours_median_s": float(np.nanmedian(t)),
                "bench_mean_s": float(theirs[0][1]),
                "bench_written_mean_s": float(written[0][1]),
                "warmup": warmup,
                "iters": iters,
            }
    return out if comm.Get_rank() == 0 else None


@contextlib.contextmanager
def _written_numpy_empty():
    """numpy.empty that returns written memory, for the duration of the block.

    mpi4py.bench allocates its messages with numpy.empty() and never writes them. The pages of
    a large fresh allocation all map the kernel's one zero page until written, so its sender
    reads one cached 4 KiB page again and again and large messages look faster than real data
    can be. Inside this block the same mpi4py.bench code runs on buffers written once before
    timing, as OSU's set-up does.
    """
    original = np.empty

    def written(shape, dtype=float, *args, **kwargs):
        out = original(shape, dtype, *args, **kwargs)
        out.fill(0x5A)
        return out

    np.empty = written
    try:
        yield
    finally:
        np.empty = original


@jobs.job
def round_job(spec: dict, comm) -> int:
    """The "bench-round" job (every rank): C fixed sizes, then Python vs mpi4py.bench."""
    c = c_fixed_sizes(spec["c_sizes_reps"])
    py = python_vs_mpi4py_bench(spec["py_sizes"], spec.get("quick", False))
    info = environment.provenance(comm, launcher="mpiexec", tool="pingpong-lab bench")
    if comm.Get_rank() == 0:
        Path(spec["out"]).write_text(json.dumps({"c": c, "py": py, "provenance": info}))
    return 0


def parse_pp_table(text: str) -> dict:
    """{nbytes: {"avg_s", "median_s", "min_s", "iters"}} from pp_blocking's OSU-like table."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts or line.startswith("#") or len(parts) != 5:
            continue
        try:
            n, avg, med, mn, iters = int(parts[0]), *map(float, parts[1:4]), int(parts[4])
        except ValueError:
            continue
        out[n] = {"avg_s": avg * 1e-6, "median_s": med * 1e-6, "min_s": mn * 1e-6, "iters": iters}
    return out
