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

import importlib
import json
import subprocess
import tempfile
from pathlib import Path

from ...mpi import jobs
from ...mpi.processes import run_group
from .mode import MPIEXEC_TIMEOUT_S

_MARK = "_pingpong_lab_fresh_work"


def work(function):
    """Mark an engine-side function `function(*packages, *args) -> dict` (JSON) that a fresh
    job may run on each of its ranks."""
    setattr(function, _MARK, True)
    return function


class Unfinished(Exception):
    """The job passed its deadline before every rank had finished run `run` (0-based)."""

    def __init__(self, run: int, timeout: float):
        super().__init__(f"run {run} did not finish within {timeout:g} s")
        self.run, self.timeout = run, timeout


def on_fresh_ranks(work_function, runs, functions=(), nranks=2, timeout=MPIEXEC_TIMEOUT_S):
    """Run `work_function(*packed functions, *args)` on every rank of a fresh job, for each
    `args` of `runs` in turn; a list (one per run) of the ranks' results ordered by rank.

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
        try:
            proc = run_group(jobs.command(fresh_ranks_job, spec, nranks), timeout)
        except subprocess.TimeoutExpired:
            done = _results(out, len(runs), nranks)
            raise Unfinished(len(done), timeout) from None
        errors = sorted(out.glob("error.rank*.json"))
        if errors:
            raise AssertionError(_raised(json.loads(errors[0].read_text()))) from None
        results = _results(out, len(runs), nranks)
    if len(results) < len(runs):
        tail = "\n".join(proc.stderr.strip().splitlines()[-6:])
        raise AssertionError(f"the {nranks}-rank run failed (exit {proc.returncode}):\n{tail}")
    return results


def _raised(error: dict) -> str:
    """'NotImplementedError raised on rank 0 (...)' from a rank's error file."""
    text = f"{error['type']} raised on rank {error['rank']}"
    if error["message"]:
        text += f": {error['message']}"
    if error["type"] == "NotImplementedError":
        text += " (write the function's body first)"
    return text


def _results(out: Path, nruns: int, nranks: int) -> list:
    """The runs every rank finished, in order (stops at the first unfinished one)."""
    results = []
    for i in range(nruns):
        files = [out / f"run{i:04d}.rank{r:05d}.json" for r in range(nranks)]
        if not all(f.is_file() for f in files):
            break
        results.append([json.loads(f.read_text()) for f in files])
    return results


@jobs.job
def fresh_ranks_job(spec: dict, comm) -> int:
    """The "fresh ranks" job (every rank): each run of a marked work, one JSON file per rank;
    an error is written as data and ends the whole job (the other ranks may be waiting)."""
    from ...engines.shipping import unpacked

    module, _, name = spec["work"].partition(":")
    function = getattr(importlib.import_module(module), name, None)
    if not getattr(function, _MARK, False):
        raise ValueError(f"{spec['work']!r} is not work for fresh ranks")
    out, rank = Path(spec["out_dir"]), comm.Get_rank()
    try:
        packages = [unpacked(Path(p).read_bytes()) for p in spec["packages"]]
        for i, args in enumerate(spec["runs"]):
            result = function(*packages, *args)
            (out / f"run{i:04d}.rank{rank:05d}.json").write_text(json.dumps(result))
    except Exception as exc:  # the learner's code: say what it raised, then end every rank
        error = {"rank": rank, "type": type(exc).__name__, "message": str(exc)}
        (out / f"error.rank{rank:05d}.json").write_text(json.dumps(error))
        comm.Abort(1)
    return 0
