"""The C timing loop's recorded calls: an honest loop passes, each classic slip is named."""

from __future__ import annotations

import pytest

from pingpong_lab.course.grading import ctiming

# pp_graded.h's kinds: 1 Send, 2 Recv, 6 Barrier, 7 Wtime, 8 Allreduce (peer: MAX, tag: double)
SEND, RECV, BARRIER, WTIME = (1, 1, 0, 8), (2, 1, 0, 8), (6, 0, 0, 0), (7, 0, 0, 0)
MAX_DOUBLE = (8, 1, 1, 8)


def loop(warmup=2, reps=3, *, barrier=True, clock_first=False, timed_warmup=False, red=MAX_DOUBLE):
    calls = [SEND, RECV] * warmup
    if clock_first:
        calls = [WTIME] + calls
    if barrier:
        calls.append(BARRIER)
    calls.append(WTIME)
    if timed_warmup:
        calls = [BARRIER, WTIME] + [SEND, RECV] * warmup + [WTIME]
    for _ in range(reps):
        calls += [SEND, RECV, WTIME]
    if red is not None:
        calls.append(red)
    return calls


def test_an_honest_timing_loop_passes():
    calls = loop()
    ctiming.check_timing_calls(calls, len(calls), warmup=2, reps=3)
    calls = loop(warmup=0, reps=9)
    ctiming.check_timing_calls(calls, len(calls), warmup=0, reps=9)


@pytest.mark.parametrize(
    ("calls", "message"),
    [
        (loop(barrier=False), "MPI_Barrier"),
        (loop(red=None), "MPI_Allreduce"),
        (loop(red=(8, 0, 1, 8)), "MPI_MAX"),
        (loop(red=(8, 1, 0, 4)), "MPI_DOUBLE"),
        (loop(clock_first=True), "before MPI_Barrier"),
        (loop(timed_warmup=True), "warm-up"),
        (loop(reps=2), "3 round trips"),
        ([c for c in loop() if c != WTIME], "MPI_Wtime"),
    ],
    ids=["no barrier", "no reduction", "MIN", "an int", "clock first", "warm-up timed", "reps"]
    + ["no clock"],
)
def test_each_slip_is_reported_by_name(calls, message):
    with pytest.raises(AssertionError, match=message):
        ctiming.check_timing_calls(calls, len(calls), warmup=2, reps=3)


def test_more_calls_than_were_recorded_is_a_clear_failure():
    calls = loop()
    with pytest.raises(AssertionError, match="too many"):
        ctiming.check_timing_calls(calls, len(calls) + 1000, warmup=2, reps=3)
