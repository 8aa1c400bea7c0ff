"""Moving MPICH's eager limit on purpose: the deadlock size and the sweep's breakpoint together.

MPICH's ch4 shared-memory transport sends a message eagerly when it fits in one cell of its
shared-memory queue; the cell size is the CVAR `MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE`
(bytes), read from the environment when a rank starts (listed by the strings of libmpi; there is
no separate eager-threshold CVAR for this path in MPICH 5). `measure(cell)` starts fresh ranks with
that variable set and returns the first size at which a head-to-head Send/Recv deadlocks and
the piecewise breakpoint of a C-kernel sweep; `cell=None` leaves MPICH's default.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ..analysis import model
from . import deadlocks

CVAR = "MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE"


def environment(cell_bytes: int | None = None, base: dict | None = None) -> dict:
    """A copy of `base` (default: this process's environment) with the cell size set to
    `cell_bytes`, or with the CVAR removed when `cell_bytes` is None (MPICH's default)."""
    env = dict(os.environ if base is None else base)
    env.pop(CVAR, None)
    if cell_bytes is not None:
        if int(cell_bytes) < 1:
            raise ValueError(f"the cell size must be a positive byte count, got {cell_bytes!r}")
        env[CVAR] = str(int(cell_bytes))
    return env


def deadlock_size(cell_bytes: int | None = None) -> int:
    """First size (bytes) at which a head-to-head Send/Recv hangs with this cell size (-1: none)."""
    return deadlocks.first_deadlock(deadlocks.run("head-to-head", env=environment(cell_bytes)))


def sweep_breakpoint(cell_bytes: int | None, max_bytes: int, reps: int, timeout: float = 300):
    """Sweep 1 B .. max_bytes with the C kernel (2 ranks) under this cell size; returns
    (nbytes, one-way medians in s, first BIC breakpoint in bytes or -1 when one line is enough)."""
    with tempfile.TemporaryDirectory(prefix="pp-eager-") as tmp:
        out = str(Path(tmp, "sweep.csv"))
        cmd = [sys.executable, "-m", "pingpong_lab", "sweep", "--np", "2", "--kernel", "c"]
        cmd += ["--min-bytes", "1", "--max-bytes", str(int(max_bytes)), "--reps", str(int(reps))]
        try:
            proc = subprocess.run(
                cmd + ["--out", out],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=environment(cell_bytes),
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"the sweep did not end within {timeout:g} s") from exc
        if proc.returncode != 0:
            raise RuntimeError(f"the sweep failed: {proc.stderr.strip()[-300:]}")
        nbytes, t = model.load_sweep_csv(out)
    return nbytes, t, breakpoint_of(nbytes, t)


def breakpoint_of(nbytes, t, min_bytes: int = 256) -> int:
    """First BIC breakpoint (bytes) of the sizes from `min_bytes` up, -1 when one line is
    enough. The smallest sizes are left out: their own small step (a header or cache effect
    near 100 B) would otherwise be the first breakpoint found, not the protocol switch."""
    import numpy as np

    nbytes, t = np.asarray(nbytes), np.asarray(t)
    keep = nbytes >= min_bytes
    pw = model.fit_piecewise(nbytes[keep], t[keep])
    return int(pw.breakpoint_bytes) if pw.two_segments_better else -1


def measure(cell_bytes: int | None, max_bytes: int, reps: int) -> dict:
    """Deadlock size and sweep breakpoint under one cell size (None: MPICH's default)."""
    nbytes, t, brk = sweep_breakpoint(cell_bytes, max_bytes, reps)
    return {
        "cell_bytes": cell_bytes,
        "deadlock_bytes": deadlock_size(cell_bytes),
        "breakpoint_bytes": brk,
        "nbytes": nbytes,
        "t_median_s": t,
    }
