"""The judge's data-only channel (pingpong_lab/grader/proxy.py): a learner's namespace served on
one end of a socket pair, in a thread, and the judge's end on the other."""

from __future__ import annotations

import math
import socket
import sys
import threading

import numpy as np
import pytest
from mpi4py import MPI

from pingpong_lab.course import grading
from pingpong_lab.grader import judge
from pingpong_lab.grader.proxy import ChannelClosed, Peer, RemoteError, Stand_in


def _hello(comm):
    return comm.Get_rank(), comm.Get_size()


def _receive_into(comm, buf):
    comm.Recv(buf, source=0, tag=0)
    return int(buf.sum())


def _pingpong(comm, sendbuf, recvbuf):
    if comm.Get_rank() == 0:
        comm.Send(sendbuf, dest=1, tag=0)
        comm.Recv(recvbuf, source=1, tag=0)
    elif comm.Get_rank() == 1:
        comm.Recv(recvbuf, source=0, tag=0)
        comm.Send(recvbuf, dest=0, tag=0)


def _pingpong_waitall(comm, sendbuf, recvbuf):
    """Non-blocking, with the module-level MPI: the receive is filled only at Waitall."""
    rank = comm.Get_rank()
    if rank == 0:
        requests = [comm.Irecv([recvbuf, MPI.BYTE], source=1), comm.Isend(sendbuf, dest=1)]
        MPI.Request.Waitall(requests)
    elif rank == 1:
        request = comm.Irecv(recvbuf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)
        request.Wait()
        comm.Isend(recvbuf, dest=0).Wait()


def _pingpong_own_buffers(comm, sendbuf, recvbuf):
    """Legal but unusual: rank 1 echoes through a bytearray of its own, rank 0 receives
    through a memoryview of its recvbuf."""
    n = len(sendbuf)
    if comm.Get_rank() == 0:
        comm.Send(memoryview(sendbuf), dest=1)
        comm.Recv(memoryview(recvbuf), source=1)
    elif comm.Get_rank() == 1:
        scratch = bytearray(n)
        comm.Recv(scratch, source=0)
        comm.Send(scratch, dest=0)


def _rejects(x):
    if len(x) < 2:
        raise ValueError("need two values")
    return x


class _LearnerError(Exception):
    pass


def _raises_own():
    raise _LearnerError("mine")


def _calls_back(f, n):
    return [f(i) for i in range(n)]


def _reduces_in_place(comm, x):
    from mpi4py import MPI

    mine = np.array([x], dtype=np.int64)
    comm.Allreduce(MPI.IN_PLACE, mine, op=MPI.MAX)
    return int(mine[0])


def _sorts_in_place(x):
    x.sort()


LEARNER = {
    "hello": _hello,
    "pingpong": _pingpong,
    "pingpong_waitall": _pingpong_waitall,
    "pingpong_own_buffers": _pingpong_own_buffers,
    "receive_into": _receive_into,
    "rejects": _rejects,
    "raises_own": _raises_own,
    "calls_back": _calls_back,
    "sorts_in_place": _sorts_in_place,
    "reduces_in_place": _reduces_in_place,
    "t_c": np.array([1.5e-6, 2.5e-6]),
    "table": {1: (2.0, "x"), "nan": math.nan, "hosts": np.array(["a", "b"]), "s": {3, 4}},
    "grading": grading,
    "np": np,
}


@pytest.fixture
def channel():
    """(the judge's Peer, the learner's Peer): the learner's end answers in a thread."""
    a, b = socket.socketpair()
    learner = Peer(b, "learner", dict(LEARNER))

    def serve():
        try:
            while (message := learner.receive()).get("op") != "done":
                learner.answer(message)
        except ChannelClosed:
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ours = Peer(a, "judge")
    judge._session.peer = ours
    yield ours, learner
    judge._session.peer = None
    ours.send({"op": "done"})
    thread.join(5)
    a.close()
    b.close()


def _describe(peer, names):
    peer.names_ok = True
    try:
        found = peer.request({"op": "describe", "names": names})
    finally:
        peer.names_ok = False
    return {name: judge.judged(value) for name, value in found.items()}


def test_data_comes_as_copies_and_functions_as_stand_ins(channel):
    peer, _ = channel
    got = _describe(peer, ["t_c", "table", "hello", "np", "grading", "missing"])
    assert set(got) == {"t_c", "table", "hello", "np", "grading"}
    assert isinstance(got["t_c"], np.ndarray) and got["t_c"].tolist() == [1.5e-6, 2.5e-6]
    assert got["table"][1] == (2.0, "x") and math.isnan(got["table"]["nan"])
    assert got["table"]["hosts"].tolist() == ["a", "b"] and got["table"]["s"] == {3, 4}
    assert isinstance(got["hello"], Stand_in)
    assert got["np"] is np  # the judge's own numpy
    assert isinstance(got["grading"], judge.CourseModule)


def test_a_fake_communicator_stays_in_the_judge_and_records_the_learners_calls(channel):
    peer, _ = channel
    got = _describe(peer, ["hello", "receive_into"])
    comm = grading.FakeComm(2, 5)
    assert got["hello"](comm) == (2, 5)
    # a receive fills the learner's buffer: the judge's copy goes back into it
    fake = grading.FakeComm(1, 2, incoming=lambda source, tag, n: np.arange(n, dtype=np.uint8))
    assert got["receive_into"](fake, np.zeros(4, np.uint8)) == 6
    assert [(op.kind, op.peer, op.nbytes) for op in fake.log] == [("Recv", 0, 4)]  # ours


def test_mpis_handles_travel_by_name_to_the_judges_fakes(channel):
    peer, _ = channel
    comm = grading.FakeComm(0, 2, others=[9])
    assert _describe(peer, ["reduces_in_place"])["reduces_in_place"](comm, 4) == 9
    assert [op.kind for op in comm.log] == ["Allreduce"]


def test_a_learners_array_changed_in_place_comes_back(channel):
    peer, _ = channel
    x = np.array([3.0, 1.0, 2.0])
    _describe(peer, ["sorts_in_place"])["sorts_in_place"](x)
    assert x.tolist() == [1.0, 2.0, 3.0]


def test_errors_come_as_builtin_types_or_as_names(channel):
    peer, _ = channel
    got = _describe(peer, ["rejects", "raises_own"])
    with pytest.raises(ValueError, match="need two values"):
        got["rejects"]([1])
    with pytest.raises(RemoteError, match="mine") as raised:
        got["raises_own"]()
    assert type(raised.value).__name__ == "_LearnerError"  # as the learner would read it


def test_the_judges_functions_are_called_back_where_they_are(channel):
    peer, _ = channel
    seen = []
    got = _describe(peer, ["calls_back"])["calls_back"](lambda i: seen.append(i) or i * i, 4)
    assert got == [0, 1, 4, 9] and seen == [0, 1, 2, 3]


def test_a_course_trace_of_a_learners_function_runs_in_the_judge(channel, monkeypatch):
    peer, _ = channel
    got = _describe(peer, ["hello", "pingpong", "pingpong_waitall", "grading"])
    seen = []
    tracer = sys.modules["pingpong_lab.course.grading.trace"]
    real_trace = tracer.trace
    monkeypatch.setattr(tracer, "trace", lambda *a, **k: seen.append(1) or real_trace(*a, **k))
    # the check, its fakes and its verdict are the judge's: the tracer here ran
    got["grading"].check_pingpong(got["pingpong"], size=3, nbytes=8)
    assert seen
    # a receive posted by Irecv and filled at Waitall goes back; MPI is the judge's fake
    got["grading"].check_pingpong(got["pingpong_waitall"], size=4, nbytes=33, nonblocking=True)
    with pytest.raises(TypeError, match="takes 1 positional argument"):
        got["grading"].check_pingpong(got["hello"], size=2, nbytes=8)
    assert got["grading"].within_ratio(1.0, 1.0, 0.5, 2.0) in (True, None)


def test_legal_buffers_of_the_learners_own_are_written_back(channel):
    peer, _ = channel
    got = _describe(peer, ["pingpong_own_buffers", "grading"])
    got["grading"].check_pingpong(got["pingpong_own_buffers"], size=2, nbytes=16)


def test_the_learners_mpi_is_its_own_again_after_a_traced_call(channel):
    peer, _ = channel
    got = _describe(peer, ["pingpong_waitall", "grading"])
    with pytest.raises(AssertionError):
        got["grading"].check_pingpong(got["pingpong_waitall"], size=2, nbytes=8)  # not blocking
    assert _pingpong_waitall.__globals__["MPI"] is MPI


def test_only_the_judge_swaps_a_functions_globals(channel):
    peer, learner = channel
    stand_in = Stand_in(learner, 1)
    with pytest.raises(ValueError, match="only the judge"):
        stand_in.with_globals(MPI=None)
    with pytest.raises(ValueError, match="keep their own globals"):
        peer.handle({"op": "call", "target": {"$own": 1}, "globals": {"$d": []}})


@pytest.mark.parametrize(
    "value",
    [
        {"$n": "pingpong_lab.course.grading.cbench.subprocess.run"},
        {"$n": "numpy.save"},
        {"$code": "gASV"},
        {"$mod": "os"},
    ],
    ids=["a name through subprocess", "a numpy function", "code", "a module"],
)
def test_the_judge_decodes_no_code_and_no_name_but_mpis(channel, value):
    peer, _ = channel
    with pytest.raises((ValueError, KeyError)):
        peer.decode(value)


def test_the_judge_answers_only_for_objects_it_gave(channel):
    peer, _ = channel
    for target in ({"$n": "numpy.save"}, {"$ref": 1}, {"$own": 12345}):
        with pytest.raises((ValueError, KeyError)):
            peer.handle({"op": "call", "target": target, "args": [], "kwargs": {"$d": []}})
    with pytest.raises(ValueError):
        peer.handle({"op": "course", "name": "pingpong_lab.grader.build.main"})
