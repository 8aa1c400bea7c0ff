"""What one bench run is asked to do, and what every step of it shares: the log and the
checked run of a command."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ...mpi.processes import run_group
from ...progress import echo
from .peers import JOB_TIMEOUT_S, LAUNCH_REPS, PY_SIZES, QUICK_LAUNCH_REPS, QUICK_PY_SIZES


@dataclass(frozen=True)
class Settings:
    """The command line of one run: ranks, output folder, interleaved rounds, quick or full."""

    np: int
    out: Path
    rounds: int
    quick: bool
    class_size: int = 30

    @property
    def launch_reps(self) -> dict[int, int]:
        """Repetitions per size for the launcher comparison."""
        return QUICK_LAUNCH_REPS if self.quick else LAUNCH_REPS

    @property
    def py_sizes(self) -> tuple[int, ...]:
        """The sizes of the Python kernel vs mpi4py.bench comparison."""
        return QUICK_PY_SIZES if self.quick else PY_SIZES


def log(message: str) -> None:
    echo(f"[bench {time.strftime('%H:%M:%S')}] {message}")


def run_checked(cmd, timeout=JOB_TIMEOUT_S, env=None) -> subprocess.CompletedProcess:
    """Run a command in its own process group (ended as a whole on timeout); check its exit."""
    proc = run_group(cmd, timeout, env=env)
    if proc.returncode != 0:
        tail = " | ".join(ln for ln in proc.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"{' '.join(map(str, cmd[:4]))} ... failed ({proc.returncode}): {tail}")
    return proc
