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
    with pytest.raises(AssertionError, match=r"100x, 100x, 100x, 100x, 100x .* in 5 tries"):
        grading.agrees_with_reference(lambda: 2e-4, lambda: 2e-6, 0.1, 10.0, what="t")


def test_the_medians_so_far_decide_when_single_pairs_stall_in_turn():
    # a correct loop (2 us) and the reference (2 us), each stalling in alternate tries
    mine = iter([2e-4, 2e-6, 2e-4, 2e-6, 2e-4])
    theirs = iter([2e-6, 2e-4, 2e-6, 2e-4, 2e-6])
    ratio = grading.agrees_with_reference(lambda: next(mine), lambda: next(theirs), 0.2, 5.0)
    assert 0.2 <= ratio <= 5.0


def test_a_machine_too_noisy_to_tell_passes_with_a_note_never_a_zero(capsys):
    # the reference itself varies 50x between runs: the noise, not the loop, would decide
    theirs = iter([1e-6, 5e-5, 1e-6, 5e-5, 1e-6])
    grading.agrees_with_reference(lambda: 1e-3, lambda: next(theirs), 0.1, 10.0, what="t")
    assert "[grader note] t:" in capsys.readouterr().out


def test_a_timing_loop_that_reports_zero_fails_even_on_a_noisy_machine():
    theirs = iter([1e-6, 5e-5, 1e-6, 5e-5, 1e-6])
    with pytest.raises(AssertionError, match="expected a positive number"):
        grading.agrees_with_reference(lambda: 0.0, lambda: next(theirs), 0.1, 10.0, what="t")


# -- every correct variant earns full marks; wrong ones fail with a reason -------------------------
def _pingpong_with(recv0, send1, send0=None, recv1=None):
    """A ping-pong whose four calls are given as functions of (comm, buffer)."""
    send0 = send0 or (lambda comm, buf: comm.Send(buf, dest=1, tag=TAG))
    recv1 = recv1 or (lambda comm, buf: comm.Recv(buf, source=0, tag=TAG))

    def pingpong(comm, sendbuf, recvbuf):
        if comm.Get_rank() == 0:
            send0(comm, sendbuf)
            recv0(comm, recvbuf)
        elif comm.Get_rank() == 1:
            recv1(comm, recvbuf)
            send1(comm, recvbuf)

    return pingpong


def _any_source_any_tag(comm, sendbuf, recvbuf):
    from mpi4py import MPI

    if comm.Get_rank() == 0:
        comm.Send(sendbuf, dest=1, tag=TAG)
        comm.Recv(recvbuf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)
    elif comm.Get_rank() == 1:
        comm.Recv(recvbuf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)
        comm.Send(recvbuf, dest=0, tag=TAG)


def _default_source_and_tag(comm, sendbuf, recvbuf):
    if comm.Get_rank() == 0:
        comm.Send(sendbuf, dest=1)
        comm.Recv(recvbuf)
    elif comm.Get_rank() == 1:
        comm.Recv(recvbuf)
        comm.Send(recvbuf, dest=0)


def _ssend(comm, sendbuf, recvbuf):
    if comm.Get_rank() == 0:
        comm.Ssend(sendbuf, dest=1, tag=TAG)
        comm.Recv(recvbuf, source=1, tag=TAG)
    elif comm.Get_rank() == 1:
        comm.Recv(recvbuf, source=0, tag=TAG)
        comm.Ssend(recvbuf, dest=0, tag=TAG)


def _typed(spec):
    """A ping-pong that passes every buffer as spec(buf), e.g. [buf, MPI.BYTE]."""

    def pingpong(comm, sendbuf, recvbuf):
        if comm.Get_rank() == 0:
            comm.Send(spec(sendbuf), dest=1, tag=TAG)
            comm.Recv(spec(recvbuf), source=1, tag=TAG)
        elif comm.Get_rank() == 1:
            comm.Recv(spec(recvbuf), source=0, tag=TAG)
            comm.Send(spec(recvbuf), dest=0, tag=TAG)

    return pingpong


def _reply_to_status(source_of, tag_of):
    """Rank 1 receives from anyone with any tag and replies to the status's source and tag."""

    def pingpong(comm, sendbuf, recvbuf):
        from mpi4py import MPI

        if comm.Get_rank() == 0:
            comm.Send(sendbuf, dest=1, tag=TAG)
            comm.Recv(recvbuf, source=1, tag=TAG)
        elif comm.Get_rank() == 1:
            status = MPI.Status()
            comm.Recv(recvbuf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
            comm.Send(recvbuf, dest=source_of(status), tag=tag_of(status))

    return pingpong


def _larger_buffer_then_count(comm, sendbuf, recvbuf):
    from mpi4py import MPI

    if comm.Get_rank() == 0:
        comm.Send(sendbuf, dest=1, tag=TAG)
        comm.Recv(recvbuf, source=1, tag=TAG)
    elif comm.Get_rank() == 1:
        big = np.zeros(len(recvbuf) + 100, np.uint8)
        status = MPI.Status()
        comm.Recv([big, MPI.BYTE], source=0, tag=TAG, status=status)
        comm.Send([big, status.Get_count(MPI.BYTE), MPI.BYTE], dest=0, tag=TAG)


def _byte(buf):
    from mpi4py import MPI

    return MPI.BYTE


SPECS = {
    "[buf, MPI.BYTE]": lambda b: [b, _byte(b)],
    "(buf, MPI.BYTE)": lambda b: (b, _byte(b)),
    "[buf, n, MPI.BYTE]": lambda b: [b, len(b), _byte(b)],
    "[buf, (n, 0), MPI.BYTE]": lambda b: [b, (len(b), 0), _byte(b)],
    "[buf, n, 0, MPI.BYTE]": lambda b: [b, len(b), 0, _byte(b)],
    "[buf, n]": lambda b: [b, len(b)],
    "[buf, 'B']": lambda b: [b, "B"],
}

ACCEPTED = {
    "ANY_SOURCE and ANY_TAG receives": _any_source_any_tag,
    "source and tag left out (wildcards)": _default_source_and_tag,
    "Ssend instead of Send": _ssend,
    **{f"typed buffers {name}": _typed(spec) for name, spec in SPECS.items()},
    "reply to status.Get_source()/Get_tag()": _reply_to_status(
        lambda s: s.Get_source(), lambda s: s.Get_tag()
    ),
    "reply to status.source/status.tag": _reply_to_status(lambda s: s.source, lambda s: s.tag),
    "receive into a larger buffer, echo status.Get_count() bytes": _larger_buffer_then_count,
}


@pytest.mark.parametrize("fn", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_every_correct_variant_of_the_pingpong_passes(fn):
    for size, nbytes in ((2, 16), (3, 0), (4, 100), (6, 4097)):
        assert grading.check_pingpong(fn, size=size, nbytes=nbytes, seed=size)
        logs, bufs, payload = grading.trace(fn, size=size, nbytes=nbytes)
        assert grading.diagnose_trace(logs, bufs, payload) is None


def _recv_tag(tag):
    return lambda comm, buf: comm.Recv(buf, source=0, tag=tag)


def _mpi():
    from mpi4py import MPI

    return MPI


def _mpich_only():
    """Tests of what a swapped wildcard means, with MPICH's values (ANY_TAG == PROC_NULL)."""
    mpi = grading.mpi_constants()
    if (mpi.any_source, mpi.any_tag, mpi.proc_null) != (-2, -1, -1):
        pytest.skip("these wildcard values are MPICH's")


def _send_back(dest=0, tag=TAG):
    return lambda comm, buf: comm.Send(buf, dest=dest, tag=tag)


def _recv_from(source, tag=TAG):
    return lambda comm, buf: comm.Recv(buf, source=source, tag=tag)


REJECTED = {  # (ping-pong, the words the failure must contain)
    "rank 1 receives from MPI.PROC_NULL": (
        lambda: _pingpong_with(_recv_from(1), _send_back(), recv1=_recv_from(_mpi().PROC_NULL)),
        "rank 1 must receive from rank 0 .* MPI.PROC_NULL",
    ),
    "rank 0 receives the echo from MPI.PROC_NULL": (
        lambda: _pingpong_with(_recv_from(_mpi().PROC_NULL), _send_back()),
        "rank 0 must receive the echo from rank 1 .* MPI.PROC_NULL",
    ),
    "the echo goes to rank 2": (
        lambda: _pingpong_with(_recv_from(1), _send_back(dest=2)),
        "rank 1 must send the echo back to rank 0; it sent to rank 2",
    ),
    "the echo goes to MPI.PROC_NULL": (
        lambda: _pingpong_with(_recv_from(1), _send_back(dest=_mpi().PROC_NULL)),
        "send the echo back to rank 0; it sent to MPI.PROC_NULL",
    ),
    "rank 0 waits for the echo from rank 2": (
        lambda: _pingpong_with(_recv_from(2), _send_back()),
        "rank 0 must receive the echo from rank 1 .* it received from rank 2",
    ),
    "Isend in the blocking exercise": (
        lambda: _pingpong_with(_recv_from(1), lambda c, b: c.Isend(b, dest=0, tag=TAG).Wait()),
        r"comm.Isend; this exercise asks for the blocking comm.Send \(or comm.Ssend\)",
    ),
    "Rsend in the blocking exercise": (
        lambda: _pingpong_with(_recv_from(1), lambda c, b: c.Rsend(b, dest=0, tag=TAG)),
        "comm.Rsend; this exercise asks for the blocking comm.Send",
    ),
    "the echo with another tag than rank 0 expects": (
        lambda: _pingpong_with(_recv_from(1), _send_back(tag=TAG + 1)),
        "the tags differ: rank 1 sends the echo with tag 4 and rank 0 receives with tag 3",
    ),
    "the whole larger buffer sent back": (
        lambda: _pingpong_with(
            _recv_from(1),
            _send_back(),
            recv1=lambda c, b: c.Recv(np.zeros(len(b) + 8, np.uint8), source=0, tag=TAG),
        ),
        "rank 1 must send back exactly the bytes it received",
    ),
    "a count of half the buffer": (
        lambda: _pingpong_with(
            _recv_from(1), _send_back(), send0=lambda c, b: c.Send([b, len(b) // 2, _mpi().BYTE], 1)
        ),
        "rank 0 sent 32 bytes instead of all 64",
    ),
}


@pytest.mark.parametrize("make,message", REJECTED.values(), ids=REJECTED.keys())
def test_wrong_variants_fail_with_a_message_that_says_why(make, message):
    with pytest.raises(AssertionError, match=message):
        grading.check_pingpong(make(), size=4, nbytes=64)


INVALID = {  # calls that MPI itself refuses: (ping-pong, the words of the error)
    "a send to MPI.ANY_SOURCE": (
        lambda: _pingpong_with(_recv_from(1), _send_back(dest=_mpi().ANY_SOURCE)),
        "dest=MPI.ANY_SOURCE: a send needs the rank it goes to",
    ),
    "a send with tag MPI.ANY_TAG": (
        lambda: _pingpong_with(_recv_from(1), _send_back(tag=_mpi().ANY_TAG)),
        "MPI.ANY_TAG is a wildcard for receives only",
    ),
    "a negative tag": (
        lambda: _pingpong_with(_recv_from(1), _send_back(tag=-5)),
        "tag=-5 is not a valid tag: tags are 0 or more",
    ),
    "a count larger than the buffer": (
        lambda: _pingpong_with(
            _recv_from(1), _send_back(), send0=lambda c, b: c.Send([b, len(b) + 1, _mpi().BYTE], 1)
        ),
        "go beyond the buffer",
    ),
    "a datatype that does not divide the buffer": (
        lambda: _pingpong_with(
            _recv_from(1), _send_back(), send0=lambda c, b: c.Send([b, _mpi().INT], 1)
        ),
        "not a whole number of 4-byte items: for a message counted in bytes use MPI.BYTE",
    ),
}


@pytest.mark.parametrize("make,message", INVALID.values(), ids=INVALID.keys())
def test_calls_that_mpi_refuses_are_refused_by_the_fake_too(make, message):
    with pytest.raises(ValueError, match=message):
        grading.check_pingpong(make(), size=4, nbytes=63)


def test_a_tag_wildcard_given_as_the_source_is_what_its_value_means_there():
    _mpich_only()
    MPI = _mpi()  # MPICH: ANY_TAG (-1) is PROC_NULL as a source, ANY_SOURCE (-2) no valid tag
    swapped = _pingpong_with(_recv_from(1), _send_back(), recv1=_recv_from(MPI.ANY_TAG))
    with pytest.raises(AssertionError, match="it received from MPI.PROC_NULL"):
        grading.check_pingpong(swapped, size=2, nbytes=8)
    both = _pingpong_with(
        _recv_from(1), _send_back(), recv1=_recv_from(MPI.ANY_TAG, MPI.ANY_SOURCE)
    )
    with pytest.raises(ValueError, match="-2 is MPI.ANY_SOURCE, the wildcard for source="):
        grading.check_pingpong(both, size=2, nbytes=8)


def test_a_fake_receive_fills_the_status_as_mpi_does():
    MPI = _mpi()
    comm = grading.FakeComm(1, 2, incoming=lambda s, t, n: grading.Message(b"abc", 0, 7))
    status, buf = MPI.Status(), bytearray(10)
    comm.Recv(buf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
    assert (status.Get_source(), status.Get_tag(), status.Get_count(MPI.BYTE)) == (0, 7, 3)
    assert bytes(buf[:3]) == b"abc"
    comm.Recv(buf, source=MPI.PROC_NULL, tag=5, status=status)  # returns at once, no data
    assert (status.source, status.tag, status.Get_count(MPI.BYTE)) == (
        MPI.PROC_NULL,
        MPI.ANY_TAG,
        0,
    )


def test_a_receive_from_proc_null_gets_nothing_buffer_or_object():
    MPI = _mpi()
    comm = grading.FakeComm(1, 2, incoming=lambda s, t, n: b"data")
    buf = bytearray(4)
    comm.Recv(buf, source=MPI.PROC_NULL)
    assert buf == bytearray(4) and comm.recv(source=MPI.PROC_NULL) is None


def test_a_nonblocking_pingpong_with_wildcards_and_a_status_passes():
    MPI = _mpi()

    def pingpong(comm, sendbuf, recvbuf):
        if comm.Get_rank() == 0:
            echo = comm.Irecv(recvbuf, source=MPI.ANY_SOURCE)
            comm.Isend(sendbuf, dest=1).Wait()
            echo.Wait()
        elif comm.Get_rank() == 1:
            status = MPI.Status()
            comm.Irecv(recvbuf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG).Wait(status)
            comm.Isend(recvbuf, dest=status.Get_source(), tag=status.Get_tag()).Wait()

    assert grading.check_pingpong(pingpong, size=3, nbytes=40, nonblocking=True)


def test_without_mpi4py_the_wildcards_are_mpichs(monkeypatch):
    import sys

    from pingpong_lab.course.grading import matching

    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import mpi4py raises ImportError
    assert matching.mpi_constants.__wrapped__() == matching.MPICH
    assert matching.MPICH.source_matches(1, -2) and not matching.MPICH.source_matches(1, -1)
    assert matching.MPICH.tag_matches(5, -1) and not matching.MPICH.tag_matches(5, -2)


# -- the pairwise exchange of 05: every correct variant passes, each fault says why


def _peer(rank, size):
    return (rank + size // 2) % size


def _pairwise(echo_recvbuf=True):
    """A blocking pairwise exchange; the upper half echoes recvbuf (or, wrongly, sendbuf)."""

    def exchange(comm, sendbuf, recvbuf):
        rank, size = comm.Get_rank(), comm.Get_size()
        peer = _peer(rank, size)
        if rank < size // 2:
            comm.Send(sendbuf, dest=peer, tag=0)
            comm.Recv(recvbuf, source=peer, tag=0)
        else:
            comm.Recv(recvbuf, source=peer, tag=0)
            comm.Send(recvbuf if echo_recvbuf else sendbuf, dest=peer, tag=0)

    return exchange


pairwise_plain = _pairwise()
pairwise_echoes_sendbuf = _pairwise(echo_recvbuf=False)


def pairwise_wildcards(comm, sendbuf, recvbuf):
    from mpi4py import MPI

    rank, size = comm.Get_rank(), comm.Get_size()
    if rank < size // 2:
        comm.Ssend([sendbuf, MPI.BYTE], dest=_peer(rank, size), tag=7)
        comm.Recv([recvbuf, MPI.BYTE], source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)
    else:
        status = MPI.Status()
        comm.Recv(recvbuf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
        comm.Send(recvbuf, dest=status.Get_source(), tag=status.Get_tag())


def pairwise_neighbours(comm, sendbuf, recvbuf):  # pairs (0,1), (2,3): the wrong pairing
    rank = comm.Get_rank()
    peer = rank ^ 1
    if rank % 2 == 0:
        comm.Send(sendbuf, dest=peer, tag=0)
        comm.Recv(recvbuf, source=peer, tag=0)
    else:
        comm.Recv(recvbuf, source=peer, tag=0)
        comm.Send(recvbuf, dest=peer, tag=0)


@pytest.mark.parametrize("fn", [pairwise_plain, pairwise_wildcards])
@pytest.mark.parametrize("size", [2, 4, 8])
def test_every_correct_pairwise_exchange_passes(fn, size):
    assert grading.check_pairwise_exchange(fn, size=size, nbytes=33, seed=size)


@pytest.mark.parametrize(
    "fn, message",
    [
        (pairwise_echoes_sendbuf, "must send back exactly the bytes it received"),
        (pairwise_neighbours, "rank 1 must send first, then receive"),
    ],
)
def test_wrong_pairwise_exchanges_fail_with_a_message_that_says_why(fn, message):
    with pytest.raises(AssertionError, match=message):
        grading.check_pairwise_exchange(fn, size=4)


def test_a_traceback_loses_the_lines_that_quote_hidden_tests():
    from pingpong_lab.grader.preprocessors import hidden_lines, without_hidden_lines

    source = (
        '"""doc"""\ncheck(a)\n### BEGIN HIDDEN TESTS\ncheck(secret_case)\n'
        "check(other_secret)\n### END HIDDEN TESTS\n"
    )
    hidden = hidden_lines(source)
    assert "check(secret_case)" in hidden and "check(a)" not in hidden
    traceback = (
        "Cell In[5], line 4\n      2 check(a)\n      3 ### BEGIN HIDDEN TESTS\n"
        "\x1b[0;32m----> 4\x1b[0m check(secret_case)\n      5 check(other_secret)\n"
        "AssertionError: size 3 fails"
    )
    shown = without_hidden_lines(traceback, hidden)
    assert "secret" not in shown and "HIDDEN" not in shown
    assert "check(a)" in shown and shown.count("(hidden tests)") == 1
    assert shown.endswith("AssertionError: size 3 fails")
