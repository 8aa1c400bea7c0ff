"""Page-aligned message buffers, every page written once before any timing.

A page-aligned buffer starts on a fresh page, as kernels_c's and mpi4py.bench's do, so no
message straddles one page more than it must. Each page is written here: a fresh allocation's
pages all map the kernel's zero page until they are written, which would flatter the first
large message sent from them and put a first-touch page fault in a timed loop.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PAGE", "aligned", "reused"]

PAGE = 4096
_reused: dict[str, np.ndarray] = {}


def aligned(nbytes: int) -> np.ndarray:
    """A new page-aligned uint8 array of exactly nbytes, zeroed by writing every page."""
    nbytes = int(nbytes)
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes}")
    raw = np.empty(max(nbytes, 1) + PAGE, dtype=np.uint8)
    raw.fill(0)
    offset = (-raw.ctypes.data) % PAGE
    return raw[offset : offset + nbytes]


def reused(name: str, nbytes: int) -> np.ndarray:
    """The buffer called name, kept while its size stays nbytes; a new size gets a new one.

    A new size gets a new allocation (as in kernels_c and mpi4py.bench), so the kind of memory
    (numpy asks for huge pages from 4 MiB) depends on the size, never on what ran before.
    """
    buf = _reused.get(name)
    if buf is None or buf.size != nbytes:
        _reused.pop(name, None)  # free the old one first: no two big buffers at once
        buf = _reused[name] = aligned(nbytes)
    return buf
