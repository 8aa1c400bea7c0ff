"""The kernels' stamped payload: changes every iteration, any wrong byte is caught (no MPI)."""

from __future__ import annotations

import numpy as np
import pytest

from pingpong_lab.mpi import payload


def _message(n: int, iteration: int) -> np.ndarray:
    buf = np.empty(n, np.uint8)
    payload.fill(buf, payload.base(n), 0)
    payload.stamp(buf, iteration)
    return buf


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 16, 17, 1000, 65536, 65537, 200_003])
def test_a_stamped_message_checks_only_for_its_own_iteration(n):
    for i in (-5, 0, 1, 300):
        msg = _message(n, i)
        assert payload.stamped_ok(msg, i)
        if n:
            assert not payload.stamped_ok(msg, i + 1), "last iteration's message is stale"


@pytest.mark.parametrize("n", [1, 9, 17, 1000, 65537, 200_003])
def test_one_wrong_byte_anywhere_or_a_short_message_is_caught(n):
    msg = _message(n, 3)
    for j in {0, n // 2, n - 1}:
        bad = msg.copy()
        bad[j] ^= 0x01
        assert not payload.stamped_ok(bad, 3), f"byte {j} of {n}"
    # a short message into a buffer still holding the previous iteration leaves a stale end
    got = _message(n, 2)
    got[: n - 1] = msg[: n - 1]
    assert not payload.stamped_ok(got, 3)


def test_only_the_two_ends_change_between_iterations():
    a, b = _message(1000, 0), _message(1000, 1)
    differ = np.flatnonzero(a != b)
    assert set(differ) == set(range(8)) | set(range(992, 1000))
