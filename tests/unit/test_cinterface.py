"""The C interface has one source, kernels_c/pp_util.h; Python reads it from the built library."""

import re
from pathlib import Path

import pytest

from pingpong_lab.errors import ABIMismatchError
from pingpong_lab.mpi import cinterface, ckernels

HEADER = (Path(__file__).resolve().parents[2] / "kernels_c" / "pp_util.h").read_text()


def _define(name: str) -> int:
    return int(re.search(rf"#define PP_{name} \(?(-?\d+)\)?", HEADER).group(1))


def test_the_library_states_what_the_header_defines(c_library):
    api = cinterface.read(c_library)
    assert (api.shared_buffer, api.corrupt_echo, api.batch_shift) == (
        _define("SHARED_BUFFER"),
        _define("CORRUPT_ECHO"),
        _define("BATCH_SHIFT"),
    )
    assert (api.tag, api.tag_ready) == (_define("TAG"), _define("TAG_READY"))
    for name in ("ERR_ARGS", "ERR_ODD_RANKS", "ERR_NO_PEER", "ERR_ALLOC", "ERR_MPI"):
        assert _define(name) in api.errors
    assert api.error_text(_define("ERR_NO_PEER")) == "a ping-pong needs at least 2 ranks"
    declared = set(re.findall(r"^int (pp_\w+)\(MPI_Comm comm, size_t nbytes", HEADER, re.M))
    assert set(api.kernels.values()) == declared - {"pp_pingpong_ranks_0_1"}
    assert ckernels.interface() == api


def test_flags_combine_the_header_bits_and_the_batch():
    api = cinterface.parse(
        "PP_INTERFACE:SHARED_BUFFER=1;CORRUPT_ECHO=2;BATCH_SHIFT=8;TAG=17;TAG_READY=18;"
        "ERR_ARGS=(-1):bad;KERNEL_blocking=pp_b;END;"
    )
    assert api.flags(shared_buffer=True, corrupt_echo=True, batch=3) == 1 | 2 | 3 << 8
    assert api.errors == {-1: "bad"} and api.kernels == {"blocking": "pp_b"}
    assert api.error_text(-9) == "error -9"


def test_a_file_without_the_interface_is_refused_clearly(tmp_path):
    with pytest.raises(ValueError, match="not a complete"):
        cinterface.parse("PP_INTERFACE:TAG=17;")
    other = tmp_path / "other.so"
    other.write_bytes(b"\x7fELF nothing here")
    with pytest.raises(ABIMismatchError, match="no PP_INTERFACE"):
        cinterface.read(other)
    with pytest.raises(FileNotFoundError, match="make kernels"):
        cinterface.read(tmp_path / "missing.so")
