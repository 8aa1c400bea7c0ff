"""grading.engine_checks: what a learner reads when echoes come back corrupted (no MPI)."""

from __future__ import annotations

import pytest

from pingpong_lab.course.grading import engine_checks, matching


@pytest.fixture
def ranks(monkeypatch):
    """ranks(results): every run of a check's fresh job answers with these per-rank results."""

    def answer(results):
        monkeypatch.setattr(
            engine_checks, "on_fresh_ranks", lambda work, runs, *a, **k: [results for _ in runs]
        )

    return answer


def _c_results(corrupt, calls0=(), calls1=(), constants=matching.MPICH):
    """Per-rank results of the instrumented C, with the C library's constants."""
    values = [constants.any_source, constants.any_tag, constants.proc_null]
    return [
        {"rank": 0, "corrupt": corrupt, "codes": [0], "calls": list(calls0), "constants": values},
        {"rank": 1, "corrupt": 0, "codes": [0], "calls": list(calls1), "constants": values},
    ]


def test_python_echoes_name_the_count_the_size_and_the_detail(ranks):
    ranks([{"rank": 0, "corrupt": 2, "detail": "byte 5 differs"}, {}])
    with pytest.raises(AssertionError) as info:
        engine_checks.check_pingpong_on_ranks(print, sizes=(4097,), iters=3)
    assert str(info.value) == (
        "2 of 3 echoes of 4097 bytes came back different from what rank 0 sent; byte 5 differs"
    )
    ranks([{"rank": 0, "corrupt": 0, "detail": None}, {}])
    assert engine_checks.check_pingpong_on_ranks(print, sizes=(0, 1), iters=3)


@pytest.fixture
def partner(monkeypatch):
    """partner(**report): the course's partner rank reports this for every size and side."""
    monkeypatch.setattr(engine_checks, "compile_student_c", lambda path, name, **k: path)
    monkeypatch.setattr(engine_checks, "wire_tags", lambda *a: (0, 0))

    def answer(**fields):
        def reports(lib, sizes, iters, function, side, ping, pong, nranks=2, timeout=0):
            base = {"partner": side, "iters": iters, "intact": iters, "detail": None,
                    "stopped": None, "tags": [0]}  # fmt: skip
            return [(n, {**base, "nbytes": n, **fields}) for n in sizes]

        monkeypatch.setattr(engine_checks, "partner_reports", reports)

    return answer


def test_c_payload_names_the_side_the_size_and_what_the_course_rank_saw(partner):
    partner(intact=1, detail="round trip 2: the bytes that arrived are not the payload")
    with pytest.raises(AssertionError) as info:
        engine_checks.check_c_payload("pingpong.c", sizes=(1,), iters=2)
    assert str(info.value) == (
        "round trips of 1 byte with the course's own rank 1: 1 of 2 of rank 0's messages "
        "arrived different from what was sent (round trip 2: the bytes that arrived are not the "
        "payload)"
    )
    partner()
    assert engine_checks.check_c_payload("pingpong.c", sizes=(1,))


def test_c_payload_says_what_the_learners_rank_returned(partner):
    partner(stopped={"calls": 1, "rc": engine_checks.NOT_IMPLEMENTED, "at": 0})
    with pytest.raises(AssertionError, match="not implemented yet"):
        engine_checks.check_c_payload("pingpong.c", sizes=(8,))
    partner(stopped={"calls": 2, "rc": 0, "at": 0})
    with pytest.raises(AssertionError, match="returned 2 times, but only 0 of its messages"):
        engine_checks.check_c_payload("pingpong.c", sizes=(8,))


def test_instrumented_c_echoes_show_the_calls_seen(ranks):
    send, recv = (1, 1, 0, 8), (2, 1, 0, 8)
    calls0 = [send, recv]
    calls1 = [(2, 0, 0, 8), (1, 0, 0, 8)]
    ranks(_c_results(1, calls0, calls1))
    with pytest.raises(AssertionError) as info:
        engine_checks.check_c_pingpong("lib.so", nbytes=8, iters=1)
    message = str(info.value)
    assert message.startswith("1 of 1 echoes came back different from what rank 0 sent (calls")
    ranks(_c_results(0, calls0, calls1))
    assert engine_checks.check_c_pingpong("l", 8, 1)


def test_more_ranks_name_the_rank_count(partner):
    partner(intact=0, detail="round trip 1: 0 bytes arrived where 100 were sent")
    with pytest.raises(AssertionError) as info:
        engine_checks.check_c_with_ranks("pingpong.c", nranks=3, nbytes=100)
    assert str(info.value).startswith("with 3 ranks, round trips of 100 bytes with the course's")


# -- the instrumented C, judged with the constants of the C library it was built against ----------
OPEN_MPI = matching.MPIConstants(any_source=-1, any_tag=-1, proc_null=-2)
LIBRARIES = {"MPICH": matching.MPICH, "Open MPI": OPEN_MPI}
KIND = {name: code for code, name in engine_checks.GRADED_KINDS.items()}


def _call(kind, peer, tag=0, nbytes=8):
    return (KIND[kind], peer, tag, nbytes)


def _check_c(mpi, calls0, calls1):
    results = _c_results(0, calls0, calls1, constants=mpi)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine_checks, "on_fresh_ranks", lambda work, runs, *a, **k: [results])
        return engine_checks.check_c_pingpong("lib.so", nbytes=8, iters=1)


C_ACCEPTED = {
    "MPI_ANY_SOURCE and MPI_ANY_TAG receives": lambda mpi: (
        [_call("Send", 1), _call("Recv", mpi.any_source, mpi.any_tag)],
        [_call("Recv", mpi.any_source, mpi.any_tag), _call("Send", 0)],
    ),
    "MPI_Ssend instead of MPI_Send": lambda mpi: (
        [_call("Ssend", 1), _call("Recv", 1)],
        [_call("Recv", 0), _call("Ssend", 0)],
    ),
    "a receive count larger than the message": lambda mpi: (
        [_call("Send", 1), _call("Recv", 1, nbytes=64)],
        [_call("Recv", 0, nbytes=64), _call("Send", 0)],
    ),
}


@pytest.mark.parametrize("mpi", LIBRARIES.values(), ids=LIBRARIES.keys())
@pytest.mark.parametrize("calls", C_ACCEPTED.values(), ids=C_ACCEPTED.keys())
def test_every_correct_variant_of_the_c_pingpong_passes(mpi, calls):
    assert _check_c(mpi, *calls(mpi))


C_REJECTED = {
    "rank 1 receives from MPI_PROC_NULL": lambda mpi: (
        [_call("Send", 1), _call("Recv", 1)],
        [_call("Recv", mpi.proc_null), _call("Send", 0)],
        "rank 1 must receive from rank 0 .* MPI_PROC_NULL",
    ),
    "the echo goes to rank 2": lambda mpi: (
        [_call("Send", 1), _call("Recv", 1)],
        [_call("Recv", 0), _call("Send", 2)],
        "rank 1 must send the echo back to rank 0; it sent to rank 2",
    ),
    "rank 0 sends to MPI_PROC_NULL": lambda mpi: (
        [_call("Send", mpi.proc_null), _call("Recv", 1)],
        [_call("Recv", 0), _call("Send", 0)],
        "rank 0 must send to rank 1; it sent to MPI_PROC_NULL",
    ),
    "MPI_Isend in the blocking exercise": lambda mpi: (
        [_call("Isend", 1), _call("Recv", 1)],
        [_call("Recv", 0), _call("Send", 0)],
        r"with the blocking MPI_Send \(or MPI_Ssend\) and MPI_Recv",
    ),
    "tags that never match": lambda mpi: (
        [_call("Send", 1, tag=1), _call("Recv", 1, tag=1)],
        [_call("Recv", 0, tag=2), _call("Send", 0, tag=2)],
        "the tags differ: rank 0 sends with tag 1 and rank 1 receives with tag 2",
    ),
}


@pytest.mark.parametrize("mpi", LIBRARIES.values(), ids=LIBRARIES.keys())
@pytest.mark.parametrize("calls", C_REJECTED.values(), ids=C_REJECTED.keys())
def test_wrong_c_variants_fail_with_a_message_that_says_why(mpi, calls):
    calls0, calls1, message = calls(mpi)
    with pytest.raises(AssertionError, match=message):
        _check_c(mpi, calls0, calls1)


def test_a_tag_wildcard_as_the_source_means_what_its_value_means_in_that_library():
    # rank 1: MPI_Recv(..., MPI_ANY_TAG, MPI_ANY_TAG, ...); MPI_ANY_TAG is -1 in both
    swapped = [_call("Send", 1), _call("Recv", 1)], [_call("Recv", -1, -1), _call("Send", 0)]
    assert _check_c(OPEN_MPI, *swapped)  # as a source, -1 is MPI_ANY_SOURCE in Open MPI
    with pytest.raises(AssertionError, match="it received from MPI_PROC_NULL"):
        _check_c(matching.MPICH, *swapped)  # and MPI_PROC_NULL in MPICH
