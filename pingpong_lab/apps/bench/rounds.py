"""The interleaved rounds: per round the C kernel under mpiexec and on ipyparallel engines,
our Python kernel vs mpi4py.bench, the OSU way and the hardware floor."""

from __future__ import annotations

import json
import tempfile
import time
import warnings
from pathlib import Path

from ...data.schema import COL
from ...mpi import environment, jobs
from ...progress import bar
from ..hardware import HW_FLOOR, parse_hw_floor
from . import peers
from .peers import JOB_TIMEOUT_S, LAUNCH_SIZES, OSU_SIZE, PP_BLOCKING, parse_pp_table
from .settings import Settings, log, run_checked


def mpiexec_job(np_: int, spec: dict, timeout=JOB_TIMEOUT_S) -> dict:
    """One round's "bench-round" job under plain mpiexec: {"c", "py", "provenance"}."""
    with tempfile.TemporaryDirectory(prefix="pingpong-bench-") as tmp:
        spec = {**spec, "out": str(Path(tmp) / "round.json")}
        run_checked(jobs.command(peers.round_job, spec, np_), timeout=timeout)
        data = json.loads(Path(spec["out"]).read_text())
    for key in ("c", "py"):  # JSON keys are strings
        data[key] = {int(k): v for k, v in (data[key] or {}).items()}
    return data


def osu_method(s: Settings) -> dict:
    """The same C kernel the OSU way (OSU's iteration counts, mean of the iterations)."""
    cmd = [environment.mpiexec(), "-n", str(s.np), str(PP_BLOCKING)]
    cmd += ["-m", f"{OSU_SIZE}:{OSU_SIZE}"]
    if s.quick:
        cmd += ["-i", "50", "-x", "5"]
    return parse_pp_table(run_checked(cmd).stdout)


def hardware_floor(s: Settings) -> dict:
    """Cache-line ping-pong latency and single-core memcpy bandwidth (no MPI)."""
    iters = "2000" if s.quick else "20000"
    lat = parse_hw_floor(run_checked([str(HW_FLOOR), "-l", "-i", iters, "-r", "5"]).stdout)
    sizes = f"{LAUNCH_SIZES[0]}:{LAUNCH_SIZES[-1]}"
    seconds = "0.002" if s.quick else "0.02"
    bw = parse_hw_floor(run_checked([str(HW_FLOOR), "-b", "-m", sizes, "-t", seconds]).stdout)
    return {**lat, "memcpy": bw["memcpy"]}


def one_round(s: Settings, cluster, spec: dict, have: dict) -> tuple[dict, dict]:
    """Every comparison once, in a fixed order: (the round's record, the MPI provenance)."""
    job = mpiexec_job(s.np, spec)  # A: plain mpiexec, C fixed sizes + Python vs mpi4py.bench
    rec = {"mpiexec_c": job["c"], "py": job["py"]}
    # B: the same C kernel on the engines, by reference to the importable module (not
    # __main__, which would be pickled by value)
    eng = cluster.run(peers.c_fixed_sizes, spec["c_sizes_reps"], timeout=JOB_TIMEOUT_S)[0]
    rec["engines_c"] = {int(k): v for k, v in eng.items()}
    if have["pp_blocking"]:  # C: the OSU way
        rec["osu_method"] = osu_method(s)
    if have["hw_floor"]:  # D: hardware floor
        rec["floor"] = hardware_floor(s)
    return rec, job["provenance"]


def _log_round(s: Settings, r: int, rec: dict, t0: float) -> None:
    c8 = rec["mpiexec_c"][LAUNCH_SIZES[0]][COL.t_median_s]
    e8 = rec["engines_c"][LAUNCH_SIZES[0]][COL.t_median_s]
    log(
        f"round {r + 1}/{s.rounds}: 8 B mpiexec {c8 * 1e6:.2f} us, engines {e8 * 1e6:.2f}"
        f" us ({time.perf_counter() - t0:.1f} s)"
    )


def interleaved_rounds(s: Settings, raw: dict) -> dict:
    """Start the engines, run the rounds into raw, stop the engines (also on errors and
    Ctrl-C); the MPI provenance of the mpiexec jobs."""
    from ...engines.cluster import MPICluster, OversubscribedWarning

    c_sizes_reps = [[n, s.launch_reps[n]] for n in LAUNCH_SIZES]
    spec = {"c_sizes_reps": c_sizes_reps, "py_sizes": list(s.py_sizes), "quick": s.quick}
    have = {"hw_floor": HW_FLOOR.exists(), "pp_blocking": PP_BLOCKING.exists()}
    provenance: dict = {}
    log(f"starting {s.np} MPI engines (ipyparallel)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OversubscribedWarning)
        t0 = time.perf_counter()
        cluster = MPICluster(n=s.np, timeout=JOB_TIMEOUT_S)
        try:
            cluster.start()
            raw["cluster_start_s"] = time.perf_counter() - t0
            log(f"engines up in {raw['cluster_start_s']:.1f} s; {s.rounds} interleaved rounds")
            for r in bar(range(s.rounds), "bench", unit="round"):
                t_round = time.perf_counter()
                rec, prov = one_round(s, cluster, spec, have)
                raw["rounds"].append(rec)
                provenance = provenance or prov
                _log_round(s, r, rec, t_round)
        finally:
            t0 = time.perf_counter()
            cluster.stop()
            raw["cluster_stop_s"] = time.perf_counter() - t0
    return provenance
