"""Correct variants of a learner's C ping-pong pass the instrumented check on real engines."""

from __future__ import annotations

import pytest

from pingpong_lab.course import grading
from pingpong_lab.course.grading import engine_checks, matching

from ..conftest import requires_mpi

pytestmark = [requires_mpi, pytest.mark.engines]

HEAD = """#include <mpi.h>
#include <stdlib.h>
#include <string.h>

int pingpong_c(MPI_Comm comm, const unsigned char *sendbuf, unsigned char *recvbuf, int nbytes)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
"""

VARIANTS = {
    # rank 1 takes the message from anyone with any tag and replies to the status's fields
    "wildcards and a reply from the status": """
    MPI_Status status;
    if (rank == 0) {
        MPI_Send(sendbuf, nbytes, MPI_BYTE, 1, 7, comm);
        MPI_Recv(recvbuf, nbytes, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Recv(recvbuf, nbytes, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &status);
        MPI_Send(recvbuf, nbytes, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, comm);
    }
    return 0;
}
""",
    "MPI_Ssend": """
    if (rank == 0) {
        MPI_Ssend(sendbuf, nbytes, MPI_BYTE, 1, 0, comm);
        MPI_Recv(recvbuf, nbytes, MPI_BYTE, 1, 0, comm, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Recv(recvbuf, nbytes, MPI_BYTE, 0, 0, comm, MPI_STATUS_IGNORE);
        MPI_Ssend(recvbuf, nbytes, MPI_BYTE, 0, 0, comm);
    }
    return 0;
}
""",
    # a tag for the ping and another for the pong, each received by its own tag
    "one tag each way": """
    if (rank == 0) {
        MPI_Send(sendbuf, nbytes, MPI_BYTE, 1, 11, comm);
        MPI_Recv(recvbuf, nbytes, MPI_BYTE, 1, 22, comm, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Recv(recvbuf, nbytes, MPI_BYTE, 0, 11, comm, MPI_STATUS_IGNORE);
        MPI_Send(recvbuf, nbytes, MPI_BYTE, 0, 22, comm);
    }
    return 0;
}
""",
    # rank 1 receives into a larger buffer of its own and echoes as many bytes as arrived
    "a larger receive buffer and MPI_Get_count": """
    if (rank == 0) {
        MPI_Send(sendbuf, nbytes, MPI_BYTE, 1, 0, comm);
        MPI_Recv(recvbuf, nbytes, MPI_BYTE, 1, 0, comm, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Status status;
        int count = 0;
        unsigned char *big = malloc((size_t)nbytes + 64);
        if (big == NULL)
            return 1;
        MPI_Recv(big, nbytes + 64, MPI_BYTE, 0, 0, comm, &status);
        MPI_Get_count(&status, MPI_BYTE, &count);
        MPI_Send(big, count, MPI_BYTE, 0, 0, comm);
        memcpy(recvbuf, big, (size_t)count);
        free(big);
    }
    return 0;
}
""",
}


@pytest.fixture
def build_here(tmp_path, monkeypatch):
    monkeypatch.setenv("PINGPONG_LAB_BUILD", str(tmp_path / "build"))
    return tmp_path


def _instrumented(folder, body):
    path = folder / "pingpong.c"
    path.write_text(HEAD + body)
    return grading.compile_student_c(str(path), name="pingpong", instrument=True)


@pytest.mark.parametrize("body", VARIANTS.values(), ids=VARIANTS.keys())
def test_a_correct_c_variant_passes_the_instrumented_check(build_here, body):
    lib = _instrumented(build_here, body)
    for nbytes in (1000, 1 << 20):
        assert grading.check_c_pingpong(lib, nbytes=nbytes, iters=2)


@pytest.mark.parametrize("body", VARIANTS.values(), ids=VARIANTS.keys())
def test_a_correct_c_variant_passes_against_the_course_rank(build_here, monkeypatch, body):
    monkeypatch.chdir(build_here)
    (build_here / "pingpong.c").write_text(HEAD + body)
    assert grading.check_c_payload("pingpong.c", sizes=(0, 1000, 1 << 20), iters=2)
    assert grading.check_c_with_ranks("pingpong.c", nranks=3, nbytes=100)


WRONG = {
    # rank 0 sends the wrong bytes: the course's echo sees them
    "rank 0 sends recvbuf": (
        "MPI_Send(sendbuf, nbytes, MPI_BYTE, 1, 0, comm);",
        "MPI_Send(recvbuf, nbytes, MPI_BYTE, 1, 0, comm);",
        "of rank 0's messages arrived different",
    ),
    # rank 1 echoes a buffer it never received into
    "rank 1 echoes sendbuf": (
        "MPI_Send(big, count, MPI_BYTE, 0, 0, comm);",
        "MPI_Send(sendbuf, count, MPI_BYTE, 0, 0, comm);",
        "of rank 1's echoes arrived different",
    ),
    # rank 1 returns without echoing: the course's sender hears it at once, no deadline
    "rank 1 returns early": (
        "    } else if (rank == 1) {",
        "    } else if (rank == 1) {\n        return 0;",
        "only 0 of its messages",
    ),
}


@pytest.mark.parametrize(("old", "new", "says"), WRONG.values(), ids=WRONG.keys())
def test_a_wrong_side_fails_against_the_course_rank(build_here, monkeypatch, old, new, says):
    monkeypatch.chdir(build_here)
    body = VARIANTS["a larger receive buffer and MPI_Get_count"]
    assert old in body
    (build_here / "pingpong.c").write_text(HEAD + body.replace(old, new))
    with pytest.raises(AssertionError, match=says):
        grading.check_c_payload("pingpong.c", sizes=(8, 1 << 20), iters=2)


def test_the_instrumented_build_reports_the_wildcards_of_the_mpi_it_was_compiled_with(
    cluster2, build_here
):
    lib = _instrumented(build_here, VARIANTS["MPI_Ssend"])
    results = engine_checks.c_pingpong_on_engines(cluster2, lib, 8, 1, instrumented=True)
    reported = matching.c_constants(results[0]["constants"])
    assert reported[:3] == matching.mpi_constants()[:3]  # the same MPICH for C and mpi4py here
