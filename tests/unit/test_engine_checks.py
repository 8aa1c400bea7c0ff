"""grading.engine_checks: what a learner reads when echoes come back corrupted (no engines)."""

from __future__ import annotations

import pytest

from pingpong_lab.course.grading import engine_checks, matching


class _Cluster:
    """Answers every cluster.run with the given per-rank results."""

    def __init__(self, results):
        self.results = results

    def run(self, func, *args, timeout=None, **kwargs):
        return self.results


def _c_results(corrupt, calls0=(), calls1=(), constants=matching.MPICH):
    """Per-rank results of the instrumented C, with the C library's constants."""
    values = [constants.any_source, constants.any_tag, constants.proc_null]
    return [
        {"rank": 0, "corrupt": corrupt, "codes": [0], "calls": list(calls0), "constants": values},
        {"rank": 1, "corrupt": 0, "codes": [0], "calls": list(calls1), "constants": values},
    ]


def test_python_echoes_name_the_count_the_size_and_the_detail():
    cluster = _Cluster([{"rank": 0, "corrupt": 2, "detail": "byte 5 differs"}, {}])
    with pytest.raises(AssertionError) as info:
        engine_checks.check_pingpong_on_engines(cluster, print, sizes=(4097,), iters=3)
    assert str(info.value) == (
        "2 of 3 echoes of 4097 bytes came back different from what rank 0 sent; byte 5 differs"
    )
    ok = _Cluster([{"rank": 0, "corrupt": 0, "detail": None}, {}])
    assert engine_checks.check_pingpong_on_engines(ok, print, sizes=(0, 1), iters=3)


def test_c_payload_echoes_name_the_count_and_the_size():
    with pytest.raises(AssertionError) as info:
        engine_checks.check_c_payload(_Cluster(_c_results(1)), "lib.so", sizes=(1,), iters=2)
    assert str(info.value) == "1 of 2 echoes of 1 byte came back different from what rank 0 sent"
    assert engine_checks.check_c_payload(_Cluster(_c_results(0)), "lib.so", sizes=(1,))


def test_instrumented_c_echoes_show_the_calls_seen():
    send, recv = (1, 1, 0, 8), (2, 1, 0, 8)
    calls0 = [send, recv]
    calls1 = [(2, 0, 0, 8), (1, 0, 0, 8)]
    cluster = _Cluster(_c_results(1, calls0, calls1))
    with pytest.raises(AssertionError) as info:
        engine_checks.check_c_pingpong(cluster, "lib.so", nbytes=8, iters=1)
    message = str(info.value)
    assert message.startswith("1 of 1 echoes came back different from what rank 0 sent (calls")
    assert engine_checks.check_c_pingpong(_Cluster(_c_results(0, calls0, calls1)), "l", 8, 1)


def test_more_ranks_name_the_rank_count(monkeypatch):
    monkeypatch.setattr(engine_checks, "run_c_with_ranks", lambda *a, **k: _c_results(3))
    with pytest.raises(AssertionError) as info:
        engine_checks.check_c_with_ranks("lib.so", nranks=3, nbytes=100)
    assert str(info.value) == (
        "with 3 ranks, 3 echoes of 100 bytes came back different from what rank 0 sent"
    )
