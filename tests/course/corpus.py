"""Submissions made from the solutions: correct variants, shortcuts and faults, for 02-05.

Each case rewrites whole answer cells (found by grade_id, so the surrounding text may change)
and says which test cells must then score 0; every other test cell must keep its points.

- "variants": every answer written another way the instructions allow (numpy vs loops,
  positional vs keyword arguments, buffer vs object collectives, another order of the
  non-blocking calls). Each must earn full marks: a zero here is a false zero.
- "shortcuts": answers that fit the visible checks without doing the work (constants
  copied from a check cell's "expect", a lookup table for the shown case, skipped steps)
  or that break one rule the text states. Each must lose its part, and only its part.
"""

from __future__ import annotations

import json
from pathlib import Path

# -- 02_timing -----------------------------------------------------------------------------

_TIMING_VARIANTS = {
    # sorted distinct readings: for a clock that never goes back, the same smallest step
    "timer_resolution": '''\
def timer_resolution(clock, n=20000):
    """Smallest positive difference between readings of clock() over n calls (inf if none)."""
    seen = np.unique(np.fromiter((clock() for _ in range(n)), dtype=float, count=n))
    if seen.size < 2:
        return math.inf
    return float(np.diff(seen).min())
''',
    # numpy rounding and clipping, the buffer Allreduce in place
    "choose_reps": '''\
def choose_reps(comm, calibration_s, calibration_reps, target_s, min_reps=10, max_reps=100_000):
    """Repetitions for about target_s seconds, the maximum over ranks."""
    wanted = max_reps
    if calibration_s != 0:
        wanted = int(np.ceil(target_s / (calibration_s / calibration_reps)))
    mine = np.array([np.clip(wanted, min_reps, max_reps)], dtype=np.int64)
    comm.Allreduce(MPI.IN_PLACE, mine, op=MPI.MAX)
    return int(mine[0])
''',
    # a while loop, the reduction with a positional op, the division written differently
    "time_pingpong": '''\
def time_pingpong(comm, pingpong, sendbuf, recvbuf, reps, warmup, clock=MPI.Wtime):
    """One-way time: max over ranks of the time of reps round trips, / (2 reps)."""
    done = 0
    while done < warmup:
        pingpong(comm, sendbuf, recvbuf)
        done += 1
    comm.Barrier()
    t0 = clock()
    for _ in range(reps):
        pingpong(comm, sendbuf, recvbuf)
    t1 = clock()
    slowest = comm.allreduce(t1 - t0, MPI.MAX)
    return 0.5 * slowest / reps
''',
    "bandwidth": '''\
def bandwidth_Bps(nbytes, seconds):
    """Bytes per second, elementwise."""
    return np.true_divide(nbytes, seconds, dtype=np.float64)


def to_mbit_per_s(Bps):
    """Megabits (10**6 bits) per second."""
    return np.asarray(Bps, dtype=float) / 125_000
''',
    "overhead": '''\
def overhead_us(t_python, t_c):
    """Extra one-way time of Python over C in microseconds."""
    return np.subtract(t_python, t_c, dtype=float) / 1e-6


def negligible_from(nbytes, t_python, t_c, fraction=0.1):
    """Smallest size from which on every relative overhead is <= fraction (None if none)."""
    t_c = np.asarray(t_c, dtype=float)
    small = (np.asarray(t_python, dtype=float) - t_c) / t_c <= fraction
    sizes = list(nbytes)
    start = len(sizes)
    while start > 0 and small[start - 1]:
        start -= 1
    return int(sizes[start]) if start < len(sizes) else None
''',
    # rank 0 posts the send first; rank 1 waits for its receive before it posts the echo
    "pingpong_nonblocking": '''\
def pingpong_nonblocking(comm, sendbuf, recvbuf):
    """Round trip with Isend/Irecv, every request waited for."""
    me = comm.Get_rank()
    if me == 0:
        out = comm.Isend([sendbuf, MPI.BYTE], dest=1, tag=3)
        back = comm.Irecv([recvbuf, MPI.BYTE], source=1, tag=3)
        MPI.Request.Waitall([out, back])
    elif me == 1:
        req = comm.Irecv(recvbuf, source=0, tag=3)
        req.Wait()
        req = comm.Isend(recvbuf, dest=0, tag=3)
        req.Wait()
''',
}


def _bench(*edits: tuple[str, str]) -> str:
    """Notebook 02's bench.c solution cell (from course/source) with each (old, new) applied."""
    source_nb = Path(__file__).resolve().parents[2] / "course/source/02_timing/02_timing.ipynb"
    cell = next(
        c
        for c in json.loads(source_nb.read_text())["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade_id") == "bench_c"
    )
    text = "".join(cell["source"])
    for old, new in edits:
        assert text.count(old) == 1, f"bench.c changed: update tests/course/corpus.py ({old!r})"
        text = text.replace(old, new)
    return text


# the round trip with MPI_Sendrecv on rank 0, a count-down loop reading the clock around each
# round trip, the maximum with Allreduce in place, every echo checked
_TIMING_VARIANTS["bench_c"] = _bench(
    (
        "        MPI_Send(sendbuf, nbytes, MPI_BYTE, 1, TAG, comm);\n"
        "        MPI_Recv(recvbuf, nbytes, MPI_BYTE, 1, TAG, comm, MPI_STATUS_IGNORE);\n",
        "        MPI_Sendrecv(sendbuf, nbytes, MPI_BYTE, 1, TAG, recvbuf, nbytes, MPI_BYTE, 1,\n"
        "                     TAG, comm, MPI_STATUS_IGNORE);\n",
    ),
    (
        "    double before = MPI_Wtime();\n"
        "    for (int i = 0; i < reps; i++) {\n"
        "        round_trip(comm, rank, sendbuf, recvbuf, nbytes);\n"
        "        double after = MPI_Wtime();\n"
        "        samples[i] = (after - before) / 2.0;\n"
        "        before = after;\n"
        "    }\n",
        "    int bad = 0;\n"
        "    for (int left = reps; left > 0; left--) {\n"
        "        double t0 = MPI_Wtime();\n"
        "        round_trip(comm, rank, sendbuf, recvbuf, nbytes);\n"
        "        samples[reps - left] = 0.5 * (MPI_Wtime() - t0);\n"
        "        bad |= rank == 0 && memcmp(sendbuf, recvbuf, (size_t)nbytes) != 0;\n"
        "    }\n",
    ),
    (
        "    MPI_Reduce(samples, slowest, reps, MPI_DOUBLE, MPI_MAX, 0, comm);\n",
        "    MPI_Allreduce(MPI_IN_PLACE, samples, reps, MPI_DOUBLE, MPI_MAX, comm);\n"
        "    memcpy(slowest, samples, sizeof(double) * (size_t)reps);\n",
    ),
    (
        "    return rank == 0 && memcmp(sendbuf, recvbuf, (size_t)nbytes) != 0;\n",
        "    return bad;\n",
    ),
)

_TIMING_SHORTCUTS = {
    # rank 0 reports its own samples: no maximum over ranks (the fake clock shows it)
    "bench_c": _bench(
        (
            "    MPI_Reduce(samples, slowest, reps, MPI_DOUBLE, MPI_MAX, 0, comm);\n",
            "    memcpy(slowest, samples, sizeof(double) * (size_t)reps);\n",
        )
    ),
    # the warm-up is skipped
    "time_pingpong": '''\
def time_pingpong(comm, pingpong, sendbuf, recvbuf, reps, warmup, clock=MPI.Wtime):
    """No warm-up."""
    comm.Barrier()
    start = clock()
    for _ in range(reps):
        pingpong(comm, sendbuf, recvbuf)
    return comm.allreduce(clock() - start, op=MPI.MAX) / (2 * reps)
''',
    # the numbers of the check cell's "Expected" comment, whatever the input
    "bandwidth": """\
def bandwidth_Bps(nbytes, seconds):
    return 1.048576e10


def to_mbit_per_s(Bps):
    return 83886.08
""",
}

# -- 03_variability ------------------------------------------------------------------------

_VARIABILITY_VARIANTS = {
    "describe": '''\
import statistics


def describe(samples):
    """Summary statistics of timing samples, NaN ignored."""
    x = np.asarray(samples, dtype=float).reshape(-1)
    x = x[np.isfinite(x) | np.isinf(x)]
    if not len(x):
        raise ValueError("nothing was measured")
    n = len(x)
    mean = x.sum() / n
    std = float(np.sqrt(((x - mean) ** 2).sum() / (n - 1))) if n > 1 else 0.0
    cuts = statistics.quantiles(x.tolist(), n=100) if n > 1 else [x[0]] * 99
    return dict(
        n=n,
        mean=float(mean),
        std=std,
        min=float(np.min(x)),
        max=float(np.max(x)),
        median=float(np.median(x)),
        # statistics.quantiles' own definition ('exclusive'), not numpy's: any standard one
        p90=float(cuts[89]),
        p99=float(cuts[98]),
    )
''',
    "exchange_times": '''\
def exchange_times(samples_2d):
    """Per-iteration maximum over the ranks that measured."""
    a = np.array(samples_2d, dtype=float)
    if a.ndim != 2:
        raise ValueError("need (ranks, iterations)")
    rows = [row for row in a if not np.isnan(row).all()]
    if not rows:
        raise ValueError("no rank measured")
    return np.fmax.reduce(np.vstack(rows), axis=0)
''',
    # the binomial tail summed from the other end, 0-based indices
    "median_ci": '''\
import math


def median_ci(samples, confidence=0.95):
    """Order-statistics CI of the median, NaN ignored."""
    x = sorted(v for v in np.asarray(samples, dtype=float).ravel() if not math.isnan(v))
    n = len(x)

    def tail(j):  # P(K <= j - 1), K ~ Binomial(n, 1/2)
        return sum(math.comb(n, i) for i in range(j)) / 2**n

    good = [j for j in range(1, n // 2 + 1) if 1 - 2 * tail(j) >= confidence]
    if not good:
        raise ValueError("too few samples for this confidence")
    j = max(good)
    return float(x[j - 1]), float(x[n - j])
''',
    # all resamples drawn at once (another random stream than the solution's)
    "bootstrap_ci": '''\
def bootstrap_ci(samples, statistic=np.median, confidence=0.95, n_boot=2000, seed=0):
    """Percentile bootstrap, vectorised draws."""
    x = np.asarray(samples, dtype=float).ravel()
    x = x[~np.isnan(x)]
    if x.size == 0:
        raise ValueError("no samples")
    gen = np.random.default_rng(seed)
    draws = x[gen.integers(0, x.size, size=(n_boot, x.size))]
    values = np.array([statistic(row) for row in draws])
    alpha = 1 - confidence
    return float(np.percentile(values, 50 * alpha)), float(np.percentile(values, 100 - 50 * alpha))
''',
    "outliers_iqr": '''\
def outliers_iqr(samples, k=1.5):
    """Tukey's fences; NaN is never an outlier."""
    a = np.asarray(samples, dtype=float)
    if np.isnan(a).all():
        raise ValueError("no samples")
    q1, q3 = np.nanquantile(a, [0.25, 0.75])
    low, high = q1 - k * (q3 - q1), q3 + k * (q3 - q1)
    return np.where(np.isnan(a), False, (a < low) | (a > high))
''',
}

_VARIABILITY_SHORTCUTS = {
    # the check cell's "expect (1.0, 6.0)", for any input
    "median_ci": """\
def median_ci(samples, confidence=0.95):
    return (1.0, 6.0)
""",
    # the maximum over all ranks and iterations at once, not per iteration
    "exchange_times": """\
def exchange_times(samples_2d):
    a = np.asarray(samples_2d, dtype=float)
    return np.full(a.shape[1], np.nanmax(a))
""",
}

# -- 04_model --------------------------------------------------------------------------------

_MODEL_VARIANTS = {
    # weighted least squares through lstsq on the scaled design matrix
    "fit_alpha_beta": '''\
def fit_alpha_beta(nbytes, t, weighted=True):
    """t = alpha + beta * nbytes by (relative) least squares."""
    b = np.asarray(nbytes, dtype=float)
    y = np.asarray(t, dtype=float)
    w = 1.0 / y if weighted else np.ones_like(y)
    design = np.column_stack([np.ones_like(b), b]) * w[:, None]
    (alpha, beta), *_ = np.linalg.lstsq(design, y * w, rcond=None)
    return float(alpha), float(beta)
''',
    "r_squared": '''\
def r_squared(t, t_pred):
    """1 - SS_res / SS_tot."""
    t, t_pred = np.asarray(t, dtype=float), np.asarray(t_pred, dtype=float)
    return float(1 - np.square(t - t_pred).sum() / (t.var() * t.size))


def relative_residuals(t, t_pred):
    """(t - t_pred) / t."""
    return 1 - np.asarray(t_pred, dtype=float) / np.asarray(t, dtype=float)
''',
    # np.polyfit directly, each candidate split scored by its relative residuals
    "find_breakpoint": '''\
def find_breakpoint(nbytes, t, min_points=3):
    """First size of the upper segment of the best two-line fit."""
    pairs = sorted(zip(np.asarray(nbytes, dtype=float), np.asarray(t, dtype=float)))
    x = np.array([p[0] for p in pairs])
    y = np.array([p[1] for p in pairs])
    if x.size < 2 * min_points:
        raise ValueError("too few sizes for two segments")
    costs = {}
    for k in range(min_points, x.size - min_points + 1):
        total = 0.0
        for part in (slice(0, k), slice(k, None)):
            slope, icpt = np.polyfit(x[part], y[part], 1, w=1 / y[part])
            total += np.sum((1 - (icpt + slope * x[part]) / y[part]) ** 2)
        costs[k] = total
    return int(x[min(costs, key=costs.get)])
''',
    "n_half_regime": '''\
def n_half(alpha, beta):
    """alpha / beta in bytes."""
    if alpha <= 0 or beta <= 0:
        raise ValueError("alpha and beta must both be positive")
    return alpha / beta


def regime(nbytes, alpha, beta, margin=10):
    """Which term of alpha + beta * nbytes dominates."""
    ratio = beta * nbytes / alpha
    return "latency" if ratio <= 1 / margin else "bandwidth" if ratio >= margin else "transition"
''',
}

_MODEL_SHORTCUTS = {
    # the check cell's synthetic switch, whatever the data
    "find_breakpoint": """\
def find_breakpoint(nbytes, t, min_points=3):
    return 65536
""",
    # the unweighted fit although weighted=True is asked for
    "fit_alpha_beta": """\
def fit_alpha_beta(nbytes, t, weighted=True):
    beta, alpha = np.polyfit(np.asarray(nbytes, float), np.asarray(t, float), 1)
    return float(alpha), float(beta)
""",
}

# -- 05_contention ---------------------------------------------------------------------------

_CONTENTION_VARIANTS = {
    "pair_peer": '''\
def pair_peer(rank, size):
    """Bottom half <-> top half partner."""
    if size % 2 or size < 2:
        raise ValueError(f"an even number of ranks is needed, not {size}")
    if rank < 0 or rank >= size:
        raise ValueError(f"rank {rank} outside 0..{size - 1}")
    return (rank + size // 2) % size
''',
    # typed buffer specs; the top half receives from any source and answers the sender
    "pairwise_exchange": '''\
from mpi4py import MPI


def pairwise_exchange(comm, sendbuf, recvbuf):
    """Bottom half sends first, top half echoes."""
    rank, size = comm.Get_rank(), comm.Get_size()
    if rank < size // 2:
        comm.Send([sendbuf, MPI.BYTE], dest=pair_peer(rank, size), tag=5)
        comm.Recv([recvbuf, MPI.BYTE], source=pair_peer(rank, size), tag=5)
    else:
        status = MPI.Status()
        comm.Recv([recvbuf, MPI.BYTE], source=MPI.ANY_SOURCE, tag=5, status=status)
        comm.Send([recvbuf, MPI.BYTE], dest=status.Get_source(), tag=5)
''',
    "contention_summary": '''\
def contention_summary(samples_by_pairs, nbytes):
    """Per pair count: median, p90, spread and aggregate bandwidth of the per-iteration max."""
    summary = {}
    for pairs in samples_by_pairs:
        a = np.asarray(samples_by_pairs[pairs], dtype=float)
        measured = a[np.isfinite(a).any(axis=1)]
        worst = measured.max(axis=0) if not np.isnan(measured).any() else np.nanmax(measured, 0)
        median = float(np.median(worst))
        p90 = float(np.quantile(worst, 0.9))
        summary[pairs] = {
            "median_s": median,
            "p90_s": p90,
            "spread": p90 / median,
            "aggregate_Bps": pairs * nbytes / median,
        }
    return summary
''',
    "aggregation": '''\
def aggregation_gain(k, m, alpha, beta):
    """k separate m-byte messages vs one message of k*m bytes."""
    separate = k * alpha + k * m * beta
    return separate / (alpha + k * m * beta)


def worth_aggregating(m, alpha, beta):
    """Latency-dominated: m below n_1/2."""
    return alpha > beta * m
''',
    "crossing_pairs": '''\
def crossing_pairs(hosts):
    """Pairs (r, r + size/2) on different hosts."""
    if len(hosts) % 2:
        raise ValueError("an odd number of ranks cannot be paired")
    half = len(hosts) // 2
    return sum(1 for a, b in zip(hosts[:half], hosts[half:]) if a != b)
''',
    # a while loop, the sample written with two clock readings, the barrier flag inline
    "pair_timing": '''\
def time_pair_loop(comm, exchange, sendbuf, recvbuf, iters, warmup=20, barrier=False):
    """Per-iteration one-way seconds on the bottom half, NaN on the top."""
    import numpy as np
    from mpi4py import MPI

    n = 0
    while n < warmup:
        exchange(comm, sendbuf, recvbuf)
        n += 1
    timing = comm.Get_rank() < comm.Get_size() // 2
    samples = np.empty(iters)
    comm.Barrier()
    for i in range(iters):
        barrier and comm.Barrier()
        start = MPI.Wtime()
        exchange(comm, sendbuf, recvbuf)
        stop = MPI.Wtime()
        samples[i] = 0.5 * (stop - start) if timing else np.nan
    return samples
''',
    # receives posted first, both neighbours by hand at the ends, one Waitall
    "halo_exchange": '''\
from mpi4py import MPI


def halo_exchange(comm, u, width):
    """Ghost cells from both neighbours; no neighbour beyond either end."""
    rank, size = comm.Get_rank(), comm.Get_size()
    pending = []
    if rank > 0:
        pending.append(comm.Irecv(u[:width], source=rank - 1, tag=3))
    if rank < size - 1:
        pending.append(comm.Irecv(u[-width:], source=rank + 1, tag=3))
    if rank > 0:
        pending.append(comm.Isend(u[width : 2 * width], dest=rank - 1, tag=3))
    if rank < size - 1:
        pending.append(comm.Isend(u[-2 * width : -width], dest=rank + 1, tag=3))
    MPI.Request.Waitall(pending)
''',
}

_CONTENTION_SHORTCUTS = {
    # the whole loop timed once and spread evenly: no per-iteration samples, no max across ranks
    "pair_timing": """\
def time_pair_loop(comm, exchange, sendbuf, recvbuf, iters, warmup=20, barrier=False):
    import numpy as np
    from mpi4py import MPI

    for _ in range(warmup):
        exchange(comm, sendbuf, recvbuf)
    comm.Barrier()
    t0 = MPI.Wtime()
    for _ in range(iters):
        if barrier:
            comm.Barrier()
        exchange(comm, sendbuf, recvbuf)
    each = (MPI.Wtime() - t0) / iters / 2
    if comm.Get_rank() >= comm.Get_size() // 2:
        return np.full(iters, np.nan)
    return np.full(iters, each)
""",
    # the aggregate bandwidth of one pair, whatever the number of pairs
    "contention_summary": """\
def contention_summary(samples_by_pairs, nbytes):
    out = {}
    for pairs, samples in samples_by_pairs.items():
        per_iter = np.nanmax(np.asarray(samples, dtype=float), axis=0)
        med, p90 = np.percentile(per_iter, [50, 90])
        out[pairs] = {"median_s": med, "p90_s": p90, "spread": p90 / med,
                      "aggregate_Bps": nbytes / med}
    return out
""",
    # an import that fails when it runs: only this part is lost (an allowed module, a name it
    # lacks; a misspelled module itself is refused by the audit, which costs the tests after it)
    "aggregation": """\
from numpy import aggregate_but_misspelled


def aggregation_gain(k, m, alpha, beta):
    return k * (alpha + beta * m) / (alpha + beta * k * m)


def worth_aggregating(m, alpha, beta):
    return bool(m < alpha / beta)
""",
    # every rank sends before it receives: right while MPI buffers the halo (eager), a
    # deadlock above that; only the large-halo check may be lost
    "halo_exchange": """\
def halo_exchange(comm, u, width):
    rank, size = comm.Get_rank(), comm.Get_size()
    if rank + 1 < size:
        comm.Send(u[-2 * width : -width], dest=rank + 1)
    if rank > 0:
        comm.Send(u[width : 2 * width], dest=rank - 1)
        comm.Recv(u[:width], source=rank - 1)
    if rank + 1 < size:
        comm.Recv(u[-width:], source=rank + 1)
""",
}

# student -> assignment -> (answer cells by grade_id, test cells that must score 0)
CORPUS = {
    "variants": {
        "02_timing": (_TIMING_VARIANTS, set()),
        "03_variability": (_VARIABILITY_VARIANTS, set()),
        "04_model": (_MODEL_VARIANTS, set()),
        "05_contention": (_CONTENTION_VARIANTS, set()),
    },
    "shortcuts": {
        "02_timing": (
            _TIMING_SHORTCUTS,
            {"test_time_pingpong_fake", "test_bandwidth_units", "test_bench_clock"},
        ),
        "03_variability": (_VARIABILITY_SHORTCUTS, {"test_median_ci", "test_exchange_times"}),
        "04_model": (_MODEL_SHORTCUTS, {"test_find_breakpoint", "test_fit_alpha_beta"}),
        "05_contention": (
            _CONTENTION_SHORTCUTS,
            {
                "test_contention_summary",
                "test_aggregation",
                "test_pair_timing",
                "test_halo_no_deadlock",
            },
        ),
    },
}


def rewrite(nb: dict, answers: dict) -> dict:
    """nb with the source of each answer cell named in `answers` (grade_id -> code) replaced."""
    found = set()
    for cell in nb["cells"]:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid in answers:
            cell["source"] = answers[gid]
            found.add(gid)
    missing = set(answers) - found
    assert not missing, (
        f"no answer cell with grade_id {sorted(missing)}: update tests/course/corpus.py"
    )
    return nb


def corpus_case(student: str, name: str, solution) -> dict:
    """The solution notebook of `name` with the answers of CORPUS[student][name]."""
    return rewrite(json.loads(Path(solution).read_text()), CORPUS[student][name][0])


CASES = sorted((student, name) for student, by_name in CORPUS.items() for name in by_name)
