"""The eager-limit arms on this MPI: what MPI_T reads, where the head-to-head exchange hangs.

MPICH's shared-memory eager limit is the smaller of the queue's cell size and the single-copy
(CMA) threshold while CMA works, and the cell size when it is off. Whether CMA works depends on
the machine (ptrace permission between the ranks), so an arm that moves the cell alone is
asserted either way; every other arm has one answer.
"""

import pytest

from pingpong_lab.course import eager
from pingpong_lab.mpi import mpit

from ..conftest import requires_mpi

pytestmark = requires_mpi
KiB = 1024


def test_mpi_t_reads_the_settings_each_arm_starts_with():
    assert eager.read_settings({eager.CELL: 2048, eager.CMA: 0}) == {
        eager.CELL: "2048",
        eager.CMA_THRESHOLD: "8192",
        eager.CMA: "0",
    }


def test_a_misspelt_setting_is_found_by_mpi_t_not_silently_ignored():
    assert mpit.unknown(["MPIR_CVAR_CH4_IPC_CMA_ENABLE", eager.CMA]) == [
        "MPIR_CVAR_CH4_IPC_CMA_ENABLE"
    ]


def test_a_cell_mpich_refuses_is_a_clear_error_not_a_traceback():
    with pytest.raises(mpit.SettingsRefused, match=r"refused to start with .*CELL_SIZE=32768"):
        eager.read_settings({eager.CELL: 32 * KiB})


@pytest.mark.parametrize(
    ("arm", "hangs_at"),
    [
        ("cell 2 KiB", {2 * KiB}),
        ("cell 16 KiB", {8 * KiB, 16 * KiB}),  # 8 KiB while the single-copy threshold holds it
        ("cell 16 KiB + threshold 32 KiB", {16 * KiB}),
        ("single copy off + cell 16 KiB", {16 * KiB}),
    ],
)
def test_each_arm_moves_the_deadlock_where_the_two_limits_say(arm, hangs_at):
    assert eager.deadlock_size(eager.ARMS[arm]) in hangs_at
