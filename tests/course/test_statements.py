"""Statements an expert reviewer corrected stay corrected (course/source, text and code)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[2] / "course" / "source"


def _text(name: str) -> str:
    cells = json.loads((SOURCE / name / f"{name}.ipynb").read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells)


# (notebook, a wrong statement that must not come back, the correction that must stay)
CORRECTIONS = [
    ("01_pingpong", "a size first, then the bytes", "`Mprobe`"),
    ("01_pingpong", "of sending the size first", "probing for the message's size"),
    ("03_variability", "so rank 1's row is NaN", "both rows are measured"),
    ("03_variability", "adaptive sweep of notebook 02 stops", "The course's adaptive sweep"),
    ("03_variability", "statistic=np.max", "can never hold a value above the sample's own maximum"),
    (
        "03_variability",
        "4 ranks on this machine** (it has",
        "depends on the cores this job may use",
    ),
    ("03_variability", "Pin ranks deliberately (`mpiexec", "leave placement to the"),
    ("03_variability", "p99 (floats, seconds). Raises", "any standard"),
    ("04_model", "always a rendezvous", "completes only once the matching receive has started"),
    ("04_model", "usually has the higher R²", "always has the higher (plain) R²"),
    ("04_model", "down to 0.23 (SP2)", "down to 0.01"),
    ("04_model", "tables stop at 32 KiB because", "tables 2.3 and 2.5"),
    ("04_model", "run `make kernels` in the course folder", "hw_floor is not built in this"),
    ("04_model", 'ECHO = "echo', "own reply buffer (as OSU) + ready message"),
    ("04_model", "ready message (OSU)", "own reply buffer (as OSU)"),
    ("04_model", "(OSU's method; docs/method.md)", "a step of\nits own, not OSU's"),
    ("04_model", "1.3-4x at 16 KiB - 1 MiB", "more\nthan ten times as much between 16 KiB"),
    ("04_model", "costs this MPICH 1.3-4x", "02's own-buffer experiment"),
    ("01_pingpong", "most clearly for small\nmessages", "predicted_ratio = {8: None"),
    ("01_pingpong", "On small messages the fixed cost of pickling", "a ratio\nthat grows with"),
    ("02_timing", "Write your guess down, then compare", "predicted_steps = None"),
    ("02_timing", "**Predict:** faster or slower than blocking", "predicted_nonblocking = {"),
    ("04_model", "UDP on their AIX cluster", "0.01 (UDP on\ntheir SP2"),
    ("01_pingpong", "stop at 32 KiB (128 KiB in", "stop at 32, 64 or 128 KiB"),
    ("03_variability", "ping-pong times\nare skewed to the right", "the mean can land below it"),
    # the first comparison's legend took the whole figure (a label with the method in it)
    ("04_model", 'f"reference: C kernel, {REF_METHOD}"', "reference kernel's method: {REF_METHOD}"),
    ("02_timing", "<no such text>", "on one and the same buffer at once, which MPI does not allow"),
    # a KVM guest shows one thread per core whatever the host has
    ("03_variability", "as on the course's 2-core servers) cannot show", "the guest cannot tell"),
    ("03_variability", "this notebook was written on (no SMT)", "a KVM guest that sees one"),
    ("05_contention", "largest sizes the two meet", "6.0 GiB/s windowed against 11.9 GiB/s"),
    ("04_model", "latency.\n- Compare the *shape*", "by up to a factor of 2 either way"),
    ("04_model", "seconds, **echo** method: half of each round", 'sends a small "ready" message'),
    ("04_model", "<no such text>", "Hockney"),
    ("04_model", "<no such text>", "the largest size\ntheir code measures"),
    ("04_model", "<no such text>", "MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE"),
    # the eager limit has two causes that coincide at 8 KiB (the cell and the CMA threshold)
    ("04_model", "one setting decides both", "the **smaller** of the two settings"),
    ("04_model", "is what fits in one cell of MPICH's shared-memory\nqueue, so", "*and* is below"),
    ("04_model", "MPIR_CVAR_CH4_IPC_CMA_ENABLE", "MPIR_CVAR_CH4_CMA_ENABLE"),
    ("05_contention", "6.2 KiB here", "14.2 KiB here"),
    ("05_contention", "ranks alternate between nodes and every pair stays", "multiple of the"),
    ("05_contention", "np.sum(nbytes / rows[p][0])", "p * nbytes / rows[p][1]"),
    ("05_contention", "measured gain is usually **smaller** than the model's:", "gain_with_ack"),
    ("05_contention", "measure many pair counts, not two", "--mode pairwise --np N"),
    ("05_contention", "<no such text>", "exit skew"),
    ("05_contention", "<no such text>", "LogGP"),
    # blocking against non-blocking: a rank test on repeated runs, not one run by eye
    ("02_timing", "within 5 % counts as the same", "notebook.compare_runs("),
    # 03 Part A counts each iteration once: the starting rank's round trip, not the larger of
    # two readings half a round trip apart (which counts a stall on the way back twice)
    ("03_variability", "d = describe(raw[nbytes])", "stats.round_trips(raw[nbytes])"),
    ("03_variability", "describe(stats.max_across_ranks(raw[nbytes]))", "paired by index"),
    ("03_variability", "same round trip, started and stopped at slightly", "half a round trip"),
    # the null model of 05 comes with its interval within the run, and says that is all it is
    ("05_contention", "<no such text>", "stats.null_median_interval("),
    # 05's aggregation is modelled with the alpha and beta of the calls the batches make
    ("05_contention", "<no such text>", 'agg["alpha_s"], agg["beta_s_per_byte"]'),
    # 02's "flat until" is read against the small sizes' median, not the 1-byte reading alone
    ("02_timing", "t_s > 2 * t_s[0]", "np.median(t_s[nbytes <= 64])"),
    # a run's interval is labelled as that run's
    ("02_timing", 'f"(95% CI {lo', "this run's 95% CI"),
]


@pytest.mark.parametrize("name,wrong,right", CORRECTIONS, ids=lambda v: str(v)[:30])
def test_a_corrected_statement_stays_corrected(name, wrong, right):
    text = _text(name)
    assert wrong not in text and right in text


def test_every_mark_scheme_has_a_model_answer_and_half_point_rules():
    import re

    for nb in sorted(SOURCE.iterdir()):
        for scheme in re.findall(
            r"=== BEGIN MARK SCHEME ===(.*?)=== END MARK SCHEME ===", _text(nb.name), re.S
        ):
            assert "Model answer" in scheme, (nb.name, scheme[:80])
            assert re.search(r"[Hh]alf (a )?points?", scheme), (nb.name, scheme[:80])
