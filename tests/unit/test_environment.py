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
MPI_KEYS = {
    "mpi_vendor",
    "mpi_standard",
    "mpi_library_version",
    "mpi4py",
    "mpi_source",
    "mpi_library_path",
    "mpiexec_path",
}


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


X86_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC 7B13
cpu MHz\t\t: 2445.404
"""
ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32
CPU implementer\t: 0x41
CPU part\t: 0xd0c
"""
ARM_LSCPU = """Architecture:          aarch64
Vendor ID:             ARM
Model name:            Neoverse-N1
"""


def test_model_from_cpuinfo_reads_the_model_name_not_the_family():
    assert environment.model_from_cpuinfo(X86_CPUINFO) == "AMD EPYC 7B13"
    assert environment.model_from_cpuinfo("cpu\t\t: POWER9, altivec supported\n") == (
        "POWER9, altivec supported"
    )
    assert environment.model_from_cpuinfo(ARM_CPUINFO) is None
    assert environment.model_from_cpuinfo("") is None


def test_model_from_lscpu_names_arm_cores():
    assert environment.model_from_lscpu(ARM_LSCPU) == "Neoverse-N1"
    assert environment.model_from_lscpu("Model name: -\n") is None


def _machine_without_a_name(monkeypatch, cpuinfo="", lscpu=""):
    outputs = {"lscpu": lscpu}
    monkeypatch.setattr(environment, "_read_text", lambda path: cpuinfo)
    monkeypatch.setattr(environment, "_command_output", lambda *argv: outputs.get(argv[0], ""))
    monkeypatch.setattr(environment.platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(environment.platform, "processor", lambda: "aarch64")


def test_cpu_model_asks_lscpu_when_cpuinfo_has_no_name(monkeypatch):
    _machine_without_a_name(monkeypatch, cpuinfo=ARM_CPUINFO, lscpu=ARM_LSCPU)
    assert environment.cpu_model() == "Neoverse-N1"


def test_cpu_model_never_passes_the_architecture_off_as_a_model(monkeypatch):
    _machine_without_a_name(monkeypatch, cpuinfo=ARM_CPUINFO)
    assert environment.cpu_model() == "unknown model (aarch64)"


def test_the_setup_notebook_prints_the_cpu_model_not_the_architecture():
    pytest.importorskip("mpi4py")
    from pingpong_lab.course import notebook

    cpu = notebook.machine()["cpu"]
    assert cpu == environment.cpu_model()
    assert cpu != environment.platform.machine()


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
    # the libmpi mpi4py loaded, and where it comes from
    assert os.path.basename(m["mpi_library_path"]).startswith("libmpi")
    assert m["mpi_source"] == environment.mpi_source(m["mpi_library_path"])


@pytest.mark.parametrize(
    "library,source",
    [
        ("/env/lib/libmpi.so.12", "wheel"),
        ("/conda/lib/libmpi.so.40", "conda"),
        ("/usr/lib/x86_64-linux-gnu/libmpich.so.12", "system"),
        ("/opt/cray/pe/lib64/libmpi_cray.so.12", "system"),
        ("", ""),
    ],
)
def test_mpi_source_says_wheel_conda_or_system_by_where_libmpi_lives(library, source):
    assert environment.mpi_source(library, prefix="/env", conda_prefix="/conda") == source


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
