"""While grading, mpi4py's lower-case calls load only pickles of plain data."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from pingpong_lab.mpi import safepickle

PLAIN = [
    {"n": list(range(10)), "s": "text", "b": b"\x00\x01", "t": (1, 2.5, None)},
    np.arange(12, dtype=np.float64).reshape(3, 4),
    np.zeros(5, dtype=np.uint8),
    np.float64(2.5),
    {1, 2},
    frozenset({3}),
    1 + 2j,
    bytearray(b"xy"),
    range(3),
]


@pytest.mark.parametrize("value", PLAIN, ids=[type(v).__name__ for v in PLAIN])
def test_the_values_the_course_sends_load_as_they_were(value):
    for protocol in (4, pickle.HIGHEST_PROTOCOL):  # mpi4py pickles with protocol 5
        got = safepickle.loads(pickle.dumps(value, protocol))
        if isinstance(value, np.ndarray):
            assert np.array_equal(got, value) and got.dtype == value.dtype
        else:
            assert got == value


class _Runs:
    def __reduce__(self):
        return (os.system, ("echo planted",))


@pytest.mark.parametrize(
    "data",
    [
        pickle.dumps(_Runs()),
        b"cos\nsystem\n(S'echo planted'\ntR.",  # written by hand, protocol 0
        pickle.dumps(np.array([_Runs()], dtype=object)),  # an object array names the call too
    ],
    ids=["reduce", "by hand", "object array"],
)
def test_a_pickle_that_would_call_something_is_refused_before_it_runs(data):
    with pytest.raises(pickle.UnpicklingError, match="grading does not load"):
        safepickle.loads(data)


DOOR = r"""
from mpi4py import MPI
import pickle, sys
from pingpong_lab.course import grading  # as a notebook's locked set-up cell does
raw = bytearray(b"cos\nsystem\n(S'echo planted'\ntR.")
comm = MPI.COMM_SELF
request = comm.Isend(raw, dest=0)
try:
    comm.recv(source=0)
    print("loaded")
except pickle.UnpicklingError as exc:
    print("refused:", exc)
request.Wait()
"""


def test_a_hand_written_pickle_sent_to_its_own_rank_runs_nothing_in_a_grading_kernel():
    env = {**os.environ, "PINGPONG_LAB_GRADING": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", DOOR], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "planted" not in proc.stdout.replace("echo planted", "")
    assert proc.stdout.startswith("refused: a pickled message names os.system")


NUMPY_DOOR = r"""
import numpy as np, pickle, sys
from pingpong_lab.mpi import safepickle
safepickle.install()
np.save(sys.argv[1], np.array([print], dtype=object), allow_pickle=True)  # names builtins.print
from numpy import load
for how in (lambda f: load(f, None, True), lambda f: np.load(f, **{"allow" + "_pickle": True})):
    try:
        how(sys.argv[1])
        print("loaded")
    except pickle.UnpicklingError:
        print("refused")
print(np.load(sys.argv[2], allow_pickle=True).tolist())
"""


def test_numpy_load_with_pickles_reads_only_plain_data_after_install(tmp_path):
    plain = tmp_path / "plain.npy"
    np.save(plain, np.arange(3))
    proc = subprocess.run(
        [sys.executable, "-c", NUMPY_DOOR, str(tmp_path / "door.npy"), str(plain)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:3] == ["refused", "refused", "[0, 1, 2]"]
