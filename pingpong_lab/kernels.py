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


def _run_pairs(
    comm, peer, starts, nbytes, warmup, iters, shared_buffer, corrupt_echo, style, batch=1
):
    from mpi4py import MPI

    samples = np.full(iters, np.nan)
    if peer is None:  # idle rank: joins only the synchronised start
        for i in range(-warmup, iters):
            if i == 0:
                comm.Barrier()
        return samples, 0
    base = payload.base(nbytes) if starts else None
    sbuf = _aligned("send", nbytes)
    rbuf = sbuf if shared_buffer else _aligned("recv", nbytes)
    corrupt = 0
    wtime = MPI.Wtime
    for i in range(-warmup, iters):
        if i == 0:
            comm.Barrier()
        if starts:
            payload.fill(sbuf, base, i)
            t0 = wtime()
            for _ in range(batch):
                if style == "blocking":
                    comm.Send(sbuf, dest=peer, tag=TAG)
                    comm.Recv(rbuf, source=peer, tag=TAG)
                    echoed = rbuf
                elif style == "nonblocking":
                    if shared_buffer:
                        comm.Isend(sbuf, dest=peer, tag=TAG).Wait()
                        comm.Irecv(rbuf, source=peer, tag=TAG).Wait()
                    else:
                        reqs = [
                            comm.Irecv(rbuf, source=peer, tag=TAG),
                            comm.Isend(sbuf, dest=peer, tag=TAG),
                        ]
                        MPI.Request.Waitall(reqs)
                    echoed = rbuf
                else:  # pickle
                    comm.send(sbuf, dest=peer, tag=TAG)
                    echoed = comm.recv(source=peer, tag=TAG)
            t1 = wtime()
            if not payload.matches(echoed, base, i):
                corrupt += 1
            if i >= 0:
                samples[i] = (t1 - t0) / batch
        else:
            for k in range(batch):
                _echo(comm, peer, rbuf, nbytes, style, corrupt_echo and k == batch - 1)
    return samples, corrupt


def _echo(comm, peer, rbuf, nbytes, style, corrupt):
    """Receive one message and send back exactly what arrived (one byte flipped if corrupt)."""
    if style == "pickle":
        msg = comm.recv(source=peer, tag=TAG)
        if corrupt and nbytes:
            msg = msg.copy()
            msg[nbytes // 2] ^= 0xFF
        comm.send(msg, dest=peer, tag=TAG)
        return
    if style == "nonblocking":
        comm.Irecv(rbuf, source=peer, tag=TAG).Wait()
    else:
        comm.Recv(rbuf, source=peer, tag=TAG)
    if corrupt and nbytes:
        rbuf[nbytes // 2] ^= 0xFF
    if style == "nonblocking":
        comm.Isend(rbuf, dest=peer, tag=TAG).Wait()
    else:
        comm.Send(rbuf, dest=peer, tag=TAG)


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
