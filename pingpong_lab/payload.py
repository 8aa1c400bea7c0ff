"""The ping-pong payload: bytes that depend on position and iteration, as in kernels_c.

Byte j of iteration i is (7*j + j//256 + 13*i + 1) mod 256, so a stale echo (last iteration's
message), a shifted or a truncated one never matches. The kernels send a lighter variant that
changes only at both ends (stamp / stamped_ok); students' ping-pongs are checked with fill /
matches.
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


def stamp(buf: np.ndarray, iteration: int) -> None:
    """Write the iteration's bytes at both ends of a kernel message (at most 2*STAMP bytes).

    The kernels' payload of iteration i is the pattern of iteration 0 (the body, written once)
    with its first and last STAMP bytes taken from the pattern of iteration i, so it changes
    every iteration while the loop writes only 16 bytes: the send buffer stays clean in the
    caches, as in OSU's and mpi4py.bench's loops.
    """
    n = buf.size
    k = np.uint8((13 * iteration) & 0xFF)
    head, tail = min(STAMP, n), max(0, n - STAMP)
    np.add(_BASE[:head], k, out=buf[:head])
    np.add(_BASE2[tail % _PERIOD : tail % _PERIOD + n - tail], k, out=buf[tail:])


def stamped_ok(got, iteration: int) -> bool:
    """True when got is exactly the kernels' payload of `iteration` (see stamp).

    The body is compared with the 64 KiB pattern period, piece by piece, so a check reads the
    message once and nothing message-sized (no second copy evicting the caches between timed
    round trips; bytes comparisons cost tens of nanoseconds for tiny messages).
    """
    got = np.asarray(got)
    if got.ndim != 1:
        return False
    n = got.size
    k = np.uint8((13 * iteration) & 0xFF)
    head, tail = min(STAMP, n), max(0, n - STAMP)
    expected_head = (_BASE[:head] + k).astype(np.uint8)
    expected_tail = (_BASE2[tail % _PERIOD : tail % _PERIOD + n - tail] + k).astype(np.uint8)
    if got[:head].tobytes() != expected_head.tobytes():
        return False
    if got[tail:].tobytes() != expected_tail.tobytes():
        return False
    for start in range(head, tail, _PERIOD):
        stop = min(tail, start + _PERIOD)
        offset = start % _PERIOD
        if got[start:stop].tobytes() != _BASE2[offset : offset + stop - start].tobytes():
            return False
    return True
