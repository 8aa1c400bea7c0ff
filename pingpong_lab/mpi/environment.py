"""Where the MPI of this environment lives: mpiexec, mpicc, and what to record about it."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import shutil
import socket
import sys
from pathlib import Path

from ..errors import MPINotFoundError

TRANSPORT_VARS = ("MPIR_CVAR_", "UCX_", "FI_", "MPICH_", "OMPI_MCA_", "I_MPI_")


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


# -- what to record with every result -------------------------------------------------------
def transport_settings(environ=None) -> dict:
    """Environment variables that change how MPI moves data (recorded with every result)."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in sorted(env.items()) if k.startswith(TRANSPORT_VARS)}


def placement(comm) -> list[dict]:
    """rank -> host and core, gathered on every rank (collective)."""
    import psutil

    try:
        core = psutil.Process().cpu_num()
    except (AttributeError, psutil.Error):
        core = -1
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except AttributeError:
        allowed = []
    # "core" is where the rank ran last; unless ranks are pinned it may change at any moment.
    mine = {"rank": comm.Get_rank(), "host": socket.gethostname(), "core": core}
    return comm.allgather({**mine, "allowed_cores": allowed})


def provenance(comm, **fields) -> dict:
    """Everything needed to interpret a result later (collective: call on every rank)."""
    from mpi4py import MPI

    from ..analysis.stats import measured_timer_resolution

    where = placement(comm)
    vendor, version = MPI.get_vendor()
    info = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "mpi_library_version": MPI.Get_library_version().strip(),
        "mpi_vendor": f"{vendor} {'.'.join(map(str, version))}",
        "mpi_standard": "{}.{}".format(*MPI.Get_version()),
        "mpi4py_version": __import__("mpi4py").__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "ranks": comm.Get_size(),
        "hosts": sorted({p["host"] for p in where}),
        "placement": where,
        "timer": "MPI_Wtime",
        "timer_wtick_s": MPI.Wtick(),
        "timer_resolution_measured_s": measured_timer_resolution(MPI.Wtime),
        "transport_env": transport_settings(),
        "command": " ".join(sys.argv),
    }
    info.update(fields)
    return info
