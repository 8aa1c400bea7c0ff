"""From the raw rounds to the table: each comparison as a row with its ratio and target.

`build_table(settings, raw, sweep_note)` walks `GROUPS`, one function per group of rows, in
the order the table lists them, then adds the course's costs.
"""

from __future__ import annotations

import math

from ...data.schema import COL
from ..hardware import HW_FLOOR
from .peers import LAUNCH_SIZES, OSU_SIZE, PP_BLOCKING
from .settings import Settings
from .table import Table, median


def series(raw, key, nbytes, field):
    """One quantity of one size over the rounds (rounds that lack it are left out)."""
    return [rec[key][nbytes][field] for rec in raw["rounds"] if nbytes in rec.get(key, {})]


def _mpiexec_c(raw, nbytes, field=COL.t_median_s) -> float:
    """The median over rounds of the C kernel under mpiexec at one size."""
    return median(series(raw, "mpiexec_c", nbytes, field))


def launcher_rows(table: Table, s: Settings, raw: dict) -> None:
    """The same C kernel under plain mpiexec and on ipyparallel engines."""
    for n in LAUNCH_SIZES:
        a_rounds = series(raw, "mpiexec_c", n, COL.t_median_s)
        b_rounds = series(raw, "engines_c", n, COL.t_median_s)
        table.row(
            "launcher",
            "C blocking one-way median",
            n,
            "mpiexec",
            median(a_rounds),
            "ipyparallel engines",
            median(b_rounds),
            "s",
            "within 5 %",
            tolerance=0.05,
            note=f"{s.launch_reps[n]} reps per round",
            paired=list(zip(a_rounds, b_rounds)),
        )


def osu_rows(table: Table, s: Settings, raw: dict) -> None:
    """Our sweep's median at 1 MiB vs the same C kernel run the OSU way (mean and median)."""
    rounds = raw["rounds"]
    if "osu_method" not in rounds[0]:
        table.not_measured("osu-method", "C vs OSU counts", f"{PP_BLOCKING} not built")
        return
    iters = rounds[0]["osu_method"][OSU_SIZE]["iters"]
    notes = {"mean": f"OSU counts: {iters} iterations; real OSU not packaged here", "median": ""}
    for statistic, key in (("mean", "avg_s"), ("median", "median_s")):
        table.row(
            "osu-method",
            f"C one-way: our sweep median vs OSU-style {statistic}",
            OSU_SIZE,
            f"pp_blocking OSU counts, {statistic}",
            median(r["osu_method"][OSU_SIZE][key] for r in rounds),
            "pingpong_lab sweep median",
            _mpiexec_c(raw, OSU_SIZE),
            "s",
            "within 10 %",
            tolerance=0.10,
            note=notes[statistic],
        )


def osu_reference_row(table: Table, s: Settings, raw: dict) -> None:
    """Our C sweep's mean vs mpi4py.bench's at 1 MiB (for reference)."""
    near = min(s.py_sizes, key=lambda n: abs(n - OSU_SIZE))
    m4b = median(r["py"][near]["bench_mean_s"] for r in raw["rounds"])
    table.row(
        "osu-method",
        "C sweep mean vs mpi4py.bench mean",
        OSU_SIZE,
        "mpi4py.bench pingpong",
        m4b if near == OSU_SIZE else math.nan,
        "pingpong_lab C sweep",
        _mpiexec_c(raw, OSU_SIZE, COL.t_mean_s),
        "s",
        note="for reference, no target",
    )


def _python_vs_bench(table: Table, s: Settings, raw: dict, bench_key: str, labels: tuple):
    """Our Python kernel vs one mpi4py.bench variant, size by size, paired per round."""
    metric, a_label, note = labels
    rounds = raw["rounds"]
    for n in s.py_sizes:
        pairs = [(r["py"][n][bench_key], r["py"][n]["ours_mean_s"]) for r in rounds]
        table.row(
            "mpi4py.bench",
            metric,
            n,
            a_label,
            median(p[0] for p in pairs),
            "pingpong_lab Python kernel",
            median(p[1] for p in pairs),
            "s",
            "within 10 %",
            tolerance=0.10,
            note=note.format(iters=rounds[0]["py"][n]["iters"]),
            paired=pairs,
        )


def mpi4py_bench_rows(table: Table, s: Settings, raw: dict) -> None:
    """mpi4py.bench as shipped, then on written buffers (the fair peer)."""
    shipped = ("Python blocking one-way mean", "mpi4py.bench pingpong")
    shipped += ("{iters} iterations each, same job, interleaved",)
    written = ("vs mpi4py.bench on written buffers", "mpi4py.bench pingpong, buffers written")
    written += ("the fair peer: its own code, no zero-page send buffer",)
    _python_vs_bench(table, s, raw, "bench_mean_s", shipped)
    _python_vs_bench(table, s, raw, "bench_written_mean_s", written)


def overhead_row(table: Table, s: Settings, raw: dict) -> None:
    """Python / C small-message latency (for the record)."""
    n8 = min(s.py_sizes, key=lambda n: abs(n - 8))
    table.row(
        "overhead",
        "Python/C small-message latency",
        None,
        "C 8 B",
        _mpiexec_c(raw, 8),
        f"Python {n8} B",
        median(r["py"][n8]["ours_median_s"] for r in raw["rounds"]),
        "s",
        note="medians, mpiexec",
    )


def floor_rows(table: Table, s: Settings, raw: dict) -> None:
    """MPI latency / cache-line ping-pong, MPI bandwidth / memcpy bandwidth."""
    rounds = raw["rounds"]
    if "floor" not in rounds[0]:
        why = f"{HW_FLOOR} not built (make kernels)"
        table.not_measured("hw-floor", "MPI / hardware floor", why)
        return
    pinned = rounds[0]["floor"].get("pinned", 0)
    table.row(
        "hw-floor",
        "latency: MPI / cache-line ping-pong",
        8,
        "hw_floor one-way (no MPI)",
        median(r["floor"]["latency_s"] for r in rounds),
        "MPI C one-way median",
        _mpiexec_c(raw, 8),
        "s",
        note="pinned to 2 cores" if pinned else "one core: not pinned",
    )
    for n in LAUNCH_SIZES[1:]:
        t = _mpiexec_c(raw, n)
        table.row(
            "hw-floor",
            "bandwidth: MPI / memcpy",
            n,
            "memcpy single core",
            median(r["floor"]["memcpy"].get(n) for r in rounds),
            "MPI C one-way",
            n / t if t else math.nan,
            "B/s",
            note="best-of-10 memcpy",
        )


MPI_BUILDS = "the same C kernel: PyPI wheel's MPICH vs Debian's MPICH"


def mpi_build_rows(table: Table, s: Settings, raw: dict) -> None:
    """pp_blocking's medians on two MPICH builds, same arguments, runs paired in order."""
    rec = raw.get("mpi_builds", {"missing": "not run"})
    if "missing" in rec:
        table.not_measured("mpi-build", MPI_BUILDS, rec["missing"])
        return
    for n in (n for n in LAUNCH_SIZES if n <= rec["max_bytes"]):
        pairs = [(d[n]["median_s"], p[n]["median_s"]) for d, p in zip(rec["debian"], rec["pypi"])]
        table.row(
            "mpi-build",
            MPI_BUILDS,
            n,
            f"Debian MPICH {rec.get('debian_version', '')}".strip(),
            median(a for a, _ in pairs),
            "PyPI wheel MPICH",
            median(b for _, b in pairs),
            "s",
            note=f"pp_blocking one-way medians, same arguments, {len(pairs)} runs each in turn",
            paired=pairs,
        )


def _cost_row(table: Table, group: str, metric: str, what: str, seconds: float, note="") -> None:
    """A cost of running the course: one measured value (no peer, no ratio)."""
    table.row(group, metric, None, "", math.nan, what, seconds, "s", ratio_definition="", note=note)


def course_cost_rows(table: Table, s: Settings, raw: dict, sweep_note: str) -> None:
    """Engine start and a full sweep; with a full run also nbgrader's costs."""
    _cost_row(
        table,
        "course-cost",
        "engine start (ipyparallel, mpi)",
        f"{s.np} engines",
        raw["cluster_start_s"],
        note="one start",
    )
    lo, hi = raw["full_sweep_range"]
    metric = f"sweep {lo} B..{hi} B, C, default precision"
    _cost_row(table, "course-cost", metric, f"{s.np} ranks", raw["full_sweep_s"], sweep_note)
    if s.quick:
        why = "skipped with --quick (it runs nbgrader on every notebook: minutes)"
        table.not_measured("course-cost", "autograde time of one submission", why)
        table.not_measured("course-cost", "notebook execution time, grading mode", why)
        table.not_measured("class-grading", "submissions per minute", why)
        return
    grading_rows(table, s, raw)


def grading_rows(table: Table, s: Settings, raw: dict) -> None:
    """Autograding one submission, executing each notebook, grading a class (JOBS=n vs 1)."""
    graded = raw["autograde"]
    _cost_row(
        table,
        "course-cost",
        f"autograde one submission ({graded['notebooks']} notebooks)",
        f"score {graded['score']:g}/{graded['max_score']:g}",
        graded["autograde_s"],
        "make autograde JOBS=1: sandbox, grading mode, feedback; target 60 s",
    )
    times = raw["notebook_s"]
    for name, seconds in times.items():
        _cost_row(
            table, "course-cost", f"execute {name}, grading mode", "nbconvert --execute", seconds
        )
    _cost_row(
        table,
        "course-cost",
        "execute all notebooks, grading mode",
        f"{len(times)} notebooks",
        sum(times.values()),
    )
    graded = raw["class_grading"]
    cores = max(graded["seconds"])  # graded at JOBS=1 and at JOBS=cores
    per_min = {n: 60 * graded["count"] / sec for n, sec in graded["seconds"].items()}
    table.row(
        "class-grading",
        f"submissions ({graded['notebook']}) per minute, JOBS={cores} vs 1",
        None,
        "JOBS=1",
        per_min[1],
        f"JOBS={cores}",
        per_min[cores],
        "1/min",
        note=f"{graded['count']} submissions; all full marks: {graded['scores_ok']}"
        + "".join(f"; {line}" for line in graded.get("short", [])[:3])
        + f"; processes left: {len(graded['survivors'])}",
    )


# every group of rows that reads only the raw rounds, in the order of the table
GROUPS = (
    launcher_rows,
    osu_rows,
    osu_reference_row,
    mpi4py_bench_rows,
    overhead_row,
    floor_rows,
    mpi_build_rows,
)


def build_table(s: Settings, raw: dict, sweep_note: str) -> Table:
    """Every row of the table from the raw measurements (ratios, targets, course costs)."""
    t = Table(s.rounds)
    for rows in GROUPS:
        rows(t, s, raw)
    course_cost_rows(t, s, raw, sweep_note)
    return t
