"""Deadlocks, crashes in learners' C, compile errors and ABI mismatches give clear errors."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pingpong_lab.engines.cluster import MPICluster, wait_gone
from pingpong_lab.errors import (
    ABIMismatchError,
    CompileError,
    DeadlockError,
    EngineCrashError,
    MPINotFoundError,
    RemoteError,
)
from pingpong_lab.mpi import ckernels

from ..conftest import remember_pids, requires_mpi

pytestmark = [requires_mpi, pytest.mark.engines]


def _both_send_8_mib_first():
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    peer = 1 - comm.Get_rank()
    buf = np.zeros(8 << 20, dtype=np.uint8)
    comm.Send(buf, dest=peer)  # too large to buffer: waits for a Recv that never comes
    comm.Recv(buf, source=peer)


def _rank():
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank()


def test_a_deadlock_times_out_with_a_clear_error_and_the_next_call_runs_on_fresh_engines(
    cluster2,
):
    old = cluster2.pids
    remember_pids(old)
    start = time.monotonic()
    with pytest.raises(DeadlockError) as info:
        cluster2.run(_both_send_8_mib_first, timeout=5)
    assert time.monotonic() - start < 60
    message = str(info.value)
    assert "deadlock" in message and "rank(s) [0, 1]" in message
    assert "blocking Send" in message and "restarted" in message
    assert wait_gone(old), "the deadlocked engines must be gone"
    assert cluster2.run(_rank, timeout=30) == [0, 1]
    remember_pids(cluster2.pids)


SEGFAULT_C = r"""
#include <mpi.h>
int crash(MPI_Comm comm) {
    int rank;
    MPI_Comm_rank(comm, &rank);
    if (rank == 1) {
        volatile int *nowhere = 0;
        *nowhere = 42;
    }
    return rank;
}
"""


def _call_learner_c(path, function):
    """On every engine: call `function(MPI_Comm)` from the learner's library at path."""
    from mpi4py import MPI

    from pingpong_lab.mpi import ckernels

    return ckernels.call_c(path, function, MPI.COMM_WORLD)


def test_a_segfault_in_learner_c_kills_engines_not_the_notebook_and_is_reported(
    cluster2, tmp_path, monkeypatch
):
    monkeypatch.setenv("PINGPONG_LAB_BUILD", str(tmp_path))
    lib = ckernels.compile_c(SEGFAULT_C, name="crashy", with_util=False)
    remember_pids(cluster2.pids)
    with pytest.raises(EngineCrashError) as info:
        cluster2.run(_call_learner_c, str(lib), "crash", timeout=30)
    assert "segfault" in str(info.value)
    assert cluster2.run(_rank, timeout=30) == [0, 1]
    remember_pids(cluster2.pids)


def test_a_compile_error_is_shown_with_the_learners_file_name_and_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PINGPONG_LAB_BUILD", str(tmp_path))
    with pytest.raises(CompileError) as info:
        ckernels.compile_c("int broken(void) { return 1 }\n", name="student")
    message = str(info.value)
    assert "student.c:1" in message and "error" in message
    assert str(tmp_path) not in message.splitlines()[1]


def test_compiled_libraries_are_named_by_their_source_so_an_edit_is_never_stale(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("PINGPONG_LAB_BUILD", str(tmp_path))
    one = ckernels.compile_c("int f(void) { return 1; }\n", with_util=False)
    two = ckernels.compile_c("int f(void) { return 2; }\n", with_util=False)
    assert one != two
    assert ctypes.CDLL(str(one)).f() == 1 and ctypes.CDLL(str(two)).f() == 2


def test_the_abi_preflight_refuses_a_library_built_against_another_mpi(tmp_path):
    from pingpong_lab.mpi import environment

    other = Path(environment.mpicc()).with_name("mpicc_abi")
    src = ckernels.KERNELS_DIR
    lib = tmp_path / "libother.so"
    if other.exists():  # MPICH's standard-ABI compiler: MPI_Comm is a pointer there
        cmd = [str(other), "-fPIC", "-shared", "-o", str(lib), f"-I{src}"]
        cmd += [str(src / f) for f in ("pp_util.c", "pp_build_info.c", "pp_blocking.c")]
    else:  # no second MPI here: a library stamped as if built with Open MPI
        stamp = 'const char info[] = "PP_BUILD_INFO:vendor=Open MPI;version=4.1.4;handle=pointer;";'
        (tmp_path / "other.c").write_text(stamp + "\n")
        cmd = ["cc", "-fPIC", "-shared", "-o", str(lib), str(tmp_path / "other.c")]
    subprocess.run(cmd, check=True, capture_output=True)
    with pytest.raises(ABIMismatchError) as info:
        ckernels.load(lib)
    message = str(info.value)
    assert "handles are pointers" in message and "handles are ints" in message
    assert "make kernels" in message
    assert str(lib.resolve()) not in ckernels._loaded


def test_the_abi_preflight_accepts_the_projects_own_library(c_library):
    ckernels.preflight(c_library)
    assert ckernels.build_info(c_library)["vendor"] == ckernels.runtime_info()["vendor"]


def test_a_missing_mpiexec_is_a_clear_error_within_seconds(monkeypatch, tmp_path):
    monkeypatch.setenv("MPIEXEC", str(tmp_path / "no-such-mpiexec"))
    start = time.monotonic()
    with pytest.raises(MPINotFoundError) as info:
        MPICluster(n=2).start()
    assert time.monotonic() - start < 30  # fails at once, long before the 90 s start deadline
    assert "MPIEXEC" in str(info.value)


def test_more_ranks_than_cores_works_with_an_oversubscription_warning():
    from pingpong_lab.engines.cluster import OversubscribedWarning
    from pingpong_lab.mpi import environment

    n = environment.cpu_count() + 1
    if n % 2:
        n += 1
    with pytest.warns(OversubscribedWarning, match="oversubscribed"):
        cluster = MPICluster(n=n, timeout=60)
        cluster.start()
    try:
        remember_pids(cluster.pids)
        assert cluster.run(_rank) == list(range(n))
    finally:
        pids = cluster.pids
        cluster.stop()
    assert wait_gone(pids)


def test_the_executables_print_an_osu_like_table_and_refuse_odd_pairwise(c_library):
    from pingpong_lab.mpi import environment

    build = c_library.parent
    out = subprocess.run(
        [
            environment.mpiexec(),
            "-n",
            "2",
            str(build / "pp_blocking"),
            "-m",
            "0:1024",
            "-i",
            "20",
            "-x",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    rows = [ln.split() for ln in out.splitlines() if not ln.startswith("#")]
    assert [int(r[0]) for r in rows] == [0] + [2**k for k in range(11)]
    assert all(float(r[2]) > 0 for r in rows)
    odd = subprocess.run(
        [environment.mpiexec(), "-n", "3", str(build / "pp_pairwise"), "-m", "8:8", "-i", "5"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert odd.returncode != 0
    assert "even number" not in odd.stdout
    assert "kernel error (code -2)" in odd.stderr


ODD_PAIRWISE = """
from mpi4py import MPI
from pingpong_lab.mpi import measure
from pingpong_lab.errors import KernelError
for kind in ("c", "python"):
    try:
        measure.run_kernel(kind, "pairwise", 64, 1, 3)
        print("no error", flush=True)
    except KernelError as exc:
        print(f"refused: {exc}", flush=True)
"""


def test_an_odd_rank_count_is_refused_by_pairwise_on_every_rank_never_a_hang(c_library):
    from pingpong_lab.mpi import environment

    if shutil.which(environment.mpiexec()) is None:
        pytest.skip("no mpiexec")
    proc = subprocess.run(
        [environment.mpiexec(), "-n", "3", sys.executable, "-c", ODD_PAIRWISE],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # three ranks print at once: lines may interleave, so count the verdicts
    assert proc.stdout.count("refused: ") == 6 and "no error" not in proc.stdout, proc.stdout
    assert proc.stdout.count("even number of ranks") == 6, proc.stdout


FORGETFUL_SCRIPT = """
import json, warnings
from pingpong_lab.engines.cluster import MPICluster
cluster = MPICluster(n=2, timeout=30).start()
print(json.dumps(sorted(cluster.pids)), flush=True)
# exits without cluster.stop(): the at-exit handler must clean up
"""


def test_a_script_that_forgets_to_stop_its_cluster_leaves_nothing_behind_at_exit():
    import json

    proc = subprocess.run(
        [sys.executable, "-c", FORGETFUL_SCRIPT], capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr
    pids = json.loads(proc.stdout.strip().splitlines()[-1])
    remember_pids(pids)
    assert len(pids) >= 4  # controller, mpiexec, proxy, 2 engines
    assert wait_gone(pids, timeout=20)


KILLED_SCRIPT = """
import json, os, signal
from pingpong_lab.engines.cluster import MPICluster
cluster = MPICluster(n=2, timeout=30).start()
print(json.dumps(sorted(cluster.pids)), flush=True)
{death}  # a notebook kernel killed or exiting at once: no at-exit handler runs
"""


@pytest.mark.parametrize(
    "death, status",
    [("os.kill(os.getpid(), signal.SIGKILL)", -9), ("os._exit(0)", 0)],
    ids=["SIGKILL", "os._exit"],
)
def test_a_killed_notebook_kernel_leaves_no_engines_behind(death, status):
    import json

    proc = subprocess.run(
        [sys.executable, "-c", KILLED_SCRIPT.format(death=death)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == status
    pids = json.loads(proc.stdout.strip().splitlines()[-1])
    remember_pids(pids)
    assert wait_gone(pids, timeout=30), "the watchdog must end the orphaned cluster"


TRUNCATING_C = r"""
#include <mpi.h>
int short_recv(MPI_Comm comm) {
    int rank;
    char buf[64] = {0};
    MPI_Comm_rank(comm, &rank);
    if (rank == 0) MPI_Send(buf, 64, MPI_BYTE, 1, 0, comm);
    if (rank == 1) MPI_Recv(buf, 16, MPI_BYTE, 0, 0, comm, MPI_STATUS_IGNORE);
    return 0;
}
"""


def test_an_mpi_error_that_learner_c_ignores_is_reported_with_mpis_own_words(
    cluster2, tmp_path, monkeypatch
):
    monkeypatch.setenv("PINGPONG_LAB_BUILD", str(tmp_path))
    lib = ckernels.compile_c(TRUNCATING_C, name="truncating", with_util=False)
    with pytest.raises(RemoteError) as info:
        cluster2.run(_call_learner_c, str(lib), "short_recv", timeout=30)
    message = str(info.value)
    assert "rank 1: KernelError" in message and "truncated" in message
    assert "short_recv()" in message
    assert cluster2.run(_rank, timeout=30) == [0, 1]  # the engines survive
