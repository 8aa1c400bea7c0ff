"""`pingpong-lab bench`: is our measurement fair? Ratios, all measured in one run.

    pingpong-lab bench [--np 2] [--out bench-results] [--rounds 7] [--quick]

A shared 2-core machine is noisy, so every number here is a RATIO of two things measured in the
same run, interleaved (A B A B ...) over several rounds. Each side is summarised by the median
over rounds; the ratios with a target are the median of the per-round ratios (paired, so a slow
round slows both sides and drift cancels). Comparisons:

- launcher: the same C kernel (kernels_c, blocking) under plain mpiexec and on ipyparallel
  engines (MPICluster + measure), at 8 B, 64 KiB, 1 MiB and 16 MiB (target: within 5 %);
- OSU methodology: our C sweep at 1 MiB vs the same C kernel run the OSU way
  (kernels_c/build/pp_blocking: OSU's iteration counts, mean of the iterations) and vs
  mpi4py.bench pingpong (the real OSU micro-benchmarks are not packaged here);
- mpi4py.bench: our Python kernel vs `mpi4py.bench pingpong` (same MPI, same sizes, same
  iteration counts, same statistic: mean of rank 0's half round trips; target: within 10 %),
  as shipped and with its numpy.empty() buffers written once (the fair peer: unwritten pages
  all map the kernel's zero page, which flatters large messages);
- NetPIPE (Debian's builds, installed by `make bench` when it can): NPmpich2 vs our C kernel
  built with the same Debian MPICH, the same C kernel on both MPICH builds, and NPtcp vs our
  C kernel over TCP loopback;
- hardware floor (kernels_c/build/hw_floor, no MPI): MPI latency / cache-line ping-pong between
  two pinned processes, MPI bandwidth / single-core memcpy bandwidth;
- course costs: engine start time, a full 1 B..64 MiB C sweep at the default precision.

Writes OUT/bench.csv, OUT/bench.md and OUT/bench.json (provenance), prints the table, and leaves
no process behind (engines and mpiexec jobs are stopped, also on errors and Ctrl-C).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime as _dt
import importlib
import importlib.util
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from ..analysis import stats
from ..analysis.formatting import format_bandwidth, format_bytes, format_number, format_time
from ..data import results
from ..data.jsonable import jsonable
from ..mpi import environment, jobs, measure
from ..mpi.ckernels import DEFAULT_LIBRARY, KERNELS_DIR
from ..mpi.processes import run_group
from . import netpipe
from .hardware import HW_FLOOR, parse_hw_floor

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
PP_BLOCKING = KERNELS_DIR / "build" / "pp_blocking"
JOB_TIMEOUT_S = 300
COLUMNS = (
    "group",
    "metric",
    "nbytes",
    "a_label",
    "a_value",
    "b_label",
    "b_value",
    "unit",
    "ratio",
    "ratio_definition",
    "target",
    "within_target",
    "rounds",
    "note",
)


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


# -- SPMD pieces: run on every rank (under mpiexec or on engines) ----------------------------
def c_fixed_sizes(sizes_reps, library=None):
    """C blocking kernel, fixed repetitions per size: rank 0 gets {nbytes: stats}, others None.

    The same function runs under mpiexec and on engines, so only the launcher differs.
    """
    from pingpong_lab.mpi import measure

    out = {}
    for nbytes, reps in sizes_reps:
        res = measure.sweep("c", "blocking", [int(nbytes)], reps=int(reps), library=library)
        if res is not None:
            row = res[0][0]
            out[int(nbytes)] = {k: row[k] for k in ("t_median_s", "t_mean_s", "t_min_s", "reps")}
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


def round_job(spec: dict, comm) -> int:
    """The "bench-round" job (every rank): C fixed sizes, then Python vs mpi4py.bench."""
    c = c_fixed_sizes(spec["c_sizes_reps"])
    py = python_vs_mpi4py_bench(spec["py_sizes"], spec.get("quick", False))
    info = environment.provenance(comm, launcher="mpiexec", tool="pingpong-lab bench")
    if comm.Get_rank() == 0:
        Path(spec["out"]).write_text(json.dumps({"c": c, "py": py, "provenance": info}))
    return 0


# -- process helpers ---------------------------------------------------------------------------
def _run(cmd, timeout=JOB_TIMEOUT_S, env=None) -> subprocess.CompletedProcess:
    """Run a command in its own process group (ended as a whole on timeout); check its exit."""
    proc = run_group(cmd, timeout, env=env)
    if proc.returncode != 0:
        tail = " | ".join(ln for ln in proc.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"{' '.join(map(str, cmd[:4]))} ... failed ({proc.returncode}): {tail}")
    return proc


def _mpiexec_job(np_: int, spec: dict, timeout=JOB_TIMEOUT_S) -> dict:
    with tempfile.TemporaryDirectory(prefix="pingpong-bench-") as tmp:
        spec = {**spec, "out": str(Path(tmp) / "round.json")}
        _run(jobs.command("bench-round", spec, np_), timeout=timeout)
        data = json.loads(Path(spec["out"]).read_text())
    for key in ("c", "py"):  # JSON keys are strings
        data[key] = {int(k): v for k, v in (data[key] or {}).items()}
    return data


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


def _median(values) -> float:
    v = [x for x in values if x is not None and math.isfinite(x)]
    return float(np.median(v)) if v else math.nan


# -- the benchmark -----------------------------------------------------------------------------
class Bench:
    def __init__(self, np_: int, out: Path, rounds: int, quick: bool):
        self.np = np_
        self.out = out
        self.rounds = rounds
        self.quick = quick
        self.launch_reps = QUICK_LAUNCH_REPS if quick else LAUNCH_REPS
        self.py_sizes = QUICK_PY_SIZES if quick else PY_SIZES
        self.rows: list[dict] = []
        self.raw: dict = {"rounds": []}
        self.provenance: dict = {}

    def row(
        self,
        group,
        metric,
        nbytes,
        a_label,
        a,
        b_label,
        b,
        unit,
        target="",
        note="",
        ratio_definition="b / a",
        tolerance=None,
        paired=None,
    ):
        ratio = b / a if a and math.isfinite(a) and b is not None and math.isfinite(b) else math.nan
        if paired is not None:  # the median of the per-round ratios: drift between rounds cancels
            ratio = _median([y / x for x, y in paired if x and y is not None])
            ratio_definition = "median over rounds of b / a"
        within = ""
        if tolerance is not None and math.isfinite(ratio):
            within = "yes" if abs(ratio - 1.0) <= tolerance else "no"
        self.rows.append(
            {
                "group": group,
                "metric": metric,
                "nbytes": nbytes if nbytes is not None else "",
                "a_label": a_label,
                "a_value": a,
                "b_label": b_label,
                "b_value": b,
                "unit": unit,
                "ratio": ratio,
                "ratio_definition": ratio_definition,
                "target": target,
                "within_target": within,
                "rounds": self.rounds,
                "note": note,
            }
        )

    def not_measured(self, group, metric, why):
        self.rows.append(
            {k: "" for k in COLUMNS}
            | {"group": group, "metric": metric, "note": f"not measured: {why}", "ratio": math.nan}
        )

    def run(self):
        from ..engines.cluster import MPICluster, OversubscribedWarning

        t_start = time.perf_counter()
        c_sizes_reps = [[n, self.launch_reps[n]] for n in LAUNCH_SIZES]
        spec = {"c_sizes_reps": c_sizes_reps, "py_sizes": list(self.py_sizes), "quick": self.quick}
        have_floor = HW_FLOOR.exists()
        have_pp = PP_BLOCKING.exists()
        _log(f"starting {self.np} MPI engines (ipyparallel)")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OversubscribedWarning)
            t0 = time.perf_counter()
            cluster = MPICluster(n=self.np, timeout=JOB_TIMEOUT_S)
            try:
                cluster.start()
                start_s = time.perf_counter() - t0
                self.raw["cluster_start_s"] = start_s
                _log(f"engines up in {start_s:.1f} s; {self.rounds} interleaved rounds")
                for r in range(self.rounds):
                    self.raw["rounds"].append(self._round(r, cluster, spec, have_pp, have_floor))
            finally:
                t0 = time.perf_counter()
                cluster.stop()
                self.raw["cluster_stop_s"] = time.perf_counter() - t0
        self._netpipe()
        self._full_sweep()
        self._analyse(have_pp, have_floor)
        self.raw["total_s"] = time.perf_counter() - t_start

    def _round(self, r, cluster, spec, have_pp, have_floor) -> dict:
        rec: dict = {}
        # A: plain mpiexec (C fixed sizes + Python vs mpi4py.bench in the same job)
        t0 = time.perf_counter()
        job = _mpiexec_job(self.np, spec)
        rec["mpiexec_c"], rec["py"] = job["c"], job["py"]
        if not self.provenance:
            self.provenance = job["provenance"]
        # B: the same C kernel on the engines
        # by reference to the importable module (not __main__, which would be pickled by value)
        func = importlib.import_module("pingpong_lab.apps.bench").c_fixed_sizes
        eng = cluster.run(func, spec["c_sizes_reps"], timeout=JOB_TIMEOUT_S)[0]
        rec["engines_c"] = {int(k): v for k, v in eng.items()}
        # C: the OSU way (OSU iteration counts, mean) with the same C kernel
        if have_pp:
            cmd = [environment.mpiexec(), "-n", str(self.np), str(PP_BLOCKING)]
            cmd += ["-m", f"{OSU_SIZE}:{OSU_SIZE}"]
            if self.quick:
                cmd += ["-i", "50", "-x", "5"]
            rec["osu_method"] = parse_pp_table(_run(cmd).stdout)
        # D: hardware floor (no MPI)
        if have_floor:
            iters = "2000" if self.quick else "20000"
            lat = parse_hw_floor(_run([str(HW_FLOOR), "-l", "-i", iters, "-r", "5"]).stdout)
            sizes = f"{LAUNCH_SIZES[0]}:{LAUNCH_SIZES[-1]}"
            bw = parse_hw_floor(
                _run(
                    [str(HW_FLOOR), "-b", "-m", sizes, "-t", "0.002" if self.quick else "0.02"]
                ).stdout
            )
            rec["floor"] = {**lat, "memcpy": bw["memcpy"]}
        c8 = rec["mpiexec_c"][LAUNCH_SIZES[0]]["t_median_s"]
        e8 = rec["engines_c"][LAUNCH_SIZES[0]]["t_median_s"]
        _log(
            f"round {r + 1}/{self.rounds}: 8 B mpiexec {c8 * 1e6:.2f} us, engines {e8 * 1e6:.2f}"
            f" us ({time.perf_counter() - t0:.1f} s)"
        )
        return rec

    def _netpipe(self):
        """NetPIPE (Debian's builds) as peers, once: MPI vs our C kernel on the same MPI, TCP
        vs our C kernel over TCP. Missing tools leave a reason instead of numbers."""
        from .cli import TRANSPORTS

        hi = 64 * KIB if self.quick else LAUNCH_SIZES[-1]
        iters = "200" if self.quick else "1000"
        rec: dict = {"max_bytes": hi}
        self.raw["netpipe"] = rec
        for kind in ("mpi", "tcp"):
            why = netpipe.missing(kind)
            if why:
                rec[kind] = {"missing": why}
                continue
            _log(f"NetPIPE {kind} (Debian's build) up to {hi} B")
            try:
                peer = netpipe.run_mpi if kind == "mpi" else netpipe.run_tcp
                rec[kind] = {"netpipe": peer(hi, self.out / f"netpipe_{kind}.out")}
                if kind == "mpi":  # our C kernel built against the same (Debian's) MPICH
                    exe = self._debian_pp_blocking()
                    cmd = [shutil.which(netpipe.DEBIAN_MPIEXEC), "-n", "2", str(exe)]
                    rec[kind]["mpi_version"] = netpipe.debian_mpich_version()
                    env = None
                else:  # our C kernel over TCP loopback, the pip MPICH forced off shared memory
                    cmd = [environment.mpiexec(), "-n", "2", str(PP_BLOCKING)]
                    env = {**os.environ, **TRANSPORTS["tcp"]}
                cmd += ["-m", f"8:{hi}", "-i", iters, "-x", "50"]
                rec[kind]["ours"] = parse_pp_table(_run(cmd, env=env).stdout)
            except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                rec[kind] = {"missing": f"failed: {exc}"}

    def _debian_pp_blocking(self) -> Path:
        """pp_blocking compiled with Debian's mpicc (the MPI that NetPIPE's build uses)."""
        build = (self.out / "build-debian-mpich").resolve()
        mpicc = shutil.which(netpipe.DEBIAN_MPICC)
        if mpicc is None:
            raise RuntimeError(f"{netpipe.DEBIAN_MPICC} not installed (Debian: libmpich-dev)")
        target = build / "pp_blocking"
        _run(["make", "-s", "-C", str(KERNELS_DIR), f"MPICC={mpicc}", f"BUILD={build}", target])
        return target

    def _full_sweep(self):
        lo, hi = QUICK_SWEEP if self.quick else FULL_SWEEP
        out = self.out / "full_sweep_c_blocking.csv"
        cmd = [sys.executable, "-m", "pingpong_lab", "sweep", "--np", str(self.np)]
        cmd += ["--kernel", "c", "--mode", "blocking", "--min-bytes", str(lo)]
        cmd += ["--max-bytes", str(hi), "--out", str(out)]
        if self.quick:
            cmd += ["--target-time", "0.01"]
        _log(f"timing a full sweep {lo} B .. {hi} B at the default precision")
        t0 = time.perf_counter()
        _run(cmd, timeout=JOB_TIMEOUT_S * 2)
        self.raw["full_sweep_s"] = time.perf_counter() - t0
        self.raw["full_sweep_range"] = [lo, hi]

    def _sweep_note(self) -> str:
        """How many sizes reached the +/-2% median CI in the timed full sweep."""
        path = self.out / "full_sweep_c_blocking.csv"
        try:
            rows, _ = results.read_results(path)
        except OSError:
            return "no CSV"
        met = sum(r.get("stop_reason") == "ci" for r in rows)
        how = "quick: 0.01 s first round" if self.quick else "+/-2% CI or 1 s per size"
        return f"{how}; CI met at {met} of {len(rows)} sizes (mpiexec)"

    def _series(self, key, nbytes, field):
        return [rec[key][nbytes][field] for rec in self.raw["rounds"] if nbytes in rec.get(key, {})]

    def _analyse(self, have_pp, have_floor):
        rounds = self.raw["rounds"]
        us = "s"
        # launcher
        for n in LAUNCH_SIZES:
            a_rounds = self._series("mpiexec_c", n, "t_median_s")
            b_rounds = self._series("engines_c", n, "t_median_s")
            a, b = _median(a_rounds), _median(b_rounds)
            self.row(
                "launcher",
                "C blocking one-way median",
                n,
                "mpiexec",
                a,
                "ipyparallel engines",
                b,
                us,
                "within 5 %",
                tolerance=0.05,
                note=f"{self.launch_reps[n]} reps per round",
                paired=list(zip(a_rounds, b_rounds)),
            )
        # OSU methodology at 1 MiB
        ours = _median(self._series("mpiexec_c", OSU_SIZE, "t_median_s"))
        if have_pp:
            osu_avg = _median(r["osu_method"][OSU_SIZE]["avg_s"] for r in rounds)
            osu_med = _median(r["osu_method"][OSU_SIZE]["median_s"] for r in rounds)
            iters = rounds[0]["osu_method"][OSU_SIZE]["iters"]
            self.row(
                "osu-method",
                "C one-way: our sweep median vs OSU-style mean",
                OSU_SIZE,
                "pp_blocking OSU counts, mean",
                osu_avg,
                "pingpong_lab sweep median",
                ours,
                us,
                "within 10 %",
                tolerance=0.10,
                note=f"OSU counts: {iters} iterations; real OSU not packaged here",
            )
            self.row(
                "osu-method",
                "C one-way: our sweep median vs OSU-style median",
                OSU_SIZE,
                "pp_blocking OSU counts, median",
                osu_med,
                "pingpong_lab sweep median",
                ours,
                us,
                "within 10 %",
                tolerance=0.10,
            )
        else:
            self.not_measured("osu-method", "C vs OSU counts", f"{PP_BLOCKING} not built")
        near = min(self.py_sizes, key=lambda s: abs(s - OSU_SIZE))
        m4b = _median(r["py"][near]["bench_mean_s"] for r in rounds)
        c_mean = _median(self._series("mpiexec_c", OSU_SIZE, "t_mean_s"))
        self.row(
            "osu-method",
            "C sweep mean vs mpi4py.bench mean",
            OSU_SIZE,
            "mpi4py.bench pingpong",
            m4b if near == OSU_SIZE else math.nan,
            "pingpong_lab C sweep",
            c_mean,
            us,
            note="for reference, no target",
        )
        # Python kernel vs mpi4py.bench
        for n in self.py_sizes:
            pairs = [(r["py"][n]["bench_mean_s"], r["py"][n]["ours_mean_s"]) for r in rounds]
            a, b = _median(p[0] for p in pairs), _median(p[1] for p in pairs)
            it = rounds[0]["py"][n]["iters"]
            self.row(
                "mpi4py.bench",
                "Python blocking one-way mean",
                n,
                "mpi4py.bench pingpong",
                a,
                "pingpong_lab Python kernel",
                b,
                us,
                "within 10 %",
                tolerance=0.10,
                note=f"{it} iterations each, same job, interleaved",
                paired=pairs,
            )
        for n in self.py_sizes:
            pairs = [
                (r["py"][n]["bench_written_mean_s"], r["py"][n]["ours_mean_s"]) for r in rounds
            ]
            a, b = _median(p[0] for p in pairs), _median(p[1] for p in pairs)
            self.row(
                "mpi4py.bench",
                "vs mpi4py.bench on written buffers",
                n,
                "mpi4py.bench pingpong, buffers written",
                a,
                "pingpong_lab Python kernel",
                b,
                us,
                "within 10 %",
                tolerance=0.10,
                note="the fair peer: its own code, no zero-page send buffer",
                paired=pairs,
            )
        # Python overhead (for the record)
        n8 = min(self.py_sizes, key=lambda s: abs(s - 8))
        py8 = _median(r["py"][n8]["ours_median_s"] for r in rounds)
        c8 = _median(self._series("mpiexec_c", 8, "t_median_s"))
        self.row(
            "overhead",
            "Python/C small-message latency",
            None,
            "C 8 B",
            c8,
            f"Python {n8} B",
            py8,
            us,
            note="medians, mpiexec",
        )
        # hardware floor
        if have_floor:
            floor = _median(r["floor"]["latency_s"] for r in rounds)
            pinned = rounds[0]["floor"].get("pinned", 0)
            self.row(
                "hw-floor",
                "latency: MPI / cache-line ping-pong",
                8,
                "hw_floor one-way (no MPI)",
                floor,
                "MPI C one-way median",
                c8,
                us,
                note="pinned to 2 cores" if pinned else "one core: not pinned",
            )
            for n in LAUNCH_SIZES[1:]:
                bw_mem = _median(r["floor"]["memcpy"].get(n) for r in rounds)
                t = _median(self._series("mpiexec_c", n, "t_median_s"))
                self.row(
                    "hw-floor",
                    "bandwidth: MPI / memcpy",
                    n,
                    "memcpy single core",
                    bw_mem,
                    "MPI C one-way",
                    n / t if t else math.nan,
                    "B/s",
                    note="best-of-10 memcpy",
                )
        else:
            self.not_measured(
                "hw-floor", "MPI / hardware floor", f"{HW_FLOOR} not built (make kernels)"
            )
        self._netpipe_rows()
        # course costs
        self.row(
            "course-cost",
            "engine start (ipyparallel, mpi)",
            None,
            "",
            math.nan,
            f"{self.np} engines",
            self.raw["cluster_start_s"],
            "s",
            ratio_definition="",
            note="one start",
        )
        lo, hi = self.raw["full_sweep_range"]
        self.row(
            "course-cost",
            f"sweep {lo} B..{hi} B, C, default precision",
            None,
            "",
            math.nan,
            f"{self.np} ranks",
            self.raw["full_sweep_s"],
            "s",
            ratio_definition="",
            note=self._sweep_note(),
        )
        self._course_costs()

    def _netpipe_rows(self):
        rec = self.raw.get("netpipe", {})
        labels = {
            "mpi": ("C kernel vs NetPIPE, same MPI", "NPmpich2", "our C kernel, same MPI"),
            "tcp": ("C kernel over TCP vs NetPIPE TCP", "NPtcp (no MPI)", "our C kernel, MPI TCP"),
        }
        for kind, (metric, a_label, b_label) in labels.items():
            got = rec.get(kind, {"missing": "not run"})
            if "missing" in got:
                self.not_measured("netpipe", metric, got["missing"])
                continue
            version = got.get("mpi_version", "")
            for n in LAUNCH_SIZES:
                if n > rec["max_bytes"]:
                    continue
                a = got["netpipe"].get(n, math.nan)
                b = got["ours"].get(n, {}).get("avg_s", math.nan)
                which = f"Debian MPICH {version}" if kind == "mpi" else "pip MPICH over TCP"
                self.row(
                    "netpipe",
                    metric,
                    n,
                    a_label,
                    a,
                    b_label,
                    b,
                    "s",
                    note=f"{which}; NetPIPE: best of its trials, ours: mean",
                )
            if kind == "mpi":  # what the MPI build alone changes, same C kernel
                for n in LAUNCH_SIZES:
                    pip = _median(self._series("mpiexec_c", n, "t_mean_s"))
                    deb = got["ours"].get(n, {}).get("avg_s", math.nan)
                    if n <= rec["max_bytes"]:
                        self.row(
                            "netpipe",
                            "same C kernel: pip MPICH vs Debian MPICH",
                            n,
                            f"Debian MPICH {version}",
                            deb,
                            "pip wheel MPICH",
                            pip,
                            "s",
                            note="one-way means; the MPI build, not the kernel, differs",
                        )

    def _course_costs(self):
        """Grading one submission and executing every notebook (grading mode): real nbgrader."""
        if self.quick:
            why = "skipped with --quick (it runs nbgrader on every notebook: minutes)"
            self.not_measured("course-cost", "autograde time of one submission", why)
            self.not_measured("course-cost", "notebook execution time, grading mode", why)
            return
        from ..course import build

        course = KERNELS_DIR.parent / "course"
        _log("autograding the solutions as one submission (real nbgrader)")
        graded = build.time_grading(course)
        self.raw["autograde"] = graded
        self.row(
            "course-cost",
            f"autograde one submission ({graded['notebooks']} notebooks)",
            None,
            "",
            math.nan,
            f"score {graded['score']:g}/{graded['max_score']:g}",
            graded["autograde_s"],
            "s",
            ratio_definition="",
            note="nbgrader autograde, grading mode; target under 300 s",
        )
        _log("executing every solution notebook in grading mode")
        times = build.time_notebooks(course)
        self.raw["notebook_s"] = times
        for name, seconds in times.items():
            self.row(
                "course-cost",
                f"execute {name}, grading mode",
                None,
                "",
                math.nan,
                "nbconvert --execute",
                seconds,
                "s",
                ratio_definition="",
                note="",
            )
        self.row(
            "course-cost",
            "execute all notebooks, grading mode",
            None,
            "",
            math.nan,
            f"{len(times)} notebooks",
            sum(times.values()),
            "s",
            ratio_definition="",
            note="",
        )

    # -- output ----------------------------------------------------------------------------------
    def write(self) -> dict:
        self.out.mkdir(parents=True, exist_ok=True)
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        for r in self.rows:
            w.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()})
        (self.out / "bench.csv").write_text(buf.getvalue())
        md = markdown_table(self.rows, self.machine())
        (self.out / "bench.md").write_text(md)
        info = {
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "machine": self.machine(),
            "ranks": self.np,
            "rounds": self.rounds,
            "quick": self.quick,
            "mpi": self.provenance,
            "raw": jsonable(self.raw),
        }
        (self.out / "bench.json").write_text(json.dumps(info, indent=1, default=str))
        return info

    def machine(self) -> str:
        """One line: CPU model, usable cores, OS, Python and the MPI the jobs ran on."""
        m = environment.machine()
        mpi = self.provenance.get("mpi_vendor") or m.get("mpi_vendor", "?")
        return (
            f"{m['cpu']}, {m['cores_usable']} cores usable, {m['os']}, "
            f"Python {m['python']}, MPI {mpi}"
        )


def _fmt(v, unit) -> str:
    """A table cell: a time, a bandwidth or a plain number; '-' when not measured."""
    if unit == "s":
        return format_time(v, missing="-")
    if unit == "B/s":
        return format_bandwidth(v, missing="-")
    return format_number(v, ".3g", missing="-")


def _cells(r) -> tuple[str, str, str, str]:
    """A row's size, A value, B value and B / A as table cells."""
    return (
        format_bytes(r["nbytes"], missing=""),
        _fmt(r["a_value"], r["unit"]),
        _fmt(r["b_value"], r["unit"]),
        format_number(r["ratio"], ".3f", missing="-"),
    )


def markdown_table(rows, machine: str = "") -> str:
    lines = ["# pingpong_lab bench: ratios measured in one run", ""]
    if machine:
        lines += [f"Machine: {machine}", ""]
    lines += [
        "| group | metric | size | A | B | B / A | target | ok | note |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        size, a, b, ratio = _cells(r)
        a = f"{r['a_label']}: {a}" if r["a_label"] else ""
        b = f"{r['b_label']}: {b}" if r["b_label"] else ""
        lines.append(
            f"| {r['group']} | {r['metric']} | {size} | {a} | {b} | {ratio} "
            f"| {r['target']} | {r['within_target']} | {r['note']} |"
        )
    return "\n".join(lines) + "\n"


def print_table(rows) -> None:
    print()
    print(f"{'group':<13} {'metric':<46} {'size':>8} {'A':>11} {'B':>11} {'B/A':>8}  ok")
    for r in rows:
        size, a, b, ratio = _cells(r)
        print(
            f"{r['group']:<13} {r['metric'][:46]:<46} {size:>8} {a:>11} {b:>11} "
            f"{ratio:>8}  {r['within_target'] or ''}"
            + (f"  ({r['note']})" if r["note"].startswith("not measured") else "")
        )
    print()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pingpong-lab bench", description=__doc__.split("\n")[0])
    p.add_argument("--np", type=int, default=2, help="MPI ranks (default 2)")
    p.add_argument("--out", default="bench-results", help="output folder")
    p.add_argument("--rounds", type=int, help="interleaved rounds (default 7, quick 2)")
    p.add_argument("--quick", action="store_true", help="tiny sizes and counts (for tests)")
    return p


def main(argv=None) -> int:
    a = parser().parse_args(argv)
    if a.np < 2:
        print("bench: error: --np must be at least 2", file=sys.stderr)
        return 2
    rounds = a.rounds or (2 if a.quick else 7)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if not (DEFAULT_LIBRARY.exists() and PP_BLOCKING.exists() and HW_FLOOR.exists()):
        _log("building kernels_c (make)")
        subprocess.run(
            [
                "make",
                "--no-print-directory",
                "-C",
                str(KERNELS_DIR),
                f"MPICC={environment.mpicc()}",
            ],
            check=False,
            capture_output=True,
        )
    bench = Bench(a.np, out, rounds, a.quick)
    try:
        bench.run()
    except KeyboardInterrupt:
        print("bench: interrupted; engines and MPI jobs were stopped", file=sys.stderr)
        return 130
    except Exception as exc:  # one line, not a traceback
        print(f"bench: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    bench.write()
    print_table(bench.rows)
    _log(f"wrote {out}/bench.csv, bench.md, bench.json (total {bench.raw['total_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
