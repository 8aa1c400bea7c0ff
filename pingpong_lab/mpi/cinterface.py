"""The C kernels' interface as the library states it: kernels_c/pp_util.h is its one source.

Every library built from kernels_c carries the text of `pp_interface()` (pp_build_info.c),
"PP_INTERFACE:NAME=value;...;END;": the flags, the tags, the error codes with their meaning
and the kernel function of each mode. Python reads it from the library file, without loading
the library (no MPI needed), and never spells those values itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import ABIMismatchError

__all__ = ["Interface", "parse", "read"]

_TEXT = re.compile(rb"PP_INTERFACE:([^\0]*?END;)")


@dataclass(frozen=True)
class Interface:
    """What pp_util.h defines, as one library was compiled with it."""

    shared_buffer: int
    corrupt_echo: int
    batch_shift: int
    tag: int
    tag_ready: int
    errors: dict[int, str]
    kernels: dict[str, str]

    def error_text(self, code: int) -> str:
        """What a kernel's negative return value means."""
        return self.errors.get(int(code), f"error {code}")

    def flags(self, shared_buffer=False, corrupt_echo=False, batch=1) -> int:
        """The kernels' `flags` argument (PP_SHARED_BUFFER | PP_CORRUPT_ECHO | batch)."""
        bits = (self.shared_buffer if shared_buffer else 0) | (
            self.corrupt_echo if corrupt_echo else 0
        )
        return bits | int(batch) << self.batch_shift


def _int(text: str) -> int:
    return int(text.strip().strip("()"))


def parse(text: str) -> Interface:
    """The Interface from a "PP_INTERFACE:...;END;" text (ValueError when it is not one)."""
    body = text.removeprefix("PP_INTERFACE:")
    if not body.endswith("END;"):
        raise ValueError(f"not a complete PP_INTERFACE text: {text[:80]!r}")
    values, errors, kernels = {}, {}, {}
    for item in body[: -len("END;")].split(";"):
        if not item:
            continue
        name, _, value = item.partition("=")
        if name.startswith("ERR_"):
            code, _, meaning = value.partition(":")
            errors[_int(code)] = meaning
        elif name.startswith("KERNEL_"):
            kernels[name.removeprefix("KERNEL_")] = value
        else:
            values[name.lower()] = _int(value)
    try:
        return Interface(**values, errors=errors, kernels=kernels)
    except TypeError as exc:
        raise ValueError(f"PP_INTERFACE text with other names than expected: {exc}") from None


@lru_cache(maxsize=16)
def _read(path: str, mtime_ns: int) -> Interface:
    found = _TEXT.search(Path(path).read_bytes())
    if not found:
        raise ABIMismatchError(
            f"{path} carries no PP_INTERFACE text: rebuild it from kernels_c (`make kernels`)"
        )
    return parse("PP_INTERFACE:" + found.group(1).decode())


def read(path) -> Interface:
    """The interface a kernels_c library (or executable) was built with, read from its file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: build the C kernels (`make kernels`)")
    return _read(str(path.resolve()), path.stat().st_mtime_ns)
