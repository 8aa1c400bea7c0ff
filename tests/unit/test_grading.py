"""Claims about course.grading: grading mode, fake communicators and the ping-pong trace check."""

from __future__ import annotations

import numpy as np
import pytest

from pingpong_lab.course import grading


def test_grading_mode_follows_the_environment(monkeypatch):
    monkeypatch.setenv("PINGPONG_LAB_GRADING", "1")
    assert grading.grading_mode() and grading.scale(100, 5) == 5
    for off in ("", "0", "false"):
        monkeypatch.setenv("PINGPONG_LAB_GRADING", off)
        assert not grading.grading_mode() and grading.scale(100, 5) == 100


# -- fake communicators ----------------------------------------------------------------------------
TAG = 3


def good(comm, sendbuf, recvbuf):
    if comm.Get_rank() == 0:
        comm.Send(sendbuf, dest=1, tag=TAG)
        comm.Recv(recvbuf, source=1, tag=TAG)
    elif comm.Get_rank() == 1:
        comm.Recv(recvbuf, source=0, tag=TAG)
        comm.Send(recvbuf, dest=0, tag=TAG)


def echoes_own_buffer(comm, sendbuf, recvbuf):
    if comm.Get_rank() == 0:
        comm.Send(sendbuf, dest=1, tag=TAG)
        comm.Recv(recvbuf, source=1, tag=TAG)
    elif comm.Get_rank() == 1:
        comm.Recv(recvbuf, source=0, tag=TAG)
        comm.Send(sendbuf, dest=0, tag=TAG)


def everyone_talks(comm, sendbuf, recvbuf):
    peer = 1 if comm.Get_rank() == 0 else 0
    if comm.Get_rank() == 0:
        comm.Send(sendbuf, dest=1, tag=TAG)
        comm.Recv(recvbuf, source=1, tag=TAG)
    else:
        comm.Recv(recvbuf, source=peer, tag=TAG)
        comm.Send(recvbuf, dest=peer, tag=TAG)


def wrong_tag(comm, sendbuf, recvbuf):
    if comm.Get_rank() == 0:
        comm.Send(sendbuf, dest=1, tag=1)
        comm.Recv(recvbuf, source=1, tag=1)
    elif comm.Get_rank() == 1:
        comm.Recv(recvbuf, source=0, tag=2)
        comm.Send(recvbuf, dest=0, tag=2)


def pickles(comm, sendbuf, recvbuf):
    if comm.Get_rank() == 0:
        comm.send(sendbuf, dest=1)
        recvbuf[:] = comm.recv(source=1)
    elif comm.Get_rank() == 1:
        comm.send(comm.recv(source=0), dest=0)


def half_message(comm, sendbuf, recvbuf):
    n = len(sendbuf) // 2
    if comm.Get_rank() == 0:
        comm.Send(sendbuf[:n], dest=1, tag=TAG)
        comm.Recv(recvbuf, source=1, tag=TAG)
    elif comm.Get_rank() == 1:
        comm.Recv(recvbuf, source=0, tag=TAG)
        comm.Send(recvbuf, dest=0, tag=TAG)


def test_a_correct_pingpong_passes_on_fake_communicators_of_any_size():
    for size in (2, 3, 8):
        assert grading.check_pingpong(good, size=size, nbytes=33)


@pytest.mark.parametrize(
    "fn,message",
    [
        (echoes_own_buffer, "exactly the bytes it received"),
        (everyone_talks, "stay idle"),
        (wrong_tag, "tags"),
        (pickles, "pickles"),
        (half_message, "bytes instead of all"),
    ],
)
def test_wrong_pingpongs_fail_with_a_message_that_says_why(fn, message):
    with pytest.raises(AssertionError, match=message):
        grading.check_pingpong(fn, size=4, nbytes=64)


def test_an_echo_through_an_untouched_buffer_is_caught_even_if_it_is_zeros():
    with pytest.raises(AssertionError):
        grading.check_pingpong(echoes_own_buffer, size=2, nbytes=1)


def test_allreduce_on_a_fake_communicator_combines_with_the_other_ranks():
    from mpi4py import MPI

    comm = grading.FakeComm(0, 3, others=[5.0, 2.0])
    assert comm.allreduce(3.0, op=MPI.MAX) == 5.0
    assert comm.allreduce(3.0, op=MPI.MIN) == 2.0
    assert comm.allreduce(3.0, op=MPI.SUM) == 10.0
    out = np.zeros(1)
    comm.Allreduce(np.array([7.0]), out, op=MPI.MAX)
    assert out[0] == 7.0


def test_a_comparison_with_the_reference_survives_one_stalled_measurement():
    times = iter([5e-3, 2e-6, 2.1e-6])  # the first try stalled (a scheduler tick)
    ratio = grading.agrees_with_reference(lambda: next(times), lambda: 2e-6, 0.1, 10.0)
    assert ratio == pytest.approx(1.0)


def test_a_timing_loop_that_is_always_off_fails_with_every_ratio_shown():
    with pytest.raises(AssertionError, match=r"100x, 100x, 100x .* in 3 tries"):
        grading.agrees_with_reference(lambda: 2e-4, lambda: 2e-6, 0.1, 10.0, what="t")
