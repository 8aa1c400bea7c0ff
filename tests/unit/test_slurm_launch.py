"""Which launcher MPICluster uses, and the engines' job script for sbatch."""

from __future__ import annotations

import pytest

from pingpong_lab.engines import slurm_launch
from pingpong_lab.engines.cluster import MPICluster


@pytest.fixture(autouse=True)
def _no_slurm_settings(monkeypatch):
    for name in ("SLURM_JOB_ID", slurm_launch.LAUNCHER_VARIABLE, "PINGPONG_LAB_SRUN_MPI"):
        monkeypatch.delenv(name, raising=False)


def test_mpiexec_is_the_default_and_the_variable_chooses_otherwise(monkeypatch):
    assert MPICluster(n=2).launcher == "mpiexec"
    monkeypatch.setenv(slurm_launch.LAUNCHER_VARIABLE, "slurm")
    assert MPICluster(n=2).launcher == "sbatch"
    assert MPICluster(n=2, launcher="mpiexec").launcher == "mpiexec"  # the argument wins


def test_slurm_inside_an_allocation_is_a_step_of_it(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    assert slurm_launch.choose("slurm") == "srun"
    assert slurm_launch.choose("sbatch") == "sbatch"  # asked for by name: a job of its own


def test_an_unknown_launcher_is_refused_by_name(monkeypatch):
    with pytest.raises(ValueError, match="launcher must be one of .*got 'pbs'"):
        MPICluster(n=2, launcher="pbs")
    monkeypatch.setenv(slurm_launch.LAUNCHER_VARIABLE, "ssh")
    with pytest.raises(ValueError, match=r"\$PINGPONG_LAB_LAUNCHER must be one of .*got 'ssh'"):
        slurm_launch.choose(None)


def test_the_engines_job_runs_srun_with_the_pmi_plugin_and_the_extra_options(monkeypatch):
    from traitlets.config import Config

    monkeypatch.setattr(slurm_launch.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setenv("PINGPONG_LAB_SRUN_MPI", "pmix")
    monkeypatch.setenv("PINGPONG_LAB_SBATCH_OPTIONS", "--partition=short --time=00:30:00")
    config = Config()
    slurm_launch.configure_batch(config, {"A": "1"}, "/shared/profile")
    launcher = config.SlurmEngineSetLauncher
    assert launcher.batch_file_name == "/shared/profile/engines.sbatch"  # not the current folder
    script = launcher.batch_template.format(
        cluster_id="c1", n=4, output_file="o.log", program_and_args="ipengine", **launcher.namespace
    )
    assert "#SBATCH --ntasks=4" in script
    assert "#SBATCH --partition=short\n#SBATCH --time=00:30:00" in script
    assert script.rstrip().endswith("exec srun --mpi=pmix ipengine --mpi")
    assert launcher.environment == {"A": "1"}
    assert slurm_launch.srun_command() == ["/usr/bin/srun", "--mpi=pmix"]


def test_without_slurm_the_launcher_says_what_is_missing(monkeypatch):
    monkeypatch.setattr(slurm_launch.shutil, "which", lambda name: None)
    with pytest.raises(FileNotFoundError, match="`srun` is not on PATH"):
        slurm_launch.srun_command()
