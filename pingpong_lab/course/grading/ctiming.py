"""Notebook 02's C timing loop: run a learner's time_pingpong_c on MPI ranks, and check it.

The learner writes

    int time_pingpong_c(MPI_Comm comm, unsigned char *sendbuf, unsigned char *recvbuf,
                        int nbytes, int reps, int warmup, double *samples, double *one_way);

`warmup` untimed round trips, MPI_Barrier, then `reps` timed round trips read with MPI_Wtime:
samples[i] is this rank's one-way time of round trip i (half of it), and *one_way the
one-way time of the whole loop (elapsed / (2 reps)), agreed as the maximum over ranks with
MPI_Allreduce(MPI_MAX). In the instrumented build (kernels_c/grading/pp_graded.h) MPI_Wtime is
a fake clock that only point-to-point calls move, by (rank + 1) ticks each, so the check knows
every sample in advance on any machine.

The checks run it on ranks of their own (fresh_ranks.on_fresh_ranks); the learner's cells run
it on the learner's engines (c_timing_on_engines, c_sweep).
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import DeadlockError
from .. import on_ranks
from .cbuild import GRADED_KINDS, NOT_IMPLEMENTED
from .fresh_ranks import Unfinished, on_fresh_ranks
from .mode import ENGINE_TIMEOUT_S, MPIEXEC_TIMEOUT_S

FUNCTION = on_ranks.TIMING_FUNCTION
TICK_S = 1e-6  # PP_GRADED_TICK_S in pp_graded.h
# pp_graded_calls() kinds beyond the point-to-point ones, as in pp_graded.h
TIMING_KINDS = {**GRADED_KINDS, 6: "Barrier", 7: "Wtime", 8: "Allreduce"}
P2P = ("Send", "Ssend", "Recv", "Isend", "Irecv")


def c_timing_on_engines(
    cluster, lib, nbytes=8, reps=10, warmup=2, instrumented=False, timeout=ENGINE_TIMEOUT_S
):
    """time_pingpong_c on every engine; per-rank dicts (rank, rc, one_way, samples[, calls])."""
    return cluster.run(
        on_ranks.c_timing,
        str(lib),
        int(nbytes),
        int(reps),
        int(warmup),
        bool(instrumented),
        timeout=timeout,
    )


def c_timing_on_ranks(lib, nbytes=8, reps=10, warmup=2, instrumented=False,
                      timeout=MPIEXEC_TIMEOUT_S):  # fmt: skip
    """time_pingpong_c on two ranks of the check's own; per-rank dicts as c_timing_on_engines."""
    try:
        (results,) = on_fresh_ranks(
            on_ranks.c_timing,
            [[str(lib), int(nbytes), int(reps), int(warmup), bool(instrumented)]],
            timeout=timeout,
        )
    except Unfinished:
        raise DeadlockError(
            f"{FUNCTION} ({reps} round trips of {nbytes} B) did not finish within {timeout:g} s: "
            "a rank is waiting for a message that never comes"
        ) from None
    return results


def raise_for_rc(results) -> None:
    for res in results:
        if res["rc"] == NOT_IMPLEMENTED:
            raise AssertionError(f"{FUNCTION} is not implemented yet (it returned NOT_IMPLEMENTED)")
        if res["rc"] != 0:
            raise AssertionError(f"{FUNCTION} returned {res['rc']} on rank {res['rank']}, not 0")


def _kinds(calls) -> list[str]:
    return [TIMING_KINDS.get(kind, str(kind)) for kind, *_ in calls]


def _shown(kinds) -> str:
    """'Send, Recv (x3), Barrier, ...': runs of the same call folded."""
    out: list[str] = []
    for kind in kinds:
        if out and out[-1][0] == kind:
            out[-1][1] += 1
        else:
            out.append([kind, 1])
    return ", ".join(k if n == 1 else f"{k} (x{n})" for k, n in out)


def check_timing_calls(calls, ncalls, warmup, reps, rank=0) -> None:
    """AssertionError unless one rank's recorded calls are a honest timing loop.

    Expected order: the warm-up's point-to-point calls, MPI_Barrier, MPI_Wtime, the timed
    round trips (with the Wtime readings that fill the samples), MPI_Allreduce with MPI_MAX.
    """
    if ncalls > len(calls):
        raise AssertionError(
            f"rank {rank} made {ncalls} MPI calls for {warmup} warm-up and {reps} timed round "
            "trips: too many to be one Barrier, the round trips and a few clock readings"
        )
    kinds = _kinds(calls)
    where = f"(rank {rank}, warmup={warmup}, reps={reps}, calls: {_shown(kinds)})"
    if "Barrier" not in kinds:
        raise AssertionError(f"call MPI_Barrier(comm) once before the timed loop {where}")
    if "Wtime" not in kinds:
        raise AssertionError(f"read the clock with MPI_Wtime() {where}")
    barrier, first_clock = kinds.index("Barrier"), kinds.index("Wtime")
    if first_clock < barrier:
        raise AssertionError(
            "the first MPI_Wtime() comes before MPI_Barrier: start the clock after the ranks "
            f"have met {where}"
        )
    warm = sum(k in P2P for k in kinds[:barrier])
    if warm != 2 * warmup:
        raise AssertionError(
            f"before MPI_Barrier there should be the {warmup} warm-up round trips "
            f"({2 * warmup} point-to-point calls on ranks 0 and 1), found {warm} {where}"
        )
    between = sum(k in P2P for k in kinds[barrier:first_clock])
    if between:
        raise AssertionError(f"start the clock right after MPI_Barrier {where}")
    last_clock = len(kinds) - 1 - kinds[::-1].index("Wtime")
    timed = sum(k in P2P for k in kinds[first_clock:last_clock])
    if timed != 2 * reps:
        raise AssertionError(
            f"between the first and the last MPI_Wtime() there should be {reps} round trips "
            f"({2 * reps} point-to-point calls), found {timed} {where}"
        )
    reductions = [c for c, k in zip(calls, kinds) if k == "Allreduce"]
    if not reductions:
        raise AssertionError(f"agree on the result with MPI_Allreduce(..., MPI_MAX, comm) {where}")
    _, is_max, is_double, nbytes = reductions[-1]
    if not is_max:
        raise AssertionError(f"MPI_Allreduce must use MPI_MAX (the slowest rank's time) {where}")
    if not is_double or nbytes != 8:
        raise AssertionError(f"reduce one MPI_DOUBLE (the one-way time) {where}")
    if kinds.index("Allreduce") < last_clock:
        raise AssertionError(f"reduce after the timed loop, not inside it {where}")


_PONG_TAGS: dict[str, int | None] = {}  # instrumented library -> the tag rank 1 replies with


def check_c_timing(lib_instrumented, nbytes=64, reps=5, warmup=3) -> bool:
    """The instrumented build on fresh ranks: call order per rank, samples and the result.

    With the fake clock rank r's round trip takes 2 (r + 1) ticks, so rank r's samples are all
    (r + 1) ticks (half a round trip), and *one_way is the largest of them on every rank.
    """
    results = c_timing_on_ranks(lib_instrumented, nbytes, reps, warmup, True)
    raise_for_rc(results)
    sending = ("Send", "Ssend", "Isend")
    sends = [tag for kind, _, tag, _ in results[1]["calls"] if TIMING_KINDS.get(kind) in sending]
    _PONG_TAGS[str(lib_instrumented)] = sends[0] if sends else None
    for res in results[:2]:
        check_timing_calls(res["calls"], res["ncalls"], warmup, reps, res["rank"])
    for res in results[:2]:
        want = (res["rank"] + 1) * TICK_S
        got = np.asarray(res["samples"], dtype=float)
        if not np.allclose(got, want, rtol=1e-6, atol=0):
            raise AssertionError(
                f"rank {res['rank']}: every sample should be half of its round trip, "
                f"{want:.3g} s with the grader's clock; got {np.round(got, 12).tolist()} "
                "(samples[i] = (time after round trip i - time before it) / 2)"
            )
    want = 2 * TICK_S  # the slower of ranks 0 and 1 (idle ranks make no round trip)
    for res in results:
        if not np.isclose(res["one_way"], want, rtol=1e-6, atol=0):
            raise AssertionError(
                f"rank {res['rank']}: *one_way should be {want:.3g} s, the slowest rank's "
                f"elapsed / (2 * reps) agreed with MPI_MAX; got {res['one_way']:.6g} s"
            )
    return True


def c_median_one_way(lib, nbytes=8, reps=500, warmup=50, timeout=MPIEXEC_TIMEOUT_S):
    """Median over round trips of the per-round-trip maximum over ranks of the learner's
    samples at nbytes (seconds), on two ranks of the check's own: robust to the stalls of a
    shared machine."""
    from ...analysis import stats

    results = c_timing_on_ranks(lib, nbytes, reps, warmup, timeout=timeout)
    raise_for_rc(results)
    per_trip = stats.max_across_ranks([r["samples"] for r in results])
    if not np.isfinite(per_trip).any() or np.nanmedian(per_trip) <= 0:
        raise AssertionError(
            f"{FUNCTION} left its samples empty or not positive: {per_trip[:5].tolist()} ..."
        )
    return float(np.nanmedian(per_trip))


def check_c_timing_against_partner(
    path="timing.c", nbytes=8, reps=500, warmup=50, low=2 / 3, high=1.5, name="timing",
    timeout=MPIEXEC_TIMEOUT_S,
) -> bool:  # fmt: skip
    """The learner's time_pingpong_c on rank 0, timed against a rank of the course's own on rank
    1 (on_ranks.c_timing_partner): the median of its samples is within [low, high] x what the
    course's rank saw in the same run, half the time between two of its messages arriving.

    Both are read in the same round trips, so a busy machine moves them together; the course's
    rank never loads the learner's library and signs its report (engine_checks.partner_key)."""
    from .cbuild import compile_student_c
    from .engine_checks import NO_SINGLE_COPY, partner_key, verified

    lib = compile_student_c(path, name=name)
    pong = _PONG_TAGS.get(compile_student_c(path, name=name, instrument=True))
    with partner_key() as (key, key_path):
        try:
            ((mine, theirs),) = on_fresh_ranks(
                on_ranks.c_timing_partner,
                [[str(lib), int(nbytes), int(reps), int(warmup), pong, key_path]],
                timeout=timeout,
                env=NO_SINGLE_COPY,
            )
        except Unfinished:
            raise DeadlockError(
                f"{FUNCTION} ({reps} round trips of {nbytes} B with the course's own rank 1) did "
                f"not finish within {timeout:g} s: a rank is waiting for a message that never "
                "comes, or at an MPI_Barrier the other never reaches (the course's rank echoes "
                f"{warmup} warm-up round trips, calls MPI_Barrier, echoes {reps} timed ones, "
                "then calls MPI_Allreduce)"
            ) from None
    report = verified(theirs, key)
    raise_for_rc([mine])
    stopped = report["stopped"]
    if stopped is not None:
        raise_for_rc([{"rank": 0, "rc": stopped["rc"]}])
    arrivals = np.asarray(report["arrivals"], dtype=float)
    if stopped is not None or arrivals.size < reps:
        raise AssertionError(
            f"the course's rank 1 saw {arrivals.size} of the {reps} timed round trips after the "
            f"Barrier ({warmup} untimed ones first, then MPI_Barrier, then the timed ones)"
        )
    observed = float(np.median(np.diff(arrivals))) / 2
    samples = np.asarray(mine["samples"], dtype=float)
    yours = float(np.nanmedian(samples)) if np.isfinite(samples).any() else math.nan
    if not yours > 0:
        raise AssertionError(f"{FUNCTION} left its samples empty or not positive")
    ratio = yours / observed
    if not low <= ratio <= high:
        raise AssertionError(
            f"the median of your samples, {yours * 1e6:.3g} us, is {ratio:.2f}x the one-way time "
            f"the course's rank saw in the same run ({observed * 1e6:.3g} us: half the time "
            f"between two of your messages arriving); expected {low:.2g}x .. {high:.2g}x. "
            "samples[i] is half of round trip i, read with MPI_Wtime around that round trip"
        )
    return True


def course_c_median_one_way(nbytes=8, reps=500, timeout=MPIEXEC_TIMEOUT_S) -> float:
    """The course's own C kernel at nbytes on two ranks of the check's own: its median one-way
    time (seconds), the reference a learner's C timing loop is compared with."""
    try:
        ((report, *_),) = on_fresh_ranks(
            on_ranks.course_c_median, [[int(nbytes), int(reps)]], timeout=timeout
        )
    except Unfinished:
        raise DeadlockError(f"the course's C kernel did not finish within {timeout:g} s") from None
    return report["t_median_s"]


# -- notebook 02's sweep with the learner's own C timing loop and choose_reps --------------------
def _c_sweep_on_engine(lib, reps_pkg, sizes, target_s, calibration_reps, min_reps):
    from mpi4py import MPI

    from pingpong_lab.engines.shipping import unship
    from pingpong_lab.mpi.measure import warmup_for

    choose_reps = unship(reps_pkg)
    comm = MPI.COMM_WORLD
    rows = []
    for nbytes in sizes:
        cal = on_ranks.c_timing(lib, nbytes, calibration_reps, 2, False, keep_samples=False)
        if cal["rc"] != 0:
            return {"rank": comm.Get_rank(), "rc": cal["rc"], "rows": rows}
        cal_s = 2 * cal["one_way"] * calibration_reps  # the round trips' elapsed time
        reps = int(choose_reps(comm, cal_s, calibration_reps, target_s, min_reps=min_reps))
        warmup = warmup_for(reps)
        res = on_ranks.c_timing(lib, nbytes, reps, warmup, False)
        if res["rc"] != 0:
            return {"rank": comm.Get_rank(), "rc": res["rc"], "rows": rows}
        everyone = comm.gather(np.asarray(res["samples"], dtype=float), root=0)
        rows.append(
            {
                "nbytes": int(nbytes),
                "reps": reps,
                "one_way": res["one_way"],
                "samples": np.vstack(everyone) if everyone is not None else None,
            }
        )
    return {"rank": comm.Get_rank(), "rc": 0, "rows": rows}


def c_sweep(
    cluster, lib, choose_reps, sizes, target_s=0.05, calibration_reps=5, min_reps=10, timeout=300
) -> list[dict]:
    """Every size timed by the learner's time_pingpong_c, repetitions from their choose_reps.

    Returns rank 0's rows: nbytes, reps, one_way (the C function's result) and samples, an
    array (ranks, reps) of every rank's one-way time per round trip.
    """
    from ...engines.shipping import ship

    results = cluster.run(
        _c_sweep_on_engine,
        str(lib),
        ship(choose_reps),
        [int(s) for s in sizes],
        float(target_s),
        int(calibration_reps),
        int(min_reps),
        timeout=timeout,
    )
    raise_for_rc(results)
    return results[0]["rows"]
