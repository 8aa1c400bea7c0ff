import numpy as np
import pytest

from pingpong_lab.course import eager


def test_environment_sets_and_clears_the_cell_size():
    base = {"PATH": "/bin", eager.CVAR: "999"}
    assert eager.environment(4096, base)[eager.CVAR] == "4096"
    assert eager.CVAR not in eager.environment(None, base)
    assert base[eager.CVAR] == "999"  # the base is not changed
    with pytest.raises(ValueError):
        eager.environment(0, base)


def test_breakpoint_of_finds_the_step_and_ignores_the_smallest_sizes():
    nbytes = np.array([1 << k for k in range(19)], dtype=float)
    t = 1e-6 + nbytes * 1e-10
    t[nbytes >= 4096] += 2e-6  # the protocol switch
    t[nbytes >= 128] += 0.3e-6  # a small step among the smallest sizes
    assert eager.breakpoint_of(nbytes, t) == 4096
    assert eager.breakpoint_of(nbytes, 1e-6 + nbytes * 1e-10) == -1
