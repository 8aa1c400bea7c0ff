"""Where the MPI of this environment lives: mpiexec, mpicc, and what to record about it."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from .. import runtime
from ..errors import MPINotFoundError

TRANSPORT_VARS = ("MPIR_CVAR_", "UCX_", "FI_", "MPICH_", "OMPI_MCA_", "I_MPI_")
LINK_ENV = "PINGPONG_LAB_LINK"
"""Set by `sweep --link` (mpi/link.py) to the emulated link's settings, recorded as "link"."""


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
    """Cores this process may keep busy: its affinity (taskset, cpusets), cut to its cgroup's
    CPU quota (a container or JupyterHub limit), rounded down, at least 1.

    A quota of 1.5 CPUs counts as 1 core: an MPI rank busy-polls a whole core, so a second rank
    would share time with the first.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    if quota is not None:
        cores = min(cores, max(1, int(quota)))
    return cores


def cgroup_cpu_quota(proc_cgroup="/proc/self/cgroup", root="/sys/fs/cgroup") -> float | None:
    """CPUs this process's cgroup may use (quota / period), None when it has no CPU quota.

    cgroup v2: `cpu.max` ("200000 100000" is 2 CPUs, "max 100000" no limit); v1: the cpu
    controller's `cpu.cfs_quota_us` (-1: no limit) over `cpu.cfs_period_us`. The tightest quota
    of the process's cgroup and its parents counts. `proc_cgroup` and `root` are there for tests.
    """
    try:
        with open(proc_cgroup, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:  # not Linux
        return None
    quotas = []
    for line in lines:
        _id, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: one unified tree (under unified/ in a hybrid set-up)
            base = Path(root) if (Path(root) / "cgroup.controllers").exists() else None
            base = base or (Path(root) / "unified")
            quotas += [_v2_quota(d) for d in _cgroup_dirs(base, path)]
        elif "cpu" in controllers.split(","):
            for base in {Path(root) / controllers, Path(root) / "cpu"}:
                quotas += [_v1_quota(d) for d in _cgroup_dirs(base, path)]
    quotas = [q for q in quotas if q is not None]
    return min(quotas) if quotas else None


def _cgroup_dirs(base: Path, path: str) -> list[Path]:
    """base/path and each of its parents up to base (those that exist)."""
    here = base / path.strip("/")
    dirs = [here, *[p for p in here.parents if p == base or base in p.parents]]
    return [d for d in dirs if d.is_dir()]


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return None


def _v2_quota(directory: Path) -> float | None:
    fields = (_read(directory / "cpu.max") or "max").split()
    if fields[0] == "max" or len(fields) != 2:
        return None
    return int(fields[0]) / int(fields[1])


def _v1_quota(directory: Path) -> float | None:
    quota, period = _read(directory / "cpu.cfs_quota_us"), _read(directory / "cpu.cfs_period_us")
    if quota is None or period is None or int(quota) <= 0 or int(period) <= 0:
        return None
    return int(quota) / int(period)


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


# Fields that name the CPU in /proc/cpuinfo, most specific first: x86 and some ARM kernels write
# "model name"; other ARM, MIPS and PowerPC kernels write "Hardware", "cpu model" or "cpu".
CPUINFO_MODEL_KEYS = ("model name", "Hardware", "cpu model", "cpu")


def model_from_cpuinfo(text: str) -> str | None:
    """The CPU's name in the text of /proc/cpuinfo, or None when no field names it."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and value.strip():
            fields.setdefault(key.strip(), value.strip())
    return next((fields[k] for k in CPUINFO_MODEL_KEYS if k in fields), None)


def model_from_lscpu(text: str) -> str | None:
    """The 'Model name' that `lscpu` prints (it names ARM cores such as 'Neoverse-N1')."""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "Model name" and value.strip() not in ("", "-"):
            return value.strip()
    return None


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:  # not Linux
        return ""


def _command_output(*argv: str) -> str:
    """stdout of a short system command, or "" when it is missing or fails (2 s at most)."""
    if not shutil.which(argv[0]):
        return ""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=2, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout if done.returncode == 0 else ""


def cpu_model() -> str:
    """The CPU's model name, e.g. 'AMD EPYC 7B13', never just the architecture ('x86_64').

    Looks in /proc/cpuinfo, then `lscpu` (Linux), `sysctl machdep.cpu.brand_string` (macOS)
    and platform.processor() (Windows); when none names the CPU: 'unknown model (<arch>)'.
    """
    arch = platform.machine()
    candidates = (
        lambda: model_from_cpuinfo(_read_text("/proc/cpuinfo")),
        lambda: model_from_lscpu(_command_output("lscpu")),
        lambda: _command_output("sysctl", "-n", "machdep.cpu.brand_string").strip(),
        platform.processor,
    )
    for candidate in candidates:
        name = candidate()
        if name and name not in (arch, "i386", "arm"):  # platform.processor() may say only that
            return name
    return f"unknown model ({arch or 'unknown architecture'})"


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

    Keys: host, cpu, cores_usable (affinity cut to the cgroup CPU quota, see cpu_count),
    cores_logical, memory_gib, os,
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
        "link": runtime.setting(LINK_ENV) or None,
        "command": " ".join(sys.argv),
    }
    info.update(fields)
    return info
