"""mpi4py's lower-case calls and numpy.load unpickle only data while grading.

`comm.recv()` unpickles whatever bytes arrive. A pickle can name any importable function and
call it while it loads, so a learner who writes pickle bytes by hand and sends them, even to
their own rank, could run code no audit has read. While grading, the kernels and the MPI
engines load pickles through DataOnlyUnpickler instead: the values the course sends (numbers,
strings, bytes, lists, tuples, dicts, sets, numpy arrays and scalars) load as before; a pickle
that names anything else raises UnpicklingError before anything is called. numpy.load with
pickles allowed (however the call is spelled) reads object arrays through the same unpickler.
"""

from __future__ import annotations

import importlib
import io
import pickle
import types

# (module, name) a pickle of plain data may name: numpy arrays, dtypes and scalars (numpy 1
# and 2 spell the modules differently) and the builtins without an opcode of their own
ALLOWED_GLOBALS = frozenset(
    {
        *(
            (core, name)
            for core in ("numpy.core.multiarray", "numpy._core.multiarray")
            for name in ("_reconstruct", "scalar")
        ),  # fmt: skip
        *((core, "_frombuffer") for core in ("numpy.core.numeric", "numpy._core.numeric")),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("builtins", "complex"),
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "bytearray"),
        ("builtins", "range"),
        ("builtins", "slice"),
    }
)


class DataOnlyUnpickler(pickle.Unpickler):
    """An Unpickler that refuses every global but those of plain data (ALLOWED_GLOBALS)."""

    def find_class(self, module: str, name: str):
        if (module, name) in ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"a pickled message names {module}.{name}, which grading does not load (a pickle "
            "can run code while it loads): send plain data with send/recv (numbers, strings, "
            "lists, dicts, numpy arrays)"
        )


def loads(data, buffers=None, **options):
    """pickle.loads, through DataOnlyUnpickler."""
    return DataOnlyUnpickler(io.BytesIO(bytes(data)), buffers=buffers, **options).load()


def load(file, **options):
    """pickle.load, through DataOnlyUnpickler."""
    return DataOnlyUnpickler(file, **options).load()


# the pickle module as numpy's readers see it after install(): the same, but for loading
DATA_ONLY_PICKLE = types.ModuleType("pickle", "pickle, loading plain data only")
DATA_ONLY_PICKLE.__dict__.update(
    {k: v for k, v in vars(pickle).items() if not k.startswith("__")},
    load=load,
    loads=loads,
    Unpickler=DataOnlyUnpickler,
)
# numpy's modules that unpickle object arrays (numpy 2, then numpy 1)
NUMPY_READERS = (
    "numpy.lib._npyio_impl",
    "numpy.lib._format_impl",
    "numpy.lib.npyio",
    "numpy.lib.format",
)


def install() -> None:
    """Make this process's mpi4py and numpy.load read pickles through DataOnlyUnpickler."""
    from mpi4py import MPI

    MPI.pickle.__init__(pickle.dumps, loads, MPI.pickle.PROTOCOL)
    for name in NUMPY_READERS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if getattr(module, "pickle", None) is pickle:
            module.pickle = DATA_ONLY_PICKLE
