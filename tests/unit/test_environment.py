"""mpi.environment: one description of the machine and of where a rank runs."""

from __future__ import annotations

import os
import socket
import sys

import pytest

from pingpong_lab.mpi import environment

BASE_KEYS = {
    "host",
    "cpu",
    "cores_usable",
    "cores_logical",
    "memory_gib",
    "os",
    "platform",
    "python",
}
MPI_KEYS = {"mpi_vendor", "mpi_standard", "mpi_library_version", "mpi4py"}


def test_cpu_model_is_the_model_name_from_proc_cpuinfo():
    model = environment.cpu_model()
    assert isinstance(model, str) and model
    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
    except OSError:
        names = []
    if names:
        assert model == names[0]


def test_machine_describes_this_machine_and_its_mpi():
    pytest.importorskip("mpi4py")
    m = environment.machine()
    assert set(m) == BASE_KEYS | MPI_KEYS
    assert m["host"] == socket.gethostname()
    assert m["cpu"] == environment.cpu_model()
    assert 1 <= m["cores_usable"] <= m["cores_logical"] == os.cpu_count()
    assert m["memory_gib"] > 0
    assert m["python"].startswith(f"{sys.version_info.major}.{sys.version_info.minor}")
    assert m["mpi_vendor"] and m["mpi_standard"].count(".") == 1


def test_machine_without_mpi4py_leaves_the_mpi_out(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)
    assert set(environment.machine()) == BASE_KEYS


def test_rank_placement_says_host_core_and_allowed_cores():
    where = environment.rank_placement(3)
    assert list(where) == ["rank", "host", "core", "allowed_cores"]
    assert where["rank"] == 3 and where["host"] == socket.gethostname()
    assert isinstance(where["core"], int) and where["core"] >= -1
    if hasattr(os, "sched_getaffinity"):
        assert where["allowed_cores"] == sorted(os.sched_getaffinity(0))


class _Comm:
    """Two ranks seen from rank 1: allgather returns every rank's value."""

    def Get_rank(self):  # noqa: N802 - the mpi4py name
        return 1

    def allgather(self, value):
        return [{**value, "rank": 0}, value]


def test_placement_gathers_every_rank():
    where = environment.placement(_Comm())
    assert [p["rank"] for p in where] == [0, 1]
    assert where[1] == {**environment.rank_placement(1), "core": where[1]["core"]}


@pytest.mark.parametrize(
    ("wanted", "ncores", "ranks"), [(8, 2, 2), (4, 16, 4), (1, 16, 2), (8, 1, 2), (0, 1, 2)]
)
def test_plan_ranks_caps_at_the_cores_but_never_goes_below_two(wanted, ncores, ranks):
    assert environment.plan_ranks(wanted, ncores) == ranks
    assert environment.oversubscribed(ranks, ncores) == (ranks > ncores)


def test_plan_ranks_refuses_nonsense():
    with pytest.raises(ValueError, match="ncores"):
        environment.plan_ranks(4, 0)
    with pytest.raises(ValueError, match="wanted"):
        environment.plan_ranks(-1, 4)
