"""Timing fakes: a deterministic clock and a check of the order of a timing loop's steps."""

from __future__ import annotations

from .fakempi import FakeComm, Op


class FakeClock:
    """A deterministic timer: every call advances by `step` seconds (plus what others add).

    With `log` (e.g. a FakeComm's log), every reading appends Op("clock") to it, so a test can
    see when the clock was read relative to the MPI calls.
    """

    def __init__(self, start=100.0, step=1e-6, log=None):
        self.now, self.step, self.calls = float(start), float(step), 0
        self.log = log

    def __call__(self):
        self.calls += 1
        self.now += self.step
        if self.log is not None:
            self.log.append(Op("clock"))
        return self.now

    def advance(self, seconds):
        self.now += seconds


def timing_fakes(round_trip_s, others=(), size=2):
    """(comm, pingpong, clock) for testing a time_pingpong on one fake rank.

    Every round trip of `pingpong` appends Op("round trip") to comm.log and advances the clock by
    round_trip_s; every clock reading appends Op("clock"). `others`: the elapsed times that the
    other ranks contribute to allreduce.
    """
    comm = FakeComm(0, size, others=others)
    clock = FakeClock(step=0.0, log=comm.log)

    def fake_pingpong(comm_, sendbuf, recvbuf):
        comm.log.append(Op("round trip"))
        clock.advance(round_trip_s)

    return comm, fake_pingpong, clock


def timing_steps(log) -> str:
    """'round trip x7, Barrier, clock, round trip x100, ...': a log, runs compressed."""
    names = [
        f"{op.kind}({op.tag})" if op.kind in ("allreduce", "Allreduce") else op.kind for op in log
    ]
    parts = []
    for name in names:
        if parts and parts[-1][0] == name:
            parts[-1][1] += 1
        else:
            parts.append([name, 1])
    shown = [n if k == 1 else f"{n} x{k}" for n, k in parts]
    if len(shown) > 12:
        shown = [*shown[:10], f"... ({len(shown) - 11} more) ...", shown[-1]]
    return ", ".join(shown)


def check_timing_sequence(log, warmup, reps):
    """AssertionError unless a traced time_pingpong did: all warm-up round trips, one Barrier,
    read the clock, the timed round trips (no Barrier among them), read the clock again."""
    kinds = [op.kind for op in log]
    where = f"(what time_pingpong did, in order: {timing_steps(log)})"
    trips = [i for i, k in enumerate(kinds) if k == "round trip"]
    assert len(trips) == warmup + reps, (
        f"expected {warmup} warm-up + {reps} timed round trips, found {len(trips)} {where}"
    )
    barriers = [i for i, k in enumerate(kinds) if k == "Barrier"]
    assert barriers, f"synchronise the ranks with comm.Barrier() before timing {where}"
    assert len(barriers) == 1, (
        f"call comm.Barrier() once, after the warm-up and before the timed loop; found "
        f"{len(barriers)} Barriers (a Barrier inside the timed loop is timed too) {where}"
    )
    b = barriers[0]
    after = sum(i > b for i in trips[:warmup])
    assert after == 0, (
        f"all {warmup} warm-up round trips must come before the Barrier, but {after} came after "
        f"it {where}"
    )
    before = sum(i < b for i in trips[warmup:])
    assert before == 0, (
        f"the Barrier must come before every timed round trip, but {before} came before it {where}"
    )
    first_timed = trips[warmup] if reps else len(kinds)
    assert "clock" in kinds[b + 1 : first_timed], (
        f"start the clock after the Barrier and before the first timed round trip {where}"
    )
    last = trips[-1] if trips else b
    assert "clock" in kinds[last + 1 :], (
        f"read the clock again after the last timed round trip {where}"
    )
    return True
