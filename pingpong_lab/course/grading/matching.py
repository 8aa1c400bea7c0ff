"""Which receive matches which send: MPI's wildcards and MPI_PROC_NULL, as the MPI in use has them.

The values differ between MPI libraries (MPICH: ANY_SOURCE -2, ANY_TAG -1, PROC_NULL -1; Open
MPI: ANY_SOURCE -1, ANY_TAG -1, PROC_NULL -2), so they are never hard-coded: Python checks take
them from mpi4py, checks of C take them from the C library under test. A source wildcard and a
tag wildcard can have the same value, so each is only ever compared with its own kind of field.
"""

from __future__ import annotations

import functools
from typing import NamedTuple


class MPIConstants(NamedTuple):
    """MPI_ANY_SOURCE, MPI_ANY_TAG and MPI_PROC_NULL of one MPI, and how the learner writes them
    (prefix "MPI." in Python, "MPI_" in C)."""

    any_source: int
    any_tag: int
    proc_null: int
    prefix: str = "MPI."

    def source_matches(self, sender, source) -> bool:
        """A receive from `source` accepts a message from rank `sender`."""
        return source in (sender, self.any_source)

    def tag_matches(self, send_tag, recv_tag) -> bool:
        """A receive with tag `recv_tag` accepts a message sent with `send_tag`."""
        return recv_tag in (send_tag, self.any_tag)

    def source_text(self, source) -> str:
        """How a receive's source reads in a message to the learner."""
        if source == self.any_source:
            return f"{self.prefix}ANY_SOURCE"
        if source == self.proc_null:
            return (
                f"{self.prefix}PROC_NULL ({source}: a receive from it returns at once with no "
                f"data; the wildcard for any sender is {self.prefix}ANY_SOURCE)"
            )
        return f"rank {source}"

    def dest_text(self, dest) -> str:
        """How a send's destination reads in a message to the learner."""
        if dest == self.proc_null:
            return f"{self.prefix}PROC_NULL ({dest}: a send to it goes nowhere)"
        return f"rank {dest}"

    def recv_tag_text(self, tag) -> str:
        return f"{self.prefix}ANY_TAG" if tag == self.any_tag else str(tag)


MPICH = MPIConstants(any_source=-2, any_tag=-1, proc_null=-1)


@functools.cache
def mpi_constants() -> MPIConstants:
    """The constants of the MPI that mpi4py uses; MPICH's when mpi4py is not installed."""
    try:
        from mpi4py import MPI
    except ImportError:
        return MPICH
    return MPIConstants(MPI.ANY_SOURCE, MPI.ANY_TAG, MPI.PROC_NULL)


def c_constants(values) -> MPIConstants:
    """The constants a C library reports (pp_graded_constants: any source, any tag, proc null)."""
    any_source, any_tag, proc_null = values
    return MPIConstants(any_source, any_tag, proc_null, prefix="MPI_")
