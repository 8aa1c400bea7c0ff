"""Where the MPI of this environment lives: mpiexec, mpicc, and what to record about it."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from .errors import MPINotFoundError


def _find(tool: str, override_var: str) -> str:
    """Return the path of an MPI tool: $OVERRIDE, then this Python's bin/, then PATH."""
    override = os.environ.get(override_var)
    if override:
        found = shutil.which(override)
        if not found:
            raise MPINotFoundError(f"{override_var}={override!r} is not an executable")
        return found
    beside_python = Path(sys.executable).parent / tool
    if beside_python.exists():
        return str(beside_python)
    found = shutil.which(tool)
    if not found:
        raise MPINotFoundError(
            f"'{tool}' was not found beside {sys.executable} or on PATH. Install an MPI "
            "(`make test` sets up the mpich wheel in .venv; or activate the conda env from "
            f"environment.yml), or set {override_var} to its path."
        )
    return found


def mpiexec() -> str:
    """Path of mpiexec (override with $MPIEXEC)."""
    return _find("mpiexec", "MPIEXEC")


def mpicc() -> str:
    """Path of mpicc (override with $MPICC)."""
    return _find("mpicc", "MPICC")


def require_mpi4py():
    """Import mpi4py.MPI or raise a clear MPINotFoundError."""
    try:
        from mpi4py import MPI
    except ImportError as exc:  # a missing wheel or a broken libmpi
        raise MPINotFoundError(f"mpi4py cannot be imported here: {exc}") from exc
    return MPI


def cpu_count() -> int:
    """Cores this process may run on (respects taskset/cgroups affinity)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
