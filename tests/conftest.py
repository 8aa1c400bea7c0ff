"""Shared fixtures: built C kernels, MPI engine clusters, and a check that no process is left."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_started_pids: set[int] = set()


def _mpi_available() -> bool:
    try:
        from pingpong_lab.mpi import environment

        environment.mpiexec()
        environment.require_mpi4py()
        return True
    except Exception:
        return False


requires_mpi = pytest.mark.skipif(not _mpi_available(), reason="no MPI (mpiexec/mpi4py) here")


def interruptible() -> None:
    """preexec_fn for a command a test stops with SIGINT: Ctrl-C acts in it even when the test
    run itself was started in the background (a shell's `cmd &` ignores SIGINT, and a Python
    started with SIGINT ignored never raises KeyboardInterrupt)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope="session")
def c_library() -> Path:
    """kernels_c built with this environment's mpicc (as `make kernels` does)."""
    from pingpong_lab.mpi import ckernels, environment

    subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-C",
            str(ckernels.KERNELS_DIR),
            f"MPICC={environment.mpicc()}",
            f"BUILD={ckernels.KERNELS_BUILD.name}",
        ],
        check=True,
        capture_output=True,
    )
    return ckernels.DEFAULT_LIBRARY


def _cluster(n: int):
    import warnings

    from pingpong_lab.engines.cluster import MPICluster, OversubscribedWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OversubscribedWarning)
        cluster = MPICluster(n=n, timeout=60).start()
    _started_pids.update(cluster.pids)
    return cluster


@pytest.fixture(scope="session")
def cluster2(c_library):
    cluster = _cluster(2)
    yield cluster
    _started_pids.update(cluster.pids)
    cluster.stop()


@pytest.fixture(scope="session")
def cluster4(c_library):
    cluster = _cluster(4)
    yield cluster
    _started_pids.update(cluster.pids)
    cluster.stop()


def remember_pids(pids) -> None:
    """Tests that start their own clusters report their PIDs here for the final check."""
    _started_pids.update(pids)


def _leftovers() -> list[str]:
    me = os.getpid()
    mine = {p.pid for p in psutil.Process(me).children(recursive=True)}
    left = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE or proc.pid == me:
                continue
            cmd = " ".join(proc.info["cmdline"] or [])
        except psutil.Error:
            continue
        if proc.pid in _started_pids or (proc.pid in mine and "pingpong-lab-ipp-" in cmd):
            left.append(f"{proc.pid}: {cmd[:120]}")
    return left


def pytest_sessionfinish(session, exitstatus):
    """Fail the run if any engine, controller or mpiexec started by the tests is still alive."""
    import time

    from pingpong_lab.engines.cluster import stop_all_clusters

    stop_all_clusters()
    deadline = time.monotonic() + 15
    left = _leftovers()
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _leftovers()
    if left:
        print("\nprocesses left behind by the tests:\n  " + "\n  ".join(left), file=sys.stderr)
        session.exitstatus = 1


def pytest_collection_modifyitems(config, items):
    """Tests under tests/mpi and tests/course carry their tier as a marker (`-m "not course"`)."""
    for item in items:
        tier = Path(str(item.fspath)).parent.name
        if tier in ("mpi", "course"):
            item.add_marker(tier)
