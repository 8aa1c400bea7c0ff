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

import contextlib
import hashlib
import hmac
import json
import secrets
import tempfile
from pathlib import Path

from ...engines.shipping import ship
from ...errors import DeadlockError
from .. import on_ranks
from ..deadlocks import WAIT_QUIETLY
from .cbuild import GRADED_KINDS, NOT_IMPLEMENTED, compile_student_c
from .fakempi import Op, describe_op
from .fresh_ranks import Unfinished, on_fresh_ranks
from .matching import c_constants
from .mode import ENGINE_TIMEOUT_S, MPIEXEC_TIMEOUT_S, nbytes_text
from .trace import check_exchange


def pingpong_on_engines_report(cluster, fn, nbytes, iters=3, timeout=ENGINE_TIMEOUT_S):
    """Rank 0's report of a learner's Python ping-pong on the engines: corrupt, detail."""
    results = cluster.run(on_ranks.pingpong, ship(fn), int(nbytes), int(iters), timeout=timeout)
    return results[0]


def _sized_runs(work_function, sizes, functions, what, timeout, nranks=2, before=(), after=(),
                **job):  # fmt: skip
    """work_function(*packed functions, *before, nbytes, *after) for each size on one fresh
    job: [(nbytes, per-rank results)] (see on_fresh_ranks for `job`: decided_by, env); a size
    that does not finish by the deadline is an AssertionError that names it."""
    sizes = [int(n) for n in sizes]
    try:
        runs = on_fresh_ranks(
            work_function,
            [[*before, n, *after] for n in sizes],
            functions,
            nranks,
            timeout,
            **job,
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


def check_halo_exchange(fn, widths=(1, 3), nranks=3, groups=on_ranks.HALO_GROUPS[:1],
                        timeout=MPIEXEC_TIMEOUT_S):  # fmt: skip
    """AssertionError unless fn(comm, u, width) fills every rank's ghost cells from its
    neighbours, and nothing else, at each width (cells of 8 bytes) on each group of ranks
    (on_ranks.HALO_GROUPS) of one fresh job of `nranks`; a width that does not finish by the
    deadline is a DeadlockError that names it."""
    runs = [[int(w), g] for g in groups for w in widths]
    try:
        # ranks that wait sleep between polls (no timing here): a deadlocked exchange does not
        # keep every core busy until its deadline
        results = on_fresh_ranks(on_ranks.halo, runs, [fn], nranks, timeout, env=WAIT_QUIETLY)
    except Unfinished as exc:
        w, group = runs[exc.run]
        why = (
            "a receive that no send matches (a wrong neighbour or tag), or, for a large halo, "
            "blocking sends that wait for receives the neighbours have not posted because "
            "they are sending too: pair each send with its receive (Sendrecv), order the "
            "calls by parity, or post the receives first (Irecv)"
            if group == on_ranks.HALO_GROUPS[0]
            else "check that it uses the communicator it is given (comm), not MPI.COMM_WORLD: "
            "here comm holds only some of the ranks"
        )
        raise DeadlockError(
            f"the halo exchange of width {w} ({nbytes_text(8 * w)} per message) on {group} of "
            f"{nranks} did not finish within {timeout:g} s: a rank waits for a message that "
            f"never comes ({why})"
        ) from None
    for (w, group), ranks in zip(runs, results):
        bad = [r["detail"] for r in ranks if not r["ok"]]
        assert not bad, f"width {w}, {group} of {nranks}: " + "; ".join(bad)
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
    _remember_tags(lib_instrumented, results)
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


# -- the course's partner rank: what crossed the wire, seen by a process of the course's ---------
# The partner rank is not dumpable (on_ranks._partner_key): single-copy (CMA) reads of its
# memory by the learner's rank would be refused, so the job sends through shared memory only.
NO_SINGLE_COPY = {"MPIR_CVAR_CH4_CMA_ENABLE": "0"}
_TAGS: dict[str, tuple] = {}  # instrumented library -> (rank 0's send tag, rank 1's)
TAGS_TIMEOUT_S = 10.0  # one round trip of 8 bytes between the learner's own ranks


def _remember_tags(lib_instrumented, results) -> tuple:
    sends = ("Send", "Ssend", "Isend")
    tags = tuple(
        next((op.tag for op in _graded_ops(r["calls"]) if op.kind in sends), None)
        for r in results[:2]
    )
    _TAGS[str(lib_instrumented)] = tags
    return tags


def wire_tags(path="pingpong.c", name="pingpong", function="pingpong_c") -> tuple:
    """(the tag rank 0 sends with, the tag rank 1 replies with) in the learner's ping-pong,
    from one round trip of its instrumented build (check_c_pingpong's, when it ran), so that
    the course's partner rank speaks the learner's protocol. The learner's ranks report them:
    a wrong report only makes the partner's messages miss, it never passes a check."""
    graded = compile_student_c(path, name=name, instrument=True)
    if graded not in _TAGS:
        try:
            ((_, results),) = c_pingpong_on_ranks(
                graded, [8], 1, function, True, timeout=TAGS_TIMEOUT_S
            )
        except (AssertionError, DeadlockError):  # fails with itself: the partner says how
            return (None, None)
        _raise_for_codes(results, function)
        _remember_tags(graded, results)
    return _TAGS[graded]


@contextlib.contextmanager
def partner_key():
    """(a fresh secret key, the path of a file that holds it) for one job's partner rank, which
    reads and removes the file before any learner's code is loaded; the folder goes after."""
    key = secrets.token_bytes(32)
    with tempfile.TemporaryDirectory(prefix="pp-partner-") as tmp:
        path = Path(tmp) / "key"
        path.touch(mode=0o600)
        path.write_bytes(key)
        yield key, str(path)


def verified(result: dict, key: bytes) -> dict:
    text = json.dumps(result.get("report"), sort_keys=True)
    mac = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
    if not isinstance(result.get("mac"), str) or not hmac.compare_digest(mac, result["mac"]):
        raise AssertionError(
            "the report of the course's partner rank was changed after it was written (only a "
            "process of this check's job could have: the learner's ranks)"
        )
    return result["report"]


def partner_reports(lib, sizes, iters, function, partner, ping_tag, pong_tag, nranks=2,
                    timeout=MPIEXEC_TIMEOUT_S) -> list[tuple[int, dict]]:  # fmt: skip
    """The learner's C ping-pong on every rank but `partner`, the course's own rank, at each
    size on one fresh job: [(nbytes, the partner's verified report)] (see
    on_ranks.c_pingpong_partner). A secret key, given only to the partner, signs its report."""
    with partner_key() as (key, key_path):
        runs = _sized_runs(
            on_ranks.c_pingpong_partner, sizes, [], f"{function}'s ping-pong", timeout, nranks,
            before=[str(lib), function],
            after=[int(iters), int(partner), ping_tag, pong_tag, key_path],
            decided_by=partner, env=NO_SINGLE_COPY,
        )  # fmt: skip
    return [(nbytes, verified(result, key)) for nbytes, result in runs]


def _judge_partner(report: dict, function: str) -> None:
    """AssertionError unless the partner saw every round trip, each message intact."""
    partner, nbytes, iters = report["partner"], report["nbytes"], report["iters"]
    role = "rank 0 (sending)" if partner == 1 else "rank 1 (echoing)"
    what = f"round trips of {nbytes_text(nbytes)} with the course's own rank {partner}"
    stopped = report["stopped"]
    if stopped and stopped["rc"] == NOT_IMPLEMENTED:
        raise AssertionError(f"{function} is not implemented yet (it returned NOT_IMPLEMENTED)")
    if stopped and stopped["rc"] != 0:
        raise AssertionError(f"{function} returned {stopped['rc']} on {role} instead of 0")
    if stopped:
        raise AssertionError(
            f"{what}: as {role}, {function} returned {stopped['calls']} times, but only "
            f"{stopped['at']} of its messages reached rank {partner}"
        )
    if report["intact"] != iters:
        whose = "rank 0's messages" if partner == 1 else "rank 1's echoes"
        raise AssertionError(
            f"{what}: {iters - report['intact']} of {iters} of {whose} arrived different from "
            f"what was sent ({report['detail']})"
        )


def check_c_payload(path="pingpong.c", sizes=(0, 1, 4097, 1 << 20), iters=2,
                    function="pingpong_c", name="pingpong") -> bool:  # fmt: skip
    """The learner's C ping-pong moves every size intact, each of its roles judged by a rank of
    the course's: the learner's rank 0 against the course's echo (every message it sends
    arrives as the payload), then the learner's rank 1 against the course's sender (every echo
    comes back as it was sent). The course's rank never loads the learner's library, and its
    report is signed with a key only it and the judge hold: native code in the learner's ranks
    cannot answer for it."""
    lib = compile_student_c(path, name=name)
    ping, pong = wire_tags(path, name, function)
    for partner in (1, 0):
        for _, report in partner_reports(
            lib, sizes, iters, function, partner, ping if ping is not None else 0, pong
        ):
            _judge_partner(report, function)
    return True


def check_c_with_ranks(path="pingpong.c", nranks=3, nbytes=100, function="pingpong_c",
                       name="pingpong") -> bool:  # fmt: skip
    """With more ranks than two (the others idle), the learner's rank 0 reaches the course's
    echo on rank 1 intact, and every rank ends."""
    lib = compile_student_c(path, name=name)
    ping, pong = wire_tags(path, name, function)
    for _, report in partner_reports(lib, [nbytes], 2, function, 1, ping, pong, nranks=nranks):
        try:
            _judge_partner(report, function)
        except AssertionError as exc:
            raise AssertionError(f"with {nranks} ranks, {exc}") from None
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


def pair_loop_on_ranks(loop, exchange, nbytes=1024, iters=50, nranks=2,
                       timeout=MPIEXEC_TIMEOUT_S) -> list[tuple]:  # fmt: skip
    """Notebook 05's pair-timing loop on ranks of the check's own: per rank (samples as an
    array, NaN where the rank returned NaN; the loop's wall time; the echo intact)."""
    import numpy as np

    try:
        (results,) = on_fresh_ranks(
            on_ranks.pair_loop, [[int(nbytes), int(iters)]], [loop, exchange], nranks, timeout
        )
    except Unfinished:
        raise DeadlockError(
            f"the pair-timing loop ({iters} exchanges of {nbytes_text(nbytes)}) did not finish "
            f"within {timeout:g} s: a rank is waiting for a message that never comes"
        ) from None
    return [
        (np.array([np.nan if x is None else x for x in r["samples"]], dtype=float).reshape(
            r["shape"]), r["wall"], r["intact"])
        for r in results
    ]  # fmt: skip
