"""The shipped TCP loopback sweep stands in where TCP cannot run (a grading sandbox)."""

from __future__ import annotations

import pytest

from pingpong_lab.analysis import model
from pingpong_lab.course import handoff, shipdata


def test_the_shipped_tcp_sweep_reads_back_as_a_sweep_of_the_sizes_asked_for(tmp_path):
    sizes = [1, 2, 4, 8, 1024, 262144]
    path = shipdata.to_csv("tcp_loopback", tmp_path / "tcp.csv", sizes)
    nbytes, t = model.load_sweep_csv(path)
    assert list(nbytes) == sizes
    shipped = handoff.shipped("tcp_loopback")
    assert t[0] == pytest.approx(float(shipped["t_median_s"][0]))
    assert (t > 1e-6).all() and t[-1] > t[0]  # slower than shared memory, growing with size
    assert "TCP" in shipped["about"] and not list(tmp_path.glob("*.tmp"))


def test_a_size_the_shipped_sweep_lacks_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"no size\(s\) \[3\]"):
        shipdata.to_csv("tcp_loopback", tmp_path / "tcp.csv", [1, 3])


def test_the_grading_sweep_sizes_are_all_in_the_shipped_tcp_sweep(tmp_path):
    """04 in grading mode sweeps 1 B .. 256 KiB in powers of two: all shipped."""
    sizes = [1 << k for k in range(19)]
    shipdata.to_csv("tcp_loopback", tmp_path / "tcp.csv", sizes)
