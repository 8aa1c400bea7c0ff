"""Checks on what a learner's ping-pong does, traced on fake ranks (see fakempi)."""

from __future__ import annotations

import numpy as np

from .fakempi import FakeComm, comm_ops, describe_calls, fake_mpi_for, message_to
from .matching import mpi_constants
from .mode import nbytes_text


def trace(fn, size=4, nbytes=8, seed=0):
    """Run fn(comm, sendbuf, recvbuf) on fake ranks 0..size-1; return each rank's calls.

    Returns (logs, bufs, payload): every rank's recorded calls and its recvbuf afterwards, by
    rank, and the payload that rank 0 had in its sendbuf. Rank 0 first runs once as if the
    echo came back intact, to find out what it sends to whom with which tag; the other ranks
    then run and receive what rank 0 sent them. Rank 0 runs again and receives what rank 1
    *actually* sent back to it with a tag its receive accepts. A receive that matches no
    message gets nothing (on real MPI it would wait forever): its buffer keeps its zeros. The
    status of a receive says who sent the message with which tag, as after a real MPI receive.
    """
    rng = np.random.default_rng(seed)
    payload = rng.integers(0, 256, nbytes, dtype=np.uint8)
    logs, bufs = [None] * size, [None] * size

    def run(rank, incoming):
        comm = FakeComm(rank, size, incoming=incoming)
        sendbuf = payload.copy() if rank == 0 else np.zeros(nbytes, np.uint8)
        recvbuf = np.zeros(nbytes, np.uint8)
        with fake_mpi_for(fn) as traced:
            traced(comm, sendbuf, recvbuf)
        logs[rank], bufs[rank] = comm.log, recvbuf

    def sent_by(sender, receiver):
        log = logs[sender] if sender < size else []
        return lambda source, tag, n: message_to(log, sender, receiver, source, tag)

    run(0, lambda source, tag, n: payload.copy())
    for rank in range(1, size):
        run(rank, sent_by(0, rank))
    run(0, sent_by(1, 0))
    return logs, bufs, payload


def show_bytes(data, limit=8):
    data = bytes(data)
    shown = " ".join(f"{b:02x}" for b in data[:limit])
    return shown + (" ..." if len(data) > limit else "") if data else "(empty)"


def describe_echo(sent, echoed, reference="what rank 0 sent"):
    """One line on how the echo compares with what was sent (bytes-like or None)."""
    sent = bytes(memoryview(sent).cast("B"))
    if echoed is None:
        return "nothing (no message to its partner with a matching tag)"
    try:
        echoed = bytes(memoryview(echoed).cast("B"))
    except TypeError:
        return f"a pickled Python object, {type(echoed).__name__} {echoed!r:.60}"
    if echoed == sent:
        return f"{nbytes_text(len(echoed))}, identical to {reference}"
    if len(echoed) != len(sent):
        return (
            f"{nbytes_text(len(echoed))} instead of {len(sent)}: {show_bytes(echoed)} "
            f"({reference}: {show_bytes(sent)})"
        )
    diff = [j for j, (a, b) in enumerate(zip(sent, echoed)) if a != b]
    zeros = " (all zeros: a buffer that never received anything?)" if not any(echoed) else ""
    return (
        f"{show_bytes(echoed)}{zeros}: {len(diff)} of {len(sent)} bytes differ from "
        f"{reference} ({show_bytes(sent)}), first at byte {diff[0]}"
    )


def check_pingpong(fn, size=4, nbytes=64, seed=0, nonblocking=False):
    """Check a buffer ping-pong fn(comm, sendbuf, recvbuf) on fake ranks; AssertionError if wrong.

    Rank 0 must send the whole sendbuf to rank 1 and then receive the echo into recvbuf; rank 1
    must receive and send back exactly what it received; other ranks must not communicate.
    With nonblocking=True, Isend/Irecv are expected and every request must be completed.
    """
    logs, bufs, payload = trace(fn, size=size, nbytes=nbytes, seed=seed)
    calls = describe_calls(logs)
    where = f"(with {size} ranks and a {nbytes}-byte message; what each rank did: {calls})"
    return check_trace(logs, bufs, payload, nonblocking=nonblocking, where=where)


def diagnose_trace(logs, bufs, payload, nonblocking=None):
    """None for a correct ping-pong trace (from trace()), else the first problem, in words.

    nonblocking=None guesses the flavour from the calls (Isend/Irecv seen -> non-blocking).
    """
    if nonblocking is None:
        nonblocking = any(op.kind in ("Isend", "Irecv") for log in logs for op in log)
    try:
        check_trace(logs, bufs, payload, nonblocking=nonblocking, where="")
    except AssertionError as exc:
        return str(exc).strip()
    return None


def check_exchange(r0, r1, nbytes, mpi, where="", pair=(0, 1)):
    """The first rank's [send, receive] and the second's [receive, send] (Ops, from Python or
    C) are one round trip of `nbytes` between the ranks `pair` (default 0 and 1): peers, sizes
    and tags, wildcards as `mpi` has them."""
    a, b = pair
    assert r0[0].peer == b, (
        f"rank {a} must send to rank {b}; it sent to {mpi.dest_text(r0[0].peer)} {where}"
    )
    assert mpi.source_matches(a, r1[0].peer), (
        f"rank {b} must receive from rank {a} (or {mpi.prefix}ANY_SOURCE); it received from "
        f"{mpi.source_text(r1[0].peer)} {where}"
    )
    assert r1[1].peer == a, (
        f"rank {b} must send the echo back to rank {a}; it sent to "
        f"{mpi.dest_text(r1[1].peer)} {where}"
    )
    assert mpi.source_matches(b, r0[1].peer), (
        f"rank {a} must receive the echo from rank {b} (or {mpi.prefix}ANY_SOURCE); it received "
        f"from {mpi.source_text(r0[1].peer)} {where}"
    )
    assert r0[0].nbytes == nbytes, (
        f"rank {a} sent {r0[0].nbytes} bytes instead of all {nbytes} of sendbuf {where}"
    )
    assert r1[1].nbytes == nbytes, (
        f"rank {b} sent back {r1[1].nbytes} bytes instead of {nbytes} {where}"
    )
    assert r0[1].nbytes >= nbytes and r1[0].nbytes >= nbytes, (
        f"a receive buffer is too small for {nbytes_text(nbytes)}: rank {a} receives into "
        f"{r0[1].nbytes}, rank {b} into {r1[0].nbytes} {where}"
    )
    assert mpi.tag_matches(r0[0].tag, r1[0].tag), (
        f"the tags differ: rank {a} sends with tag {r0[0].tag} and rank {b} receives with tag "
        f"{mpi.recv_tag_text(r1[0].tag)}, so on real MPI that message never matches and both "
        f"ranks wait forever {where}"
    )
    assert mpi.tag_matches(r1[1].tag, r0[1].tag), (
        f"the tags differ: rank {b} sends the echo with tag {r1[1].tag} and rank {a} receives "
        f"with tag {mpi.recv_tag_text(r0[1].tag)}, so on real MPI the echo never matches and "
        f"rank {a} waits forever {where}"
    )


def trace_pairs(fn, size=4, nbytes=32, seed=0):
    """Run a pairwise exchange fn(comm, sendbuf, recvbuf) on fake ranks 0..size-1, where rank
    r < size/2 starts a round trip with r + size/2 (the bottom half sends first).

    As trace() does for one pair: the bottom half runs once as if its echo came back intact,
    the top half then receives what its partner actually sent, and the bottom half runs again
    and receives what its partner actually sent back. Returns (logs, bufs, payloads): each
    rank's calls and recvbuf, and the payload each bottom rank had in its sendbuf.
    """
    rng = np.random.default_rng(seed)
    half = size // 2
    payloads = {r: rng.integers(0, 256, nbytes, dtype=np.uint8) for r in range(half)}
    logs, bufs = [None] * size, [None] * size

    def run(rank, incoming):
        comm = FakeComm(rank, size, incoming=incoming)
        own = payloads.get(rank)
        sendbuf = own.copy() if own is not None else np.zeros(nbytes, np.uint8)
        recvbuf = np.zeros(nbytes, np.uint8)
        with fake_mpi_for(fn) as traced:
            traced(comm, sendbuf, recvbuf)
        logs[rank], bufs[rank] = comm.log, recvbuf

    def sent_by(sender, receiver):
        return lambda source, tag, n: message_to(logs[sender] or [], sender, receiver, source, tag)

    for rank in range(half):
        run(rank, lambda source, tag, n, r=rank: payloads[r].copy())
    for rank in range(half, size):
        run(rank, sent_by(rank - half, rank))
    for rank in range(half):
        run(rank, sent_by(rank + half, rank))
    return logs, bufs, payloads


def check_pairwise_exchange(fn, size=4, nbytes=32, seed=0):
    """Check a pairwise exchange on `size` fake ranks: every rank r < size/2 sends its whole
    sendbuf to r + size/2 and receives the echo into recvbuf; every upper rank receives and
    sends back exactly what it received; blocking Send (or Ssend) and Recv; wildcards accepted.
    """
    logs, bufs, payloads = trace_pairs(fn, size=size, nbytes=nbytes, seed=seed)
    where = f"(with {size} ranks and a {nbytes}-byte message; what each rank did: "
    where += f"{describe_calls(logs)})"
    mpi = mpi_constants()
    half = size // 2
    for rank, log in enumerate(logs):
        kinds = [op.kind for op in comm_ops(log)]
        want = ["send", "Recv"] if rank < half else ["Recv", "send"]
        got = ["send" if k in ("Send", "Ssend") else k for k in kinds]
        order = "send first, then receive" if rank < half else "receive first, then send back"
        assert got == want, (
            f"rank {rank} must {order}, with {BLOCKING_API} (one call each); it called "
            f"{kinds or 'nothing'} {where}"
        )
    for low in range(half):
        high = low + half
        r_low, r_high = comm_ops(logs[low]), comm_ops(logs[high])
        check_exchange(r_low, r_high, nbytes, mpi, where, pair=(low, high))
        payload = payloads[low]
        assert r_low[0].data == payload.tobytes(), (
            f"rank {low} must send the contents of its sendbuf; it sent "
            f"{describe_echo(payload, r_low[0].data, 'its sendbuf')} {where}"
        )
        assert r_high[1].data == payload.tobytes(), (
            f"rank {high} must send back exactly the bytes it received; it sent back "
            f"{describe_echo(payload, r_high[1].data, f'what rank {low} sent')} {where}"
        )
        assert np.array_equal(bufs[low], payload), (
            f"the echo must arrive in rank {low}'s recvbuf; it holds {show_bytes(bufs[low])} "
            f"{where}"
        )
    return True


# what each flavour of the exercise asks for, in the words of a failure message
BLOCKING_API = "the blocking comm.Send (or comm.Ssend) and comm.Recv"
NONBLOCKING_API = "the non-blocking comm.Isend and comm.Irecv"


def check_trace(logs, bufs, payload, nonblocking=False, where=""):
    """AssertionError (with `where` appended) unless the traced calls are a correct round trip."""
    send_kinds = {"Isend"} if nonblocking else {"Send", "Ssend"}
    recv_kinds = {"Irecv"} if nonblocking else {"Recv"}
    api = NONBLOCKING_API if nonblocking else BLOCKING_API
    size, nbytes = len(logs), len(payload)
    assert size >= 2, f"a ping-pong needs at least 2 ranks, the trace has {size}"
    for rank, log in enumerate(logs):
        for op in comm_ops(log):
            if op.kind in ("send", "recv", "ssend", "isend"):
                raise AssertionError(
                    f"rank {rank} called comm.{op.kind}, which pickles Python objects; this "
                    f"exercise asks for {api} (capital letter), which move buffers {where}"
                )
            if op.kind not in send_kinds | recv_kinds:
                raise AssertionError(
                    f"rank {rank} called comm.{op.kind}; this exercise asks for {api} {where}"
                )
    r0, r1 = comm_ops(logs[0]), comm_ops(logs[1])
    if nonblocking:  # rank 0 may post its receive first: a good habit
        assert sorted(op.kind for op in r0) == ["Irecv", "Isend"], (
            f"rank 0 must post one Isend and one Irecv; it called "
            f"{[op.kind for op in r0] or 'nothing'} {where}"
        )
        if r0[0].kind == "Irecv":
            r0 = [r0[1], r0[0]]
        recv_wait = [i for i, op in enumerate(logs[0]) if op.kind == "Wait" and op is not None]
        posted = [i for i, op in enumerate(logs[0]) if op.kind == "Isend"]
        assert posted and (not recv_wait or posted[0] < recv_wait[-1]), (
            f"rank 0 waits for the echo before its Isend is posted: that deadlocks {where}"
        )
    else:
        assert [op.kind in send_kinds for op in r0] == [True, False], (
            f"rank 0 must send first and then receive, with {api} (one call each); it called "
            f"{[op.kind for op in r0] or 'nothing'} {where}"
        )
    assert [op.kind in recv_kinds for op in r1] == [True, False], (
        f"rank 1 must receive first and then send the message back, with {api} (one call "
        f"each); it called {[op.kind for op in r1] or 'nothing'} {where}"
    )
    check_exchange(r0, r1, nbytes, mpi_constants(), where)
    assert r0[0].data == payload.tobytes(), (
        "rank 0 must send the contents of sendbuf; it sent "
        f"{describe_echo(payload, r0[0].data, 'the payload in sendbuf')} {where}"
    )
    assert r1[1].data == payload.tobytes(), (
        "rank 1 must send back exactly the bytes it received (the payload is checked); it sent "
        f"back {describe_echo(payload, r1[1].data)} {where}"
    )
    assert np.array_equal(bufs[0], payload), (
        f"the echo must arrive in rank 0's recvbuf; it holds {show_bytes(bufs[0])} {where}"
    )
    for rank in range(2, size):
        assert not comm_ops(logs[rank]), (
            f"rank {rank} must stay idle (no messages); it called {comm_ops(logs[rank])} {where}"
        )
    if nonblocking:
        for rank in (0, 1):
            waits = sum(1 for op in logs[rank] if op.kind == "Wait")
            assert waits >= 2, (
                f"rank {rank} must complete (Wait for) both of its requests; it completed "
                f"{waits} {where}"
            )
    return True


def check_pickle_pingpong(fn, size=3, seed=0):
    """Check fn(comm, obj) -> echoed obj on rank 0, None elsewhere, using lowercase send/recv."""
    rng = np.random.default_rng(seed)
    obj = {"numbers": rng.integers(0, 1000, 5).tolist(), "label": f"ping-{seed}"}
    results, logs = [], []
    for rank in range(size):
        incoming = (lambda s, t, n, o=obj: o) if rank == 1 else None
        comm = FakeComm(rank, size, incoming=incoming)
        with fake_mpi_for(fn) as traced:
            results.append(traced(comm, obj if rank == 0 else None))
        logs.append(comm.log)
    where = f"(what each rank did: {describe_calls(logs)})"
    r0, r1 = comm_ops(logs[0]), comm_ops(logs[1])
    assert [op.kind for op in r0] == ["send", "recv"], (
        f"rank 0 must comm.send the object, then comm.recv the echo {where}"
    )
    assert [op.kind for op in r1] == ["recv", "send"], (
        f"rank 1 must comm.recv, then comm.send the object back {where}"
    )
    assert r0[0].peer == 1 and r1[1].peer == 0, f"ranks 0 and 1 must talk to each other {where}"
    assert r0[0].data == obj, f"rank 0 must send the object it was given {where}"
    assert r1[1].data == obj, f"rank 1 must send back the object it received {where}"
    assert results[0] == obj, f"rank 0 must return the echoed object, got {results[0]!r}"
    assert all(r is None for r in results[1:]), (
        f"ranks other than 0 must return None, got {results[1:]}"
    )
    for rank in range(2, size):
        assert not comm_ops(logs[rank]), f"rank {rank} must stay idle {where}"
    return True
