"""Numbers as people read them: times, bandwidths, sizes and ratios, with their units.

Every formatter takes a number (Python or numpy) and returns ``missing`` (default ``"n/a"``)
for anything that is not a finite number: None, NaN, infinities, an empty CSV cell.
"""

from __future__ import annotations

import math
from numbers import Real

__all__ = [
    "format_bandwidth",
    "format_bytes",
    "format_number",
    "format_ratio",
    "format_time",
    "is_finite_number",
]

GIB = 2**30


def is_finite_number(value) -> bool:
    """True for a finite int or float (numpy scalars included), False for anything else."""
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


def format_number(value, spec: str = ".4g", missing: str = "n/a") -> str:
    """``format(value, spec)``, e.g. ``format_number(1234.5) == "1235"``."""
    return format(value, spec) if is_finite_number(value) else missing


def format_time(seconds, missing: str = "n/a") -> str:
    """Seconds in µs, ms or s with 3 significant digits: '12.3 µs', '4.5 ms', '1.2 s'."""
    if not is_finite_number(seconds):
        return missing
    v = float(seconds)
    if abs(v) < 1e-3:
        return f"{v * 1e6:.3g} µs"
    if abs(v) < 1:
        return f"{v * 1e3:.3g} ms"
    return f"{v:.3g} s"


def format_bandwidth(bytes_per_s, bits: bool = False, missing: str = "n/a") -> str:
    """Bytes per second in GiB/s: '11.2 GiB/s'; with bits also in Gbit/s: '... (96.2 Gbit/s)'."""
    if not is_finite_number(bytes_per_s):
        return missing
    v = float(bytes_per_s)
    text = f"{v / GIB:.3g} GiB/s"
    return f"{text} ({v * 8 / 1e9:.3g} Gbit/s)" if bits else text


def format_bytes(n, missing: str = "n/a") -> str:
    """A size with binary prefixes: '1 B', '512 B', '1.5 KiB', '16 MiB', '2 GiB'."""
    if not is_finite_number(n):
        return missing
    n = float(n)
    for unit, scale in (("GiB", GIB), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            v = n / scale
            return f"{v:g} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{n:g} B"


def format_ratio(x, missing: str = "n/a") -> str:
    """A ratio with 3 significant digits and an 'x': '3.2x'."""
    return f"{float(x):.3g}x" if is_finite_number(x) else missing
