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


def oversubscribed(nranks: int, ncores: int | None = None) -> bool:
    """True when more ranks would run than there are cores (ranks take turns on a core)."""
    return int(nranks) > (cpu_count() if ncores is None else int(ncores))


def plan_ranks(wanted: int, ncores: int | None = None) -> int:
    """Ranks to start for a timing run: ``wanted``, at most ``ncores``, but never fewer than 2.

    The rule notebook 00 asks for: a ping-pong needs 2 ranks, so on a 1-core machine the
    answer is 2 (oversubscribed, see :func:`oversubscribed`). ``ncores`` defaults to the
    cores this process may run on.
    """
    wanted = int(wanted)
    if wanted < 0:
        raise ValueError(f"wanted must be a number of ranks (0 or more), got {wanted}")
    cores = cpu_count() if ncores is None else int(ncores)
    if cores < 1:
        raise ValueError(f"ncores must be at least 1, got {cores}")
    return max(2, min(wanted, cores))


# -- what to record with every result -------------------------------------------------------
def transport_settings(environ=None) -> dict:
    """Environment variables that change how MPI moves data (recorded with every result)."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in sorted(env.items()) if k.startswith(TRANSPORT_VARS)}


def cpu_model() -> str:
    """The CPU's model name ('model name' in /proc/cpuinfo), else what platform knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:  # not Linux
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    """This machine: host, CPU model, cores, memory, OS, Python and, when mpi4py imports, MPI.

    Keys: host, cpu, cores_usable (this process's affinity), cores_logical, memory_gib, os,
    platform, python; with mpi4py also mpi_vendor ('MPICH 4.2.0'), mpi_standard ('4.1'),
    mpi_library_version (MPI_Get_library_version) and mpi4py (its version).
    """
    import psutil

    info = {
        "host": socket.gethostname(),
        "cpu": cpu_model(),
        "cores_usable": cpu_count(),
        "cores_logical": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "os": f"{platform.system()} {platform.release()}",
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    try:
        import mpi4py
        from mpi4py import MPI
    except ImportError:
        return info
    vendor, version = MPI.get_vendor()
    info.update(
        mpi_vendor=f"{vendor} {'.'.join(map(str, version))}",
        mpi_standard="{}.{}".format(*MPI.Get_version()),
        mpi_library_version=MPI.Get_library_version().strip(),
        mpi4py=mpi4py.__version__,
    )
    return info


def rank_placement(rank: int) -> dict:
    """Where this process runs: {"rank", "host", "core", "allowed_cores"}.

    "core" is where it ran last (-1 where the OS does not say): unless the process is pinned it
    may move at any moment; "allowed_cores" are the cores it may run on.
    """
    import psutil

    try:
        core = psutil.Process().cpu_num()
    except (AttributeError, psutil.Error):  # cpu_num() is not available on every OS
        core = -1
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except AttributeError:
        allowed = []
    return {"rank": rank, "host": socket.gethostname(), "core": core, "allowed_cores": allowed}


def placement(comm) -> list[dict]:
    """rank -> host and core (see rank_placement), gathered on every rank (collective)."""
    return comm.allgather(rank_placement(comm.Get_rank()))


def provenance(comm, **fields) -> dict:
    """Everything needed to interpret a result later (collective: call on every rank)."""
    from mpi4py import MPI

    from ..analysis.stats import measured_timer_resolution

    where = placement(comm)
    here = machine()
    info = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "mpi_library_version": here["mpi_library_version"],
        "mpi_vendor": here["mpi_vendor"],
        "mpi_standard": here["mpi_standard"],
        "mpi4py_version": here["mpi4py"],
        "python": here["python"],
        "platform": here["platform"],
        "cpu": here["cpu"],
        "cores_usable": here["cores_usable"],
        "memory_gib": here["memory_gib"],
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
