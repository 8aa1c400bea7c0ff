"""05's overlap experiment on real ranks: what the text says is checked as behaviour that does
not depend on the machine's speed (who waits for whom, how many Test calls), never as times."""

from __future__ import annotations

import math

import pytest

from pingpong_lab.course import eager, overlap

MIB = 1 << 20


@pytest.fixture(scope="module")
def arms():
    """CMA on and off, few trials: enough to read who waited for whom."""
    chosen = {k: v for k, v in overlap.ARMS.items() if overlap.ASYNC_PROGRESS not in v}
    return overlap.measure_arms(chosen, sizes=(overlap.EAGER_BYTES, MIB), reps=5)


def test_every_payload_arrives_intact_in_every_case(arms):
    for name, arm in arms.items():
        assert "error" not in arm, (name, arm)
        assert len(arm["rows"]) == 2 * len(overlap.SIDES) * len(overlap.STRATEGIES)
        assert all(r["corrupt"] == 0 for r in arm["rows"]), name
        for r in arm["rows"]:  # every trial kept, not only the medians
            assert {k: len(v) for k, v in r["samples_s"].items()} == dict.fromkeys(
                ("computing", "control", "peer"), 5
            )


def test_a_rendezvous_message_waits_for_a_receiver_that_only_calls_wait(arms):
    for name in arms:
        row = overlap.case(arms, name, MIB, "receiver computes", "Wait only")
        # the sender cannot be done before the receiver's work ends and it calls Wait (the
        # work is about 3 ms, one copy about 0.1 ms: half the work tells the two apart, with
        # room for a loaded machine's noise between trials and their controls)
        assert row["peer_done_s"] >= 0.5 * row["work_s"], (name, row)


def test_with_single_copy_one_test_call_moves_the_whole_message(arms):
    name = next(iter(overlap.ARMS))  # MPICH's defaults
    row = overlap.case(arms, name, MIB, "receiver computes", "Test")
    assert math.isfinite(row["tests_until_done"]), row


def test_without_single_copy_each_test_moves_only_part_of_the_message(arms):
    name = next(k for k, v in overlap.ARMS.items() if v.get(eager.CMA) == 0)
    row = overlap.case(arms, name, MIB, "receiver computes", "Test")
    # MPICH's 8 KiB cells: about 128 calls for 1 MiB here; far more than one in any case
    assert row["tests_until_done"] >= 16, row
    table = overlap.table(arms)
    assert "single copy (CMA) off:" in table and "Test calls until done" in table


def test_an_arm_mpi_refuses_is_reported_with_its_setting_not_raised():
    cell = {eager.CELL: 1 << 20}  # far above what MPICH starts with
    out = overlap.measure_arms({"huge cell": cell}, sizes=(overlap.EAGER_BYTES,), reps=1)
    assert out["huge cell"]["error"].startswith(
        f"the overlap job failed with {eager.CELL}=1048576"
    ), out
    assert "huge cell:\n  not measured here (the overlap job failed" in overlap.table(out)
    with pytest.raises(ValueError, match="not one of the settings"):
        overlap.measure({"MPIR_CVAR_NO_SUCH_THING": 1})
