"""`python -m pingpong_lab.report --quick` and `python -m pingpong_lab.bench --quick`.

Well-formed output only (files, columns, numbers in the summary, finite ratios): no speed
assertions, since the machine is shared and noisy. Both run as subprocesses with a marker in
their environment, so that any process they leave behind (engines, mpiexec) is found.
"""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from ..conftest import requires_mpi

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [requires_mpi, pytest.mark.mpi]


def _marked(mark: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("PINGPONG_TEST_MARK") == mark:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def _run(command: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    mark = uuid.uuid4().hex
    env = {**os.environ, "PINGPONG_TEST_MARK": mark, "MPLBACKEND": "Agg"}
    proc = subprocess.run(
        [sys.executable, "-m", "pingpong_lab", command, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    deadline = time.monotonic() + 10
    left = _marked(mark)
    while left and time.monotonic() < deadline:
        time.sleep(0.3)
        left = _marked(mark)
    for p in left:  # clean up before failing, so that one failure does not leak into others
        try:
            p.kill()
        except psutil.Error:
            pass
    assert not left, f"{command} left processes behind: {[p.cmdline() for p in left]}"
    assert proc.returncode == 0, f"{command} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory, c_library):
    out = tmp_path_factory.mktemp("report")
    proc = _run("report", "--quick", "--out", str(out))
    return out, proc


def test_report_quick_writes_every_file(quick_report):
    out, proc = quick_report
    assert "[report" in proc.stdout  # progress lines
    for name in ("summary.md", "summary.html", "summary.json"):
        assert (out / name).stat().st_size > 0
    data = out / "data"
    for role in (
        "c_blocking",
        "c_nonblocking",
        "python_blocking",
        "python_nonblocking",
        "variability",
        "c_blocking_tcp",
        "contention_2",
        "contention_4",
    ):
        assert (data / f"{role}.csv").exists(), role
        assert (data / f"{role}.csv.json").exists(), role
        assert (data / f"{role}.samples.npz").exists(), role
    figs = sorted(p.name for p in (out / "figures").glob("*.png"))
    for name in (
        "latency_c_blocking.png",
        "bandwidth_c_blocking.png",
        "compare_kernels.png",
        "shm_vs_tcp_latency.png",
        "variability.png",
        "contention_small.png",
        "model_c_blocking.png",
    ):
        assert name in figs
        assert (out / "figures" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_csv_columns_and_provenance(quick_report):
    out, _ = quick_report
    with open(out / "data" / "c_blocking.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows
    for col in ("nbytes", "reps", "t_median_s", "t_min_s", "ci_lo_s", "ci_hi_s", "bandwidth_Bps"):
        assert col in rows[0]
    assert all(float(r["t_median_s"]) > 0 for r in rows)
    tcp = json.loads((out / "data" / "c_blocking_tcp.csv.json").read_text())
    assert tcp["transport_env"].get("MPIR_CVAR_NOLOCAL") == "1"
    assert tcp["transport"] == "tcp"
    # the main sweeps are measured in interleaved rounds, every round kept in the samples
    info = json.loads((out / "data" / "c_blocking.csv.json").read_text())
    assert info["interleaved"] is True and info["rounds"] == 3
    assert all(int(r["rounds"]) == 3 and int(r["reps"]) % 3 == 0 for r in rows)


def test_report_summary_contains_the_numbers(quick_report):
    out, _ = quick_report
    summary = json.loads((out / "summary.json").read_text())
    n = summary["numbers"]
    # latency and bandwidth are always in the headline, with the way they were read
    from pingpong_lab.analysis import headline

    assert n["headline_method"] in headline.METHODS and n["alpha_s"] > 0
    assert n["headline_times"].startswith("median of 3 interleaved rounds")
    assert n["rounds"]["rounds"] == 3 and len(n["rounds"]["latency_s"]) == 3
    for key in (
        "bandwidth_Bps",
        "n_half_bytes",
        "r2",
        "breakpoint_bytes",
        "python_over_c_latency",
        "tcp_over_shm_latency",
        "contention_slowdown_small",
        "nonblocking_over_blocking_c_latency",
    ):
        assert key in n, key
    for key in ("python_over_c_latency", "tcp_over_shm_latency", "contention_slowdown_small"):
        assert math.isfinite(n[key]) and n[key] > 0, key
    assert isinstance(n["tcp_verified"], bool)
    md = (out / "summary.md").read_text()
    html = (out / "summary.html").read_text()
    from pingpong_lab.analysis.formatting import format_ratio, format_time

    for text in (md, html):
        assert format_time(n["alpha_s"]) in text and n["headline_label"] in text
        assert "latency per round" in text and "in 3 rounds (spread " in text
        assert format_ratio(n["python_over_c_latency"]) in text
        assert format_ratio(n["tcp_over_shm_latency"]) in text
        assert format_ratio(n["contention_slowdown_small"]) in text
        assert "n_1/2" in text and "breakpoint" in text
    assert "figures/latency_c_blocking.png" in md and "<img src='figures/" in html


def test_report_from_reanalyses_without_measuring(quick_report, tmp_path):
    out, _ = quick_report
    proc = _run("report", "--from", str(out / "data"), "--out", str(tmp_path))
    assert "re-analysing" in proc.stdout
    again = json.loads((tmp_path / "summary.json").read_text())["numbers"]
    first = json.loads((out / "summary.json").read_text())["numbers"]
    # the same numbers, and the same ones left out (an implausible fit on a busy machine)
    assert again.keys() == first.keys()
    for key, value in first.items():
        if isinstance(value, float):
            assert again[key] == pytest.approx(value, nan_ok=True), key
    assert (tmp_path / "summary.html").exists() and (tmp_path / "figures").is_dir()


def test_report_from_classifies_renamed_files_by_provenance(quick_report, tmp_path):
    out, _ = quick_report
    for role, new in (("c_blocking", "job123_rank2.csv"), ("c_blocking_tcp", "tcp_run.csv")):
        for suffix in (".csv", ".csv.json", ".samples.npz"):
            src = out / "data" / f"{role}{suffix}"
            dst = tmp_path / (Path(new).stem + suffix)
            dst.write_bytes(src.read_bytes())
    from pingpong_lab.apps import report

    found = report.discover(tmp_path)
    assert found["c_blocking"].path.name == "job123_rank2.csv"
    assert found["c_blocking_tcp"].path.name == "tcp_run.csv"


def test_report_from_missing_folder_is_one_line_error(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "pingpong_lab", "report", "--from", str(tmp_path / "nope")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "no such folder" in proc.stderr


@pytest.mark.engines
def test_bench_quick_table_and_ratios(tmp_path, c_library):
    proc = _run("bench", "--quick", "--out", str(tmp_path), timeout=150)
    with open(tmp_path / "bench.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    from pingpong_lab.apps import bench

    assert rows and list(rows[0]) == list(bench.COLUMNS)
    groups = {r["group"] for r in rows}
    expected = {"launcher", "osu-method", "mpi4py.bench", "hw-floor", "mpi-build", "course-cost"}
    assert expected <= groups
    for r in (r for r in rows if r["group"] == "mpi-build"):  # measured, or says why not
        assert r["note"].startswith("not measured") or float(r["ratio"]) > 0, r
    launcher = [r for r in rows if r["group"] == "launcher"]
    assert sorted(int(r["nbytes"]) for r in launcher) == sorted(bench.LAUNCH_SIZES)
    for r in rows:
        if r["group"] in ("launcher", "mpi4py.bench", "hw-floor"):
            assert math.isfinite(float(r["ratio"])) and float(r["ratio"]) > 0, r
            assert r["within_target"] in ("yes", "no", ""), r
    costs = {r["metric"]: r for r in rows if r["group"] == "course-cost"}
    assert float(costs["engine start (ipyparallel, mpi)"]["b_value"]) > 0
    assert any(r["note"].startswith("not measured") for r in costs.values()) or len(costs) >= 4
    md = (tmp_path / "bench.md").read_text()
    assert md.count("\n| launcher |") == len(launcher)
    info = json.loads((tmp_path / "bench.json").read_text())
    assert info["machine"] and info["mpi"]["mpi_vendor"]
    assert "launcher" in proc.stdout  # the printed table


def test_a_missing_debian_mpich_is_named():
    from pingpong_lab.apps.bench import oneoffs

    why = oneoffs.debian_mpich_missing()
    assert why == "" or ("not installed" in why and "libmpich-dev" in why)


def test_hw_floor_output_parses(c_library):
    from pingpong_lab.apps import bench

    assert bench.HW_FLOOR.exists(), "make -C kernels_c builds build/hw_floor"
    out = subprocess.run(
        [str(bench.HW_FLOOR), "-i", "1000", "-r", "3", "-m", "8:4096", "-t", "0.001"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    parsed = bench.parse_hw_floor(out.stdout)
    assert parsed["latency_s"] > 0
    assert sorted(parsed["memcpy"]) == [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
    assert all(v > 0 for v in parsed["memcpy"].values())
    bad = subprocess.run([str(bench.HW_FLOOR), "-x"], capture_output=True, text=True, timeout=10)
    assert bad.returncode == 2 and "usage" in bad.stderr
