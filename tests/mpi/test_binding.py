"""Pinned ranks (bind=): engines and break-it jobs run on the CPUs their placement names."""

from __future__ import annotations

import os

import pytest

from pingpong_lab.course import deadlocks, notebook
from pingpong_lab.engines.cluster import MPICluster
from pingpong_lab.mpi import binding

from ..conftest import requires_mpi

pytestmark = [
    requires_mpi,
    pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here"),
]


def _placements():
    return {name: cpus for name, cpus in binding.available(2).items() if isinstance(cpus, list)}


def test_engines_run_where_their_placement_puts_them():
    """Engines on two cores where there are two, else both on one (break-it covers the other:
    both ways pin through binding.pin)."""
    name = "cores" if "cores" in _placements() else "same-core"
    cpus = _placements()[name]
    with MPICluster(n=2, bind=name, timeout=60) as cluster:
        assert [p["allowed_cores"] for p in cluster.placement] == [[c] for c in cpus]
        ranks = cluster.run(lambda: __import__("mpi4py.MPI").MPI.COMM_WORLD.Get_rank())
        assert ranks == [0, 1]


def test_a_placement_this_machine_cannot_give_fails_before_anything_starts():
    with pytest.raises(binding.PlacementError, match="not among"):
        MPICluster(n=2, bind=[0, 4096])
    with pytest.raises(ValueError, match="Slurm"):
        MPICluster(n=2, bind="cores", launcher="slurm")


def test_break_it_pins_both_ranks_and_still_finds_the_deadlock(capsys):
    cpus = _placements()["same-core"]
    result = notebook.break_it("head-to-head", sizes=(8, 1 << 20), stuck_after_s=2.0,
                               bind="same-core")  # fmt: skip
    # a rank stuck at the deadline may be ended before it reports: every report says so
    assert result["cpus"] and all(got == [cpus[0]] for got in result["cpus"]), result["cpus"]
    assert result["completed"] == [8] and result["stuck_at"] == 1 << 20
    assert "ranks on CPUs" in capsys.readouterr().out
    unpinned = deadlocks.run("head-to-head", sizes=(8,), stuck_after_s=2.0)
    assert unpinned["cpus"] == [sorted(os.sched_getaffinity(0))] * 2
