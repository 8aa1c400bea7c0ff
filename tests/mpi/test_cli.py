"""`pingpong-lab sweep`: tidy results with provenance, and one-line errors for bad arguments."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from ..conftest import interruptible, requires_mpi

CLI = [sys.executable, "-m", "pingpong_lab", "sweep"]
REQUIRED = {"nbytes", "reps", "t_median_s", "t_min_s", "t_mean_s", "t_max_s"}


def _run(args, timeout=240):
    return subprocess.run(CLI + args, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(
    "args,expected",
    [
        (["--min-bytes", "-5"], "negative"),
        (["--max-bytes", "lots"], "not a whole number"),
        (["--np", "1"], "at least 2 ranks"),
        (["--np", "zero"], "not a whole number"),
        (["--np", "3", "--mode", "pairwise"], "even number"),
        (["--min-bytes", "64", "--max-bytes", "8"], "smaller than"),
        (["--kernel", "fortran"], "invalid choice"),
        (["--kernel", "c", "--mode", "pickle"], "only for --kernel python"),
        (["--out", "/no/such/folder/results.csv"], "does not exist"),
        (["--out", "/"], "is a directory"),
    ],
)
def test_bad_arguments_give_one_line_and_a_non_zero_exit_never_a_traceback(args, expected):
    proc = _run(args, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("pingpong-lab sweep: error:") and expected in lines[0]
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_an_unwritable_output_file_is_refused_before_any_measurement(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root can write anywhere")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    proc = _run(["--out", str(locked / "r.csv")], timeout=60)
    assert proc.returncode == 2 and "permission denied" in proc.stderr


@requires_mpi
@pytest.mark.parametrize("kernel,mode,np_", [("c", "blocking", 2), ("python", "pairwise", 4)])
def test_a_sweep_writes_one_row_per_size_with_provenance_and_raw_samples(
    c_library, tmp_path, kernel, mode, np_
):
    out = tmp_path / "results.csv"
    args = ["--np", str(np_), "--kernel", kernel, "--mode", mode, "--min-bytes", "1"]
    args += ["--max-bytes", "4096", "--reps", "40", "--out", str(out)]
    proc = _run(args)
    assert proc.returncode == 0, proc.stderr
    progress = [ln for ln in proc.stdout.splitlines() if ln.startswith("[")]
    assert len(progress) == 13  # one line per size, 1 B .. 4 KiB
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert REQUIRED <= set(rows[0])
    assert [int(r["nbytes"]) for r in rows] == [2**k for k in range(13)]
    for r in rows:
        assert int(r["reps"]) == 40
        assert 0 < float(r["t_min_s"]) <= float(r["t_median_s"]) <= float(r["t_max_s"])
    info = json.loads(out.with_name("results.csv.json").read_text())
    for key in (
        "mpi_library_version",
        "hosts",
        "placement",
        "timer_wtick_s",
        "date",
        "timer_resolution_measured_s",
        "sizes",
        "repetitions",
        "kernel",
        "mode",
    ):
        assert key in info, key
    assert info["kernel"] == kernel and info["ranks"] == np_
    assert sorted(p["rank"] for p in info["placement"]) == list(range(np_))
    raw = np.load(out.with_name("results.samples.npz"))
    assert raw["n4096"].shape == (np_, 40)


@requires_mpi
def test_the_tcp_transport_is_recorded_in_the_provenance(c_library, tmp_path):
    out = tmp_path / "tcp.csv"
    proc = _run(["--transport", "tcp", "--max-bytes", "64", "--reps", "30", "--out", str(out)])
    assert proc.returncode == 0, proc.stderr
    info = json.loads(out.with_name("tcp.csv.json").read_text())
    assert info["transport"] == "tcp"
    assert info["transport_env"]["MPIR_CVAR_NOLOCAL"] == "1"


@requires_mpi
def test_a_missing_c_library_is_a_one_line_error(tmp_path):
    proc = _run(["--library", str(tmp_path / "nope.so"), "--out", str(tmp_path / "r.csv")])
    assert proc.returncode == 1
    assert proc.stderr.strip().startswith("pingpong-lab sweep: error:")
    assert "make kernels" in proc.stderr and "Traceback" not in proc.stderr


@requires_mpi
def test_a_sweep_feeds_the_fit_command_end_to_end(c_library, tmp_path):
    out = tmp_path / "r.csv"
    args = ["--max-bytes", "1048576", "--min-bytes", "1024", "--reps", "30", "--out", str(out)]
    assert _run(args).returncode == 0
    fit = subprocess.run(
        [sys.executable, "-m", "pingpong_lab", "fit", str(out), "--json", "--piecewise"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert fit.returncode == 0, fit.stderr
    result = json.loads(fit.stdout)
    assert result["beta_s_per_byte"] > 0 and result["bandwidth_Bps"] > 1e6
    assert "breakpoint_bytes" in result and result["method"] == "weighted"


@requires_mpi
def test_a_sweep_in_interleaved_rounds_keeps_every_round_and_feeds_fit(c_library, tmp_path):
    out = tmp_path / "rounds.csv"
    args = ["--max-bytes", "4096", "--rounds", "3", "--reps", "10", "--out", str(out)]
    proc = _run(args)
    assert proc.returncode == 0, proc.stderr
    counted = [ln for ln in proc.stdout.splitlines() if ln.startswith("[")]
    assert [ln.split("]")[0] for ln in counted] == ["[ 1/3", "[ 2/3", "[ 3/3"]  # the rounds
    assert "measured in 3 interleaved rounds" in proc.stdout
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 13 and {(r["reps"], r["rounds"], r["stop_reason"]) for r in rows} == {
        ("30", "3", "fixed")
    }
    info = json.loads(out.with_name("rounds.csv.json").read_text())
    assert info["interleaved"] is True and info["rounds"] == 3
    assert np.load(out.with_name("rounds.samples.npz"))["n64"].shape == (2, 30)
    fit = subprocess.run(
        [sys.executable, "-m", "pingpong_lab", "fit", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert fit.returncode == 0, fit.stderr
    result = json.loads(fit.stdout)
    assert result["times"].startswith("median of 3 interleaved rounds")
    assert result["rounds"]["rounds"] == 3 and result["headline"]["alpha_s"] > 0


@requires_mpi
def test_a_sweep_past_its_timeout_is_stopped_with_one_line(c_library, tmp_path):
    args = ["--max-bytes", "67108864", "--budget", "5", "--timeout", "3"]
    proc = _run([*args, "--out", str(tmp_path / "r.csv")], timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "pingpong-lab sweep: error: the MPI job did not finish within 3 s and was stopped"
    )
    assert not (tmp_path / "r.csv").exists()


@requires_mpi
def test_a_closed_stdout_stops_the_echo_but_not_the_measurement(c_library, tmp_path):
    out = tmp_path / "r.csv"
    args = ["--max-bytes", "256", "--reps", "30", "--out", str(out)]
    cmd = " ".join([*CLI, *args]) + " | head -n 1"
    proc = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=240)
    assert proc.stdout.startswith("[ 1/9]")
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr
    with open(out) as f:
        assert len(list(csv.DictReader(f))) == 9


@requires_mpi
def test_ctrl_c_stops_the_mpi_job_and_says_so(c_library, tmp_path):
    import signal

    import psutil

    args = ["--max-bytes", "67108864", "--budget", "5", "--out", str(tmp_path / "r.csv")]
    proc = subprocess.Popen(
        CLI + args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )
    try:
        assert proc.stdout.readline().startswith("[ 1/")  # measuring
        job = psutil.Process(proc.pid).children(recursive=True)
        assert job, "the MPI job runs under the command"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    assert err.strip().splitlines()[-1] == (
        "pingpong-lab sweep: error: interrupted; the MPI job was stopped"
    )
    gone, alive = psutil.wait_procs(job, timeout=10)
    assert not alive, f"left behind: {alive}"
