"""The one way work runs under mpiexec (or srun): `python -m pingpong_lab.mpi.jobs NAME SPEC`.

Every rank runs the job NAME with the same JSON SPEC. A job is a function
`job(spec: dict, comm) -> int` (the exit status); JOBS names where each lives, and it is
imported only when run, so a job may sit next to the code it drives in any layer. Launchers
build the command line with `command(...)` and never spell the module or the JSON themselves.
"""

from __future__ import annotations

import importlib
import json
import sys

from . import environment

JOBS = {
    "sweep": "pingpong_lab.mpi.measure:sweep_job",  # pingpong-lab sweep, report
    "bench-round": "pingpong_lab.apps.bench.peers:round_job",  # one round of make bench
    "c-pingpong": "pingpong_lab.course.grading.engine_checks:c_pingpong_job",  # graded C, N ranks
    "break-it": "pingpong_lab.course.deadlocks:experiment_job",  # notebook 02's deadlocks
}


def command(name: str, spec: dict, np_: int, launcher: str | None = None) -> list[str]:
    """The argv that runs job `name` on `np_` ranks with `spec` (a JSON-serialisable dict)."""
    if int(np_) < 1:
        raise ValueError(f"a job needs at least 1 rank, got {np_}")
    mpiexec = launcher or environment.mpiexec()
    return [mpiexec, "-n", str(int(np_)), *program(name, spec)]


def program(name: str, spec: dict) -> list[str]:
    """The argv one rank runs for job `name` (what `command` starts under mpiexec)."""
    if name not in JOBS:
        raise ValueError(f"unknown job {name!r}; known jobs: {', '.join(JOBS)}")
    return [sys.executable, "-m", __name__, name, json.dumps(spec)]


def run(name: str, spec: dict, comm) -> int:
    """Run job `name` in this process (every rank of `comm` must call it)."""
    module, function = JOBS[name].split(":")
    return int(getattr(importlib.import_module(module), function)(spec, comm) or 0)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 2 or argv[0] not in JOBS:
        print(f"usage: python -m {__name__} {{{','.join(JOBS)}}} SPEC_JSON", file=sys.stderr)
        return 2
    try:
        spec = json.loads(argv[1])
    except json.JSONDecodeError as exc:
        print(f"{__name__}: SPEC is not valid JSON: {exc}", file=sys.stderr)
        return 2
    from mpi4py import MPI

    return run(argv[0], spec, MPI.COMM_WORLD)


if __name__ == "__main__":
    sys.exit(main())
