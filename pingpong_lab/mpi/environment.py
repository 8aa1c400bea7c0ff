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


def loaded_mpi_library() -> str:
    """Path of the libmpi this process has loaded ('' when none, or not Linux)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            paths = {line.split()[-1] for line in f if "/libmpi" in line}
    except OSError:
        return ""
    # libmpi.so.12 (MPICH wheel, Intel), libmpich.so.12 (Debian), libmpi.so.40 (Open MPI),
    # libmpi_cray.so.12; not the language bindings (libmpifort, libmpicxx)
    libs = sorted(p for p in paths if Path(p).name.startswith(("libmpi.", "libmpi_", "libmpich.")))
    return libs[0] if libs else ""


def mpi_source(library: str, prefix: str | None = None, conda_prefix: str | None = None) -> str:
    """Where a libmpi path comes from: "wheel" (a PyPI MPI inside this Python's environment),
    "conda" (the active conda env) or "system" (anything else: a site module, Debian's MPI).
    "" when the library is unknown."""
    if not library:
        return ""
    lib = Path(library).resolve()
    conda = conda_prefix if conda_prefix is not None else os.environ.get("CONDA_PREFIX", "")
    if conda and lib.is_relative_to(Path(conda).resolve()):
        return "conda"
    if lib.is_relative_to(Path(prefix or sys.prefix).resolve()):
        return "wheel"
    return "system"


def which_mpi() -> dict:
    """Which MPI this process runs on: mpi_source (wheel, conda or system), mpi_library_path
    (the loaded libmpi) and mpiexec_path (the launcher found as `mpiexec()` finds it).

    Call after mpi4py.MPI is imported (the library is then loaded)."""
    library = loaded_mpi_library()
    try:
        launcher = mpiexec()
    except MPINotFoundError:
        launcher = ""
    return {
        "mpi_source": mpi_source(library),
        "mpi_library_path": library,
        "mpiexec_path": launcher,
    }


def machine() -> dict:
    """This machine: host, CPU model, cores, memory, OS, Python and, when mpi4py imports, MPI.

    Keys: host, cpu, cores_usable (this process's affinity), cores_logical, memory_gib, os,
    platform, python; with mpi4py also mpi_vendor ('MPICH 4.2.0'), mpi_standard ('4.1'),
    mpi_library_version (MPI_Get_library_version), mpi4py (its version) and which_mpi()'s
    mpi_source, mpi_library_path and mpiexec_path.
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
        **which_mpi(),
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
        "mpi_source": here["mpi_source"],
        "mpi_library_path": here["mpi_library_path"],
        "mpiexec_path": here["mpiexec_path"],
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
