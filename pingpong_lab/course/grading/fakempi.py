"""Fake MPI for test cells: communicators that record every call instead of communicating.

A learner's function is first run on FakeComm ranks, which record each call (peer, tag, byte
count, payload) without any MPI, so a wrong peer or a deadlock-prone order is reported as a
readable assertion, never as a hang. Arguments are checked as MPI checks them: buffer specs as
mpi4py reads them, wildcards and MPI.PROC_NULL with the values of the MPI in use (matching).
"""

from __future__ import annotations

import contextlib
import operator
import types
from typing import NamedTuple

import numpy as np

from .matching import mpi_constants

# the calls that send (buffers, then pickled objects) and that receive
SEND_KINDS = ("Send", "Ssend", "Rsend", "Bsend", "Isend", "Sendrecv", "send", "ssend", "isend")
RECV_KINDS = ("Recv", "Irecv", "recv")


class Message(NamedTuple):
    """What a fake receive gets: the data, the rank it came from and the tag it was sent with."""

    data: object
    source: int
    tag: int


class Op:
    """One recorded call: kind ('Send', 'Recv', ...), peer, tag, nbytes, data (bytes sent)."""

    def __init__(self, kind, peer=None, tag=None, nbytes=None, data=None, buf=None):
        self.kind, self.peer, self.tag, self.nbytes, self.data = kind, peer, tag, nbytes, data
        self.buf = buf

    def __repr__(self):
        return describe_op(self, mpi_constants())


def describe_op(op, constants):
    """'(Recv peer=MPI.ANY_SOURCE tag=3 8 B)': wildcards by name, in the learner's language."""
    parts = [op.kind]
    receive = op.kind in RECV_KINDS
    if op.peer is not None:
        special = {constants.proc_null: "PROC_NULL"}
        if receive:
            special[constants.any_source] = "ANY_SOURCE"
        name = special.get(op.peer)
        parts.append(f"peer={constants.prefix}{name}" if name else f"peer={op.peer}")
    if op.tag is not None:
        tag = constants.recv_tag_text(op.tag) if receive else op.tag
        parts.append(f"tag={tag}")
    if op.nbytes is not None:
        parts.append(f"{op.nbytes} B")
    return "(" + " ".join(str(p) for p in parts) + ")"


# -- buffer specs, as mpi4py reads them -----------------------------------------------------------
def _is_datatype(item) -> bool:
    if isinstance(item, str):  # a typecode such as "B"
        return True
    try:
        from mpi4py import MPI
    except ImportError:
        return False
    return isinstance(item, MPI.Datatype)


def _unpack_spec(spec):
    """(buf, count, displ, datatype) of a message: buf, [buf, type], [buf, count], [buf, count,
    type], [buf, (count, displ), type] or [buf, count, displ, type]; None where not given."""
    if not isinstance(spec, (list, tuple)):
        return spec, None, None, None
    if len(spec) == 2:
        buf, second = spec
        if _is_datatype(second):
            return buf, None, None, second
        if isinstance(second, (list, tuple)):
            count, displ = second
            return buf, count, displ, None
        return buf, second, None, None
    if len(spec) == 3:
        buf, count, datatype = spec
        if isinstance(count, (list, tuple)):
            count, displ = count
            return buf, count, displ, datatype
        return buf, count, None, datatype
    if len(spec) == 4:
        return tuple(spec)
    raise ValueError(
        f"a message is a buffer or a list of 2 to 4 items ([buf, MPI.BYTE], [buf, count, "
        f"MPI.BYTE], [buf, count, displ, MPI.BYTE]); this one has {len(spec)} items"
    )


def _extent(datatype, buf) -> int:
    """Bytes per item: of the MPI datatype (or its typecode string), else of the buffer."""
    if datatype is None:
        return memoryview(buf).itemsize
    if isinstance(datatype, str):
        from mpi4py import MPI

        datatype = MPI._typedict[datatype]
    return datatype.Get_extent()[1]


def _byte_view(spec):
    """The bytes a message spec covers, as a flat memoryview (writable if the buffer is)."""
    buf, count, displ, datatype = _unpack_spec(spec)
    if isinstance(buf, str):
        raise TypeError("a str is not a byte buffer: use a bytearray or a numpy uint8 array")
    try:
        view = memoryview(buf).cast("B")
    except TypeError as exc:
        raise TypeError(
            f"{type(buf).__name__} is not a buffer: the uppercase Send/Recv need a buffer "
            "such as a numpy array or bytearray"
        ) from exc
    extent = _extent(datatype, buf)
    start = (0 if displ is None else operator.index(displ)) * extent
    if count is None:
        if (len(view) - start) % extent:
            raise ValueError(
                f"a {len(view) - start}-byte buffer is not a whole number of {extent}-byte items: "
                "for a message counted in bytes use MPI.BYTE"
            )
        return view[start:]
    end = start + operator.index(count) * extent
    if start < 0 or end > len(view) or end < start:
        raise ValueError(
            f"the message spec asks for bytes {start} to {end} of a {len(view)}-byte buffer: "
            "its count (and displacement) go beyond the buffer"
        )
    return view[start:end]


def _set_status(status, message, nbytes):
    """Fill an MPI.Status as MPI does after a receive: source, tag and the bytes received."""
    if status is None:
        return
    from mpi4py import MPI

    status.Set_source(message.source)
    status.Set_tag(message.tag)
    status.Set_elements(MPI.BYTE, nbytes)


class FakeRequest:
    """A request from FakeComm.Isend/Irecv; Wait/Test complete it (and fill a status given)."""

    def __init__(self, comm, op, fill=None):
        self.comm, self.op, self._fill, self.done = comm, op, fill, False

    def Wait(self, status=None):
        if not self.done:
            self.done = True
            if self._fill is not None:
                self._fill(status)
            self.comm.log.append(Op("Wait", self.op.peer, self.op.tag))
        return True

    wait = Wait

    def Test(self, status=None):
        self.Wait(status)
        return True

    def Free(self):
        self.done = True


class FakeComm:
    """A communicator that records calls instead of communicating (one rank of `size`).

    `incoming(source, tag, nbytes)` gives what a receive gets: the bytes (or object), or a
    Message that also says which rank sent it with which tag; None: nothing arrives, and a
    buffer receive gets zeros. Default: the last message this rank sent, as a correct echo
    would return it. A receive that names a wildcard and gets plain bytes reports them as sent
    by the partner rank (1 for rank 0, else 0) with tag 0. `others` are the values that the
    other ranks contribute to allreduce/Allreduce (default: none, so the result is this rank's).
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

    # -- arguments, checked as MPI checks them
    def _check_rank(self, peer, what):
        if not 0 <= peer < self._size:
            raise ValueError(
                f"rank {self._rank}: {what}={peer} is not a rank of a "
                f"{self._size}-rank communicator"
            )
        if peer == self._rank:
            raise ValueError(f"rank {self._rank} sends to or receives from itself ({what}={peer})")

    def _check_dest(self, dest):
        _require_int(dest, "dest")
        mpi = mpi_constants()
        if dest == mpi.proc_null:
            return
        if dest == mpi.any_source:
            raise ValueError(
                f"rank {self._rank}: dest=MPI.ANY_SOURCE: a send needs the rank it goes to; "
                "MPI.ANY_SOURCE is a wildcard for receives only"
            )
        self._check_rank(dest, "dest")

    def _check_source(self, source):
        _require_int(source, "source")
        if source not in (mpi_constants().any_source, mpi_constants().proc_null):
            self._check_rank(source, "source")

    def _check_tag(self, tag, receive):
        _require_int(tag, "tag")
        mpi = mpi_constants()
        if tag >= 0 or (receive and tag == mpi.any_tag):
            return
        if tag == mpi.any_tag:
            hint = "MPI.ANY_TAG is a wildcard for receives only; a send needs a tag"
        elif tag == mpi.any_source:
            hint = f"{tag} is MPI.ANY_SOURCE, the wildcard for source=; for tag= it is MPI.ANY_TAG"
        else:
            hint = "tags are 0 or more"
        raise ValueError(f"rank {self._rank}: tag={tag} is not a valid tag: {hint}")

    # -- what arrives
    def _last_sent(self):
        for op in reversed(self.log):
            if op.kind in SEND_KINDS and op.data is not None:
                return op.data
        return None

    def _message_for(self, source, tag, nbytes):
        got = self._incoming(source, tag, nbytes) if self._incoming else self._last_sent()
        if isinstance(got, Message):
            return got
        mpi = mpi_constants()
        partner = 1 if self._rank == 0 else 0
        return Message(
            got,
            partner if source == mpi.any_source else source,
            0 if tag == mpi.any_tag else tag,
        )

    def _deliver(self, view, source, tag, status):
        """Write the message for this receive into view (and status), as MPI_Recv would."""
        mpi = mpi_constants()
        if source == mpi.proc_null:  # MPI: returns at once, nothing received
            _set_status(status, Message(None, mpi.proc_null, mpi.any_tag), 0)
            return
        message = self._message_for(source, tag, view.nbytes)
        data = bytes(view.nbytes) if message.data is None else message.data
        if not isinstance(data, (bytes, bytearray, memoryview, np.ndarray)):
            return  # a pickled object: nothing a buffer can take
        data = bytes(memoryview(data).cast("B"))
        if len(data) > view.nbytes:
            raise ValueError(
                f"rank {self._rank}: a {len(data)}-byte message arrives in a "
                f"{view.nbytes}-byte receive buffer (MPI_ERR_TRUNCATE)"
            )
        view[: len(data)] = data
        _set_status(status, message, len(data))

    # -- point to point, buffers
    def _send(self, kind, buf, dest, tag):
        self._check_dest(dest)
        self._check_tag(tag, receive=False)
        view = _byte_view(buf)
        self.log.append(Op(kind, dest, tag, view.nbytes, bytes(view)))

    def _receive(self, buf, source, tag):
        """A receive's (source, tag, byte view), checked; None: the wildcard, as in mpi4py."""
        mpi = mpi_constants()
        source = mpi.any_source if source is None else source
        tag = mpi.any_tag if tag is None else tag
        self._check_source(source)
        self._check_tag(tag, receive=True)
        return source, tag, None if buf is None else _byte_view(buf)

    def Send(self, buf, dest, tag=0):
        self._send("Send", buf, dest, tag)

    def Ssend(self, buf, dest, tag=0):
        self._send("Ssend", buf, dest, tag)

    def Rsend(self, buf, dest, tag=0):
        self._send("Rsend", buf, dest, tag)

    def Bsend(self, buf, dest, tag=0):
        self._send("Bsend", buf, dest, tag)

    # source/tag None: not given, MPI.ANY_SOURCE / MPI.ANY_TAG as in mpi4py
    def Recv(self, buf, source=None, tag=None, status=None):
        source, tag, view = self._receive(buf, source, tag)
        self.log.append(Op("Recv", source, tag, view.nbytes, buf=view))
        self._deliver(view, source, tag, status)

    def Isend(self, buf, dest, tag=0):
        self._send("Isend", buf, dest, tag)
        return FakeRequest(self, self.log[-1])

    def Irecv(self, buf, source=None, tag=None):
        source, tag, view = self._receive(buf, source, tag)
        op = Op("Irecv", source, tag, view.nbytes, buf=view)
        self.log.append(op)
        return FakeRequest(self, op, fill=lambda status: self._deliver(view, source, tag, status))

    def Sendrecv(
        self, sendbuf, dest, sendtag=0, recvbuf=None, source=None, recvtag=None, status=None
    ):
        self._send("Sendrecv", sendbuf, dest, sendtag)
        if recvbuf is not None:
            source, recvtag, view = self._receive(recvbuf, source, recvtag)
            self._deliver(view, source, recvtag, status)

    # -- point to point, pickled objects
    def send(self, obj, dest, tag=0):
        self._check_dest(dest)
        self._check_tag(tag, receive=False)
        self.log.append(Op("send", dest, tag, None, obj))

    def ssend(self, obj, dest, tag=0):
        self.send(obj, dest, tag)
        self.log[-1].kind = "ssend"

    def recv(self, buf=None, source=None, tag=None, status=None):
        source, tag, _ = self._receive(None, source, tag)
        self.log.append(Op("recv", source, tag))
        nothing = source == mpi_constants().proc_null  # MPI: returns at once, mpi4py gives None
        obj = None if nothing else self._message_for(source, tag, 0).data
        self.objects_received.append(obj)
        return obj

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
    """While tracing fn on fake communicators, its global `MPI` handles fake requests: yields
    the callable to trace. A function that lives in another process (the learner's, seen from
    the grader's judge) gets the fake MPI for the duration of each call instead."""
    swap = getattr(type(fn), "with_globals", None)
    if swap is not None:
        from mpi4py import MPI

        yield swap(fn, MPI=_FakeMPIModule(MPI))
        return
    g = getattr(fn, "__globals__", {})
    real = g.get("MPI")
    if not isinstance(real, types.ModuleType) or isinstance(real, _FakeMPIModule):
        yield fn
        return
    g["MPI"] = _FakeMPIModule(real)
    try:
        yield fn
    finally:
        g["MPI"] = real


def comm_ops(log, kinds=SEND_KINDS + RECV_KINDS):
    """The communication calls of a log (Barrier, allreduce etc. left out unless asked)."""
    return [op for op in log if op.kind in kinds]


def describe_calls(logs):
    return "; ".join(f"rank {r}: {comm_ops(log) or 'nothing'}" for r, log in enumerate(logs))


def message_to(log, sender, receiver, source, tag):
    """The first message in `sender`'s log that a receive on `receiver` (from `source`, with
    `tag`) accepts, as a Message; None if there is none (on real MPI that receive waits)."""
    mpi = mpi_constants()
    if not mpi.source_matches(sender, source):
        return None
    for op in log:
        if op.kind in SEND_KINDS and op.peer == receiver and op.data is not None:
            if mpi.tag_matches(op.tag, tag):
                return Message(op.data, sender, op.tag)
    return None


def echo_sent_by(log, tag=None):
    """The bytes a rank sent to rank 0: the first message that a receive with `tag` accepts
    (None: any tag), or None."""
    mpi = mpi_constants()
    message = message_to(log, None, 0, mpi.any_source, mpi.any_tag if tag is None else tag)
    return None if message is None else message.data


def _require_int(value, what):
    if not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an int, got {value!r}")
