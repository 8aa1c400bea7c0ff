"""Moving MPICH's eager limit on purpose: each setting alone and together, every arm measured.

MPICH's ch4 shared-memory transport has two limits that both sit at 8 KiB by default, and a
message above *either* waits for the receiver (the handshake of rendezvous):

- the cell size of its shared-memory queue, `MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE`: a
  message that fits in one cell is copied in and the send returns;
- the single-copy threshold, `MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD`: from this size up, the
  receiver copies straight out of the sender's memory with Linux cross-memory attach (CMA,
  `process_vm_readv`), which needs both sides ready. CMA itself is `MPIR_CVAR_CH4_CMA_ENABLE`
  (and needs ptrace permission between the ranks, which Yama's ptrace_scope can deny).

Each setting is read from the environment when a rank starts. `ARMS` moves one setting, then
both, then turns single copy off; `measure(settings)` starts fresh ranks with that arm's
environment and returns what MPI_T says it read (mpi.mpit), the first size at which a
head-to-head Send/Recv deadlocks, and the piecewise breakpoint of a C-kernel sweep. A name this
MPI does not list is refused before anything runs (a misspelt setting changes nothing, silently);
a value MPICH will not start with (a cell far above its default) is a SettingsRefused error that
says so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ..analysis import model
from ..mpi import mpit
from . import deadlocks

CELL = "MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE"
CMA_THRESHOLD = "MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD"
CMA = "MPIR_CVAR_CH4_CMA_ENABLE"
SETTINGS = {
    CELL: "shared-memory cell",
    CMA_THRESHOLD: "single-copy threshold",
    CMA: "single copy (CMA)",
}
CVAR = CELL  # the setting the first version of this experiment moved

# each arm: the settings it changes from MPICH's defaults (the rest stay as MPICH has them)
ARMS = {
    "MPICH's defaults": {},
    "cell 2 KiB": {CELL: 2048},
    "cell 16 KiB": {CELL: 16384},
    "single-copy threshold 32 KiB": {CMA_THRESHOLD: 32768},
    "cell 16 KiB + threshold 32 KiB": {CELL: 16384, CMA_THRESHOLD: 32768},
    "single copy off": {CMA: 0},
    "single copy off + cell 16 KiB": {CMA: 0, CELL: 16384},
}


def environment(settings: dict | int | None = None, base: dict | None = None) -> dict:
    """A copy of `base` (default: this process's environment) with every setting of SETTINGS
    removed (MPICH's defaults), then those of `settings` set. An int is a cell size (bytes),
    None no change."""
    if settings is None:
        settings = {}
    elif not isinstance(settings, dict):
        settings = {CELL: settings}
    env = dict(os.environ if base is None else base)
    for name in SETTINGS:
        env.pop(name, None)
    for name, value in settings.items():
        if name not in SETTINGS:
            raise ValueError(f"{name} is not one of the settings this experiment moves")
        value = int(value)
        if (name == CMA and value not in (0, 1)) or (name != CMA and value < 1):
            raise ValueError(
                f"{name} must be " + ("0 or 1" if name == CMA else "a positive byte count")
                + f", got {value!r}"
            )  # fmt: skip
        env[name] = str(value)
    return env


def read_settings(settings: dict | int | None = None) -> dict:
    """{setting: value} as MPI_T reports them in a rank started with this arm's environment;
    ValueError for a setting this MPI does not have, mpit.SettingsRefused when MPI will not
    start with these values."""
    env = environment(settings)
    found = mpit.control_variables("MPIR_CVAR_CH4_", env)
    missing = [name for name in SETTINGS if name not in found]
    if missing:
        raise ValueError(
            f"this MPI has no control variable {', '.join(missing)} (MPI_T lists none by that "
            "name): the experiment is written for MPICH's ch4 shared-memory transport"
        )
    return {name: found[name] for name in SETTINGS}


def deadlock_size(settings: dict | int | None = None) -> int:
    """First size (bytes) at which a head-to-head Send/Recv hangs under these settings
    (-1: none)."""
    return deadlocks.first_deadlock(deadlocks.run("head-to-head", env=environment(settings)))


def sweep_breakpoint(settings, max_bytes: int, reps: int, timeout: float = 300):
    """Sweep 1 B .. max_bytes with the C kernel (2 ranks) under these settings; returns
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
                env=environment(settings),
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


def measure(settings: dict | int | None, max_bytes: int, reps: int) -> dict:
    """One arm: what MPI_T read, the deadlock size and the sweep breakpoint under `settings`."""
    values = read_settings(settings)  # refuses an unknown name or a value MPI will not start with
    nbytes, t, brk = sweep_breakpoint(settings, max_bytes, reps)
    return {
        "settings": dict(settings) if isinstance(settings, dict) else settings,
        "mpi_t": values,
        "deadlock_bytes": deadlock_size(settings),
        "breakpoint_bytes": brk,
        "nbytes": nbytes,
        "t_median_s": t,
    }


def measure_arms(arms=None, max_bytes: int = 256 << 10, reps: int = 200, on_arm=None) -> dict:
    """Every arm of `arms` (default ARMS) measured in turn: {name: measure(...)}, or {name:
    {"error": why}} for an arm this machine's MPI refused. on_arm(name, result) after each."""
    results = {}
    for name, settings in (ARMS if arms is None else arms).items():
        try:
            result = measure(settings, max_bytes, reps)
        except (ValueError, RuntimeError) as error:  # SettingsRefused is a RuntimeError
            result = {"settings": settings, "error": str(error).strip().splitlines()[-1]}
        results[name] = result
        if on_arm is not None:
            on_arm(name, result)
    return results


def describe_arm(name: str, arm: dict) -> str:
    """One line for an arm measured by measure_arms: deadlock, breakpoint and what MPI_T read."""
    from ..analysis.formatting import format_bytes

    if "error" in arm:
        return f"{name:>31}: not measured here ({arm['error'][-100:]})"
    dead, brk, read = arm["deadlock_bytes"], arm["breakpoint_bytes"], arm["mpi_t"]
    cell, threshold = (format_bytes(int(read[k])) for k in (CELL, CMA_THRESHOLD))
    return (
        f"{name:>31}: deadlock at {format_bytes(dead) if dead > 0 else 'no size':>8}, "
        f"breakpoint at {format_bytes(brk) if brk > 0 else 'none':>8}   (MPI_T: cell {cell}, "
        f"threshold {threshold}, CMA {'on' if read[CMA] == '1' else 'off'})"
    )
