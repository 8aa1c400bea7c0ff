"""A check's own MPI ranks: a fresh `mpiexec` job for each check of a learner's code on real MPI.

The learner's MPI engines are the learner's processes: a C kernel loaded there earlier, or
anything a cell left behind, would run beside a check run there and could answer for it. So a
check starts ranks of its own (`on_fresh_ranks`): a new `mpiexec -n RANKS` job, in its own
process group, ended whole at its deadline. It gets the learner's function packed as bytes
(engines.shipping.packed: when grading, packed by the learner's kernel and passed on by the
judge, which never unpickles it) or the path of a C library, runs one engine-side function of
the course (marked with `work`) for each set of arguments, and each rank writes what it saw as
JSON. The caller, in grading the judge, reads that JSON as data and decides.

Nothing outlives the job: each check's ranks load the learner's code afresh and end with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from ...mpi import jobs
from ...mpi.processes import run_group
from ..on_ranks import _MARK, fresh_ranks_job
from .mode import MPIEXEC_TIMEOUT_S


class Unfinished(Exception):
    """The job passed its deadline before every rank had finished run `run` (0-based)."""

    def __init__(self, run: int, timeout: float):
        super().__init__(f"run {run} did not finish within {timeout:g} s")
        self.run, self.timeout = run, timeout


def on_fresh_ranks(work_function, runs, functions=(), nranks=2, timeout=MPIEXEC_TIMEOUT_S,
                   decided_by=None, env=None):  # fmt: skip
    """Run `work_function(*packed functions, *args)` on every rank of a fresh job, for each
    `args` of `runs` in turn; a list (one per run) of the ranks' results ordered by rank.

    decided_by: a rank whose result alone decides (the course's partner rank): each run's
    result is then that rank's only, and the runs it finished are returned even when the job
    ended early (the partner ends it when a send of its own can never complete). env: more
    variables for the job.

    Raises Unfinished when the deadline passes (the caller says what deadlocked, as a
    DeadlockError), AssertionError when the learner's code raised on a rank (its type and
    message) or the job failed otherwise.
    """
    if not getattr(work_function, _MARK, False):
        raise ValueError(f"{work_function!r} is not marked as work for fresh ranks")
    from ...engines.shipping import packed

    runs = [list(args) for args in runs]
    with tempfile.TemporaryDirectory(prefix="pp-ranks-") as tmp:
        out = Path(tmp)
        paths = []
        for k, function in enumerate(functions):
            path = out / f"function{k}.pkl"
            path.write_bytes(packed(function))
            paths.append(str(path))
        spec = {
            "work": f"{work_function.__module__}:{work_function.__qualname__}",
            "packages": paths,
            "runs": runs,
            "out_dir": str(out),
        }
        ranks = range(nranks) if decided_by is None else [decided_by]
        try:
            cmd = jobs.command(fresh_ranks_job, spec, nranks)
            proc = run_group(cmd, timeout, env={**_job_env(), **(env or {})})
        except subprocess.TimeoutExpired:
            done = _results(out, len(runs), ranks)
            raise Unfinished(len(done), timeout) from None
        errors = sorted(out.glob("error.rank*.json"))
        if errors:
            raise AssertionError(_raised(json.loads(errors[0].read_text()))) from None
        results = _results(out, len(runs), ranks)
    if decided_by is not None and results and results[-1][0].get("end_job"):
        return [run[0] for run in results]
    if len(results) < len(runs):
        tail = "\n".join(proc.stderr.strip().splitlines()[-6:])
        raise AssertionError(f"the {nranks}-rank run failed (exit {proc.returncode}):\n{tail}")
    return results if decided_by is None else [run[0] for run in results]


def _job_env() -> dict:
    """This process's environment with one OpenBLAS thread per rank: the ranks import numpy,
    and a thread per core in each would cost CPU time for nothing."""
    return {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def _raised(error: dict) -> str:
    """'NotImplementedError raised on rank 0 (...)' from a rank's error file."""
    text = f"{error['type']} raised on rank {error['rank']}"
    if error["message"]:
        text += f": {error['message']}"
    if error["type"] == "NotImplementedError":
        text += " (write the function's body first)"
    return text


def _results(out: Path, nruns: int, ranks) -> list:
    """The runs every one of `ranks` finished, in order (stops at the first unfinished one)."""
    results = []
    for i in range(nruns):
        files = [out / f"run{i:04d}.rank{r:05d}.json" for r in ranks]
        if not all(f.is_file() for f in files):
            break
        results.append([json.loads(f.read_text()) for f in files])
    return results
