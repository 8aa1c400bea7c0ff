"""Placements by name (mpi/binding.py), read from a fake /sys/devices/system/cpu."""

from __future__ import annotations

import os

import pytest

from pingpong_lab.mpi import binding
from pingpong_lab.mpi.binding import PlacementError


def _sysfs(tmp_path, siblings: dict[int, str]):
    for cpu, text in siblings.items():
        topo = tmp_path / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "thread_siblings_list").write_text(text + "\n")
    return tmp_path


def test_cpu_lists_in_the_kernels_format():
    assert binding.parse_cpu_list("0-2,8\n") == [0, 1, 2, 8]
    assert binding.parse_cpu_list("5") == [5]


def test_smt_siblings_are_one_core_and_each_placement_picks_its_cpus(tmp_path):
    root = _sysfs(tmp_path, {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3"})
    cpus = [0, 1, 2, 3]
    assert binding.physical_cores(cpus, root) == [[0, 2], [1, 3]]
    assert binding.cpus_for("cores", 2, cpus, root) == [0, 1]
    assert binding.cpus_for("smt", 2, cpus, root) == [0, 2]
    assert binding.cpus_for("same-core", 2, cpus, root) == [0, 0]
    assert binding.cpus_for([3, 1], 2, cpus, root) == [3, 1]


def test_a_machine_without_smt_says_it_cannot_show_siblings(tmp_path):
    root = _sysfs(tmp_path, {0: "0", 1: "1"})
    with pytest.raises(PlacementError, match="SMT is off or absent"):
        binding.cpus_for("smt", 2, [0, 1], root)
    found = binding.available(2, [0, 1], root)
    assert found["cores"] == [0, 1] and found["same-core"] == [0, 0]
    assert "cannot be shown" in found["smt"] and set(found) == set(binding.PLACEMENTS)


def test_placements_the_allowed_cpus_cannot_give_are_refused_with_the_reason(tmp_path):
    root = _sysfs(tmp_path, {0: "0", 1: "1"})
    with pytest.raises(PlacementError, match="need 2 physical cores"):
        binding.cpus_for("cores", 2, [1], root)  # e.g. taskset -c 1
    with pytest.raises(PlacementError, match=r"CPU\(s\) \[7\] are not among"):
        binding.cpus_for([0, 7], 2, [0, 1], root)
    with pytest.raises(PlacementError, match="lists 1 CPU"):
        binding.cpus_for([0], 2, [0, 1], root)
    with pytest.raises(PlacementError, match="unknown placement 'numa'"):
        binding.cpus_for("numa", 2, [0, 1], root)


def test_missing_topology_counts_each_cpu_as_a_core(tmp_path):
    assert binding.physical_cores([0, 1, 2], tmp_path) == [[0], [1], [2]]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_pin_moves_every_thread_and_can_be_undone():
    import threading

    before = os.sched_getaffinity(0)
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    try:
        cpu = min(before)
        assert binding.pin(cpu) == [cpu]
        assert os.sched_getaffinity(worker.native_id) == {cpu}
    finally:
        stop.set()
        worker.join()
        os.sched_setaffinity(0, before)
