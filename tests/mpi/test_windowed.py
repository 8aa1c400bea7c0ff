"""The windowed C kernels (osu_bw's and osu_bibw's method) on real engines: every message of a
window arrives intact in its own slot, rank 0 times whole windows, other ranks give NaN, and a
damaged message is counted by the rank that receives it."""

from __future__ import annotations

import numpy as np
import pytest

from ..conftest import requires_mpi

pytestmark = [requires_mpi, pytest.mark.engines]


def _window_run(nbytes, warmup, iters, window, both, corrupt=False):
    """On every engine: the windowed kernel on COMM_WORLD."""
    from mpi4py import MPI

    from pingpong_lab.mpi import ckernels

    return ckernels.windowed(MPI.COMM_WORLD, nbytes, warmup, iters, window, both, corrupt)


@pytest.mark.parametrize("both", [False, True], ids=["bw", "bibw"])
@pytest.mark.parametrize("nranks", [2, 4])
def test_rank_0_times_every_window_and_the_payloads_arrive_intact(request, nranks, both):
    cluster = request.getfixturevalue(f"cluster{nranks}")
    for nbytes in (0, 1, 8, 17, 4097, 1 << 20):
        for window in (1, 16):
            results = cluster.run(_window_run, nbytes, 2, 5, window, both, timeout=60)
            assert len(results) == nranks
            for rank, (samples, corrupt) in enumerate(results):
                assert corrupt == 0, f"rank {rank}: damaged message at {nbytes} B, W={window}"
                assert samples.shape == (5,)
                if rank == 0:
                    assert np.all(np.isfinite(samples)) and np.all(samples > 0), samples
                else:
                    assert np.all(np.isnan(samples)), f"rank {rank} should not time anything"


@pytest.mark.parametrize("both", [False, True], ids=["bw", "bibw"])
def test_a_damaged_message_in_every_window_is_counted_by_its_receiver(cluster2, both):
    iters, warmup = 6, 2
    results = cluster2.run(_window_run, 4096, warmup, iters, 8, both, True, timeout=60)
    (_, seen0), (_, seen1) = results
    # one damaged message per window sent, warm-up windows included
    assert seen1 == warmup + iters
    assert seen0 == (warmup + iters if both else 0)


def test_bad_arguments_are_refused_on_every_rank(cluster2):
    from pingpong_lab.errors import RemoteError

    with pytest.raises(RemoteError, match="window must be between"):
        cluster2.run(_window_run, 64, 0, 2, 0, False, timeout=30)
    with pytest.raises(RemoteError, match="non-negative"):
        cluster2.run(_window_run, 64, -1, 2, 4, True, timeout=30)


@pytest.mark.parametrize("name,directions", [("pp_bw", 1), ("pp_bibw", 2)])
def test_the_stand_alone_driver_prints_window_times_and_bandwidth(c_library, name, directions):
    import subprocess

    from pingpong_lab.mpi import environment

    exe = c_library.parent / name
    cmd = [environment.mpiexec(), "-n", "2", str(exe), "-m", "64:256", "-i", "5", "-w", "4"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    assert "window of 4" in out
    rows = [ln.split() for ln in out.splitlines() if not ln.startswith("#")]
    assert [int(r[0]) for r in rows] == [64, 128, 256]
    for size, _avg, median, _low, iters, mbps in rows:
        assert int(iters) == 5 and float(median) > 0
        moved = directions * 4 * int(size)  # bytes per window
        assert float(mbps) == pytest.approx(moved / (float(median) * 1e-6) / 1e6, rel=0.02)
