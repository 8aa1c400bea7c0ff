"""01's safe exchange, graded on real engines: every correct way passes at every size, the
head-to-head Send fails by its deadline above the eager limit, a wrong buffer fails at once."""

from __future__ import annotations

import pytest

from pingpong_lab.course import grading
from pingpong_lab.errors import DeadlockError

from ..conftest import remember_pids


def sendrecv(comm, sendbuf, recvbuf):
    rank = comm.Get_rank()
    if rank < 2:
        peer = 1 - rank
        comm.Sendrecv(sendbuf, dest=peer, recvbuf=recvbuf, source=peer)


def receive_first(comm, sendbuf, recvbuf):
    rank = comm.Get_rank()
    if rank < 2:
        request = comm.Irecv(recvbuf, source=1 - rank)
        comm.Send(sendbuf, dest=1 - rank)
        request.Wait()


def head_to_head(comm, sendbuf, recvbuf):
    rank = comm.Get_rank()
    if rank < 2:
        comm.Send(sendbuf, dest=1 - rank)
        comm.Recv(recvbuf, source=1 - rank)


def keeps_its_own(comm, sendbuf, recvbuf):
    rank = comm.Get_rank()
    if rank < 2:
        comm.Sendrecv(sendbuf, dest=1 - rank, recvbuf=sendbuf.copy(), source=1 - rank)
        recvbuf[:] = sendbuf


@pytest.mark.parametrize("fn", [sendrecv, receive_first])
def test_a_correct_exchange_passes_from_eager_to_rendezvous_sizes(fn):
    assert grading.check_safe_exchange(fn, sizes=(0, 8, 8192, 1 << 20))


def test_the_head_to_head_send_fails_by_its_deadline_not_by_hanging():
    with pytest.raises(DeadlockError, match=r"exchange of 1048576 bytes did not finish within 5 s"):
        grading.check_safe_exchange(head_to_head, sizes=(8, 1 << 20), timeout=5)
    assert grading.check_safe_exchange(sendrecv, sizes=(1 << 20,))


def test_an_exchange_that_keeps_its_own_bytes_fails_at_once():
    with pytest.raises(AssertionError, match="did not send"):
        grading.check_safe_exchange(keeps_its_own, sizes=(64,))


def test_on_the_learners_engines_a_deadlock_ends_at_the_deadline_and_the_engines_are_replaced(
    cluster2,
):
    remember_pids(cluster2.pids)  # the deadlocked engines are replaced
    with pytest.raises(DeadlockError):
        grading.safe_exchange_on_engines(cluster2, head_to_head, 1 << 20, timeout=5)
    grading.safe_exchange_on_engines(cluster2, sendrecv, 1 << 20)
