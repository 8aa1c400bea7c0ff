"""How MPICluster starts its engines on Slurm: which launcher, and the settings it needs.

    MPICluster(n=2, launcher="slurm")      # or PINGPONG_LAB_LAUNCHER=slurm

"slurm" means one of two things:
- outside an allocation: "sbatch". ipyparallel's SlurmEngineSetLauncher submits one job of n
  tasks whose script runs `srun --mpi=pmi2 ipengine --mpi ...`; the controller runs here and
  listens on every interface so that engines on other nodes reach it; the profile folder (with
  the connection files the engines read) is made under a folder they can see:
  $PINGPONG_LAB_SLURM_DIR, else ~/.cache/pingpong-lab (home folders are shared on clusters).
- inside an allocation ($SLURM_JOB_ID set, a notebook in an sbatch or salloc job, say): "srun".
  The engines are a job step of that allocation, started like mpiexec would start them but with
  `srun --mpi=pmi2 -n N`, tracked by PID like any local launcher.

Why `--mpi=pmi2`: the MPICH wheel from PyPI speaks PMI (its Hydra's wire protocol), and Slurm's
pmi2 plugin serves it, so srun'd ranks join one COMM_WORLD. Without it (a site whose MpiDefault
is none) every engine would be rank 0 of its own COMM_WORLD of size 1; MPICluster refuses that
with a clear error. $PINGPONG_LAB_SRUN_MPI picks another plugin (pmix on a site that has it).
stop() cancels the engines' job and waits until Slurm no longer lists it. When the notebook's
process dies without stop(), its watchdog ends the controller, and the engines, which miss its
heartbeat, shut down within ipyparallel's limit (50 missed beats, a few minutes), ending the job.
Extra sbatch options for the engines' job (a partition, an account, a time limit) go in
$PINGPONG_LAB_SBATCH_OPTIONS, e.g. "--partition=short --time=00:30:00".
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

from .. import runtime

LAUNCHERS = ("mpiexec", "slurm", "srun", "sbatch")
LAUNCHER_VARIABLE = "PINGPONG_LAB_LAUNCHER"

WRONG_PLUGIN = (
    "srun's MPI plugin did not connect the ranks (each is a job of its own), so it does not "
    "speak this MPI's PMI: set PINGPONG_LAB_SRUN_MPI to one that does (`srun --mpi=list`)."
)

ENGINE_JOB_TEMPLATE = """#!/bin/sh
#SBATCH --export=ALL
#SBATCH --job-name=ipengine-{cluster_id}
#SBATCH --ntasks={n}
#SBATCH --output={output_file}
{sbatch_options}
exec srun --mpi={srun_mpi} {program_and_args} --mpi
"""


def choose(launcher: str | None) -> str:
    """The launcher to use: "mpiexec", "srun" (a step of this allocation) or "sbatch"."""
    name = launcher or runtime.setting(LAUNCHER_VARIABLE) or "mpiexec"
    if name not in LAUNCHERS:
        where = "launcher" if launcher else f"${LAUNCHER_VARIABLE}"
        raise ValueError(f"{where} must be one of {', '.join(LAUNCHERS)}, got {name!r}")
    if name == "slurm":
        return "srun" if os.environ.get("SLURM_JOB_ID") else "sbatch"
    return name


def srun_mpi() -> str:
    """The srun MPI plugin the engines use (pmi2 unless $PINGPONG_LAB_SRUN_MPI says)."""
    return runtime.setting("PINGPONG_LAB_SRUN_MPI") or "pmi2"


def _require(command: str) -> str:
    path = shutil.which(command)
    if path is None:
        raise FileNotFoundError(
            f"`{command}` is not on PATH: the Slurm launcher needs a Slurm client "
            "(or use launcher='mpiexec')"
        )
    return path


def srun_command() -> list[str]:
    """The MPI command for engines inside an allocation (ipyparallel appends -n N)."""
    return [_require("srun"), f"--mpi={srun_mpi()}"]


def shared_dir() -> str:
    """A folder for the profile of engines started by sbatch (see the module's docstring)."""
    folder = runtime.setting("PINGPONG_LAB_SLURM_DIR") or str(
        Path.home() / ".cache" / "pingpong-lab"
    )
    Path(folder).mkdir(parents=True, exist_ok=True)
    return folder


def controller_settings(batch: bool) -> dict:
    """ipp.Cluster arguments for the controller: every interface when engines may be remote."""
    return {"controller_ip": "*"} if batch else {}


def configure_batch(config, env: dict, profile_dir: str) -> None:
    """Point an ipp.Cluster's config at SlurmEngineSetLauncher with our job script, written
    into the cluster's profile folder (ipyparallel would write it into the current folder)."""
    _require("sbatch")
    launcher = config.SlurmEngineSetLauncher
    launcher.batch_template = ENGINE_JOB_TEMPLATE
    launcher.batch_file_name = os.path.join(profile_dir, "engines.sbatch")  # absolute: wins
    launcher.environment = dict(env)
    extra = shlex.split(runtime.setting("PINGPONG_LAB_SBATCH_OPTIONS"))
    launcher.namespace = {
        "srun_mpi": srun_mpi(),
        "sbatch_options": "\n".join(f"#SBATCH {shlex.quote(opt)}" for opt in extra),
    }


def job_id(cluster) -> str | None:
    """The Slurm job id of a cluster's engines when sbatch started them, else None."""
    for launcher in cluster.engines.values() if cluster is not None else ():
        found = getattr(launcher, "job_id", "")
        if found:
            return str(found)
    return None


def job_running(job: str) -> bool:
    """True while Slurm lists the job as pending, running or completing."""
    try:
        proc = subprocess.run(
            ["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.stdout.strip() in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING")


def wait_ended(job: str, timeout: float = 60.0) -> bool:
    """Wait until Slurm no longer lists the job as active (its processes are then gone)."""
    end = time.monotonic() + timeout
    while job_running(job):
        if time.monotonic() > end:
            return False
        time.sleep(0.2)
    return True


def job_report(cluster) -> str:
    """For an engines job that did not come up: its Slurm state and reason, its output's end."""
    job = job_id(cluster)
    if job is None:
        return ""
    try:
        state = subprocess.run(
            ["squeue", "-h", "-j", job, "-o", "%T %r"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        state = ""
    output = ""
    for launcher in cluster.engines.values():
        try:
            output = launcher.get_output(remove=False)
        except Exception:
            pass
    tail = " | ".join(output.strip().splitlines()[-6:])
    said = f"; its output: {tail}" if tail else ""
    return f"Slurm job {job}: {state or 'no longer queued'}{said}"
