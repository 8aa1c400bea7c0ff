"""Learners' ping-pongs (Python and C) run for real on MPI, with deadlines.

The checks (check_*) run the learner's code on ranks of their own, a fresh `mpiexec` job for
each check (fresh_ranks.on_fresh_ranks): never on the learner's engines, where a C kernel
loaded earlier could answer for them. The job's ranks report what they saw as JSON and the
check decides on that data (when grading, in the judge). A deadlock costs the check its
deadline (MPIEXEC_TIMEOUT_S) and the job is ended whole.

The learner's own cells run the same engine-side functions on the learner's engines
(pingpong_on_engines_report, c_pingpong_on_engines), with ENGINE_TIMEOUT_S.
"""

from __future__ import annotations

import json

from ...engines.shipping import ship
from ...errors import DeadlockError
from .. import on_ranks
from .cbuild import GRADED_KINDS, NOT_IMPLEMENTED
from .fakempi import Op, describe_op
from .fresh_ranks import Unfinished, on_fresh_ranks
from .matching import c_constants
from .mode import ENGINE_TIMEOUT_S, MPIEXEC_TIMEOUT_S, nbytes_text
from .trace import check_exchange


def pingpong_on_engines_report(cluster, fn, nbytes, iters=3, timeout=ENGINE_TIMEOUT_S):
    """Rank 0's report of a learner's Python ping-pong on the engines: corrupt, detail."""
    results = cluster.run(on_ranks.pingpong, ship(fn), int(nbytes), int(iters), timeout=timeout)
    return results[0]


def _sized_runs(work_function, sizes, functions, what, timeout, nranks=2, before=(), after=()):
    """work_function(*packed functions, *before, nbytes, *after) for each size on one fresh
    job: [(nbytes, per-rank results)]; a size that does not finish by the deadline is an
    AssertionError that names it."""
    sizes = [int(n) for n in sizes]
    try:
        runs = on_fresh_ranks(
            work_function, [[*before, n, *after] for n in sizes], functions, nranks, timeout
        )
    except Unfinished as exc:
        raise DeadlockError(
            f"{what} of {nbytes_text(sizes[exc.run])} did not finish within {timeout:g} s: "
            "a rank is waiting for a message that never comes (a send that waits for a receive "
            "the other rank has not posted yet, or a receive that no send matches)"
        ) from None
    return list(zip(sizes, runs))


def assert_exchanged(results, nbytes) -> None:
    """AssertionError unless ranks 0 and 1 each received the other's buffer intact."""
    bad = [r["detail"] for r in results if not r["ok"]]
    assert not bad, f"exchange of {nbytes_text(nbytes)}: " + "; ".join(bad)


def check_safe_exchange(fn, sizes=(8, 8192, 1 << 20), timeout=MPIEXEC_TIMEOUT_S):
    """AssertionError unless ranks 0 and 1 swap their buffers intact at every size, on ranks of
    the check's own, with a deadline: an exchange that relies on MPI's buffering deadlocks
    above the eager limit (post the receive first, or use Sendrecv)."""
    for nbytes, results in _sized_runs(
        on_ranks.safe_exchange, sizes, [fn], "the exchange", timeout
    ):
        assert_exchanged(results, nbytes)
    return True


def safe_exchange_on_engines(cluster, fn, nbytes, timeout=ENGINE_TIMEOUT_S):
    """One exchange of nbytes on the learner's engines (a DeadlockError past the deadline)."""
    results = cluster.run(on_ranks.safe_exchange, ship(fn), int(nbytes), timeout=timeout)
    assert_exchanged(results, nbytes)


def _assert_echoes_intact(corrupt: int, count: str, nbytes=None, before="", after="") -> None:
    """AssertionError '<before><count> echoes[ of <size>] came back different from what rank 0
    sent<after>' unless corrupt is 0."""
    if corrupt:
        size = "" if nbytes is None else f" of {nbytes_text(nbytes)}"
        raise AssertionError(
            f"{before}{count} echoes{size} came back different from what rank 0 sent{after}"
        )


def check_pingpong_on_ranks(fn, sizes=(0, 1, 4097, 1 << 20), iters=3, timeout=MPIEXEC_TIMEOUT_S):
    """AssertionError unless every echo comes back intact at every size, on two ranks of the
    check's own (with a deadline)."""
    for nbytes, results in _sized_runs(
        on_ranks.pingpong, sizes, [fn], "the ping-pong", timeout, after=[int(iters)]
    ):
        corrupt = results[0]["corrupt"]
        _assert_echoes_intact(
            corrupt, f"{corrupt} of {iters}", nbytes, after=f"; {results[0].get('detail')}"
        )
    return True


def c_pingpong_on_engines(
    cluster,
    lib,
    nbytes,
    iters=3,
    function="pingpong_c",
    instrumented=False,
    timeout=ENGINE_TIMEOUT_S,
):
    """Run the learner's C ping-pong on every engine; per-rank results ordered by rank."""
    return cluster.run(
        on_ranks.c_pingpong,
        str(lib),
        function,
        int(nbytes),
        int(iters),
        bool(instrumented),
        timeout=timeout,
    )


def _raise_for_codes(results, function):
    for res in results:
        bad = [c for c in res["codes"] if c != 0]
        if bad:
            if bad[0] == NOT_IMPLEMENTED:
                raise AssertionError(
                    f"{function} is not implemented yet (it returned NOT_IMPLEMENTED)"
                )
            raise AssertionError(f"{function} returned {bad[0]} on rank {res['rank']} instead of 0")


def _graded_ops(calls):
    """The (kind, peer, tag, bytes) records of the instrumented C as Ops."""
    return [Op(GRADED_KINDS.get(kind, str(kind)), peer, tag, n) for kind, peer, tag, n in calls]


def check_c_pingpong(lib_instrumented, nbytes=1000, iters=2, function="pingpong_c"):
    """Check the learner's C ping-pong (instrumented build) on fresh ranks: calls and payload.

    Peers and tags are judged with the MPI_ANY_SOURCE, MPI_ANY_TAG and MPI_PROC_NULL of the
    library the learner's code was compiled against.
    """
    results = c_pingpong_on_ranks(lib_instrumented, [nbytes], iters, function, True)[0][1]
    _raise_for_codes(results, function)
    mpi = c_constants(results[0]["constants"])
    ops = [_graded_ops(r["calls"]) for r in results]
    shown = "; ".join(
        f"rank {r['rank']}: " + (", ".join(describe_op(op, mpi) for op in rank_ops) or "nothing")
        for r, rank_ops in zip(results, ops)
    )
    where = f"(calls seen in the first round trip of {nbytes} bytes: {shown})"
    r0, r1 = (rank_ops[: len(rank_ops) // iters] for rank_ops in ops[:2])
    sends = ("Send", "Ssend")
    api = "the blocking MPI_Send (or MPI_Ssend) and MPI_Recv"
    assert len(r0) == 2 and r0[0].kind in sends and r0[1].kind == "Recv", (
        f"rank 0 must send, then receive, with {api} (one call each) {where}"
    )
    assert len(r1) == 2 and r1[0].kind == "Recv" and r1[1].kind in sends, (
        f"rank 1 must receive, then send the message back, with {api} (one call each) {where}"
    )
    check_exchange(r0, r1, nbytes, mpi, where)
    corrupt = results[0]["corrupt"]
    _assert_echoes_intact(corrupt, f"{corrupt} of {iters}", after=f" {where}")
    return True


def c_pingpong_on_ranks(
    lib,
    sizes,
    iters=2,
    function="pingpong_c",
    instrumented=False,
    nranks=2,
    timeout=MPIEXEC_TIMEOUT_S,
):
    """The C ping-pong at each size on one fresh job: [(nbytes, per-rank results)]."""
    return _sized_runs(
        on_ranks.c_pingpong, sizes, [], f"{function}'s ping-pong", timeout, nranks,
        before=[str(lib), function], after=[int(iters), bool(instrumented)],
    )  # fmt: skip


def check_c_payload(lib, sizes=(0, 1, 4097, 1 << 20), iters=2, function="pingpong_c"):
    """The uninstrumented C ping-pong echoes every size intact on fresh ranks."""
    for nbytes, results in c_pingpong_on_ranks(lib, sizes, iters, function):
        _raise_for_codes(results, function)
        corrupt = results[0]["corrupt"]
        _assert_echoes_intact(corrupt, f"{corrupt} of {iters}", nbytes)
    return True


def check_c_with_ranks(lib, nranks=3, nbytes=100, function="pingpong_c"):
    """With more ranks than two (the others idle), the C echo is intact and every rank ends."""
    ((_, results),) = c_pingpong_on_ranks(lib, [nbytes], 2, function, nranks=nranks)
    _raise_for_codes(results, function)
    corrupt = results[0]["corrupt"]
    _assert_echoes_intact(corrupt, str(corrupt), nbytes, before=f"with {nranks} ranks, ")
    return True


# -- mpi4py's pickling calls, and a learner's timing loop, on fresh ranks ------------------------
def check_pickle_on_ranks(fn, obj, iters=2, timeout=MPIEXEC_TIMEOUT_S):
    """AssertionError unless fn(comm, obj) echoes `obj` (JSON data) back to rank 0 on two ranks
    of the check's own."""
    try:
        ((report, *_),) = on_fresh_ranks(
            on_ranks.pickle_echo, [[obj, int(iters)]], [fn], timeout=timeout
        )
    except Unfinished:
        raise DeadlockError(
            f"the echo of {obj!r} did not finish within {timeout:g} s: a rank is waiting for "
            "a message that never comes"
        ) from None
    want = json.loads(json.dumps(obj))
    got = report.get("not_data") or repr(report["echoed"])
    assert "not_data" not in report and report["echoed"] == want, (
        f"the ranks should echo {obj!r} back to rank 0, got {got}"
    )
    return True


def best_of_on_ranks(time_pingpong, pingpong, nbytes=8, runs=3, target_s=0.02,
                     timeout=MPIEXEC_TIMEOUT_S) -> float:  # fmt: skip
    """The smallest of `runs` one-way times measured with time_pingpong at nbytes, on two ranks
    of the check's own.

    A mean over round trips takes in every stall of a shared machine; the best of a few short
    runs is what the loop itself costs, so two loops compared this way differ only by their
    code, not by when the machine was busy.
    """
    try:
        ((rows, *_),) = on_fresh_ranks(
            on_ranks.student_sweep,
            [[[int(nbytes)] * int(runs), float(target_s), 5]],
            [time_pingpong, None, pingpong],
            timeout=timeout,
        )
    except Unfinished:
        raise DeadlockError(
            f"timing {runs} short runs of {nbytes_text(nbytes)} did not finish within {timeout:g} s"
        ) from None
    return min(row["t_s"] for row in rows)
