"""mpi.buffers: page-aligned, fully written message buffers (kernels and notebooks)."""

from __future__ import annotations

import numpy as np
import pytest

from pingpong_lab.mpi import buffers


@pytest.mark.parametrize("nbytes", [0, 1, 4095, 4096, 4097, 1 << 20])
def test_aligned_is_page_aligned_zeroed_and_exactly_nbytes(nbytes):
    buf = buffers.aligned(nbytes)
    assert buf.dtype == np.uint8 and buf.size == nbytes
    assert nbytes == 0 or buf.ctypes.data % buffers.PAGE == 0
    assert not buf.any()
    assert buf.flags.writeable and buf.flags.c_contiguous


def test_aligned_refuses_a_negative_size():
    with pytest.raises(ValueError, match="nbytes must be >= 0"):
        buffers.aligned(-1)


def test_reused_keeps_a_buffer_while_its_size_stays_and_replaces_it_for_a_new_size():
    a = buffers.reused("test-send", 1000)
    a[:] = 7
    assert buffers.reused("test-send", 1000) is a
    assert buffers.reused("test-recv", 1000) is not a
    b = buffers.reused("test-send", 2000)
    assert b is not a and b.size == 2000 and not b.any()
    assert b.ctypes.data % buffers.PAGE == 0
