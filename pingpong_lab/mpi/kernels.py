"""Ping-pong kernels in Python (mpi4py), with the same interface and outputs as kernels_c.

Every kernel is called on every rank of `comm` at once:

    samples, n_corrupt = kernel(comm, nbytes, warmup, iters, shared_buffer=False, batch=1)

`samples[i]` is the round-trip time of timed iteration i in seconds on ranks that start an
exchange and NaN on the others (answering or idle ranks); `n_corrupt` counts the messages this
rank received that differ from the payload sent. With batch=k each sample is the mean round trip
of k back-to-back exchanges (for round trips too short for the timer); the payload changes from
sample to sample. The method (buffers, payload, untimed checks) is described once, in
docs/method.md.

- ``blocking``: buffer-mode ``Send``/``Recv`` on byte arrays (no pickling, like C).
- ``nonblocking``: ``Isend``/``Irecv`` and ``Waitall``.
- ``pairwise``: rank r < size/2 ping-pongs with r + size/2, all pairs at once.
- ``pickle``: lowercase ``send``/``recv`` that pickle a Python object: the teaching contrast.
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from . import buffers, payload
from .ckernels import check_args


def tags() -> tuple[int, int]:
    """(message tag, "checked, ready" tag): the C kernels' (kernels_c/pp_util.h), so that a
    Python and a C rank speak the same protocol; read from the built library's interface."""
    from .ckernels import interface

    i = interface()
    return i.tag, i.tag_ready


def _messages(comm, peer, sbuf, rbuf, nbytes, style):
    """(start, answer) for a style, with everything bound before the timed loop.

    start() sends sbuf and receives the reply into rbuf; answer(flip) receives into rbuf and
    replies with sbuf, one byte flipped if flip (restored afterwards unless sbuf is rbuf).
    Both return what arrived. Pre-built message specs, bound methods and positional arguments
    keep the Python overhead per message small (the same habits as mpi4py.bench).
    """
    from mpi4py import MPI

    TAG = tags()[0]  # noqa: N806 - the protocol's constant, bound once for the loop
    s_msg, r_msg = [sbuf, nbytes, MPI.BYTE], [rbuf, nbytes, MPI.BYTE]
    Send, Recv, Isend, Irecv = comm.Send, comm.Recv, comm.Isend, comm.Irecv
    waitall = MPI.Request.Waitall
    shared = sbuf is rbuf
    half = nbytes // 2

    if style == "pickle":

        def start():
            comm.send(sbuf, peer, TAG)
            return comm.recv(None, peer, TAG)

        def answer(flip):
            got = comm.recv(None, peer, TAG)
            reply = got if shared else sbuf  # shared: send back the very object received
            if flip and nbytes:
                reply = reply.copy()
                reply[half] ^= 0xFF
            comm.send(reply, peer, TAG)
            return got

        return start, answer

    if style == "nonblocking":

        def start():
            if shared:  # never receive into a buffer being sent
                Isend(s_msg, peer, TAG).Wait()
                Irecv(r_msg, peer, TAG).Wait()
            else:
                waitall([Irecv(r_msg, peer, TAG), Isend(s_msg, peer, TAG)])
            return rbuf

        def receive():
            Irecv(r_msg, peer, TAG).Wait()

        def reply():
            Isend(s_msg, peer, TAG).Wait()

    else:

        def start():
            Send(s_msg, peer, TAG)
            Recv(r_msg, peer, TAG)
            return rbuf

        def receive():
            Recv(r_msg, peer, TAG)

        def reply():
            Send(s_msg, peer, TAG)

    def answer(flip):
        receive()
        if not (flip and nbytes):
            reply()
            return rbuf
        sbuf[half] ^= 0xFF  # fault injection: one wrong byte in the reply
        reply()
        if not shared:
            sbuf[half] ^= 0xFF  # its own copy of the payload stays intact
        return rbuf

    return start, answer


def _run_pairs(
    comm, peer, starts, nbytes, warmup, iters, shared_buffer, corrupt_echo, style, batch=1
):
    """The round trips of one rank, as in kernels_c/pp_util.c (OSU's method, checked).

    Each rank sends from its own buffer and receives into another (one buffer with
    shared_buffer). The payload is written once and only its first and last 8 bytes change
    from iteration to iteration (payload.stamp). The starting rank checks each reply after
    stopping its clock; the answering rank replies from its own buffer, then checks what it
    received, stamps its next reply and sends an empty "ready" message, which the starter
    waits for before starting its clock again: no check is ever timed. With shared_buffer the
    answering rank sends back the very bytes it received and the starter checks both ways.
    """
    from mpi4py import MPI

    samples = np.full(iters, np.nan)
    if peer is None:  # idle rank: joins only the synchronised start
        comm.Barrier()
        return samples, 0
    sbuf = buffers.reused("send", nbytes)
    rbuf = sbuf if shared_buffer else buffers.reused("recv", nbytes)
    stamps = payload.Stamps(nbytes)
    stamps.body(sbuf)  # once per call
    start, answer = _messages(comm, peer, sbuf, rbuf, nbytes, style)
    TAG_READY = tags()[1]  # noqa: N806 - the answering rank's empty "checked, ready" message
    ready = [rbuf, 0, MPI.BYTE]  # an empty message
    more = range(batch - 1)  # empty for one round trip per sample
    corrupt = 0
    if not starts:
        stamps.stamp(sbuf, -warmup)
        for i in range(-warmup, iters):
            if i == 0:
                comm.Barrier()
            for _ in more:
                answer(False)
            got = answer(corrupt_echo)
            if not shared_buffer:  # after replying, off the starter's clock:
                corrupt += not stamps.ok(got, i)
                stamps.stamp(sbuf, i + 1)
                comm.Send(ready, peer, TAG_READY)
        return samples, corrupt
    wtime = MPI.Wtime
    for i in range(-warmup, iters):
        if i == 0:
            comm.Barrier()  # synchronised start of the timed iterations
        stamps.stamp(sbuf, i)  # outside the timed region: 16 bytes
        t0 = wtime()
        for _ in more:
            start()
        got = start()
        t1 = wtime()
        if not stamps.ok(got, i):  # outside the timed region
            corrupt += 1
            if shared_buffer:  # the corrupted reply is the next message's body: rewrite it
                stamps.body(sbuf)
        if not shared_buffer:  # the answering rank has checked its message too
            comm.Recv(ready, peer, TAG_READY)
        if i >= 0:
            samples[i] = (t1 - t0) / batch
    return samples, corrupt


def _pingpong(style):
    def kernel(comm, nbytes, warmup, iters, shared_buffer=False, corrupt_echo=False, batch=1):
        check_args(comm, nbytes, warmup, iters, batch)
        rank = comm.Get_rank()
        peer = {0: 1, 1: 0}.get(rank)
        return _run_pairs(
            comm, peer, rank == 0, nbytes, warmup, iters, shared_buffer, corrupt_echo, style, batch
        )

    kernel.__name__ = f"pingpong_{style}"
    kernel.__doc__ = f"Ping-pong between ranks 0 and 1 ({style}); other ranks idle."
    return kernel


pingpong_blocking = _pingpong("blocking")
pingpong_nonblocking = _pingpong("nonblocking")
pingpong_pickle = _pingpong("pickle")


def pairwise(comm, nbytes, warmup, iters, shared_buffer=False, corrupt_echo=False, batch=1):
    """Every rank r < size/2 ping-pongs with r + size/2 at the same time (blocking)."""
    check_args(comm, nbytes, warmup, iters, batch)
    size, rank = comm.Get_size(), comm.Get_rank()
    if size % 2:
        raise KernelError(
            f"the pairwise exchange needs an even number of ranks (bottom half <-> top half); "
            f"got {size}"
        )
    half = size // 2
    peer = rank + half if rank < half else rank - half
    return _run_pairs(
        comm,
        peer,
        rank < half,
        nbytes,
        warmup,
        iters,
        shared_buffer,
        corrupt_echo,
        "blocking",
        batch,
    )


PYTHON_KERNELS = {
    "blocking": pingpong_blocking,
    "nonblocking": pingpong_nonblocking,
    "pairwise": pairwise,
    "pickle": pingpong_pickle,
}
