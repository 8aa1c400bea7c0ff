import numpy as np
import pytest

from pingpong_lab.course import eager


def test_environment_sets_an_arms_settings_and_clears_the_others():
    base = {"PATH": "/bin", eager.CELL: "999", eager.CMA: "0"}
    env = eager.environment({eager.CMA_THRESHOLD: 32768}, base)
    assert env[eager.CMA_THRESHOLD] == "32768"
    assert eager.CELL not in env and eager.CMA not in env  # MPICH's defaults for the others
    assert eager.environment(4096, base)[eager.CELL] == "4096"  # an int is a cell size
    assert not set(eager.SETTINGS) & set(eager.environment(None, base))
    assert base[eager.CELL] == "999"  # the base is not changed


@pytest.mark.parametrize(
    "settings",
    [0, {eager.CELL: -1}, {eager.CMA: 2}, {"MPIR_CVAR_CH4_IPC_CMA_ENABLE": 0}],
    ids=["no cell", "negative cell", "CMA neither on nor off", "a name the experiment lacks"],
)
def test_environment_refuses_what_no_arm_can_mean(settings):
    with pytest.raises(ValueError):
        eager.environment(settings, {})


def test_every_arm_moves_only_the_settings_the_experiment_knows():
    for settings in eager.ARMS.values():
        assert set(settings) <= set(eager.SETTINGS)
    moved = {frozenset(s) for s in eager.ARMS.values()}
    for name in eager.SETTINGS:  # each setting alone, and the cell with each of the others
        assert frozenset({name}) in moved
    assert frozenset({eager.CELL, eager.CMA_THRESHOLD}) in moved
    assert frozenset({eager.CELL, eager.CMA}) in moved


def test_breakpoint_of_finds_the_step_and_ignores_the_smallest_sizes():
    nbytes = np.array([1 << k for k in range(19)], dtype=float)
    t = 1e-6 + nbytes * 1e-10
    t[nbytes >= 4096] += 2e-6  # the protocol switch
    t[nbytes >= 128] += 0.3e-6  # a small step among the smallest sizes
    assert eager.breakpoint_of(nbytes, t) == 4096
    assert eager.breakpoint_of(nbytes, 1e-6 + nbytes * 1e-10) == -1
