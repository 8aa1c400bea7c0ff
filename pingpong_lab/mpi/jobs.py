"""The one way work runs under mpiexec (or srun): `python -m pingpong_lab.mpi.jobs JOB SPEC`.

Every rank runs the same job with the same JSON SPEC. A job is a function
`job(spec: dict, comm) -> int` (the exit status), marked with the `job` decorator where it is
defined, in any layer; JOB on the command line is its "module:function". Launchers pass the
function itself to `command(...)` or `program(...)` and never spell the module or the JSON:

    @jobs.job
    def sweep_job(spec, comm): ...

    cmd = jobs.command(sweep_job, spec, np_=2)      # [mpiexec, -n, 2, python, -m, ..., SPEC]

This module knows no job by name, so it imports nothing above it; a rank imports the job's
module when it runs. Only marked functions of this package run (a mistyped JOB is refused).
"""

from __future__ import annotations

import importlib
import json
import sys

from . import binding, environment

MODULE = "pingpong_lab.mpi.jobs"  # also when run as __main__ under mpiexec
PACKAGE = MODULE.split(".")[0]
_MARK = "_pingpong_lab_job"


def job(function):
    """Mark `function(spec, comm) -> int` as a job that `command` may launch."""
    setattr(function, _MARK, True)
    return function


def target(function) -> str:
    """'module:function' of a marked job (ValueError for anything else)."""
    if not getattr(function, _MARK, False):
        raise ValueError(f"{function!r} is not a job: mark it with @jobs.job where it is defined")
    return f"{function.__module__}:{function.__qualname__}"


def command(function, spec: dict, np_: int, launcher: str | None = None) -> list[str]:
    """The argv that runs job `function` on `np_` ranks with `spec` (JSON-serialisable)."""
    if int(np_) < 1:
        raise ValueError(f"a job needs at least 1 rank, got {np_}")
    mpiexec = launcher or environment.mpiexec()
    return [mpiexec, "-n", str(int(np_)), *program(function, spec)]


def program(function, spec: dict) -> list[str]:
    """The argv one rank runs for job `function` (what `command` starts under mpiexec)."""
    return [sys.executable, "-m", MODULE, target(function), json.dumps(spec)]


def resolve(name: str):
    """The job function named 'module:function' (ValueError unless it is a marked job)."""
    module, _, function = name.partition(":")
    if not function or not (module == PACKAGE or module.startswith(PACKAGE + ".")):
        raise ValueError(f"{name!r} is not a job of {PACKAGE} ('module:function')")
    found = getattr(importlib.import_module(module), function, None)
    if not getattr(found, _MARK, False):
        raise ValueError(f"{name!r} is not a job (no @jobs.job function of that name)")
    return found


def run(function, spec: dict, comm) -> int:
    """Run job `function` in this process (every rank of `comm` must call it); with
    spec["cpus"] (binding.cpus_for), each rank first pins itself to its CPU."""
    if spec.get("cpus"):
        binding.pin(spec["cpus"][comm.Get_rank()])
    return int(function(spec, comm) or 0)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = f"usage: python -m {MODULE} MODULE:FUNCTION SPEC_JSON"
    if len(argv) != 2:
        print(usage, file=sys.stderr)
        return 2
    try:
        function = resolve(argv[0])
        spec = json.loads(argv[1])
    except (ValueError, ImportError) as exc:  # JSONDecodeError is a ValueError
        print(f"{MODULE}: {exc}; {usage}", file=sys.stderr)
        return 2
    from mpi4py import MPI

    return run(function, spec, MPI.COMM_WORLD)


if __name__ == "__main__":
    sys.exit(main())
