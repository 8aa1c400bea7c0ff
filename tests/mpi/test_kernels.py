"""Every kernel, C and Python, on real MPI engines at 2 and 4 ranks."""

from __future__ import annotations

import numpy as np
import pytest

from pingpong_lab.errors import PayloadError, RemoteError
from pingpong_lab.mpi import measure

from ..conftest import requires_mpi

pytestmark = [requires_mpi, pytest.mark.engines]

KERNELS = [
    ("c", "blocking"),
    ("c", "nonblocking"),
    ("c", "pairwise"),
    ("python", "blocking"),
    ("python", "nonblocking"),
    ("python", "pairwise"),
    ("python", "pickle"),
]


def _initiators(mode: str, n: int) -> set[int]:
    return set(range(n // 2)) if mode == "pairwise" else {0}


@pytest.mark.parametrize("nranks", [2, 4])
@pytest.mark.parametrize("kind,mode", KERNELS)
def test_every_kernel_times_its_initiators_and_leaves_other_ranks_nan(request, nranks, kind, mode):
    cluster = request.getfixturevalue(f"cluster{nranks}")
    for nbytes in (0, 1, 4097, 1 << 20):
        results = cluster.run(measure.run_kernel, kind, mode, nbytes, 2, 5, timeout=60)
        assert len(results) == nranks
        for rank, (samples, corrupt) in enumerate(results):
            assert corrupt == 0, f"rank {rank} saw a corrupted echo at {nbytes} B"
            assert samples.shape == (5,)
            if rank in _initiators(mode, nranks):
                assert np.all(samples > 0) and np.all(np.isfinite(samples))
            else:
                assert np.all(np.isnan(samples)), f"rank {rank} should not time anything"


@pytest.mark.parametrize("kind", ["c", "python"])
def test_a_64_mib_message_is_echoed_intact(cluster2, kind):
    results = cluster2.run(measure.run_kernel, kind, "blocking", 64 << 20, 1, 2, timeout=120)
    assert results[0][1] == 0 and np.all(results[0][0] > 0)


@pytest.mark.parametrize("kind,mode", [k for k in KERNELS if k[1] != "pairwise"])
def test_one_shared_buffer_option_also_echoes_intact_and_catches_a_corrupted_echo(
    cluster2, kind, mode
):
    for corrupt, expected in ((False, 0), (True, 7)):
        results = cluster2.run(
            measure.run_kernel,
            kind,
            mode,
            65536,
            2,
            5,
            shared_buffer=True,
            corrupt_echo=corrupt,
            timeout=60,
        )
        assert results[0][1] == expected
        assert results[1][1] == 0  # the echoing rank sends back what it got: nothing to check


@pytest.mark.parametrize("kind,mode", KERNELS)
def test_a_corrupting_echo_is_counted_on_every_iteration(cluster4, kind, mode):
    results = cluster4.run(
        measure.run_kernel, kind, mode, 1000, 3, 7, corrupt_echo=True, timeout=60
    )
    for rank in _initiators(mode, 4):
        assert results[rank][1] == 10, "every warm-up and timed echo was corrupted"


def _stale_requests_to(kind):
    """Rank 0 follows the kernels' protocol but always sends iteration 1's payload (stale)."""
    from mpi4py import MPI

    from pingpong_lab.mpi import kernels, payload

    comm = MPI.COMM_WORLD
    if comm.Get_rank() == 1:
        return measure.get_kernel(kind, "blocking")(comm, 1000, 0, 3)[1]
    if comm.Get_rank() == 0:
        stale, reply = np.empty(1000, np.uint8), np.empty(1000, np.uint8)
        payload.fill(stale, payload.base(1000), 0)
        payload.stamp(stale, 1)
        if kind == "c":  # the C kernel first agrees on its arguments and its buffers
            ok, agreed = np.ones(1, np.intc), np.zeros(1, np.intc)
            comm.Allreduce(ok, agreed, op=MPI.MIN)
            comm.Allreduce(ok, agreed, op=MPI.MIN)
        tag, ready = kernels.tags()
        comm.Barrier()  # the kernels' synchronised start (no warm-up)
        for _ in range(3):
            comm.Send(stale, 1, tag)
            comm.Recv(reply, 1, tag)
            comm.Recv([reply, 0, MPI.BYTE], 1, ready)
    return None


@pytest.mark.parametrize("kind", ["c", "python"])
def test_the_answering_rank_checks_every_request_it_gets(cluster2, kind):
    # iterations 0 and 2 expect pattern 0: the answering rank counts both stale requests
    assert cluster2.run(_stale_requests_to, kind, timeout=60)[1] == 2


def _agreed_corrupt_run():
    from mpi4py import MPI

    from pingpong_lab.mpi import measure

    kernel = measure.get_kernel("c", "blocking")
    return measure.run_agreed(MPI.COMM_WORLD, kernel, 256, 1, 3, corrupt_echo=True)


def test_a_corrupted_echo_raises_payload_error_on_every_rank_never_a_silent_time(cluster2):
    with pytest.raises(RemoteError) as info:
        cluster2.run(_agreed_corrupt_run, timeout=60)
    assert "PayloadError" in str(info.value)
    assert "rank 0" in str(info.value) and "rank 1" in str(info.value)
    assert PayloadError.__name__ in str(info.value)


def test_sweep_on_engines_matches_the_csv_schema(cluster4):
    results = cluster4.run(measure.sweep, "c", "pairwise", [1, 1024], reps=30, timeout=60)
    rows, raw = results[0]
    assert all(r is None for r in results[1:])
    assert [r["nbytes"] for r in rows] == [1, 1024]
    for row in rows:
        assert row["t_min_s"] <= row["t_median_s"] <= row["t_max_s"]
        assert row["ci_lo_s"] <= row["t_median_s"] <= row["ci_hi_s"]
    assert raw[1024].shape == (4, 30)
    assert np.all(np.isnan(raw[1024][2:]))  # the echoing half does not time


def _plan_with(resolution_s, batch):
    from mpi4py import MPI

    from pingpong_lab.mpi import measure
    from pingpong_lab.mpi.settings import SweepSettings

    kernel = measure.get_kernel("c", "blocking")
    settings = SweepSettings(sizes=[8], batch=batch)
    return measure.plan(MPI.COMM_WORLD, kernel, 8, settings, resolution_s=resolution_s)


def test_a_coarse_timer_makes_every_sample_a_batch_of_round_trips(cluster2):
    (reps0, batch0), (reps1, batch1) = cluster2.run(_plan_with, 1e-4, None, timeout=60)
    assert (reps0, batch0) == (reps1, batch1), "ranks must agree on the plan"
    assert batch0 > 100  # 100 x 0.1 ms of timer resolution is many 8-byte round trips


def test_a_timed_block_shorter_than_100_timer_ticks_is_refused(cluster2):
    with pytest.raises(RemoteError) as info:
        cluster2.run(_plan_with, 1e-3, 1, timeout=60)
    assert "resolution" in str(info.value)


def _adaptive_sweep(rel_ci, budget_s):
    from pingpong_lab.mpi import measure

    return measure.sweep(
        "python", "blocking", [64], rel_ci=rel_ci, budget_s=budget_s, target_s=0.02
    )


def test_adaptive_sizes_stop_on_precision_or_budget_and_say_which(cluster2):
    rows, raw = cluster2.run(_adaptive_sweep, 0.5, 5.0, timeout=60)[0]
    assert rows[0]["stop_reason"] == "ci" and rows[0]["ci_rel_halfwidth"] <= 0.5
    # +/- 1e-9 is finer than any clock: the CI is floored at the timer's tick, so it runs out
    rows, raw = cluster2.run(_adaptive_sweep, 1e-9, 0.3, timeout=60)[0]
    assert rows[0]["stop_reason"] == "budget" and rows[0]["ci_rel_halfwidth"] > 1e-9
    assert raw[64].shape[1] == rows[0]["reps"]  # every round's samples are kept
