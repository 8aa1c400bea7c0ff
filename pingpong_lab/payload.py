"""The ping-pong payload: bytes that depend on position and iteration, as in kernels_c.

Byte j of iteration i is (7*j + j//256 + 13*i + 1) mod 256, so a stale echo (last iteration's
message), a shifted or a truncated one never matches.
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


def equal(got, expected: np.ndarray) -> bool:
    """True when got holds exactly the bytes of expected, compared piece by piece.

    Bytes comparisons of cache-sized pieces: fast for tiny messages (tens of nanoseconds, where
    numpy.array_equal costs microseconds) and no message-sized temporaries for big ones.
    """
    got = np.asarray(got)
    if got.shape != expected.shape:
        return False
    n = expected.size
    return all(
        got[i : i + _CHUNK].tobytes() == expected[i : i + _CHUNK].tobytes()
        for i in range(0, n, _CHUNK)
    )
