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
import datetime as _dt
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

from ...data import results
from ...data.jsonable import jsonable
from ...data.schema import COL
from ...mpi import environment, jobs
from ...mpi.ckernels import DEFAULT_LIBRARY, KERNELS_BUILD, KERNELS_DIR
from ...mpi.processes import run_group
from ...progress import bar, echo
from .. import netpipe
from ..hardware import HW_FLOOR, parse_hw_floor
from . import peers
from .peers import (
    FULL_SWEEP,
    JOB_TIMEOUT_S,
    KIB,
    LAUNCH_REPS,
    LAUNCH_SIZES,
    OSU_SIZE,
    PP_BLOCKING,
    PY_SIZES,
    QUICK_LAUNCH_REPS,
    QUICK_PY_SIZES,
    QUICK_SWEEP,
    c_fixed_sizes,
    parse_pp_table,
)
from .ratios import add_ratios
from .table import COLUMNS, Table, markdown_table, print_table

__all__ = ["COLUMNS", "HW_FLOOR", "LAUNCH_SIZES", "Bench", "c_fixed_sizes", "main"]
__all__ += ["markdown_table", "parse_hw_floor", "parse_pp_table", "print_table"]


def _log(message: str) -> None:
    echo(f"[bench {time.strftime('%H:%M:%S')}] {message}")


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
        _run(jobs.command(peers.round_job, spec, np_), timeout=timeout)
        data = json.loads(Path(spec["out"]).read_text())
    for key in ("c", "py"):  # JSON keys are strings
        data[key] = {int(k): v for k, v in (data[key] or {}).items()}
    return data


# -- the benchmark -----------------------------------------------------------------------------
class Bench:
    def __init__(self, np_: int, out: Path, rounds: int, quick: bool, class_size: int = 30):
        self.np = np_
        self.out = out
        self.rounds = rounds
        self.quick = quick
        self.launch_reps = QUICK_LAUNCH_REPS if quick else LAUNCH_REPS
        self.py_sizes = QUICK_PY_SIZES if quick else PY_SIZES
        self.table = Table(rounds)
        self.class_size = class_size
        self.raw: dict = {"rounds": []}
        self.provenance: dict = {}

    def run(self):
        from ...engines.cluster import MPICluster, OversubscribedWarning

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
                for r in bar(range(self.rounds), "bench", unit="round"):
                    self.raw["rounds"].append(self._round(r, cluster, spec, have_pp, have_floor))
            finally:
                t0 = time.perf_counter()
                cluster.stop()
                self.raw["cluster_stop_s"] = time.perf_counter() - t0
        self._netpipe()
        self._full_sweep()
        add_ratios(
            self.table,
            self.raw,
            np_=self.np,
            launch_reps=self.launch_reps,
            py_sizes=self.py_sizes,
            have_pp=have_pp,
            have_floor=have_floor,
            sweep_note=self._sweep_note(),
        )
        self._course_costs()
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
        eng = cluster.run(peers.c_fixed_sizes, spec["c_sizes_reps"], timeout=JOB_TIMEOUT_S)[0]
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
        c8 = rec["mpiexec_c"][LAUNCH_SIZES[0]][COL.t_median_s]
        e8 = rec["engines_c"][LAUNCH_SIZES[0]][COL.t_median_s]
        _log(
            f"round {r + 1}/{self.rounds}: 8 B mpiexec {c8 * 1e6:.2f} us, engines {e8 * 1e6:.2f}"
            f" us ({time.perf_counter() - t0:.1f} s)"
        )
        return rec

    def _netpipe(self):
        """NetPIPE (Debian's builds) as peers, once: MPI vs our C kernel on the same MPI, TCP
        vs our C kernel over TCP. Missing tools leave a reason instead of numbers."""
        from ...mpi.settings import TRANSPORTS

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

    def _course_costs(self):
        """Grading one submission and executing every notebook (grading mode): real nbgrader."""
        if self.quick:
            why = "skipped with --quick (it runs nbgrader on every notebook: minutes)"
            self.table.not_measured("course-cost", "autograde time of one submission", why)
            self.table.not_measured("course-cost", "notebook execution time, grading mode", why)
            self.table.not_measured("class-grading", "submissions per minute", why)
            return
        from ...grader import build, classgrade

        course = KERNELS_DIR.parent / "course"
        _log("autograding the solutions as one submission (real nbgrader)")
        graded = build.time_grading(course)
        self.raw["autograde"] = graded
        self.table.row(
            "course-cost",
            f"autograde one submission ({graded['notebooks']} notebooks)",
            None,
            "",
            math.nan,
            f"score {graded['score']:g}/{graded['max_score']:g}",
            graded["autograde_s"],
            "s",
            ratio_definition="",
            note="make autograde JOBS=1: sandbox, grading mode, feedback; target 60 s",
        )
        _log("executing every solution notebook in grading mode")
        times = build.time_notebooks(course)
        self.raw["notebook_s"] = times
        for name, seconds in times.items():
            self.table.row(
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
        self.table.row(
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
        cores = classgrade.default_jobs()
        jobs = sorted({1, cores})
        _log(f"grading a class of {self.class_size} at JOBS={' and '.join(map(str, jobs))}")
        graded = build.time_class_grading(course, self.class_size, jobs)
        self.raw["class_grading"] = graded
        per_min = {n: 60 * graded["count"] / s for n, s in graded["seconds"].items()}
        self.table.row(
            "class-grading",
            f"submissions ({graded['notebook']}) per minute, JOBS={cores} vs 1",
            None,
            "JOBS=1",
            per_min[1],
            f"JOBS={cores}",
            per_min[cores],
            "1/min",
            note=f"{graded['count']} submissions; all full marks: {graded['scores_ok']}; "
            f"processes left: {len(graded['survivors'])}",
        )

    # -- output ----------------------------------------------------------------------------------
    def write(self) -> dict:
        self.out.mkdir(parents=True, exist_ok=True)
        self.table.write_csv(self.out / "bench.csv")
        md = markdown_table(self.table.rows, self.machine())
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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pingpong-lab bench", description=__doc__.split("\n")[0])
    p.add_argument("--np", type=int, default=2, help="MPI ranks (default 2)")
    p.add_argument("--out", default="bench-results", help="output folder")
    p.add_argument("--rounds", type=int, help="interleaved rounds (default 7, quick 2)")
    p.add_argument("--quick", action="store_true", help="tiny sizes and counts (for tests)")
    p.add_argument(
        "--class-size", type=int, default=30, help="submissions graded as a class (default 30)"
    )
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
                f"BUILD={KERNELS_BUILD.name}",
            ],
            check=False,
            capture_output=True,
        )
    bench = Bench(a.np, out, rounds, a.quick, a.class_size)
    try:
        bench.run()
    except KeyboardInterrupt:
        print("bench: interrupted; engines and MPI jobs were stopped", file=sys.stderr)
        return 130
    except Exception as exc:  # one line, not a traceback
        print(f"bench: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    bench.write()
    print_table(bench.table.rows)
    _log(f"wrote {out}/bench.csv, bench.md, bench.json (total {bench.raw['total_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
