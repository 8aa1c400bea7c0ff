"""The floor every layer stands on: the PINGPONG_LAB_* settings and writing a file safely.

Every environment variable of the project is read here and nowhere else, through `setting`,
`enabled` and the named helpers, and each is listed once in VARIABLES (docs/developing.md shows
the same table; a test keeps the two and the code in step). This module imports nothing of the
package, so any layer may use it.

    from pingpong_lab import runtime
    runtime.grading_mode()                 # PINGPONG_LAB_GRADING
    runtime.setting("PINGPONG_LAB_BUILD")  # "" when unset
    runtime.atomic_write(path, data)       # the whole file or none of it
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

__all__ = [
    "VARIABLES",
    "atomic_file",
    "atomic_write",
    "enabled",
    "grading_mode",
    "progress_off",
    "quick_mode",
    "setting",
]

VARIABLES: dict[str, str] = {
    "PINGPONG_LAB_GRADING": "grading mode (set by course/nbgrader_config.py): small sweeps, "
    "shipped data instead of saved results, no progress bars",
    "PINGPONG_LAB_QUICK": "a dry run outside grading: measurements at their grading size, "
    "results still saved and loaded (instructors' walk-throughs, the tests)",
    "PINGPONG_LAB_RESULTS": "where notebooks save and load results (default: my_results/ "
    "beside the notebook's folder)",
    "PINGPONG_LAB_PROGRESS": "0, false or no: no progress bars",
    "PINGPONG_LAB_BUILD": "where learners' C is compiled and cached (default "
    "~/.cache/pingpong-lab)",
    "PINGPONG_LAB_LAUNCHER": "how MPICluster starts engines: mpiexec (default) or slurm",
    "PINGPONG_LAB_ENGINE_POOL": "a folder of engines lent to notebook kernels (set by grading)",
    "PINGPONG_LAB_SRUN_MPI": "the srun --mpi plugin for engines on Slurm (default pmi2)",
    "PINGPONG_LAB_SLURM_DIR": "where engines on Slurm write their connection files (default "
    "~/.cache/pingpong-lab, must be seen by the compute nodes)",
    "PINGPONG_LAB_SBATCH_OPTIONS": "extra sbatch options for engines started as a Slurm job",
    "PINGPONG_LAB_LINK": "the emulated link a sweep runs behind (set by --link, recorded in "
    "the provenance)",
    "PINGPONG_LAB_EXCHANGE": "nbgrader's exchange folder on a JupyterHub (course config)",
    "PINGPONG_LAB_HUB": "where the course's JupyterHub keeps its roster, database and secrets "
    "(default .hub)",
    "PINGPONG_LAB_HUB_SPAWNER": "how the hub starts servers: local (default) or slurm",
    "PINGPONG_LAB_VENV": "the environment the slurm/ templates use (default .venv)",
    "PINGPONG_LAB_COURSE": "the course folder slurm/grade-class.sh grades (default course)",
    "PINGPONG_LAB_CHROMIUM": "the chromium the browser tests drive (default: found on PATH)",
    "PINGPONG_LAB_TEST_TAG": "tags the processes of one test so none may outlive it (tests)",
    "PINGPONG_LAB_RUN": "marks the processes of one command run_group runs, which it ends "
    "when the command has exited (set by run_group)",
}
"""Every PINGPONG_LAB_* variable and what it does."""

_OFF = ("", "0", "false", "no")


def _known(name: str) -> str:
    if name not in VARIABLES:
        raise KeyError(f"{name} is not a setting of this project; see runtime.VARIABLES")
    return name


def setting(name: str, default: str = "") -> str:
    """The value of the variable `name` (one of VARIABLES), stripped; `default` when unset."""
    value = os.environ.get(_known(name), "").strip()
    return value or default


def enabled(name: str) -> bool:
    """True when the variable `name` is set to something other than '', 0, false or no."""
    return setting(name).lower() not in _OFF


def grading_mode() -> bool:
    """nbgrader is grading (PINGPONG_LAB_GRADING)."""
    return enabled("PINGPONG_LAB_GRADING")


def quick_mode() -> bool:
    """A dry run: measurements small, results saved and loaded as usual (PINGPONG_LAB_QUICK)."""
    return enabled("PINGPONG_LAB_QUICK")


def progress_off() -> bool:
    """Progress bars turned off by PINGPONG_LAB_PROGRESS=0 (grading turns them off too)."""
    return setting("PINGPONG_LAB_PROGRESS").lower() in _OFF[1:]


@contextlib.contextmanager
def atomic_file(path, mode: str = "wb"):
    """Open a temporary file beside `path` to write; it becomes `path` only if the block ends
    without an exception (a crash or a full disk never leaves half a file under the name)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, mode) as f:
            yield f
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write(path, data: bytes | str) -> Path:
    """Write `data` (bytes, or text as UTF-8) to `path` at once: all of it or nothing."""
    with atomic_file(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    return Path(path)


def own_tools_on_path() -> None:
    """Put this Python's own bin folder first on PATH (for this process and what it starts):
    nbgrader runs `alembic` by name, and a command run as `.venv/bin/...` without the
    environment activated would not find it."""
    import sys

    folder = str(Path(sys.executable).parent)
    parts = os.environ.get("PATH", "").split(os.pathsep)
    if folder not in parts:
        os.environ["PATH"] = os.pathsep.join([folder, *[p for p in parts if p]])


_BYTECODE = {"written": False, "lock": threading.Lock()}


def write_bytecode() -> None:
    """Write this package's compiled modules (__pycache__) now, where the folder is writable
    (once per process; threads wait for it). A grading sandbox sees the code read-only: a
    module never imported from outside it, or none at all when PYTHONDONTWRITEBYTECODE is set,
    is compiled again by each of the ~130 processes that grade one student (33 ms per rank)."""
    import compileall

    with _BYTECODE["lock"]:
        if not _BYTECODE["written"]:
            compileall.compile_dir(Path(__file__).parent, quiet=2)  # read-only: no error
            _BYTECODE["written"] = True


def without_iri_grammars() -> None:
    """Let this process import nbformat without rfc3987_syntax, which builds about 40 parsers
    when imported (0.8 s of CPU here, in each grading process): jsonschema then checks no
    "iri" format, a format that no notebook schema uses. Call it before nbformat is imported."""
    import sys

    sys.modules.setdefault("rfc3987_syntax", None)  # `import rfc3987_syntax` raises ImportError


def not_dumpable() -> None:
    """Make this process non-dumpable: a process of the same user without capabilities (a
    program a learner's code started) can then neither trace it nor read its memory or the
    /proc files that show it (Linux; elsewhere nothing)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError, TypeError):
        pass
