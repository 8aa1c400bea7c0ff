"""A check's own MPI ranks (grading.fresh_ranks): what a check reads, what it leaves, and why a C
kernel loaded into the learner's engines no longer decides a check of the learner's Python."""

from __future__ import annotations

import json
import os

import pytest

from pingpong_lab.course import grading
from pingpong_lab.course.grading import engine_checks, fresh_ranks
from pingpong_lab.errors import DeadlockError
from pingpong_lab.mpi.ckernels import compile_c

from ..conftest import requires_mpi

pytestmark = [requires_mpi, pytest.mark.engines]


def no_echo(comm, sendbuf, recvbuf):
    """A ping-pong that sends nothing: rank 0's receive buffer stays as it was."""


def unfinished(comm, sendbuf, recvbuf):
    raise NotImplementedError()


def one_sided(comm, sendbuf, recvbuf):
    if comm.Get_rank() == 0:
        comm.Recv(recvbuf, source=1)  # nobody sends it


def echo(comm, sendbuf, recvbuf):
    rank = comm.Get_rank()
    if rank == 0:
        comm.Send(sendbuf, dest=1)
        comm.Recv(recvbuf, source=1)
    elif rank == 1:
        comm.Recv(recvbuf, source=0)
        comm.Send(recvbuf, dest=0)


def _job_processes() -> list[int]:
    """PIDs of this user's processes that run a fresh-ranks job."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"fresh_ranks_job" in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def test_a_correct_pingpong_passes_and_a_wrong_one_is_told_what_came_back():
    assert grading.check_pingpong_on_ranks(echo, sizes=(0, 1, 1 << 20), iters=2)
    with pytest.raises(AssertionError, match="recvbuf is still all zeros"):
        grading.check_pingpong_on_ranks(no_echo, sizes=(64,), iters=2)


def test_an_exception_on_a_rank_is_named_and_ends_the_job_at_once():
    with pytest.raises(AssertionError, match=r"NotImplementedError raised on rank [01] \(write"):
        grading.check_pingpong_on_ranks(unfinished, sizes=(8,))
    assert _job_processes() == []


def test_a_deadlock_names_its_size_and_leaves_no_process():
    with pytest.raises(DeadlockError, match="ping-pong of 4096 bytes did not finish within 4 s"):
        grading.check_pingpong_on_ranks(one_sided, sizes=(4096,), iters=1, timeout=4)
    assert _job_processes() == []


def test_only_marked_work_runs_on_fresh_ranks():
    with pytest.raises(ValueError, match="not marked"):
        fresh_ranks.on_fresh_ranks(print, [[1]])


# A C kernel whose constructor rewrites the course's Python in the process that loads it, as the
# issue's review did: every later echo "matches".
TAKE_OVER = r"""
#include <mpi.h>

extern int PyGILState_Ensure(void);
extern void PyGILState_Release(int);
extern int PyRun_SimpleString(const char *);

__attribute__((constructor)) static void take_over(void)
{
    int state = PyGILState_Ensure();
    PyRun_SimpleString("import pingpong_lab.mpi.payload as p\np.matches = lambda *a, **k: True\n");
    PyGILState_Release(state);
}

int pingpong_c(MPI_Comm comm, unsigned char *sendbuf, unsigned char *recvbuf, int nbytes)
{
    (void)comm; (void)sendbuf; (void)recvbuf; (void)nbytes;
    return 0;
}
"""


def test_a_c_kernel_that_rewrote_the_engines_does_not_decide_a_check_of_python(
    cluster2, tmp_path, monkeypatch
):
    monkeypatch.setenv("PINGPONG_LAB_BUILD", str(tmp_path / "build"))
    lib = compile_c(TAKE_OVER, name="take_over")
    engine_checks.c_pingpong_on_engines(cluster2, lib, 8, 1)  # the learner's own cell loads it
    # control: on the engines it was loaded into, a ping-pong that echoes nothing now "passes"
    report = grading.pingpong_on_engines_report(cluster2, no_echo, 64, iters=2)
    assert report["corrupt"] == 0
    # the check runs on ranks of its own, where nothing of the learner's C was loaded
    with pytest.raises(AssertionError, match="came back different"):
        grading.check_pingpong_on_ranks(no_echo, sizes=(64,), iters=2)


# The same constructor in a C check's own job, plus a forger: a thread of the learner's rank
# that keeps writing "every message intact" over every result file of the job. The verdict is
# the course's partner rank's signed report: neither the rewritten Python nor the files decide.
FORGE = """
import json, sys, threading, time, pathlib
import pingpong_lab.mpi.payload as p
p.matches = lambda *a, **k: True
out = pathlib.Path(json.loads(sys.argv[-1])["out_dir"])
def forge():
    for _ in range(4000):
        for f in out.glob("run*.rank*.json"):
            try:
                r = json.loads(f.read_text())
                r["report"].update(intact=r["report"]["iters"], detail=None, stopped=None)
                f.write_text(json.dumps(r))
            except Exception:
                pass
        time.sleep(0.002)
threading.Thread(target=forge, daemon=True).start()
"""
_REWRITE = 'PyRun_SimpleString("import pingpong_lab.mpi.payload as p\\np.matches = lambda'
FORGER = TAKE_OVER.replace(
    _REWRITE + ' *a, **k: True\\n");', f"PyRun_SimpleString({json.dumps(FORGE)});"
)


def test_a_c_kernel_in_its_own_checks_job_cannot_answer_for_the_course_rank(tmp_path, monkeypatch):
    monkeypatch.setenv("PINGPONG_LAB_BUILD", str(tmp_path / "build"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pingpong.c").write_text(FORGER)
    with pytest.raises(AssertionError) as info:
        grading.check_c_payload("pingpong.c", sizes=(64,), iters=2)
    message = str(info.value)
    assert "course's own rank" in message or "was changed after it was written" in message
