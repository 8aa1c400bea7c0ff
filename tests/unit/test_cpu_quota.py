"""The cores a process may use come from its cgroup's CPU quota as well as its affinity, so the
oversubscription warning fires inside a container limited to fewer CPUs than the machine has."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pingpong_lab.mpi import environment


def _files(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    return tmp_path


def _quota(tmp_path, proc_cgroup: str, files: dict[str, str]):
    root = _files(tmp_path / "sys", files)
    proc = _files(tmp_path / "proc", {"cgroup": proc_cgroup}) / "cgroup"
    return environment.cgroup_cpu_quota(proc_cgroup=str(proc), root=str(root))


def test_cgroup_v2_cpu_max_gives_quota_over_period(tmp_path):
    files = {"cgroup.controllers": "cpu memory", "user/jupyter-ada/cpu.max": "150000 100000"}
    assert _quota(tmp_path, "0::/user/jupyter-ada", files) == 1.5


def test_cgroup_v2_without_a_limit_has_no_quota(tmp_path):
    files = {"cgroup.controllers": "cpu", "cpu.max": "max 100000"}
    assert _quota(tmp_path, "0::/", files) is None


def test_the_tightest_quota_of_the_cgroup_and_its_parents_counts(tmp_path):
    files = {
        "cgroup.controllers": "cpu",
        "hub/cpu.max": "100000 100000",
        "hub/user/cpu.max": "400000 100000",
    }
    assert _quota(tmp_path, "0::/hub/user", files) == 1.0


def test_cgroup_v1_cfs_quota_and_period(tmp_path):
    files = {
        "cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "300000",
        "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000",
    }
    assert _quota(tmp_path, "4:cpu,cpuacct:/docker/abc\n1:memory:/docker/abc", files) == 3.0


def test_cgroup_v1_quota_of_minus_one_is_no_limit(tmp_path):
    files = {"cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000"}
    assert _quota(tmp_path, "1:cpu:/", files) is None


def test_no_cgroup_file_means_no_quota(tmp_path):
    missing = tmp_path / "nothing"
    assert environment.cgroup_cpu_quota(proc_cgroup=str(missing), root=str(tmp_path)) is None


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="needs sched_getaffinity")
@pytest.mark.parametrize("quota, expected", [(None, None), (1.5, 1), (0.5, 1), (64.0, None)])
def test_cpu_count_is_affinity_cut_to_the_quota_rounded_down(monkeypatch, quota, expected):
    affinity = len(os.sched_getaffinity(0))
    monkeypatch.setattr(environment, "cgroup_cpu_quota", lambda: quota)
    assert environment.cpu_count() == (affinity if expected is None else min(affinity, expected))


def test_a_cluster_larger_than_the_quota_warns_of_oversubscription(monkeypatch):
    """MPICluster compares its ranks with cpu_count() (the warning, raised as an error here,
    stops start() before any engine)."""
    import warnings

    from pingpong_lab.engines.cluster import MPICluster, OversubscribedWarning

    monkeypatch.setattr(environment, "cgroup_cpu_quota", lambda: 1.0)
    monkeypatch.setattr(environment, "require_mpi4py", lambda: None)
    monkeypatch.setattr(environment, "mpiexec", lambda: "mpiexec")
    with warnings.catch_warnings():
        warnings.simplefilter("error", OversubscribedWarning)
        with pytest.raises(OversubscribedWarning, match="2 ranks on 1 cores"):
            MPICluster(n=2).start()
