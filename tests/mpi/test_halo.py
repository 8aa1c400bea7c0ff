"""05's halo exchange, graded on ranks of the check's own: every legal way of writing it passes
on every group of ranks and at every width, an exchange that relies on MPI's buffering fails
only above the eager limit (by its deadline), and wrong ghost cells are named."""

from __future__ import annotations

import pytest
from mpi4py import MPI

from pingpong_lab.course import grading
from pingpong_lab.errors import DeadlockError


def sendrecv(comm, u, width):
    rank, size = comm.Get_rank(), comm.Get_size()
    left = rank - 1 if rank > 0 else MPI.PROC_NULL
    right = rank + 1 if rank < size - 1 else MPI.PROC_NULL
    comm.Sendrecv(u[-2 * width : -width], dest=right, recvbuf=u[:width], source=left)
    comm.Sendrecv(u[width : 2 * width], dest=left, recvbuf=u[-width:], source=right)


def receives_first(comm, u, width):
    rank, size = comm.Get_rank(), comm.Get_size()
    requests = []
    if rank > 0:
        requests.append(comm.Irecv(u[:width], rank - 1, 7))
        requests.append(comm.Isend(u[width : 2 * width], rank - 1, 7))
    if rank < size - 1:
        requests.append(comm.Irecv(u[-width:], rank + 1, 7))
        requests.append(comm.Isend(u[-2 * width : -width], rank + 1, 7))
    MPI.Request.Waitall(requests)


def pickled_objects(comm, u, width):
    rank, size = comm.Get_rank(), comm.Get_size()
    left = rank - 1 if rank > 0 else MPI.PROC_NULL
    right = rank + 1 if rank < size - 1 else MPI.PROC_NULL
    got = comm.sendrecv(u[-2 * width : -width].copy(), dest=right, source=left)
    if got is not None:
        u[:width] = got
    got = comm.sendrecv(u[width : 2 * width].copy(), dest=left, source=right)
    if got is not None:
        u[-width:] = got


def even_odd(comm, u, width):
    """Even ranks send first, odd ranks receive first, towards each neighbour in turn."""
    rank, size = comm.Get_rank(), comm.Get_size()

    def swap(peer, mine, ghosts):
        if rank % 2 == 0:
            comm.Send(mine, peer)
            comm.Recv(ghosts, peer)
        else:
            comm.Recv(ghosts, peer)
            comm.Send(mine, peer)

    sides = [
        (rank + 1, u[-2 * width : -width], u[-width:]),
        (rank - 1, u[width : 2 * width], u[:width]),
    ]
    for peer, mine, ghosts in sides if rank % 2 == 0 else sides[::-1]:
        if 0 <= peer < size:
            swap(peer, mine, ghosts)


def sends_first(comm, u, width):
    rank, size = comm.Get_rank(), comm.Get_size()
    if rank < size - 1:
        comm.Send(u[-2 * width : -width], rank + 1)
    if rank > 0:
        comm.Send(u[width : 2 * width], rank - 1)
    if rank > 0:
        comm.Recv(u[:width], rank - 1)
    if rank < size - 1:
        comm.Recv(u[-width:], rank + 1)


def only_rank_1_receives_first(comm, u, width):
    """A misreading of the parity rule: rank 1 receives first, every other rank sends first."""
    rank, size = comm.Get_rank(), comm.Get_size()
    for peer, mine, ghosts in ((rank + 1, u[-2 * width : -width], u[-width:]),
                               (rank - 1, u[width : 2 * width], u[:width])):  # fmt: skip
        if 0 <= peer < size:
            if rank == 1:
                comm.Recv(ghosts, peer)
                comm.Send(mine, peer)
            else:
                comm.Send(mine, peer)
                comm.Recv(ghosts, peer)


def wraps_around(comm, u, width):
    rank, size = comm.Get_rank(), comm.Get_size()
    left, right = (rank - 1) % size, (rank + 1) % size
    comm.Sendrecv(u[-2 * width : -width], dest=right, recvbuf=u[:width], source=left)
    comm.Sendrecv(u[width : 2 * width], dest=left, recvbuf=u[-width:], source=right)


def sends_its_ghosts(comm, u, width):
    rank, size = comm.Get_rank(), comm.Get_size()
    left = rank - 1 if rank > 0 else MPI.PROC_NULL
    right = rank + 1 if rank < size - 1 else MPI.PROC_NULL
    comm.Sendrecv(u[-width:].copy(), dest=right, recvbuf=u[:width], source=left)
    comm.Sendrecv(u[:width].copy(), dest=left, recvbuf=u[-width:], source=right)


def on_the_world(comm, u, width):
    return sendrecv(MPI.COMM_WORLD, u, width)


@pytest.mark.parametrize("fn", [sendrecv, receives_first, pickled_objects, even_odd])
def test_every_legal_halo_exchange_passes_everywhere_the_grader_looks(fn):
    assert grading.check_halo_exchange(fn, widths=(1, 3), nranks=3)
    assert grading.check_halo_exchange(fn, widths=(2,), nranks=4, groups=grading.HALO_GROUPS)
    assert grading.check_halo_exchange(
        fn, widths=(16384,), nranks=4, groups=grading.HALO_GROUPS[:2]
    )  # as the graded check runs it


@pytest.mark.parametrize("fn", [sends_first, only_rank_1_receives_first])
def test_an_order_that_relies_on_buffering_loses_the_large_halo_check(fn):
    assert grading.check_halo_exchange(fn, widths=(1, 3), nranks=3)
    with pytest.raises(DeadlockError, match=r"width 16384 \(131072 bytes per message\)"):
        grading.check_halo_exchange(
            fn, widths=(16384,), nranks=4, groups=grading.HALO_GROUPS[:2], timeout=5
        )


def test_sending_first_passes_eager_halos_and_fails_a_large_one_by_its_deadline():
    assert grading.check_halo_exchange(sends_first, widths=(1, 3), nranks=3)
    assert grading.check_halo_exchange(
        sends_first, widths=(2,), nranks=4, groups=grading.HALO_GROUPS
    )
    with pytest.raises(DeadlockError, match=r"width 16384 \(131072 bytes per message\).*5 s"):
        grading.check_halo_exchange(sends_first, widths=(16384,), nranks=3, timeout=5)


@pytest.mark.parametrize(
    ("fn", "named"),
    [
        (wraps_around, r"rank 0's left ghost cells u\[0:1\] hold \[3003.0\], expected \[-1.0\]"),
        (sends_its_ghosts, r"rank 1's left ghost cells .* \(-1: nothing arrived there\)"),
    ],
)
def test_wrong_ghost_cells_fail_at_once_and_say_where(fn, named):
    with pytest.raises(AssertionError, match=named):
        grading.check_halo_exchange(fn, widths=(1,), nranks=3)


def test_a_function_that_ignores_its_communicator_is_told_so():
    assert grading.check_halo_exchange(on_the_world, widths=(2,), nranks=3)  # world = comm
    with pytest.raises(DeadlockError, match="uses the communicator it is given"):
        grading.check_halo_exchange(
            on_the_world, widths=(2,), nranks=3, groups=grading.HALO_GROUPS[1:2], timeout=5
        )
