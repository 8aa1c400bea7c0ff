"""Helpers that the course notebooks call in their "check it" and measurement cells.

They run learners' functions on fake communicators (to see what each rank would do) or on the
MPI engines (always with a deadline), and print short, readable reports.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ..data import schema
from ..engines.shipping import ship, unship
from ..errors import DeadlockError
from ..progress import bar
from . import grading, on_ranks
from .grading.fakempi import SEND_KINDS
from .grading.mode import ENGINE_TIMEOUT_S
from .grading.trace import show_bytes


# -- 00: what the machine is --------------------------------------------------------------------
def machine() -> dict:
    """Cores, memory, MPI library and versions of this machine (where the notebook runs)."""
    from ..mpi import environment

    environment.require_mpi4py()
    m = environment.machine()
    return {
        "host": m["host"],
        "cpu": m["cpu"],
        "cores usable": m["cores_usable"],
        "cores (logical)": m["cores_logical"],
        "memory GiB": m["memory_gib"],
        "MPI library": m["mpi_vendor"],
        "MPI standard": m["mpi_standard"],
        "mpi4py": m["mpi4py"],
        "python": m["python"],
    }


def usable_cores() -> int:
    """The cores this notebook's MPI ranks may keep busy: the CPU affinity (taskset, a Slurm or
    container cpuset) cut to a cgroup CPU quota (a JupyterHub or container limit). Not
    os.cpu_count(), which counts every core of the machine, usable or not."""
    from ..mpi import environment

    return environment.cpu_count()


def core_placements(nranks: int = 2) -> dict:
    """Print and return the placements this machine can give `nranks` ranks (mpi/binding.py):
    name -> the logical CPU of each rank, or the reason it cannot be shown here."""
    from ..mpi import binding

    found = binding.available(nranks)
    for name, cpus in found.items():
        where = f"CPUs {cpus}" if isinstance(cpus, list) else f"cannot be shown here: {cpus}"
        print(f"{name:<10} {binding.PLACEMENTS[name]}\n{'':<10} {where}")
    return found


def library_version() -> str:
    """The first line of MPI.Get_library_version() (which MPI, which build)."""
    from mpi4py import MPI

    return MPI.Get_library_version().strip().splitlines()[0]


def _whoami():
    from mpi4py import MPI

    from ..mpi import environment

    try:
        from ipykernel.kernelapp import IPKernelApp

        engine_id = (
            IPKernelApp.instance().engine_id
            if hasattr(IPKernelApp.instance(), "engine_id")
            else None
        )
    except Exception:
        engine_id = None
    if engine_id is None:
        try:
            import ipyparallel

            engine_id = ipyparallel.engine.app.IPEngine.instance().id
        except Exception:
            engine_id = None
    where = environment.rank_placement(MPI.COMM_WORLD.Get_rank())
    return {
        "rank": where["rank"],
        "size": MPI.COMM_WORLD.Get_size(),
        "engine_id": engine_id,
        "pid": os.getpid(),
        "host": where["host"],
    }


def whoami(cluster, timeout=ENGINE_TIMEOUT_S) -> list[dict]:
    """Rank, size, engine id, pid and host of every engine (ordered by rank)."""
    return cluster.run(_whoami, timeout=timeout)


def _call_with_world(package):
    from mpi4py import MPI

    return unship(package)(MPI.COMM_WORLD)


def on_every_rank(cluster, fn, timeout=ENGINE_TIMEOUT_S) -> list:
    """fn(MPI.COMM_WORLD) on every engine (fn may be defined in the notebook); by rank."""
    return cluster.run(_call_with_world, ship(fn), timeout=timeout)


# -- 01: ping-pong -------------------------------------------------------------------------------
def show_trace(fn, size=4, nbytes=8):
    """Run fn(comm, sendbuf, recvbuf) on fake ranks, print what each rank did and a diagnosis.

    Rank 1 receives rank 0's payload; rank 0 then receives what rank 1 actually sent back to it
    (with a matching tag), so a wrong echo, a missing one or a wrong order shows up here.
    """
    logs, bufs, payload = grading.trace(fn, size=size, nbytes=nbytes)
    for rank, log in enumerate(logs):
        calls = grading.comm_ops(log) or "nothing (idle)"
        print(f"rank {rank}: {calls}")
    sent_back = grading.echo_sent_by(logs[1]) if size > 1 else None
    sent = next((op.data for op in logs[0] if op.kind in SEND_KINDS), None)
    print("rank 0 sent:        ", grading.describe_echo(payload, sent, "the payload in sendbuf"))
    print("rank 1 sent back:   ", grading.describe_echo(payload, sent_back))
    intact = np.array_equal(bufs[0], payload)
    print(
        "rank 0's recvbuf now:",
        "the payload it sent" if intact else (show_bytes(bufs[0]) + " (not the payload it sent)"),
    )
    problem = grading.diagnose_trace(logs, bufs, payload)
    if problem is None:
        print(
            "diagnosis: a correct round trip (rank 1 echoes exactly what rank 0 sent, "
            "other ranks idle)"
        )
    else:
        print("diagnosis: NOT a correct round trip:", problem)


def run_pingpong(cluster, fn, nbytes=1000, iters=3) -> None:
    """Run a Python ping-pong on the engines and say whether every echo came back intact."""
    report = grading.pingpong_on_engines_report(cluster, fn, nbytes, iters)
    corrupt = report["corrupt"]
    verdict = "intact" if corrupt == 0 else f"{corrupt} corrupted ({report.get('detail')})"
    print(f"{iters} round trips of {nbytes} B between ranks 0 and 1: echoes {verdict}")


def run_safe_exchange(cluster, fn, sizes=(8, 1 << 20)) -> None:
    """Run a learner's exchange between ranks 0 and 1 at each size and say what happened."""
    for nbytes in sizes:
        try:
            grading.safe_exchange_on_engines(cluster, fn, nbytes)
        except (AssertionError, DeadlockError) as exc:
            print(f"{nbytes} B: {exc}")
            return
        print(f"{nbytes} B: both buffers arrived intact, in both directions")


def run_c_pingpong(cluster, lib, nbytes=1000, iters=3, function="pingpong_c") -> None:
    """Run the C ping-pong on the engines and say whether every echo came back intact."""
    results = grading.c_pingpong_on_engines(cluster, lib, nbytes, iters, function)
    codes = {c for r in results for c in r["codes"]}
    if grading.NOT_IMPLEMENTED in codes:
        print(f"{function} returns NOT_IMPLEMENTED: write its body first")
        return
    if codes - {0}:
        print(f"{function} returned {sorted(codes - {0})} (0 means success)")
        return
    corrupt = results[0]["corrupt"]
    verdict = "intact" if not corrupt else f"{corrupt} corrupted"
    print(f"{iters} round trips of {nbytes} B in C: echoes {verdict}")


def show_halo(fn, nranks=3, width=2, timeout=grading.MPIEXEC_TIMEOUT_S) -> None:
    """Run fn(comm, u, width) once on `nranks` fresh ranks and print every rank's u before and
    after (ghost cells | owned cells | ghost cells; -1 marks a ghost cell nothing was written
    to), then what is wrong, if anything."""
    from .grading.fresh_ranks import Unfinished, on_fresh_ranks

    try:
        (ranks,) = on_fresh_ranks(on_ranks.halo, [[int(width), on_ranks.HALO_GROUPS[0], True]],
                                  [fn], nranks, timeout)  # fmt: skip
    except Unfinished:
        raise DeadlockError(f"the halo exchange of width {width} on {nranks} ranks did not "
                            f"finish within {timeout:g} s") from None  # fmt: skip

    def text(u):
        cells = [f"{v:g}" for v in u]
        return " ".join(cells[:width]) + " | " + " ".join(cells[width:-width]) + " | " + " ".join(
            cells[-width:])  # fmt: skip

    for r in ranks:
        print(f"rank {r['rank']}  before: {text(r['before'])}")
        print(f"        after:  {text(r['after'])}")
    wrong = [r["detail"] for r in ranks if not r["ok"]]
    print("\n".join(wrong) if wrong else "every ghost cell holds its neighbour's cell: ok")


def run_pickle_pingpong(cluster, fn, obj, iters=2, timeout=ENGINE_TIMEOUT_S):
    """Rank 0's result of fn(comm, obj) on the engines (the echoed object)."""
    return cluster.run(on_ranks.pickle_pingpong, ship(fn), obj, iters, timeout=timeout)[0]


def _each_size(sizes, desc, timeout, measure_one) -> list:
    """measure_one(size, seconds_left) for every size, with a progress bar, under one deadline.

    Each size is one call on the engines, so the bar moves as sizes finish; a size gets the
    time the whole sweep has left (at least a second).
    """
    deadline = time.monotonic() + float(timeout)
    return [
        measure_one(n, max(1.0, deadline - time.monotonic())) for n in bar(sizes, desc, leave=False)
    ]


def _engine_sweep(cluster, settings, timeout, desc):
    """measure.sweep_rows of `settings` on the engines one size at a time: rank 0's rows."""
    from dataclasses import replace

    from ..mpi import measure

    def one(n, left):
        rows, _ = cluster.run(measure.sweep_rows, replace(settings, sizes=[n]), timeout=left)[0]
        return rows[0]

    return _each_size(settings.sizes, desc, timeout, one)


def pickle_vs_buffer(cluster, sizes, reps=200, timeout=120):
    """Median one-way time of the buffer (Send/Recv) and pickle (send/recv) kernels per size.

    `timeout` (seconds) is for each kernel's sweep.
    """
    from ..mpi.settings import SweepSettings

    table = []
    for mode in ("blocking", "pickle"):
        settings = SweepSettings(kind="python", mode=mode, sizes=sizes, reps=reps)
        rows = _engine_sweep(cluster, settings, timeout, f"python {mode}")
        table.append({r.nbytes: r.t_median_s for r in rows})
    return [
        {
            "nbytes": n,
            "buffer_us": table[0][n] * 1e6,
            "pickle_us": table[1][n] * 1e6,
            "ratio": table[1][n] / table[0][n],
        }
        for n in sizes
    ]


# -- 02: timing ----------------------------------------------------------------------------------
def reference_pingpong(comm, sendbuf, recvbuf):
    """One blocking round trip between ranks 0 and 1 (the course's reference); others idle."""
    rank = comm.Get_rank()
    if rank == 0:
        comm.Send(sendbuf, dest=1, tag=0)
        comm.Recv(recvbuf, source=1, tag=0)
    elif rank == 1:
        comm.Recv(recvbuf, source=0, tag=0)
        comm.Send(recvbuf, dest=0, tag=0)


def reference_time_pingpong(comm, pingpong, sendbuf, recvbuf, reps, warmup, clock=None):
    """The course's time_pingpong (notebook 02, Part C): warm-up, Barrier, `reps` timed round
    trips, the maximum over ranks of the elapsed time, divided by 2 * reps."""
    from mpi4py import MPI

    clock = MPI.Wtime if clock is None else clock
    for _ in range(warmup):
        pingpong(comm, sendbuf, recvbuf)
    comm.Barrier()
    start = clock()
    for _ in range(reps):
        pingpong(comm, sendbuf, recvbuf)
    elapsed = comm.allreduce(clock() - start, op=MPI.MAX)
    return elapsed / (2 * reps)


def student_sweep(
    cluster,
    time_pingpong,
    choose_reps,
    pingpong,
    sizes,
    target_s=0.05,
    calibration_reps=5,
    timeout=180,
):
    """Measure every size with the learner's own time_pingpong and choose_reps on the engines.

    Returns rank 0's rows [{nbytes, reps, t_s}] (t_s is the one-way time, half a round trip).
    `timeout` (seconds) is for the whole sweep.
    """
    functions = (
        ship(time_pingpong),
        ship(choose_reps) if choose_reps is not None else None,
        ship(pingpong),
    )

    def one(n, left):
        return cluster.run(
            on_ranks.student_sweep,
            *functions,
            [int(n)],
            float(target_s),
            int(calibration_reps),
            timeout=left,
        )[0][0]

    return _each_size(sizes, "your sweep", timeout, one)


def compare_runs(first, second, alpha=0.05) -> tuple[str, str]:
    """("faster" | "slower" | "same", a line that says why) for two sets of run medians
    (seconds, one value per fresh run): `first` against `second` by a Mann-Whitney rank test.

    "same" means the runs cannot tell them apart at level `alpha`, not that they are equal:
    with 3 runs each no difference can reach 5 % (the smallest p is 0.1); 5 each can (0.008).
    """
    from ..analysis import stats

    test = stats.mann_whitney(first, second)
    ratio = float(np.median(first) / np.median(second))
    if test.p < alpha:
        seen = "slower" if test.prob_first_above > 0.5 else "faster"
    else:
        seen = "same"
    why = (
        f"x{ratio:.2f} (median of {len(first)} runs against {len(second)}), rank test p = "
        f"{test.p:.3f}: " + (f"{seen}" if seen != "same" else "the runs cannot tell them apart")
    )
    return seen, why


def _reference_time_on_engine(nbytes, reps):
    from mpi4py import MPI

    from ..mpi import kernels, measure

    comm = MPI.COMM_WORLD
    samples, _ = kernels.pingpong_blocking(comm, nbytes, measure.warmup_for(reps), reps)
    rt = comm.allreduce(
        float(np.nanmedian(samples)) if np.isfinite(samples).any() else 0.0, op=MPI.MAX
    )
    return rt / 2


def reference_time(cluster, nbytes, reps=200, timeout=ENGINE_TIMEOUT_S) -> float:
    """The course's Python blocking kernel: median one-way time at nbytes on the engines."""
    return cluster.run(_reference_time_on_engine, int(nbytes), int(reps), timeout=timeout)[0]


def kernel_sweep(
    cluster, kind, mode, sizes, reps=None, target_s=0.05, timeout=300, shared_buffer=False
):
    """measure.sweep_rows on the engines; rank 0's rows as dicts (one-way times), with the
    run's kernel, mode and ranks in their columns (data.schema.RUN_COLUMNS).

    shared_buffer=True: one buffer per rank, the answering rank echoes the received bytes.
    `timeout` (seconds) is for the whole sweep.
    """
    from ..mpi.settings import SweepSettings

    settings = SweepSettings(
        kind=kind,
        mode=mode,
        sizes=sizes,
        reps=reps,
        target_s=target_s,
        shared_buffer=shared_buffer,
    )
    rows = _engine_sweep(cluster, settings, timeout, f"{kind} {mode}")
    run = schema.run_values({"kernel": kind, "mode": mode, "ranks": getattr(cluster, "n", None)})
    return [{**row.to_dict(), **run} for row in rows]


# -- 02: the timing loop in C, the sweep it measures, and what it hands on ---------------------
def run_c_timing(cluster, lib, nbytes=8, reps=1000, warmup=100) -> None:
    """Run the learner's time_pingpong_c once on the engines and print what each rank got."""
    from .grading import ctiming

    results = ctiming.c_timing_on_engines(cluster, lib, nbytes, reps, warmup)
    codes = {r["rc"] for r in results}
    if codes != {0}:
        stub = grading.NOT_IMPLEMENTED in codes
        print(f"{ctiming.FUNCTION} returned", "NOT_IMPLEMENTED: write it first" if stub else codes)
        return
    for r in results:
        t = np.asarray(r["samples"], dtype=float) * 1e6
        print(
            f"rank {r['rank']}: one_way {r['one_way'] * 1e6:8.3f} us   samples: median "
            f"{np.median(t):8.3f} us, min {t.min():8.3f} us, max {t.max():9.3f} us"
        )


def sweep_result(rows, kernel="student C", method="echo") -> dict:
    """The values of handoff result "02_sweep" from ctiming.c_sweep rows.

    t_median_s is, per size, the median over round trips of the per-round-trip maximum over
    ranks; ci_lo_s and ci_hi_s its 95% confidence interval (order statistics).
    """
    from ..analysis import stats

    medians, lows, highs = [], [], []
    for row in rows:
        per_trip = stats.max_across_ranks(row["samples"])
        lo, hi, _ = stats.median_ci(per_trip)
        medians.append(float(np.nanmedian(per_trip)))
        lows.append(lo)
        highs.append(hi)
    return {
        "nbytes": np.array([r["nbytes"] for r in rows], dtype=np.int64),
        "t_median_s": np.array(medians),
        "ci_lo_s": np.array(lows),
        "ci_hi_s": np.array(highs),
        "kernel": kernel,
        "method": method,
    }


def samples_result(rows, kernel="student C", cap=None) -> dict:
    """The values of handoff result "02_samples": every round trip of every size.

    Sizes measure different numbers of round trips, so the samples of all sizes are joined
    along the round trips: samples_s has shape (ranks, total) and reps[k] says how many of
    its columns belong to nbytes[k], in order (`samples_by_size` splits them again). With
    `cap`, a size that measured more than `cap` round trips keeps `cap` of them spread evenly
    over its whole run (a uniform subsample), never just its first ones.
    """
    kept = []
    for row in rows:
        a = np.atleast_2d(np.asarray(row["samples"], dtype=float))
        a = _spread(a, cap)
        kept.append(a)
    return {
        "nbytes": np.array([r["nbytes"] for r in rows], dtype=np.int64),
        "reps": np.array([a.shape[1] for a in kept], dtype=np.int64),
        "samples_s": np.concatenate(kept, axis=1),
        "kernel": kernel,
    }


def _spread(a: np.ndarray, cap) -> np.ndarray:
    """At most `cap` round trips (columns) of `a`, spread evenly over the whole run (never the
    first `cap`: those are the end of the warm-up); all of them when cap is None."""
    if cap is None or a.shape[1] <= cap:
        return a
    return a[:, np.linspace(0, a.shape[1] - 1, int(cap)).round().astype(int)]


def samples_by_size(result, cap=None) -> dict:
    """{nbytes: array (ranks, round trips)} from a "02_samples" result (see samples_result);
    with `cap`, at most that many round trips per size, spread evenly over the run.

    Also reads the older layout, one rectangular array (sizes, ranks, round trips)."""
    nbytes = [int(b) for b in result["nbytes"]]
    samples = np.asarray(result["samples_s"], dtype=float)
    if samples.ndim == 3:
        return {n: _spread(a, cap) for n, a in zip(nbytes, samples, strict=True)}
    ends = np.cumsum(np.asarray(result["reps"], dtype=np.int64))
    if len(ends) != len(nbytes) or (ends.size and ends[-1] != samples.shape[1]):
        raise ValueError(
            f"02_samples: {len(nbytes)} sizes and reps {list(result['reps'])} do not split "
            f"{samples.shape[1]} round trips"
        )
    parts = np.split(samples, ends[:-1], axis=1)
    return {n: _spread(a, cap) for n, a in zip(nbytes, parts, strict=True)}


def save_result(name, **values) -> None:
    """handoff.save(name, **values) and say where; while grading nothing is saved."""
    from . import handoff

    if grading.grading_mode():
        print(f"(grading mode: {name} is not saved)")
        return
    path = handoff.save(name, **values)
    print(f"saved {name} in {path.parent} (the next notebooks read it from there)")


def break_it(experiment, sizes=None, stuck_after_s=None, bind=None) -> dict:
    """Run one of the deadlock experiments (course.deadlocks) and print what happened; `bind`
    pins the two ranks ("cores", "same-core", "smt" or two CPUs: see core_placements())."""
    from . import deadlocks

    sizes = deadlocks.SIZES if sizes is None else sizes
    # graded runs only need the verdict's shape: deadlocked ranks spin while they wait
    wait = grading.scale(deadlocks.STUCK_AFTER_S, 0.5) if stuck_after_s is None else stuck_after_s
    result = deadlocks.run(experiment, sizes, stuck_after_s=wait, bind=bind)
    done = result["completed"]
    passed = f"{len(done)} size(s) went through" + (
        f" ({done[0]} .. {done[-1]} B); " if done else "; "
    )
    if experiment not in ("head-to-head", "ssend"):
        passed = ""
    if result["stuck_at"] is not None:
        verdict = f"stuck at {result['stuck_at']} B (nothing moved for {wait:g} s): a deadlock"
    elif result["error"]:
        verdict = f"MPI reported an error: {result['error']}"
    else:
        verdict = "no deadlock, no error"
    pinned = f", ranks on CPUs {result['cpus']}" if bind is not None else ""
    print(f"{experiment}: {passed}{verdict} [{result['seconds']:.1f} s{pinned}]")
    return result


grading.seal(sys.modules[__name__])


# -- notebook 02, Part E: the learner's own benchmark program --------------------------------
def _bench_finished(proc) -> None:
    from .grading import cbench

    if proc.returncode == cbench.NOT_IMPLEMENTED_STATUS:
        raise RuntimeError(cbench.UNFINISHED)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        raise RuntimeError(f"the program ended with exit status {proc.returncode}:\n{tail}")


def run_benchmark(path="bench.c", out="bench.csv", max_bytes=1 << 22, reps=1000, warmup=100,
                  timeout=300.0) -> dict:  # fmt: skip
    """Build `path` with this environment's mpicc, run it on 2 ranks, print and return its CSV.

    A compiler error, a deadline overrun or a non-zero exit status raise an error that says
    which, with the compiler's or the program's last messages.
    """
    from ..mpi import environment
    from .grading import cbench

    try:
        exe = cbench.build_bench(path, show_warnings=True)
    except AssertionError as exc:
        raise RuntimeError(str(exc)) from None
    print(f"built:   {Path(environment.mpicc()).name} {' '.join(cbench.FLAGS)} {path} -o {exe}")
    print(f"running: mpiexec -n 2 {Path(exe).name} {out} {max_bytes} {reps} {warmup}")
    try:
        proc = cbench.run_bench(exe, out, max_bytes, reps, warmup, timeout=timeout)
    except AssertionError as exc:
        raise RuntimeError(str(exc)) from None
    _bench_finished(proc)
    table = cbench.read_bench_csv(out)
    print(Path(out).read_text().strip())
    return table


def bench_messages(path="bench.c", max_bytes=1 << 10, reps=12, warmup=5) -> None:
    """How many messages of each size each rank sent (with REPS and WARMUP as given), and
    whether the ranks synchronised between the warm-up and the timed round trips."""
    from .grading import cbench

    try:
        table, events = cbench.message_log(path, max_bytes, reps, warmup)
    except AssertionError as exc:
        raise RuntimeError(str(exc)) from None
    print(f"REPS={reps}, WARMUP={warmup}: each rank should send each size {reps + warmup} times")
    counts = {rank: cbench.sent_counts(events[rank]) for rank in (0, 1)}
    print("  nbytes  rank 0  rank 1  Barrier after the warm-up")
    for nbytes in cbench.bench_sizes(max_bytes):
        synced = all(cbench.synchronised_after_warmup(events[r], nbytes, warmup) for r in (0, 1))
        print(f"{nbytes:>8} {counts[0].get(nbytes, 0):>7} {counts[1].get(nbytes, 0):>7}  "
              f"{'yes' if synced else 'no'}")  # fmt: skip
    print(f"reps column: {sorted({int(r) for r in table['reps']})}")


def bench_clock(path="bench.c", max_bytes=1 << 10, reps=10, warmup=2) -> None:
    """The program's times next to what its own clock readings give: the median over the timed
    round trips of the slower rank's one-way time, recomputed from every MPI_Wtime reading the
    profiling layer logged in that run (rank 1's clock runs twice as fast there)."""
    from .grading import cbench

    try:
        exe = cbench.build_bench(path, graded=True)
        run = cbench.finished_run(exe, max_bytes, reps, warmup)
    except AssertionError as exc:
        raise RuntimeError(str(exc)) from None
    verdicts = cbench.clock_verdicts(run, reps, warmup)
    print("   nbytes   yours (s)    from your clock readings (s)")
    for n, got, why in verdicts:
        try:
            (lo, hi), _ = cbench.clock_summaries(run.events, n, reps, warmup)
            want = f"{lo:.6g}" if lo == hi else f"{lo:.6g} .. {hi:.6g}"
        except AssertionError:
            want = "?"
        print(f"{n:>9} {got:11.6g} {want:>27}  {'ok' if not why else '<-'}")
    wrong = [why for _, _, why in verdicts if why]
    if wrong:
        print(wrong[0])


def bench_corrupted(path="bench.c") -> None:
    """Run the program while every echo comes back with one byte changed; say how it ended."""
    from .grading import cbench

    try:
        proc = cbench.corrupted_run(path)
    except AssertionError as exc:
        raise RuntimeError(str(exc)) from None
    if proc.returncode == cbench.NOT_IMPLEMENTED_STATUS:
        raise RuntimeError(cbench.UNFINISHED)
    said = proc.stderr.strip().splitlines()
    print(f"exit status {proc.returncode}; its first message: {said[0] if said else '(none)'}")


def bench_vs_reference(path="bench.c", max_bytes=1 << 20, reps=200, warmup=20) -> None:
    """Your program and the course's C kernel (echo buffers), same sizes, one after the other."""
    from .grading import cbench

    try:
        exe = cbench.build_bench(path)
        with tempfile.TemporaryDirectory(prefix="pp-bench-") as tmp:
            out = Path(tmp) / "bench.csv"
            proc = cbench.run_bench(exe, out, max_bytes, reps, warmup)
            _bench_finished(proc)
            table = cbench.read_bench_csv(out)
        reference = cbench.reference_bench(max_bytes, reps, warmup)
    except AssertionError as exc:
        raise RuntimeError(str(exc)) from None
    print("   nbytes   yours (us)   course kernel (us)   ratio")
    for n, t in zip(table["nbytes"], table["t_median_s"], strict=True):
        ref = reference.get(int(n), float("nan"))
        print(f"{int(n):>9} {t * 1e6:12.2f} {ref * 1e6:20.2f} {t / ref:7.2f}")
    ratio, growth = cbench.compare_with_reference(table, reference)
    largest = int(table["nbytes"][-1])
    print(f"median ratio {ratio:.2f}; {largest} B takes {growth:.1f}x as long as {largest // 4} B")
