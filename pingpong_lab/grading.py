"""What the course's test cells use: grading mode, quiet cells, fake and instrumented MPI.

Grading mode. nbgrader runs with PINGPONG_LAB_GRADING=1 (course/nbgrader_config.py sets it), and
notebooks shrink their work with `scale(normal, grading)`:

    sizes = message_sizes(1, scale(64 << 20, 1 << 16))

Test cells follow three rules (see DESIGN.md, "Grade the code, not the machine"):
- a learner's function is first run on fake communicators (FakeComm), which record every MPI
  call (peer, tag, byte count, payload) without any MPI, so a wrong peer or a deadlock-prone
  order is reported as a readable assertion, never as a hang;
- work on the engines always has a deadline shorter than nbgrader's cell timeout
  (ENGINE_TIMEOUT_S): a deadlocked submission fails that cell, the engines restart, and the rest
  of the notebook is still graded;
- timings are judged only as ratios to the reference kernel measured in the same run.

Anything a test cell writes to stderr makes nbgrader give it 0 points, so test cells run their
work inside `with quiet():` (warnings silenced, stderr sent to stdout).
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import types
import warnings
from pathlib import Path

import numpy as np

from .processes import run_group


# -- grading mode -----------------------------------------------------------------------------
def grading_mode() -> bool:
    """True when PINGPONG_LAB_GRADING is set to something other than '', '0', 'false', 'no'."""
    value = os.environ.get("PINGPONG_LAB_GRADING", "").strip().lower()
    return value not in ("", "0", "false", "no")


GRADING = grading_mode()


def scale(normal, grading):
    """`grading` while nbgrader grades (small and fast), `normal` otherwise."""
    return grading if grading_mode() else normal


ENGINE_TIMEOUT_S = 20.0  # engine work in a test cell; well below the 150 s cell timeout
MPIEXEC_TIMEOUT_S = 30.0  # a stand-alone mpiexec check (start-up included)
NOT_IMPLEMENTED = -99  # what the C stub of a released exercise returns


@contextlib.contextmanager
def quiet():
    """Run a test cell's work without writing to stderr (nbgrader scores stderr as failure).

    Warnings are ignored and anything printed to sys.stderr goes to stdout instead.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.redirect_stderr(sys.stdout):
            yield


# -- fake communicators -----------------------------------------------------------------------
ANY_SOURCE = -1  # the values of MPI.ANY_SOURCE / MPI.ANY_TAG in MPICH and Open MPI
ANY_TAG = -1


def _any_source():
    try:
        from mpi4py import MPI

        return MPI.ANY_SOURCE, MPI.ANY_TAG
    except ImportError:
        return ANY_SOURCE, ANY_TAG


class Op:
    """One recorded call: kind ('Send', 'Recv', ...), peer, tag, nbytes, data (bytes sent)."""

    def __init__(self, kind, peer=None, tag=None, nbytes=None, data=None, buf=None):
        self.kind, self.peer, self.tag, self.nbytes, self.data = kind, peer, tag, nbytes, data
        self.buf = buf

    def __repr__(self):
        parts = [self.kind]
        if self.peer is not None:
            parts.append(f"peer={self.peer}")
        if self.tag is not None:
            parts.append(f"tag={self.tag}")
        if self.nbytes is not None:
            parts.append(f"{self.nbytes} B")
        return "(" + " ".join(str(p) for p in parts) + ")"


def _byte_view(spec):
    """A writable-if-possible flat byte view of an mpi4py buffer spec: buf, [buf, type] etc."""
    buf, count = spec, None
    if isinstance(spec, (list, tuple)):
        if not spec:
            raise TypeError("an empty list is not a message buffer")
        buf = spec[0]
        if len(spec) >= 3 and isinstance(spec[1], (int, np.integer)):
            count = int(spec[1])
    if isinstance(buf, (str,)):
        raise TypeError("a str is not a byte buffer: use a bytearray or a numpy uint8 array")
    try:
        view = memoryview(buf).cast("B")
    except TypeError as exc:
        raise TypeError(
            f"{type(buf).__name__} is not a buffer: the uppercase Send/Recv need a buffer "
            "such as a numpy array or bytearray"
        ) from exc
    if count is not None:
        itemsize = memoryview(buf).itemsize
        view = view[: count * itemsize]
    return view


class FakeRequest:
    """A request from FakeComm.Isend/Irecv; Wait/Test complete it."""

    def __init__(self, comm, op, fill=None):
        self.comm, self.op, self._fill, self.done = comm, op, fill, False

    def Wait(self, status=None):
        if not self.done:
            self.done = True
            if self._fill is not None:
                self._fill()
            self.comm.log.append(Op("Wait", self.op.peer, self.op.tag))
        return True

    wait = Wait

    def Test(self, status=None):
        self.Wait()
        return True

    def Free(self):
        self.done = True


class FakeComm:
    """A communicator that records calls instead of communicating (one rank of `size`).

    `incoming(source, tag, nbytes)` gives the bytes a Recv receives (default: the last message
    this rank sent, as a correct echo would return it). `others` are the values that the other
    ranks contribute to allreduce/Allreduce (default: none, so the result is this rank's own).
    """

    def __init__(self, rank, size, incoming=None, others=(), clock=None):
        self._rank, self._size = int(rank), int(size)
        self.log: list[Op] = []
        self._incoming = incoming
        self._others = list(others)
        self._clock = clock
        self.objects_received = []

    # -- who am I
    def Get_rank(self):
        return self._rank

    def Get_size(self):
        return self._size

    rank = property(Get_rank)
    size = property(Get_size)

    def __repr__(self):
        return f"FakeComm(rank={self._rank}, size={self._size})"

    # -- helpers
    def _check_peer(self, peer, what):
        if not isinstance(peer, (int, np.integer)):
            raise TypeError(f"{what} must be a rank (int), got {peer!r}")
        if not (0 <= peer < self._size or peer in _any_source()):
            raise ValueError(
                f"rank {self._rank}: {what}={peer} is not a rank of a "
                f"{self._size}-rank communicator"
            )
        if peer == self._rank:
            raise ValueError(f"rank {self._rank} sends to or receives from itself ({what}={peer})")

    def _last_sent(self):
        for op in reversed(self.log):
            if (
                op.kind in ("Send", "Isend", "Ssend", "send", "isend", "ssend")
                and op.data is not None
            ):
                return op.data
        return None

    def _data_for(self, source, tag, nbytes):
        if self._incoming is not None:
            data = self._incoming(source, tag, nbytes)
        else:
            data = self._last_sent()
        if data is None:
            data = bytes(nbytes)
        return data

    def _fill(self, view, source, tag):
        data = self._data_for(source, tag, view.nbytes)
        if isinstance(data, (bytes, bytearray, memoryview, np.ndarray)):
            data = bytes(memoryview(data).cast("B"))
            if len(data) > view.nbytes:
                raise ValueError(
                    f"rank {self._rank}: a {len(data)}-byte message arrives in a "
                    f"{view.nbytes}-byte receive buffer (MPI_ERR_TRUNCATE)"
                )
            view[: len(data)] = data
        return data

    # -- point to point, buffers
    def _send(self, kind, buf, dest, tag):
        self._check_peer(dest, "dest")
        view = _byte_view(buf)
        self.log.append(Op(kind, dest, tag, view.nbytes, bytes(view)))

    def Send(self, buf, dest, tag=0):
        self._send("Send", buf, dest, tag)

    def Ssend(self, buf, dest, tag=0):
        self._send("Ssend", buf, dest, tag)

    def Rsend(self, buf, dest, tag=0):
        self._send("Rsend", buf, dest, tag)

    def Bsend(self, buf, dest, tag=0):
        self._send("Bsend", buf, dest, tag)

    def Recv(self, buf, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        self._check_peer(source, "source")
        view = _byte_view(buf)
        self.log.append(Op("Recv", source, tag, view.nbytes, buf=view))
        self._fill(view, source, tag)

    def Isend(self, buf, dest, tag=0):
        self._send("Isend", buf, dest, tag)
        return FakeRequest(self, self.log[-1])

    def Irecv(self, buf, source=ANY_SOURCE, tag=ANY_TAG):
        self._check_peer(source, "source")
        view = _byte_view(buf)
        op = Op("Irecv", source, tag, view.nbytes, buf=view)
        self.log.append(op)
        return FakeRequest(self, op, fill=lambda: self._fill(view, source, tag))

    def Sendrecv(
        self,
        sendbuf,
        dest,
        sendtag=0,
        recvbuf=None,
        source=ANY_SOURCE,
        recvtag=ANY_TAG,
        status=None,
    ):
        self._send("Sendrecv", sendbuf, dest, sendtag)
        if recvbuf is not None:
            view = _byte_view(recvbuf)
            self._fill(view, source, recvtag)

    # -- point to point, pickled objects
    def send(self, obj, dest, tag=0):
        self._check_peer(dest, "dest")
        self.log.append(Op("send", dest, tag, None, obj))

    def ssend(self, obj, dest, tag=0):
        self._check_peer(dest, "dest")
        self.log.append(Op("ssend", dest, tag, None, obj))

    def recv(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        self._check_peer(source, "source")
        self.log.append(Op("recv", source, tag))
        obj = self._data_for(source, tag, 0) if self._incoming else self._last_sent()
        self.objects_received.append(obj)
        return obj

    def isend(self, obj, dest, tag=0):
        self.send(obj, dest, tag)
        self.log[-1].kind = "isend"
        return FakeRequest(self, self.log[-1])

    # -- collectives
    def Barrier(self):
        self.log.append(Op("Barrier"))

    barrier = Barrier

    def allreduce(self, value, op=None):
        self.log.append(Op("allreduce", tag=_op_name(op)))
        return _reduce([value, *self._others], op)

    def Allreduce(self, sendbuf, recvbuf, op=None):
        self.log.append(Op("Allreduce", tag=_op_name(op)))
        try:
            from mpi4py import MPI

            in_place = sendbuf is MPI.IN_PLACE
        except ImportError:
            in_place = False
        target = np.asarray(recvbuf[0] if isinstance(recvbuf, (list, tuple)) else recvbuf)
        source = (
            target
            if in_place
            else np.asarray(sendbuf[0] if isinstance(sendbuf, (list, tuple)) else sendbuf)
        )
        values = [source.copy(), *[np.full_like(target, o) for o in self._others]]
        target[...] = _reduce(values, op)

    def bcast(self, obj, root=0):
        self.log.append(Op("bcast", root))
        return obj

    def gather(self, obj, root=0):
        self.log.append(Op("gather", root))
        return [obj, *self._others] if self._rank == root else None

    def allgather(self, obj):
        self.log.append(Op("allgather"))
        return [obj, *self._others]

    # -- anything else is reported, not silently accepted
    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        raise AttributeError(
            f"the grading communicator does not support comm.{name}: this exercise needs only "
            "Get_rank/Get_size, Send/Recv (Isend/Irecv where asked) and the collectives named "
            "in the instructions"
        )


def _op_name(op):
    if op is None:
        return "SUM"
    name = getattr(op, "__name__", None)
    if name:
        return name.upper()
    try:
        from mpi4py import MPI

        for known in ("MAX", "MIN", "SUM", "PROD"):
            if op == getattr(MPI, known):
                return known
    except ImportError:
        pass
    return str(op)


def _reduce(values, op):
    name = _op_name(op)
    if name == "MAX":
        out = values[0]
        for v in values[1:]:
            out = np.maximum(out, v)
        return out.item() if isinstance(out, np.generic) else out
    if name == "MIN":
        out = values[0]
        for v in values[1:]:
            out = np.minimum(out, v)
        return out.item() if isinstance(out, np.generic) else out
    if name == "SUM":
        return sum(values[1:], values[0])
    raise AssertionError(f"unexpected reduction operation {op!r}")


class _FakeRequestAPI:
    """Stands in for MPI.Request inside a traced function: Waitall etc. on fake requests."""

    @staticmethod
    def Waitall(requests, statuses=None):
        for req in requests:
            req.Wait()
        return True

    waitall = Waitall

    @staticmethod
    def Testall(requests, statuses=None):
        return _FakeRequestAPI.Waitall(requests)

    @staticmethod
    def Waitany(requests, status=None):
        for index, req in enumerate(requests):
            if not getattr(req, "done", True):
                req.Wait()
                return index
        return -1

    @staticmethod
    def Waitsome(requests, statuses=None):
        _FakeRequestAPI.Waitall(requests)
        return list(range(len(requests)))


class _FakeMPIModule(types.ModuleType):
    """The real mpi4py.MPI, except that Request.Waitall & co. accept fake requests."""

    def __init__(self, real):
        super().__init__("mpi4py.MPI")
        self._real = real
        self.Request = _FakeRequestAPI

    def __getattr__(self, name):
        return getattr(self._real, name)


@contextlib.contextmanager
def fake_mpi_for(fn):
    """While tracing fn on fake communicators, its global `MPI` handles fake requests."""
    g = getattr(fn, "__globals__", {})
    real = g.get("MPI")
    if not isinstance(real, types.ModuleType) or isinstance(real, _FakeMPIModule):
        yield
        return
    g["MPI"] = _FakeMPIModule(real)
    try:
        yield
    finally:
        g["MPI"] = real


def comm_ops(log, kinds=None):
    """The communication calls of a log (Barrier, allreduce etc. left out unless asked)."""
    kinds = kinds or {
        "Send",
        "Ssend",
        "Rsend",
        "Bsend",
        "Recv",
        "Isend",
        "Irecv",
        "Sendrecv",
        "send",
        "ssend",
        "recv",
        "isend",
    }
    return [op for op in log if op.kind in kinds]


def _describe(logs):
    return "; ".join(f"rank {r}: {comm_ops(log) or 'nothing'}" for r, log in enumerate(logs))


def _tags_match(send_tag, recv_tag):
    return recv_tag in (send_tag, ANY_TAG) or recv_tag in _any_source()


_SEND_KINDS = ("Send", "Ssend", "Rsend", "Bsend", "Isend", "Sendrecv", "send", "ssend", "isend")


def echo_sent_by(log, tag=ANY_TAG):
    """The bytes a rank sent to rank 0 (the first such message whose tag matches), or None."""
    for op in log:
        if op.kind in _SEND_KINDS and op.peer == 0 and op.data is not None:
            if _tags_match(op.tag, tag):
                return op.data
    return None


def trace(fn, size=4, nbytes=8, seed=0):
    """Run fn(comm, sendbuf, recvbuf) on fake ranks 0..size-1; return each rank's calls.

    Returns (logs, bufs, payload): every rank's recorded calls and its recvbuf afterwards, by
    rank, and the payload that rank 0 had in its sendbuf. The other ranks run first and receive
    the payload, as if rank 0 had sent it. Rank 0 then receives what rank 1 *actually* sent to
    rank 0 with a matching tag; if rank 1 sent nothing back, nothing arrives (on real MPI rank 0
    would wait forever) and rank 0's recvbuf keeps its zeros.
    """
    rng = np.random.default_rng(seed)
    payload = rng.integers(0, 256, nbytes, dtype=np.uint8)
    logs, bufs = [None] * size, [None] * size

    def run(rank, incoming):
        comm = FakeComm(rank, size, incoming=incoming)
        sendbuf = payload.copy() if rank == 0 else np.zeros(nbytes, np.uint8)
        recvbuf = np.zeros(nbytes, np.uint8)
        with fake_mpi_for(fn):
            fn(comm, sendbuf, recvbuf)
        logs[rank], bufs[rank] = comm.log, recvbuf

    for rank in range(1, size):
        run(rank, lambda s, t, n, p=payload: p)
    rank1 = logs[1] if size > 1 else []
    run(0, lambda s, t, n: echo_sent_by(rank1, t) if s in (1, *_any_source()) else None)
    return logs, bufs, payload


def _nbytes_text(n):
    return f"{n} byte" if n == 1 else f"{n} bytes"


def _show_bytes(data, limit=8):
    data = bytes(data)
    shown = " ".join(f"{b:02x}" for b in data[:limit])
    return shown + (" ..." if len(data) > limit else "") if data else "(empty)"


def describe_echo(sent, echoed, reference="what rank 0 sent"):
    """One line on how the echo compares with what was sent (bytes-like or None)."""
    sent = bytes(memoryview(sent).cast("B"))
    if echoed is None:
        return "nothing (no message to its partner with a matching tag)"
    try:
        echoed = bytes(memoryview(echoed).cast("B"))
    except TypeError:
        return f"a pickled Python object, {type(echoed).__name__} {echoed!r:.60}"
    if echoed == sent:
        return f"{_nbytes_text(len(echoed))}, identical to {reference}"
    if len(echoed) != len(sent):
        return (
            f"{_nbytes_text(len(echoed))} instead of {len(sent)}: {_show_bytes(echoed)} "
            f"({reference}: {_show_bytes(sent)})"
        )
    diff = [j for j, (a, b) in enumerate(zip(sent, echoed)) if a != b]
    zeros = " (all zeros: a buffer that never received anything?)" if not any(echoed) else ""
    return (
        f"{_show_bytes(echoed)}{zeros}: {len(diff)} of {len(sent)} bytes differ from "
        f"{reference} ({_show_bytes(sent)}), first at byte {diff[0]}"
    )


def check_pingpong(fn, size=4, nbytes=64, seed=0, nonblocking=False):
    """Check a buffer ping-pong fn(comm, sendbuf, recvbuf) on fake ranks; AssertionError if wrong.

    Rank 0 must send the whole sendbuf to rank 1 and then receive the echo into recvbuf; rank 1
    must receive and send back exactly what it received; other ranks must not communicate.
    With nonblocking=True, Isend/Irecv are expected and every request must be completed.
    """
    logs, bufs, payload = trace(fn, size=size, nbytes=nbytes, seed=seed)
    where = (
        f"(with {size} ranks and a {nbytes}-byte message; what each rank did: {_describe(logs)})"
    )
    return check_trace(logs, bufs, payload, nonblocking=nonblocking, where=where)


def diagnose_trace(logs, bufs, payload, nonblocking=None):
    """None for a correct ping-pong trace (from trace()), else the first problem, in words.

    nonblocking=None guesses the flavour from the calls (Isend/Irecv seen -> non-blocking).
    """
    if nonblocking is None:
        nonblocking = any(op.kind in ("Isend", "Irecv") for log in logs for op in log)
    try:
        check_trace(logs, bufs, payload, nonblocking=nonblocking, where="")
    except AssertionError as exc:
        return str(exc).strip()
    return None


def check_trace(logs, bufs, payload, nonblocking=False, where=""):
    """AssertionError (with `where` appended) unless the traced calls are a correct round trip."""
    send_kinds = {"Isend"} if nonblocking else {"Send", "Ssend"}
    recv_kinds = {"Irecv"} if nonblocking else {"Recv"}
    api = "Isend/Irecv" if nonblocking else "Send/Recv"
    size, nbytes = len(logs), len(payload)
    assert size >= 2, f"a ping-pong needs at least 2 ranks, the trace has {size}"
    for rank, log in enumerate(logs):
        for op in comm_ops(log):
            if op.kind in ("send", "recv", "ssend", "isend"):
                raise AssertionError(
                    f"rank {rank} called comm.{op.kind}, which pickles Python objects; use the "
                    f"buffer-based comm.{api} (capital letter) here {where}"
                )
            if op.kind not in send_kinds | recv_kinds:
                raise AssertionError(
                    f"rank {rank} called comm.{op.kind}; this ping-pong uses {api} {where}"
                )
    r0, r1 = comm_ops(logs[0]), comm_ops(logs[1])
    if nonblocking:  # rank 0 may post its receive first: a good habit
        assert sorted(op.kind for op in r0) == ["Irecv", "Isend"], (
            f"rank 0 must post one Isend and one Irecv; it called "
            f"{[op.kind for op in r0] or 'nothing'} {where}"
        )
        if r0[0].kind == "Irecv":
            r0 = [r0[1], r0[0]]
        recv_wait = [i for i, op in enumerate(logs[0]) if op.kind == "Wait" and op is not None]
        posted = [i for i, op in enumerate(logs[0]) if op.kind == "Isend"]
        assert posted and (not recv_wait or posted[0] < recv_wait[-1]), (
            f"rank 0 waits for the echo before its Isend is posted: that deadlocks {where}"
        )
    else:
        assert [op.kind in send_kinds for op in r0] == [True, False], (
            f"rank 0 must send first and then receive (one {api} each); it called "
            f"{[op.kind for op in r0] or 'nothing'} {where}"
        )
    assert [op.kind in recv_kinds for op in r1] == [True, False], (
        f"rank 1 must receive first and then send the message back (one {api} each); it "
        f"called {[op.kind for op in r1] or 'nothing'} {where}"
    )
    assert r0[0].peer == 1 and r0[1].peer in (1, ANY_SOURCE), (
        f"rank 0 must exchange with rank 1; it sent to {r0[0].peer} and received from "
        f"{r0[1].peer} {where}"
    )
    assert r1[0].peer in (0, ANY_SOURCE) and r1[1].peer == 0, (
        f"rank 1 must exchange with rank 0; it received from {r1[0].peer} and sent to "
        f"{r1[1].peer} {where}"
    )
    assert r0[0].nbytes == nbytes, (
        f"rank 0 sent {r0[0].nbytes} bytes instead of all {nbytes} of sendbuf {where}"
    )
    assert r1[1].nbytes == nbytes, (
        f"rank 1 sent back {r1[1].nbytes} bytes instead of {nbytes} {where}"
    )
    assert r0[1].nbytes >= nbytes and r1[0].nbytes >= nbytes, (
        f"a receive buffer is too small for {_nbytes_text(nbytes)}: rank 0 receives into "
        f"{r0[1].nbytes}, rank 1 into {r1[0].nbytes} {where}"
    )
    assert _tags_match(r0[0].tag, r1[0].tag), (
        f"the tags of rank 0's send ({r0[0].tag}) and rank 1's receive ({r1[0].tag}) differ: "
        f"on real MPI that message never matches and both ranks wait forever {where}"
    )
    assert _tags_match(r1[1].tag, r0[1].tag), (
        f"the tags of rank 1's send ({r1[1].tag}) and rank 0's receive ({r0[1].tag}) differ: "
        f"on real MPI the echo never matches and rank 0 waits forever {where}"
    )
    assert r0[0].data == payload.tobytes(), (
        "rank 0 must send the contents of sendbuf; it sent "
        f"{describe_echo(payload, r0[0].data, 'the payload in sendbuf')} {where}"
    )
    assert r1[1].data == payload.tobytes(), (
        "rank 1 must send back exactly the bytes it received (the payload is checked); it sent "
        f"back {describe_echo(payload, r1[1].data)} {where}"
    )
    assert np.array_equal(bufs[0], payload), (
        f"the echo must arrive in rank 0's recvbuf; it holds {_show_bytes(bufs[0])} {where}"
    )
    for rank in range(2, size):
        assert not comm_ops(logs[rank]), (
            f"rank {rank} must stay idle (no messages); it called {comm_ops(logs[rank])} {where}"
        )
    if nonblocking:
        for rank in (0, 1):
            waits = sum(1 for op in logs[rank] if op.kind == "Wait")
            assert waits >= 2, (
                f"rank {rank} must complete (Wait for) both of its requests; it completed "
                f"{waits} {where}"
            )
    return True


def check_pickle_pingpong(fn, size=3, seed=0):
    """Check fn(comm, obj) -> echoed obj on rank 0, None elsewhere, using lowercase send/recv."""
    rng = np.random.default_rng(seed)
    obj = {"numbers": rng.integers(0, 1000, 5).tolist(), "label": f"ping-{seed}"}
    results, logs = [], []
    for rank in range(size):
        incoming = (lambda s, t, n, o=obj: o) if rank == 1 else None
        comm = FakeComm(rank, size, incoming=incoming)
        with fake_mpi_for(fn):
            results.append(fn(comm, obj if rank == 0 else None))
        logs.append(comm.log)
    where = f"(what each rank did: {_describe(logs)})"
    r0, r1 = comm_ops(logs[0]), comm_ops(logs[1])
    assert [op.kind for op in r0] == ["send", "recv"], (
        f"rank 0 must comm.send the object, then comm.recv the echo {where}"
    )
    assert [op.kind for op in r1] == ["recv", "send"], (
        f"rank 1 must comm.recv, then comm.send the object back {where}"
    )
    assert r0[0].peer == 1 and r1[1].peer == 0, f"ranks 0 and 1 must talk to each other {where}"
    assert r0[0].data == obj, f"rank 0 must send the object it was given {where}"
    assert r1[1].data == obj, f"rank 1 must send back the object it received {where}"
    assert results[0] == obj, f"rank 0 must return the echoed object, got {results[0]!r}"
    assert all(r is None for r in results[1:]), (
        f"ranks other than 0 must return None, got {results[1:]}"
    )
    for rank in range(2, size):
        assert not comm_ops(logs[rank]), f"rank {rank} must stay idle {where}"
    return True


class FakeClock:
    """A deterministic timer: every call advances by `step` seconds (plus what others add).

    With `log` (e.g. a FakeComm's log), every reading appends Op("clock") to it, so a test can
    see when the clock was read relative to the MPI calls.
    """

    def __init__(self, start=100.0, step=1e-6, log=None):
        self.now, self.step, self.calls = float(start), float(step), 0
        self.log = log

    def __call__(self):
        self.calls += 1
        self.now += self.step
        if self.log is not None:
            self.log.append(Op("clock"))
        return self.now

    def advance(self, seconds):
        self.now += seconds


def timing_fakes(round_trip_s, others=(), size=2):
    """(comm, pingpong, clock) for testing a time_pingpong on one fake rank.

    Every round trip of `pingpong` appends Op("round trip") to comm.log and advances the clock by
    round_trip_s; every clock reading appends Op("clock"). `others`: the elapsed times that the
    other ranks contribute to allreduce.
    """
    comm = FakeComm(0, size, others=others)
    clock = FakeClock(step=0.0, log=comm.log)

    def fake_pingpong(comm_, sendbuf, recvbuf):
        comm.log.append(Op("round trip"))
        clock.advance(round_trip_s)

    return comm, fake_pingpong, clock


def _sequence(log):
    """'round trip x7, Barrier, clock, round trip x100, ...': a log, runs compressed."""
    names = [
        f"{op.kind}({op.tag})" if op.kind in ("allreduce", "Allreduce") else op.kind for op in log
    ]
    parts = []
    for name in names:
        if parts and parts[-1][0] == name:
            parts[-1][1] += 1
        else:
            parts.append([name, 1])
    shown = [n if k == 1 else f"{n} x{k}" for n, k in parts]
    if len(shown) > 12:
        shown = [*shown[:10], f"... ({len(shown) - 11} more) ...", shown[-1]]
    return ", ".join(shown)


def check_timing_sequence(log, warmup, reps):
    """AssertionError unless a traced time_pingpong did: all warm-up round trips, one Barrier,
    read the clock, the timed round trips (no Barrier among them), read the clock again."""
    kinds = [op.kind for op in log]
    where = f"(what time_pingpong did, in order: {_sequence(log)})"
    trips = [i for i, k in enumerate(kinds) if k == "round trip"]
    assert len(trips) == warmup + reps, (
        f"expected {warmup} warm-up + {reps} timed round trips, found {len(trips)} {where}"
    )
    barriers = [i for i, k in enumerate(kinds) if k == "Barrier"]
    assert barriers, f"synchronise the ranks with comm.Barrier() before timing {where}"
    assert len(barriers) == 1, (
        f"call comm.Barrier() once, after the warm-up and before the timed loop; found "
        f"{len(barriers)} Barriers (a Barrier inside the timed loop is timed too) {where}"
    )
    b = barriers[0]
    after = sum(i > b for i in trips[:warmup])
    assert after == 0, (
        f"all {warmup} warm-up round trips must come before the Barrier, but {after} came after "
        f"it {where}"
    )
    before = sum(i < b for i in trips[warmup:])
    assert before == 0, (
        f"the Barrier must come before every timed round trip, but {before} came before it {where}"
    )
    first_timed = trips[warmup] if reps else len(kinds)
    assert "clock" in kinds[b + 1 : first_timed], (
        f"start the clock after the Barrier and before the first timed round trip {where}"
    )
    last = trips[-1] if trips else b
    assert "clock" in kinds[last + 1 :], (
        f"read the clock again after the last timed round trip {where}"
    )
    return True


# -- student functions on the engines -------------------------------------------------------------
def ship(fn, _depth=0):
    """Package a notebook function with the globals it uses, to run it on the engines.

    ipyparallel re-creates an interactively defined function on an engine with the engine's
    globals, where the notebook's imports and constants do not exist. ship() records the
    module names and plain values the function refers to (and other notebook functions it
    calls, recursively); unship() puts them in place on the engine.
    """
    if not isinstance(fn, types.FunctionType) or fn.__module__ not in ("__main__", None):
        return ("value", fn)
    names = set()

    def collect(code):
        names.update(code.co_names)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                collect(const)

    collect(fn.__code__)
    env = []
    for name in sorted(names):
        if name not in fn.__globals__:
            continue
        value = fn.__globals__[name]
        if isinstance(value, types.ModuleType):
            env.append((name, "module", value.__name__))
        elif isinstance(value, types.FunctionType) and value.__module__ == "__main__":
            if _depth < 3 and value is not fn:
                env.append((name, "shipped", ship(value, _depth + 1)))
        else:
            try:
                if len(pickle.dumps(value)) < 1_000_000:
                    env.append((name, "value", value))
            except Exception:
                pass
    return ("shipped", fn, tuple(env))


def unship(package):
    """The function of a ship() package, with its globals restored (runs on the engine)."""
    import importlib

    kind = package[0]
    if kind == "value":
        return package[1]
    _, fn, env = package
    for name, how, value in env:
        if how == "module":
            fn.__globals__.setdefault(name, importlib.import_module(value))
        elif how == "shipped":
            fn.__globals__.setdefault(name, unship(value))
        else:
            fn.__globals__.setdefault(name, value)
    return fn


def _pingpong_on_engine(package, nbytes, iters):
    """Engine side: run a learner's fn(comm, sendbuf, recvbuf) `iters` times, check the echo."""
    from mpi4py import MPI

    from pingpong_lab import payload

    fn = unship(package)
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    base = payload.base(nbytes)
    sendbuf = np.zeros(nbytes, np.uint8)
    recvbuf = np.zeros(nbytes, np.uint8)
    corrupt, detail = 0, None
    comm.Barrier()
    for i in range(iters):
        if rank == 0:
            payload.fill(sendbuf, base, i)
            recvbuf[:] = 0
        fn(comm, sendbuf, recvbuf)
        if rank == 0 and not payload.matches(recvbuf, base, i):
            corrupt += 1
            if detail is None:  # only on failure: a message-sized temporary is fine here
                expected = np.empty_like(base)
                payload.fill(expected, base, i)
                bad = np.flatnonzero(recvbuf != expected)
                j = int(bad[0])
                detail = (
                    f"in round trip {i + 1}, {bad.size} of {nbytes} bytes differ, the first at "
                    f"byte {j}: expected {int(expected[j]):#04x}, received {int(recvbuf[j]):#04x}"
                    + (
                        " (recvbuf is still all zeros: no echo arrived in it)"
                        if not recvbuf.any()
                        else ""
                    )
                )
    comm.Barrier()
    return {"rank": rank, "corrupt": corrupt, "detail": detail}


def pingpong_on_engines_report(cluster, fn, nbytes, iters=3, timeout=ENGINE_TIMEOUT_S):
    """Rank 0's report of a learner's Python ping-pong on the engines: corrupt, detail."""
    results = cluster.run(_pingpong_on_engine, ship(fn), int(nbytes), int(iters), timeout=timeout)
    return results[0]


def pingpong_on_engines(cluster, fn, nbytes, iters=3, timeout=ENGINE_TIMEOUT_S):
    """Run a learner's Python ping-pong on the engines; number of corrupted echoes on rank 0."""
    return pingpong_on_engines_report(cluster, fn, nbytes, iters, timeout)["corrupt"]


def check_pingpong_on_engines(cluster, fn, sizes=(0, 1, 4097, 1 << 20), iters=3):
    """AssertionError unless every echo comes back intact at every size (with a deadline)."""
    for nbytes in sizes:
        report = pingpong_on_engines_report(cluster, fn, nbytes, iters)
        corrupt = report["corrupt"]
        assert corrupt == 0, (
            f"{corrupt} of {iters} echoes of {_nbytes_text(nbytes)} came back different from "
            f"what rank 0 sent; {report.get('detail')}"
        )
    return True


# -- learners' C --------------------------------------------------------------------------------
_OPS = {1: "Send", 2: "Recv", 3: "Isend", 4: "Irecv", 5: "Ssend", 6: "Sendrecv"}
_C_PRELUDE = """\
#include <mpi.h>
int pp_graded_send(const void *b, int n, MPI_Datatype t, int peer, int tag, MPI_Comm c);
int pp_graded_ssend(const void *b, int n, MPI_Datatype t, int peer, int tag, MPI_Comm c);
int pp_graded_recv(void *b, int n, MPI_Datatype t, int peer, int tag, MPI_Comm c, MPI_Status *s);
int pp_graded_isend(const void *b, int n, MPI_Datatype t, int peer, int tag, MPI_Comm c,
                    MPI_Request *r);
int pp_graded_irecv(void *b, int n, MPI_Datatype t, int peer, int tag, MPI_Comm c,
                    MPI_Request *r);
#define MPI_Send pp_graded_send
#define MPI_Ssend pp_graded_ssend
#define MPI_Recv pp_graded_recv
#define MPI_Isend pp_graded_isend
#define MPI_Irecv pp_graded_irecv
#line 1 "student.c"
"""
_C_POSTLUDE = """
#undef MPI_Send
#undef MPI_Ssend
#undef MPI_Recv
#undef MPI_Isend
#undef MPI_Irecv
#define PP_GRADED_MAX 64
static int pp_graded_log[PP_GRADED_MAX][4];
static int pp_graded_n;
static void pp_graded_note(int kind, int peer, int tag, int n, MPI_Datatype t)
{
    int size = 0;
    MPI_Type_size(t, &size);
    if (pp_graded_n < PP_GRADED_MAX) {
        pp_graded_log[pp_graded_n][0] = kind;
        pp_graded_log[pp_graded_n][1] = peer;
        pp_graded_log[pp_graded_n][2] = tag;
        pp_graded_log[pp_graded_n][3] = n * size;
    }
    pp_graded_n++;
}
int pp_graded_send(const void *b, int n, MPI_Datatype t, int peer, int tag, MPI_Comm c)
{
    pp_graded_note(1, peer, tag, n, t);
    return MPI_Send(b, n, t, peer, tag, c);
}
int pp_graded_ssend(const void *b, int n, MPI_Datatype t, int peer, int tag, MPI_Comm c)
{
    pp_graded_note(5, peer, tag, n, t);
    return MPI_Ssend(b, n, t, peer, tag, c);
}
int pp_graded_recv(void *b, int n, MPI_Datatype t, int peer, int tag, MPI_Comm c, MPI_Status *s)
{
    pp_graded_note(2, peer, tag, n, t);
    return MPI_Recv(b, n, t, peer, tag, c, s);
}
int pp_graded_isend(const void *b, int n, MPI_Datatype t, int peer, int tag, MPI_Comm c,
                    MPI_Request *r)
{
    pp_graded_note(3, peer, tag, n, t);
    return MPI_Isend(b, n, t, peer, tag, c, r);
}
int pp_graded_irecv(void *b, int n, MPI_Datatype t, int peer, int tag, MPI_Comm c,
                    MPI_Request *r)
{
    pp_graded_note(4, peer, tag, n, t);
    return MPI_Irecv(b, n, t, peer, tag, c, r);
}
int pp_graded_calls(int *out, int max_calls)
{
    int n = pp_graded_n < max_calls ? pp_graded_n : max_calls;
    n = n < PP_GRADED_MAX ? n : PP_GRADED_MAX;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 4; k++)
            out[4 * i + k] = pp_graded_log[i][k];
    return pp_graded_n;
}
void pp_graded_reset(void) { pp_graded_n = 0; }
"""


def instrument_c(source: str) -> str:
    """C source whose MPI_Send/Recv/Isend/Irecv/Ssend calls are recorded (peer, tag, bytes)."""
    return _C_PRELUDE + source + _C_POSTLUDE


def compile_student_c(path="pingpong.c", name="pingpong", instrument=False):
    """Compile the learner's C file (written by a %%writefile cell) into a library on disk."""
    from pingpong_lab.ckernels import compile_c

    source_path = Path(path)
    if not source_path.is_file():
        raise AssertionError(f"{path} does not exist: run the %%writefile {path} cell first")
    source = source_path.read_text()
    if instrument:
        source = instrument_c(source)
        name = f"{name}_graded"
    with contextlib.redirect_stdout(io.StringIO()):  # compiler warnings are not test output
        return str(compile_c(source, name=name))


def _c_pingpong_on_engine(lib, function, nbytes, iters, instrumented):
    """Engine side: call `int function(comm, sendbuf, recvbuf, nbytes)` iters times."""
    from mpi4py import MPI

    from pingpong_lab import ckernels, payload

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    base = payload.base(nbytes)
    sendbuf = np.zeros(max(nbytes, 1), np.uint8)
    recvbuf = np.zeros(max(nbytes, 1), np.uint8)
    handle = ckernels.load(lib)
    if instrumented:
        handle.pp_graded_reset()
    corrupt, codes = 0, []
    comm.Barrier()
    for i in range(iters):
        if rank == 0:
            payload.fill(sendbuf[:nbytes], base, i)
            recvbuf[:] = 0
        rc = ckernels.call_c(
            lib,
            function,
            comm,
            sendbuf.ctypes.data_as(ctypes.c_void_p),
            recvbuf.ctypes.data_as(ctypes.c_void_p),
            ctypes.c_int(nbytes),
        )
        codes.append(int(rc))
        if rc != 0:
            break
        if rank == 0 and not payload.matches(recvbuf[:nbytes], base, i):
            corrupt += 1
    calls = []
    if instrumented:
        out = (ctypes.c_int * (4 * 64))()
        n = handle.pp_graded_calls(out, 64)
        calls = [tuple(out[4 * k : 4 * k + 4]) for k in range(min(n, 64))]
    return {"rank": rank, "corrupt": corrupt, "codes": codes, "calls": calls}


def c_pingpong_on_engines(
    cluster,
    lib,
    nbytes,
    iters=3,
    function="pingpong_c",
    instrumented=False,
    timeout=ENGINE_TIMEOUT_S,
):
    """Run the learner's C ping-pong on every engine; per-rank results ordered by rank."""
    return cluster.run(
        _c_pingpong_on_engine,
        str(lib),
        function,
        int(nbytes),
        int(iters),
        bool(instrumented),
        timeout=timeout,
    )


def _raise_for_codes(results, function):
    for res in results:
        bad = [c for c in res["codes"] if c != 0]
        if bad:
            if bad[0] == NOT_IMPLEMENTED:
                raise AssertionError(
                    f"{function} is not implemented yet (it returned NOT_IMPLEMENTED)"
                )
            raise AssertionError(f"{function} returned {bad[0]} on rank {res['rank']} instead of 0")


def check_c_pingpong(cluster, lib_instrumented, nbytes=1000, iters=2, function="pingpong_c"):
    """Check the learner's C ping-pong (instrumented build) on the engines: calls and payload."""
    results = c_pingpong_on_engines(cluster, lib_instrumented, nbytes, iters, function, True)
    _raise_for_codes(results, function)
    shown = "; ".join(
        f"rank {r['rank']}: "
        + (
            ", ".join(f"{_OPS.get(k, k)}(peer={p}, tag={t}, {b} B)" for k, p, t, b in r["calls"])
            or "nothing"
        )
        for r in results
    )
    where = f"(calls seen in the first round trip of {nbytes} bytes: {shown})"
    per_trip = [r["calls"][: len(r["calls"]) // iters] if r["calls"] else [] for r in results]
    r0, r1 = per_trip[0], per_trip[1]
    assert [c[0] for c in r0] in ([1, 2], [5, 2]), f"rank 0 must MPI_Send, then MPI_Recv {where}"
    assert [c[0] for c in r1] in ([2, 1], [2, 5]), f"rank 1 must MPI_Recv, then MPI_Send {where}"
    assert r0[0][1] == 1 and r1[1][1] == 0, f"ranks 0 and 1 must send to each other {where}"
    assert r0[0][3] == nbytes and r1[1][3] == nbytes, (
        f"each message must carry all {nbytes} bytes {where}"
    )
    assert _tags_match(r0[0][2], r1[0][2]) and _tags_match(r1[1][2], r0[1][2]), (
        f"tags differ {where}"
    )
    assert results[0]["corrupt"] == 0, (
        f"{results[0]['corrupt']} of {iters} echoes came back different from what rank 0 sent "
        f"{where}"
    )
    return True


def check_c_payload(cluster, lib, sizes=(0, 1, 4097, 1 << 20), iters=2, function="pingpong_c"):
    """The uninstrumented C ping-pong echoes every size intact on the engines."""
    for nbytes in sizes:
        results = c_pingpong_on_engines(cluster, lib, nbytes, iters, function)
        _raise_for_codes(results, function)
        corrupt = results[0]["corrupt"]
        assert corrupt == 0, (
            f"{corrupt} of {iters} echoes of {_nbytes_text(nbytes)} came back different from "
            "what rank 0 sent"
        )
    return True


# -- more ranks: a separate mpiexec job, with a deadline ---------------------------------------
def run_c_with_ranks(
    lib, nranks=3, nbytes=100, iters=2, function="pingpong_c", timeout=MPIEXEC_TIMEOUT_S
):
    """Run the C ping-pong in a fresh `mpiexec -n nranks` job; per-rank results.

    The job runs in its own process group and is killed whole when it passes the deadline.
    """
    from pingpong_lab import mpi_env

    with tempfile.TemporaryDirectory(prefix="pp-grade-") as out_dir:
        cmd = [
            mpi_env.mpiexec(),
            "-n",
            str(nranks),
            sys.executable,
            "-m",
            "pingpong_lab.grading",
            "c-pingpong",
            str(lib),
            function,
            str(nbytes),
            str(iters),
            out_dir,
        ]
        try:
            proc = run_group(cmd, timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"with {nranks} ranks, {function} did not finish within {timeout:g} s: probably "
                "a deadlock (do ranks other than 0 and 1 wait for a message that never comes?)"
            ) from None
        results = [json.loads(p.read_text()) for p in sorted(Path(out_dir).glob("rank*.json"))]
    if proc.returncode != 0 or len(results) != nranks:
        tail = "\n".join(proc.stderr.strip().splitlines()[-6:])
        raise AssertionError(
            f"the {nranks}-rank run of {function} failed (exit {proc.returncode}):\n{tail}"
        )
    return sorted(results, key=lambda r: r["rank"])


def check_c_with_ranks(lib, nranks=3, nbytes=100, function="pingpong_c"):
    results = run_c_with_ranks(lib, nranks, nbytes, function=function)
    _raise_for_codes(results, function)
    corrupt = results[0]["corrupt"]
    assert corrupt == 0, (
        f"with {nranks} ranks, {corrupt} echoes of {_nbytes_text(nbytes)} came back different "
        "from what rank 0 sent"
    )
    return True


def _job_main(argv):
    if argv[:1] != ["c-pingpong"]:
        print("usage: python -m pingpong_lab.grading c-pingpong LIB FUNCTION NBYTES ITERS OUTDIR")
        return 2
    lib, function, nbytes, iters, out_dir = argv[1], argv[2], int(argv[3]), int(argv[4]), argv[5]
    result = _c_pingpong_on_engine(lib, function, nbytes, iters, False)
    Path(out_dir, f"rank{result['rank']:05d}.json").write_text(json.dumps(result))
    return 0


# -- checks on plain values -----------------------------------------------------------------------
def assert_close(actual, expected, rtol=1e-6, what="the result"):
    """AssertionError with both values when actual is not expected within rtol."""
    actual_f = float(actual)
    if not np.isclose(actual_f, expected, rtol=rtol, atol=0):
        raise AssertionError(f"{what}: expected {expected:.6g}, got {actual_f:.6g}")


def within_ratio(measured, reference, low=0.2, high=5.0, what="the measurement"):
    """Compare with the reference measured in the same run: a wide ratio band, never absolutes."""
    ratio = float(measured) / float(reference)
    if not (low <= ratio <= high):
        raise AssertionError(
            f"{what} is {ratio:.2g}x the reference kernel measured just now "
            f"(expected between {low:g}x and {high:g}x)"
        )
    return ratio


# ================================================================================================
# helper-3: functions for notebooks 03-05 go below this line (append only).
# ================================================================================================

# --- helpers for notebooks 03-05 ---
# Notebook 04's C regression challenge: the learner writes
#     int linfit(int n, const double *x, const double *y, const double *w,
#                double *alpha, double *beta)
# in linfit.c; it is compiled with the main() below into a plain executable (no MPI) and run as
# a subprocess with a deadline, so a crash or an endless loop fails the cell, not the kernel.

LINFIT_MAIN_C = r"""
/* Course driver for linfit(): reads "n weighted" then n lines "x y w" on stdin and prints
 * "status alpha beta". Written by pingpong_lab.grading; not part of the exercise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int linfit(int n, const double *x, const double *y, const double *w, double *alpha,
           double *beta);

int main(void)
{
    int n = 0, weighted = 0;
    if (scanf("%d %d", &n, &weighted) != 2 || n < 0)
        return 2;
    double *x = malloc((size_t)(n + 1) * sizeof *x);
    double *y = malloc((size_t)(n + 1) * sizeof *y);
    double *w = malloc((size_t)(n + 1) * sizeof *w);
    if (!x || !y || !w)
        return 3;
    for (int i = 0; i < n; i++)
        if (scanf("%lf %lf %lf", &x[i], &y[i], &w[i]) != 3)
            return 2;
    double alpha = NAN, beta = NAN;
    int status = linfit(n, x, y, weighted ? w : NULL, &alpha, &beta);
    printf("%d %.17g %.17g\n", status, alpha, beta);
    free(x);
    free(y);
    free(w);
    return 0;
}
"""


def _c_compiler() -> str:
    """A plain C compiler: $CC, else cc, else the environment's mpicc (also a C compiler)."""
    import shutil

    found = shutil.which(os.environ.get("CC", "cc"))
    if found:
        return found
    from pingpong_lab import mpi_env

    return mpi_env.mpicc()


def build_linfit(path="linfit.c", timeout=MPIEXEC_TIMEOUT_S) -> str:
    """Compile the learner's linfit.c with the course's main(); the executable's path.

    The executable is named after a hash of the source, so an edited cell is always rebuilt.
    Compiler errors become an AssertionError that quotes them (nothing goes to stderr).
    """
    import hashlib

    from pingpong_lab.ckernels import build_dir

    source_path = Path(path)
    if not source_path.is_file():
        raise AssertionError(f"{path} does not exist: run the %%writefile {path} cell first")
    source = source_path.read_text()
    digest = hashlib.sha1((source + LINFIT_MAIN_C).encode()).hexdigest()[:12]
    out_dir = build_dir()
    exe = out_dir / f"linfit_{digest}"
    if exe.exists():
        return str(exe)
    src = out_dir / f"linfit_{digest}.c"
    main = out_dir / f"linfit_main_{digest}.c"
    src.write_text(source)
    main.write_text(LINFIT_MAIN_C)
    tmp = out_dir / f"linfit_{digest}.{os.getpid()}.tmp"
    cmd = [_c_compiler(), "-O2", "-Wall", "-Wextra", str(src), str(main), "-o", str(tmp), "-lm"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"compiling {path} took more than {timeout:g} s") from None
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        messages = proc.stderr.replace(str(src), source_path.name).strip()
        raise AssertionError(f"{source_path.name} does not compile:\n{messages}")
    os.replace(tmp, exe)
    return str(exe)


def c_linfit(exe, x, y, w=None, timeout=10.0):
    """Run a linfit executable on (x, y[, w]); returns (status, alpha, beta).

    ``w`` weights the *squared* residuals (None: unweighted). A crash, a deadline overrun or
    unreadable output raise AssertionError with a readable message.
    """
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    weighted = w is not None
    w = np.ones_like(x) if w is None else np.asarray(w, dtype=float).ravel()
    if not (x.size == y.size == w.size):
        raise ValueError(f"x, y and w differ in length ({x.size}, {y.size}, {w.size})")
    lines = [f"{x.size} {int(weighted)}"]
    lines += [f"{a!r} {b!r} {c!r}" for a, b, c in zip(x.tolist(), y.tolist(), w.tolist())]
    try:
        proc = subprocess.run(
            [str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True,
            timeout=timeout,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"linfit did not finish within {timeout:g} s (an endless loop?)"
        ) from None
    if proc.returncode < 0:
        sig = -proc.returncode
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else sig
        raise AssertionError(
            f"linfit crashed ({name}): an array index out of range or an uninitialised pointer?"
        )
    if proc.returncode != 0:
        raise AssertionError(f"the linfit driver failed (exit {proc.returncode})")
    parts = proc.stdout.split()
    try:
        status, alpha, beta = int(parts[-3]), float(parts[-2]), float(parts[-1])
    except (IndexError, ValueError):
        raise AssertionError(f"unexpected output from linfit: {proc.stdout[-200:]!r}") from None
    if status == NOT_IMPLEMENTED:
        raise AssertionError("linfit is not implemented yet (it returned NOT_IMPLEMENTED)")
    return status, alpha, beta


def assert_fit_matches(alpha, beta, x, y, w_numpy=None, rtol=1e-6, what="fit"):
    """alpha and beta agree with numpy.polyfit(x, y, 1, w=w_numpy) (w multiplies residuals).

    beta within ``rtol``; alpha within ``rtol`` of itself or 1e-9 of the largest time, whichever
    is larger (an intercept computed from sums of huge sizes loses a few digits legitimately).
    """
    ref_beta, ref_alpha = np.polyfit(np.asarray(x, float), np.asarray(y, float), 1, w=w_numpy)
    tol_alpha = max(rtol * abs(ref_alpha), 1e-9 * float(np.max(np.abs(y))))
    if not (np.isfinite(alpha) and abs(alpha - ref_alpha) <= tol_alpha):
        raise AssertionError(f"{what}: alpha should be {ref_alpha:.6g} s, got {alpha:.6g} s")
    if not (np.isfinite(beta) and np.isclose(beta, ref_beta, rtol=rtol, atol=0)):
        raise AssertionError(f"{what}: beta should be {ref_beta:.6g} s/B, got {beta:.6g} s/B")
    return True


if __name__ == "__main__":
    sys.exit(_job_main(sys.argv[1:]))
