"""`sweep --link`: MPI through an emulated 1 Gbit/s link gives back its rate; nothing is left."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest

from pingpong_lab.analysis import model
from pingpong_lab.errors import PingPongLabError
from pingpong_lab.mpi import link

from ..conftest import interruptible, requires_mpi

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not (shutil.which("ip") and shutil.which("tc")),
    reason="needs root and iproute2 (ip, tc) to build network namespaces (make link-tools)",
)
CLI = [sys.executable, "-m", "pingpong_lab", "sweep"]
LARGE = ["--min-bytes", str(1 << 20), "--max-bytes", str(16 << 20)]


def _ours(pid: int) -> list[str]:
    return [n for n in link.namespaces() if n.startswith(f"{link.PREFIX}{pid}-")]


@requires_mpi
def test_a_sweep_through_a_1gbit_link_fits_to_1gbit_and_leaves_no_namespace(c_library, tmp_path):
    """1/beta of the large messages is the link's rate within 10 %, not shared memory's."""
    out = tmp_path / "link.csv"
    proc = subprocess.Popen(
        [*CLI, "--link", "rate=1gbit", *LARGE, "--reps", "20", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr
    assert stdout.startswith("emulated link: tbf rate=1gbit")
    info = json.loads(out.with_name("link.csv.json").read_text())
    assert info["link"].startswith("tbf rate=1gbit burst=125000B latency=50ms mtu=9000")
    assert info["transport_env"]["UCX_NET_DEVICES"] == link.IFACE
    # Other work on the machine can only slow the link down: fit the best of the repetitions.
    nbytes, t = model.load_sweep_csv(out, "t_min_s")
    fit = model.fit_linear(nbytes, t)
    assert fit.bandwidth_Mbitps == pytest.approx(1000, rel=0.10), fit.as_dict()
    assert _ours(proc.pid) == []


@requires_mpi
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stopped_sweep_removes_its_namespaces_and_its_mpi_job(c_library, tmp_path, sig):
    out = tmp_path / "stopped.csv"
    proc = subprocess.Popen(
        [*CLI, "--link", "rate=100mbit", *LARGE, "--reps", "1000", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )
    try:
        assert proc.stdout.readline().startswith("emulated link:")
        deadline = time.monotonic() + 60
        while len(_job(out, proc.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)  # mpiexec and both ranks
        assert len(_ours(proc.pid)) == 3 and len(_job(out, proc.pid)) >= 3
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1 and "interrupted" in proc.stderr.read()
    assert _ours(proc.pid) == [] and _job(out, proc.pid) == []
    assert not out.exists()


def _job(out, cli_pid: int) -> list[psutil.Process]:
    """The MPI job's processes (mpiexec and ranks): their JSON spec names the output file."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(p.info["cmdline"] or ())
        if p.pid != cli_pid and "pingpong_lab.mpi.jobs" in cmdline and str(out) in cmdline:
            found.append(p)
    return found


def test_a_link_that_fails_halfway_removes_what_it_built(monkeypatch):
    real_run = link._run

    def tc_fails(cmd, check=True):
        if cmd[0] == "tc":
            raise link.LinkError("tc refused (simulated)")
        return real_run(cmd, check)

    monkeypatch.setattr(link, "_run", tc_fails)
    net = link.EmulatedLink(link.parse_link("rate=1gbit"), 2)
    with pytest.raises(link.LinkError, match="simulated"):
        with net:
            pass
    assert not set(net.names) & set(link.namespaces())


def test_an_error_inside_the_link_removes_it_and_restores_signal_handlers():
    before = signal.getsignal(signal.SIGTERM)
    net = link.EmulatedLink(link.parse_link("rate=1gbit"), 2)
    with pytest.raises(PingPongLabError, match="inside"):
        with net:
            assert set(net.names) <= set(link.namespaces())
            tc = subprocess.run(
                ["tc", "-n", net.rank_ns[0], "qdisc", "show", "dev", link.IFACE],
                capture_output=True,
                text=True,
                check=True,
            )
            assert "tbf" in tc.stdout and "rate 1Gbit" in tc.stdout
            raise PingPongLabError("an error inside")
    assert not set(net.names) & set(link.namespaces())
    assert signal.getsignal(signal.SIGTERM) is before


def test_namespaces_left_by_a_killed_run_are_removed_by_the_next():
    dead = subprocess.Popen(["true"])
    dead.wait()
    leftover = f"{link.PREFIX}{dead.pid}-r0"
    subprocess.run(["ip", "netns", "add", leftover], check=True)
    try:
        assert leftover in link.remove_stale()
        assert leftover not in link.namespaces()
    finally:
        subprocess.run(["ip", "netns", "delete", leftover], capture_output=True)
