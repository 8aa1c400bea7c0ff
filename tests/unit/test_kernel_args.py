"""The one check of a kernel's arguments (ckernels.check_args), for Python and C kernels alike."""

from __future__ import annotations

import numpy as np
import pytest

from pingpong_lab.errors import KernelError
from pingpong_lab.mpi import ckernels, kernels


class Comm:
    def __init__(self, size):
        self.size = size

    def Get_size(self):
        return self.size


def test_whole_non_negative_counts_pass_and_the_python_kernels_use_the_same_check():
    ckernels.check_args(Comm(2), 0, 0, 1)
    ckernels.check_args(Comm(4), np.int64(8), 2, 10, batch=np.int32(3), max_batch=4)
    assert kernels.check_args is ckernels.check_args


@pytest.mark.parametrize(
    ("args", "options", "message"),
    [
        ((-1, 0, 1), {}, "nbytes must be a non-negative integer, got -1"),
        ((8.0, 0, 1), {}, "nbytes must be a non-negative integer, got 8.0"),
        ((8, True, 1), {}, "warmup must be a non-negative integer, got True"),
        ((8, 0, "3"), {}, "iters must be a non-negative integer, got '3'"),
        ((8, 0, 1), {"batch": 0}, "batch must be a positive number of round trips, got 0"),
        ((8, 0, 1), {"batch": 4, "max_batch": 4}, "batch must be between 1 and 3, got 4"),
    ],
)
def test_bad_arguments_say_which_and_why(args, options, message):
    with pytest.raises(KernelError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ckernels.check_args(Comm(2), *args, **options)


def test_one_rank_is_not_a_ping_pong():
    with pytest.raises(KernelError, match="at least 2 ranks"):
        ckernels.check_args(Comm(1), 8, 0, 1)
