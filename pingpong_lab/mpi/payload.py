"""The ping-pong payload: bytes that depend on position and iteration, as in kernels_c.

Byte j of iteration i is (7*j + j//256 + 13*i + 1) mod 256, so a stale echo (last iteration's
message), a shifted or a truncated one never matches. The kernels send a variant that changes
only at both ends (Stamps; docs/method.md); students' ping-pongs are checked with
fill / matches.
"""

from __future__ import annotations

import numpy as np

_PERIOD = 1 << 16  # the pattern repeats every 65536 bytes


def _base_period() -> np.ndarray:
    j = np.arange(_PERIOD, dtype=np.int64)
    return ((7 * j + (j >> 8) + 1) & 0xFF).astype(np.uint8)


_BASE = _base_period()


def base(nbytes: int) -> np.ndarray:
    """Bytes of iteration 0 for a message of nbytes."""
    reps = -(-nbytes // _PERIOD) if nbytes else 0
    return np.tile(_BASE, reps)[:nbytes] if reps else np.zeros(0, np.uint8)


def fill(out: np.ndarray, base_bytes: np.ndarray, iteration: int) -> None:
    """Write the payload of `iteration` into out (same length as base_bytes)."""
    np.add(base_bytes, np.uint8((13 * iteration) & 0xFF), out=out)


_CHUNK = 1 << 16  # compare in cache-sized pieces: no message-sized temporaries
_scratch = np.empty(_CHUNK, dtype=np.uint8)


def matches(buf: np.ndarray, base_bytes: np.ndarray, iteration: int) -> bool:
    """True when buf holds exactly the payload of `iteration`.

    The expected bytes are rebuilt piece by piece in a small reused buffer, so checking a
    64 MiB echo allocates nothing large (a fresh 64 MiB temporary per iteration would cost
    page faults and evict the caches that the next timed exchange uses).
    """
    if buf.shape != base_bytes.shape:
        return False
    k = np.uint8((13 * iteration) & 0xFF)
    n = base_bytes.size
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        expected = _scratch[: stop - start]
        np.add(base_bytes[start:stop], k, out=expected)
        if not np.array_equal(buf[start:stop], expected):
            return False
    return True


STAMP = 8  # bytes at each end of a kernel message that carry the iteration
_BASE2 = np.tile(_BASE, 2)  # any window of up to one period, starting anywhere, is contiguous


class Stamps:
    """The kernels' payload for messages of nbytes: pattern 0 with both ends stamped.

    The payload of iteration i is the pattern of iteration 0 (the body, written once) with its
    first and last STAMP bytes taken from the pattern of iteration i, so it changes every
    iteration while the loop writes only 16 bytes: the send buffer stays as quiet in the caches
    as in OSU's and mpi4py.bench's loops. The 256 possible ends are precomputed, so stamping and
    checking a small message cost a few hundred nanoseconds of Python, not microseconds.
    """

    def __init__(self, nbytes: int):
        self.n = n = int(nbytes)
        self.head = min(STAMP, n)
        self.tail = max(0, n - STAMP)
        start = self.tail % _PERIOD
        ends = [
            (
                (_BASE[: self.head] + np.uint8(13 * k & 0xFF)).tobytes(),
                (_BASE2[start : start + n - self.tail] + np.uint8(13 * k & 0xFF)).tobytes(),
            )
            for k in range(256)
        ]
        self._heads, self._tails = zip(*ends)
        body = self.tail - self.head
        # a body of up to one period is compared in one piece with these bytes
        self._body = _BASE2[self.head : self.head + body].tobytes() if body <= _PERIOD else None

    def body(self, buf: np.ndarray) -> None:
        """Write the body (pattern 0) into buf: once per call of a kernel."""
        fill(buf, base(self.n), 0)

    def stamp(self, buf, iteration: int) -> None:
        """Write the iteration's bytes at both ends of buf."""
        view, k = memoryview(buf), iteration & 0xFF
        view[: self.head] = self._heads[k]
        view[self.tail :] = self._tails[k]

    def ok(self, got, iteration: int) -> bool:
        """True when got is exactly the payload of `iteration`.

        The body is compared with the 64 KiB pattern period, piece by piece, so a check reads
        the message once and allocates nothing message-sized (no second copy evicting the
        caches between timed round trips).
        """
        view, k = memoryview(got), iteration & 0xFF
        if view.format != "B":
            view = view.cast("B")
        if len(view) != self.n:
            return False
        if view[: self.head].tobytes() != self._heads[k]:
            return False
        if view[self.tail :].tobytes() != self._tails[k]:
            return False
        if self._body is not None:
            return self.tail <= self.head or view[self.head : self.tail].tobytes() == self._body
        for start in range(self.head, self.tail, _PERIOD):
            stop = min(self.tail, start + _PERIOD)
            offset = start % _PERIOD
            if view[start:stop].tobytes() != _BASE2[offset : offset + stop - start].tobytes():
                return False
        return True


def stamp(buf: np.ndarray, iteration: int) -> None:
    """Stamps(len(buf)).stamp(buf, iteration), for one-off use."""
    Stamps(buf.size).stamp(buf, iteration)


def stamped_ok(got, iteration: int) -> bool:
    """Stamps(len(got)).ok(got, iteration), for one-off use."""
    return Stamps(np.asarray(got).size).ok(got, iteration)
