"""Breaking a ping-pong on purpose: each experiment ends by itself and leaves nothing behind."""

from __future__ import annotations

import os
import subprocess

import pytest

from pingpong_lab.course import deadlocks

from ..conftest import requires_mpi


@requires_mpi
def test_head_to_head_sends_pass_small_sizes_and_stop_at_one_size():
    result = deadlocks.run("head-to-head", sizes=deadlocks.SIZES)
    stuck = result["stuck_at"]
    assert stuck is None or stuck in deadlocks.SIZES
    assert all(size < (stuck or float("inf")) for size in result["completed"])
    if stuck is not None:
        assert result["completed"] == [s for s in deadlocks.SIZES if s < stuck]
    assert deadlocks.first_deadlock(result) == (-1 if stuck is None else stuck)


@requires_mpi
@pytest.mark.parametrize("experiment", ["ssend", "tag"])
def test_synchronous_sends_and_a_wrong_tag_hang_at_once(experiment):
    result = deadlocks.run(experiment, sizes=(8, 16), stuck_after_s=1.0)
    assert result["stuck_at"] == 8 and result["completed"] == []


@requires_mpi
def test_a_short_receive_buffer_is_an_mpi_error_not_a_hang():
    result = deadlocks.run("truncate")
    assert result["stuck_at"] is None
    assert "truncat" in result["error"].lower()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("sideways",), "unknown experiment"),
        (("ssend", [16, 8]), "ascending"),
        (("ssend", []), "ascending"),
        (("ssend", (8,), 0), "positive"),
    ],
)
def test_bad_arguments_are_refused_with_a_reason(args, message):
    with pytest.raises(ValueError, match=message):
        deadlocks.run(*args)


def test_the_ranks_wait_quietly_and_a_control_arms_settings_still_reach_them(monkeypatch):
    """Every experiment job runs with WAIT_QUIETLY (a deadlocked rank sleeps between polls),
    beside the settings a caller passes (an eager-limit control arm's); the verdicts above are
    the ones reached with it."""
    seen = []

    def fake_run_group(cmd, timeout, env=None, **kw):
        seen.append(env)
        raise subprocess.TimeoutExpired(cmd, timeout)

    monkeypatch.setattr(deadlocks, "run_group", fake_run_group)
    for env in (None, {"PATH": os.environ["PATH"], "MPIR_CVAR_CH4_SHM_POSIX_EAGER_MAX": "4096"}):
        with pytest.raises(RuntimeError, match="passed its deadline"):
            deadlocks.run("head-to-head", env=env)
    assert all(e["MPIR_CVAR_ENABLE_HEAVY_YIELD"] == "1" for e in seen)
    assert seen[1]["MPIR_CVAR_CH4_SHM_POSIX_EAGER_MAX"] == "4096"
