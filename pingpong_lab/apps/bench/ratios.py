"""From the raw rounds to the table: each comparison as a row with its ratio and target."""

from __future__ import annotations

import math

from ...data.schema import COL
from ..hardware import HW_FLOOR
from .peers import LAUNCH_SIZES, OSU_SIZE, PP_BLOCKING
from .table import median


def series(raw, key, nbytes, field):
    """One quantity of one size over the rounds (rounds that lack it are left out)."""
    return [rec[key][nbytes][field] for rec in raw["rounds"] if nbytes in rec.get(key, {})]


def add_ratios(table, raw, *, np_, launch_reps, py_sizes, have_pp, have_floor, sweep_note):
    """Every row of the table from the raw rounds (the ratios, their targets, the course costs)."""
    rounds = raw["rounds"]
    us = "s"
    # launcher
    for n in LAUNCH_SIZES:
        a_rounds = series(raw, "mpiexec_c", n, COL.t_median_s)
        b_rounds = series(raw, "engines_c", n, COL.t_median_s)
        a, b = median(a_rounds), median(b_rounds)
        table.row(
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
            note=f"{launch_reps[n]} reps per round",
            paired=list(zip(a_rounds, b_rounds)),
        )
    # OSU methodology at 1 MiB
    ours = median(series(raw, "mpiexec_c", OSU_SIZE, COL.t_median_s))
    if have_pp:
        osu_avg = median(r["osu_method"][OSU_SIZE]["avg_s"] for r in rounds)
        osu_med = median(r["osu_method"][OSU_SIZE]["median_s"] for r in rounds)
        iters = rounds[0]["osu_method"][OSU_SIZE]["iters"]
        table.row(
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
        table.row(
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
        table.not_measured("osu-method", "C vs OSU counts", f"{PP_BLOCKING} not built")
    near = min(py_sizes, key=lambda s: abs(s - OSU_SIZE))
    m4b = median(r["py"][near]["bench_mean_s"] for r in rounds)
    c_mean = median(series(raw, "mpiexec_c", OSU_SIZE, COL.t_mean_s))
    table.row(
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
    for n in py_sizes:
        pairs = [(r["py"][n]["bench_mean_s"], r["py"][n]["ours_mean_s"]) for r in rounds]
        a, b = median(p[0] for p in pairs), median(p[1] for p in pairs)
        it = rounds[0]["py"][n]["iters"]
        table.row(
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
    for n in py_sizes:
        pairs = [(r["py"][n]["bench_written_mean_s"], r["py"][n]["ours_mean_s"]) for r in rounds]
        a, b = median(p[0] for p in pairs), median(p[1] for p in pairs)
        table.row(
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
    n8 = min(py_sizes, key=lambda s: abs(s - 8))
    py8 = median(r["py"][n8]["ours_median_s"] for r in rounds)
    c8 = median(series(raw, "mpiexec_c", 8, COL.t_median_s))
    table.row(
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
        floor = median(r["floor"]["latency_s"] for r in rounds)
        pinned = rounds[0]["floor"].get("pinned", 0)
        table.row(
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
            bw_mem = median(r["floor"]["memcpy"].get(n) for r in rounds)
            t = median(series(raw, "mpiexec_c", n, COL.t_median_s))
            table.row(
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
        table.not_measured(
            "hw-floor", "MPI / hardware floor", f"{HW_FLOOR} not built (make kernels)"
        )
    netpipe_rows(table, raw)
    # course costs
    table.row(
        "course-cost",
        "engine start (ipyparallel, mpi)",
        None,
        "",
        math.nan,
        f"{np_} engines",
        raw["cluster_start_s"],
        "s",
        ratio_definition="",
        note="one start",
    )
    lo, hi = raw["full_sweep_range"]
    table.row(
        "course-cost",
        f"sweep {lo} B..{hi} B, C, default precision",
        None,
        "",
        math.nan,
        f"{np_} ranks",
        raw["full_sweep_s"],
        "s",
        ratio_definition="",
        note=sweep_note,
    )


def netpipe_rows(table, raw):
    """NetPIPE vs our C kernel on the same MPI and over TCP; a reason where it did not run."""
    rec = raw.get("netpipe", {})
    labels = {
        "mpi": ("C kernel vs NetPIPE, same MPI", "NPmpich2", "our C kernel, same MPI"),
        "tcp": ("C kernel over TCP vs NetPIPE TCP", "NPtcp (no MPI)", "our C kernel, MPI TCP"),
    }
    for kind, (metric, a_label, b_label) in labels.items():
        got = rec.get(kind, {"missing": "not run"})
        if "missing" in got:
            table.not_measured("netpipe", metric, got["missing"])
            continue
        version = got.get("mpi_version", "")
        for n in LAUNCH_SIZES:
            if n > rec["max_bytes"]:
                continue
            a = got["netpipe"].get(n, math.nan)
            b = got["ours"].get(n, {}).get("avg_s", math.nan)
            which = f"Debian MPICH {version}" if kind == "mpi" else "pip MPICH over TCP"
            table.row(
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
                pip = median(series(raw, "mpiexec_c", n, COL.t_mean_s))
                deb = got["ours"].get(n, {}).get("avg_s", math.nan)
                if n <= rec["max_bytes"]:
                    table.row(
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
