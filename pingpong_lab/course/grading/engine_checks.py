"""Learners' ping-pongs (Python and C) run for real on the MPI engines, with deadlines.

Work on the engines always has a deadline shorter than nbgrader's cell timeout
(ENGINE_TIMEOUT_S): a deadlocked submission fails that cell, the engines restart, and the rest
of the notebook is still graded. Runs with more ranks than the engines have are separate
`mpiexec` jobs (`c_pingpong_job`, a job of mpi.jobs), killed whole at their deadline.
"""

from __future__ import annotations

import ctypes
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from ...engines.shipping import ship, unship
from ...mpi import jobs
from ...mpi.processes import run_group
from .cbuild import GRADED_KINDS, NOT_IMPLEMENTED
from .fakempi import Op, describe_op
from .matching import c_constants
from .mode import ENGINE_TIMEOUT_S, MPIEXEC_TIMEOUT_S, nbytes_text
from .trace import check_exchange


def _on_engine(package, nbytes):
    """Engine side: the learner's function, COMM_WORLD, this rank, the payload's base pattern
    and zeroed send and receive buffers of nbytes."""
    from mpi4py import MPI

    from pingpong_lab.mpi import payload

    comm = MPI.COMM_WORLD
    zeros = np.zeros(nbytes, np.uint8), np.zeros(nbytes, np.uint8)
    return unship(package), comm, comm.Get_rank(), payload.base(nbytes), *zeros


def _pingpong_on_engine(package, nbytes, iters):
    """Engine side: run a learner's fn(comm, sendbuf, recvbuf) `iters` times, check the echo."""
    from pingpong_lab.mpi import payload

    fn, comm, rank, base, sendbuf, recvbuf = _on_engine(package, nbytes)
    corrupt, detail = 0, None
    comm.Barrier()
    for i in range(iters):
        if rank == 0:
            payload.fill(sendbuf, base, i)
            recvbuf[:] = 0
        fn(comm, sendbuf, recvbuf)
        if rank == 0 and not payload.matches(recvbuf, base, i):
            corrupt += 1
            if detail is None:  # only on failure: a message-sized temporary is fine here
                expected = np.empty_like(base)
                payload.fill(expected, base, i)
                bad = np.flatnonzero(recvbuf != expected)
                j = int(bad[0])
                detail = (
                    f"in round trip {i + 1}, {bad.size} of {nbytes} bytes differ, the first at "
                    f"byte {j}: expected {int(expected[j]):#04x}, received {int(recvbuf[j]):#04x}"
                    + (
                        " (recvbuf is still all zeros: no echo arrived in it)"
                        if not recvbuf.any()
                        else ""
                    )
                )
    comm.Barrier()
    return {"rank": rank, "corrupt": corrupt, "detail": detail}


def pingpong_on_engines_report(cluster, fn, nbytes, iters=3, timeout=ENGINE_TIMEOUT_S):
    """Rank 0's report of a learner's Python ping-pong on the engines: corrupt, detail."""
    results = cluster.run(_pingpong_on_engine, ship(fn), int(nbytes), int(iters), timeout=timeout)
    return results[0]


def _safe_exchange_on_engine(package, nbytes):
    """Engine side: ranks 0 and 1 swap patterned buffers with a learner's fn(comm, sendbuf,
    recvbuf); every rank calls it. Returns what arrived, as {rank, ok, detail}."""
    from pingpong_lab.mpi import payload

    fn, comm, rank, base, sendbuf, recvbuf = _on_engine(package, nbytes)
    if rank < 2:
        payload.fill(sendbuf, base, 1 + rank)  # each rank's own pattern
    comm.Barrier()
    fn(comm, sendbuf, recvbuf)
    ok, detail = True, None
    if rank < 2 and nbytes:
        expected = np.empty_like(base)
        payload.fill(expected, base, 2 - rank)  # the partner's pattern
        bad = np.flatnonzero(recvbuf != expected)
        if bad.size:
            ok = False
            detail = (
                f"rank {rank}'s recvbuf holds {bad.size} of {nbytes} bytes that rank {1 - rank} "
                "did not send"
                + (" (still all zeros: nothing arrived in it)" if not recvbuf.any() else "")
            )
    comm.Barrier()
    return {"rank": rank, "ok": ok, "detail": detail}


def check_safe_exchange(cluster, fn, sizes=(8, 8192, 1 << 20), timeout=ENGINE_TIMEOUT_S):
    """AssertionError unless ranks 0 and 1 swap their buffers intact at every size, with a
    deadline: an exchange that relies on MPI's buffering deadlocks above the eager limit."""
    from ...errors import DeadlockError

    for nbytes in sizes:
        try:
            results = cluster.run(_safe_exchange_on_engine, ship(fn), int(nbytes), timeout=timeout)
        except DeadlockError:
            raise AssertionError(
                f"the exchange of {nbytes_text(nbytes)} did not finish within {timeout:g} s: "
                "both ranks are waiting (a send that waits for a receive the other rank has not "
                "posted yet). Post the receive first (Irecv, then Send, then Wait) or use "
                "Sendrecv."
            ) from None
        bad = [r["detail"] for r in results if not r["ok"]]
        assert not bad, f"exchange of {nbytes_text(nbytes)}: " + "; ".join(bad)
    return True


def _assert_echoes_intact(corrupt: int, count: str, nbytes=None, before="", after="") -> None:
    """AssertionError '<before><count> echoes[ of <size>] came back different from what rank 0
    sent<after>' unless corrupt is 0."""
    if corrupt:
        size = "" if nbytes is None else f" of {nbytes_text(nbytes)}"
        raise AssertionError(
            f"{before}{count} echoes{size} came back different from what rank 0 sent{after}"
        )


def check_pingpong_on_engines(cluster, fn, sizes=(0, 1, 4097, 1 << 20), iters=3):
    """AssertionError unless every echo comes back intact at every size (with a deadline)."""
    for nbytes in sizes:
        report = pingpong_on_engines_report(cluster, fn, nbytes, iters)
        corrupt = report["corrupt"]
        _assert_echoes_intact(
            corrupt, f"{corrupt} of {iters}", nbytes, after=f"; {report.get('detail')}"
        )
    return True


def _c_pingpong_on_engine(lib, function, nbytes, iters, instrumented):
    """Engine side: call `int function(comm, sendbuf, recvbuf, nbytes)` iters times."""
    from mpi4py import MPI

    from pingpong_lab.mpi import ckernels, payload

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    base = payload.base(nbytes)
    sendbuf = np.zeros(max(nbytes, 1), np.uint8)
    recvbuf = np.zeros(max(nbytes, 1), np.uint8)
    handle = ckernels.load(lib)
    if instrumented:
        handle.pp_graded_reset()
    corrupt, codes = 0, []
    comm.Barrier()
    for i in range(iters):
        if rank == 0:
            payload.fill(sendbuf[:nbytes], base, i)
            recvbuf[:] = 0
        rc = ckernels.call_c(
            lib,
            function,
            comm,
            sendbuf.ctypes.data_as(ctypes.c_void_p),
            recvbuf.ctypes.data_as(ctypes.c_void_p),
            ctypes.c_int(nbytes),
        )
        codes.append(int(rc))
        if rc != 0:
            break
        if rank == 0 and not payload.matches(recvbuf[:nbytes], base, i):
            corrupt += 1
    result = {"rank": rank, "corrupt": corrupt, "codes": codes}
    if instrumented:
        out = (ctypes.c_int * (4 * 64))()
        n = handle.pp_graded_calls(out, 64)
        result["calls"] = [tuple(out[4 * k : 4 * k + 4]) for k in range(min(n, 64))]
        constants = (ctypes.c_int * 3)()
        handle.pp_graded_constants(constants)
        result["constants"] = list(constants)
    return result


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
        _c_pingpong_on_engine,
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


def check_c_pingpong(cluster, lib_instrumented, nbytes=1000, iters=2, function="pingpong_c"):
    """Check the learner's C ping-pong (instrumented build) on the engines: calls and payload.

    Peers and tags are judged with the MPI_ANY_SOURCE, MPI_ANY_TAG and MPI_PROC_NULL of the
    library the learner's code was compiled against.
    """
    results = c_pingpong_on_engines(cluster, lib_instrumented, nbytes, iters, function, True)
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


def check_c_payload(cluster, lib, sizes=(0, 1, 4097, 1 << 20), iters=2, function="pingpong_c"):
    """The uninstrumented C ping-pong echoes every size intact on the engines."""
    for nbytes in sizes:
        results = c_pingpong_on_engines(cluster, lib, nbytes, iters, function)
        _raise_for_codes(results, function)
        corrupt = results[0]["corrupt"]
        _assert_echoes_intact(corrupt, f"{corrupt} of {iters}", nbytes)
    return True


# -- more ranks: a separate mpiexec job, with a deadline ---------------------------------------
def run_c_with_ranks(
    lib, nranks=3, nbytes=100, iters=2, function="pingpong_c", timeout=MPIEXEC_TIMEOUT_S
):
    """Run the C ping-pong in a fresh `mpiexec -n nranks` job; per-rank results.

    The job runs in its own process group and is killed whole when it passes the deadline.
    """
    with tempfile.TemporaryDirectory(prefix="pp-grade-") as out_dir:
        spec = {"lib": str(lib), "function": function, "nbytes": int(nbytes), "iters": int(iters)}
        cmd = jobs.command(c_pingpong_job, {**spec, "out_dir": out_dir}, nranks)
        try:
            proc = run_group(cmd, timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"with {nranks} ranks, {function} did not finish within {timeout:g} s: probably "
                "a deadlock (do ranks other than 0 and 1 wait for a message that never comes?)"
            ) from None
        results = [json.loads(p.read_text()) for p in sorted(Path(out_dir).glob("rank*.json"))]
    if proc.returncode != 0 or len(results) != nranks:
        tail = "\n".join(proc.stderr.strip().splitlines()[-6:])
        raise AssertionError(
            f"the {nranks}-rank run of {function} failed (exit {proc.returncode}):\n{tail}"
        )
    return sorted(results, key=lambda r: r["rank"])


def check_c_with_ranks(lib, nranks=3, nbytes=100, function="pingpong_c"):
    results = run_c_with_ranks(lib, nranks, nbytes, function=function)
    _raise_for_codes(results, function)
    corrupt = results[0]["corrupt"]
    _assert_echoes_intact(corrupt, str(corrupt), nbytes, before=f"with {nranks} ranks, ")
    return True


@jobs.job
def c_pingpong_job(spec: dict, comm) -> int:
    """The "c-pingpong" job (every rank): run the C ping-pong, each rank writes its result."""
    args = spec["lib"], spec["function"], spec["nbytes"], spec["iters"]
    result = _c_pingpong_on_engine(*args, instrumented=False)
    Path(spec["out_dir"], f"rank{result['rank']:05d}.json").write_text(json.dumps(result))
    return 0
