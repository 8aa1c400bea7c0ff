"""Ping-pong kernels in Python (mpi4py), with the same interface and outputs as kernels_c.

Every kernel is called on every rank of `comm` at once:

    samples, n_corrupt = kernel(comm, nbytes, warmup, iters, shared_buffer=False, batch=1)

`samples[i]` is the round-trip time of timed iteration i in seconds on ranks that start an
exchange and NaN on the others (echoing or idle ranks); `n_corrupt` counts echoes that came back
different from what was sent. With batch=k each sample is the mean round trip of k back-to-back
exchanges (for round trips too short for the timer); the payload changes from sample to sample.
Warm-up iterations are not timed, a Barrier starts the timed iterations together, and the
payload is written before and checked after the timed region.

- ``blocking``: buffer-mode ``Send``/``Recv`` on byte arrays (no pickling, like C).
- ``nonblocking``: ``Isend``/``Irecv`` and ``Waitall``.
- ``pairwise``: rank r < size/2 ping-pongs with r + size/2, all pairs at once.
- ``pickle``: lowercase ``send``/``recv`` that pickle a Python object: the teaching contrast.
"""

from __future__ import annotations

import numpy as np

from . import payload
from .errors import KernelError

TAG = 17
_PAGE = 4096
_cache: dict[str, np.ndarray] = {}


def _aligned(name: str, nbytes: int) -> np.ndarray:
    """A reused page-aligned byte buffer of at least nbytes (grown on demand, touched once)."""
    buf = _cache.get(name)
    if buf is None or buf.size < nbytes:
        raw = np.zeros(max(nbytes, 1) + _PAGE, dtype=np.uint8)
        offset = (-raw.ctypes.data) % _PAGE
        buf = raw[offset : offset + max(nbytes, 1)]
        _cache[name] = buf
    return buf[:nbytes]


def free_buffers() -> None:
    """Forget the cached message buffers."""
    _cache.clear()


def _check_args(comm, nbytes, warmup, iters, batch=1):
    if not isinstance(batch, (int, np.integer)) or isinstance(batch, bool) or batch < 1:
        raise KernelError(f"batch must be a positive number of round trips, got {batch!r}")
    for name, value in (("nbytes", nbytes), ("warmup", warmup), ("iters", iters)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
            raise KernelError(f"{name} must be a non-negative integer, got {value!r}")
    if comm.Get_size() < 2:
        raise KernelError("a ping-pong needs at least 2 ranks; this communicator has 1")


def _exchanges(comm, peer, sbuf, rbuf, nbytes, style, shared_buffer):
    """(exchange, echo) for a style, with everything bound before the timed loop.

    exchange() sends the payload and returns the echo; echo(corrupt) receives one message and
    sends back exactly what arrived (one byte flipped if corrupt). Message specs, bound
    methods and positional arguments keep the Python overhead per message small (the same
    habits as mpi4py.bench).
    """
    from mpi4py import MPI

    s_msg, r_msg = [sbuf, nbytes, MPI.BYTE], [rbuf, nbytes, MPI.BYTE]
    Send, Recv, Isend, Irecv = comm.Send, comm.Recv, comm.Isend, comm.Irecv
    waitall = MPI.Request.Waitall

    if style == "pickle":

        def exchange():
            comm.send(sbuf, peer, TAG)
            return comm.recv(None, peer, TAG)

        def echo(corrupt):
            msg = comm.recv(None, peer, TAG)
            if corrupt and nbytes:
                msg = msg.copy()
                msg[nbytes // 2] ^= 0xFF
            comm.send(msg, peer, TAG)

        return exchange, echo

    if style == "nonblocking" and shared_buffer:  # never receive into a buffer being sent

        def exchange():
            Isend(s_msg, peer, TAG).Wait()
            Irecv(r_msg, peer, TAG).Wait()
            return rbuf

    elif style == "nonblocking":

        def exchange():
            waitall([Irecv(r_msg, peer, TAG), Isend(s_msg, peer, TAG)])
            return rbuf

    else:

        def exchange():
            Send(s_msg, peer, TAG)
            Recv(r_msg, peer, TAG)
            return rbuf

    if style == "nonblocking":

        def echo(corrupt):
            Irecv(r_msg, peer, TAG).Wait()
            if corrupt and nbytes:
                rbuf[nbytes // 2] ^= 0xFF
            Isend(r_msg, peer, TAG).Wait()

    else:

        def echo(corrupt):
            Recv(r_msg, peer, TAG)
            if corrupt and nbytes:
                rbuf[nbytes // 2] ^= 0xFF
            Send(r_msg, peer, TAG)

    return exchange, echo


def _run_pairs(
    comm, peer, starts, nbytes, warmup, iters, shared_buffer, corrupt_echo, style, batch=1
):
    from mpi4py import MPI

    samples = np.full(iters, np.nan)
    if peer is None:  # idle rank: joins only the synchronised start
        comm.Barrier()
        return samples, 0
    sbuf = _aligned("send", nbytes)
    rbuf = sbuf if shared_buffer else _aligned("recv", nbytes)
    exchange, echo = _exchanges(comm, peer, sbuf, rbuf, nbytes, style, shared_buffer)
    more = range(batch - 1)  # empty for one round trip per sample
    corrupt = 0
    if not starts:
        for i in range(-warmup, iters):
            if i == 0:
                comm.Barrier()
            for _ in more:
                echo(False)
            echo(corrupt_echo)
        return samples, 0
    base = payload.base(nbytes)
    wtime = MPI.Wtime
    for i in range(-warmup, iters):
        if i == 0:
            comm.Barrier()  # synchronised start of the timed iterations
        payload.fill(sbuf, base, i)  # outside the timed region
        t0 = wtime()
        echoed = exchange()
        for _ in more:
            echoed = exchange()
        t1 = wtime()
        if not payload.matches(echoed, base, i):
            corrupt += 1
        if i >= 0:
            samples[i] = (t1 - t0) / batch
    return samples, corrupt


def _pingpong(style):
    def kernel(comm, nbytes, warmup, iters, shared_buffer=False, corrupt_echo=False, batch=1):
        _check_args(comm, nbytes, warmup, iters, batch)
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
    _check_args(comm, nbytes, warmup, iters, batch)
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
