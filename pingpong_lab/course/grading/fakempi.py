"""Fake MPI for test cells: communicators that record every call instead of communicating.

A learner's function is first run on FakeComm ranks, which record each call (peer, tag, byte
count, payload) without any MPI, so a wrong peer or a deadlock-prone order is reported as a
readable assertion, never as a hang.
"""

from __future__ import annotations

import contextlib
import types

import numpy as np

ANY_SOURCE = -1  # the values of MPI.ANY_SOURCE / MPI.ANY_TAG in MPICH and Open MPI
ANY_TAG = -1
# the calls that send (buffers, then pickled objects) and that receive
SEND_KINDS = ("Send", "Ssend", "Rsend", "Bsend", "Isend", "Sendrecv", "send", "ssend", "isend")
RECV_KINDS = ("Recv", "Irecv", "recv")


def wildcards():
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
        if not (0 <= peer < self._size or peer in wildcards()):
            raise ValueError(
                f"rank {self._rank}: {what}={peer} is not a rank of a "
                f"{self._size}-rank communicator"
            )
        if peer == self._rank:
            raise ValueError(f"rank {self._rank} sends to or receives from itself ({what}={peer})")

    def _last_sent(self):
        for op in reversed(self.log):
            if op.kind in SEND_KINDS and op.data is not None:
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


def comm_ops(log, kinds=SEND_KINDS + RECV_KINDS):
    """The communication calls of a log (Barrier, allreduce etc. left out unless asked)."""
    return [op for op in log if op.kind in kinds]


def describe_calls(logs):
    return "; ".join(f"rank {r}: {comm_ops(log) or 'nothing'}" for r, log in enumerate(logs))


def tags_match(send_tag, recv_tag):
    return recv_tag in (send_tag, ANY_TAG) or recv_tag in wildcards()


def echo_sent_by(log, tag=ANY_TAG):
    """The bytes a rank sent to rank 0 (the first such message whose tag matches), or None."""
    for op in log:
        if op.kind in SEND_KINDS and op.peer == 0 and op.data is not None:
            if tags_match(op.tag, tag):
                return op.data
    return None
