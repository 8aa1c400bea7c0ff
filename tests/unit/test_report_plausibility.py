"""Claims about the report's headline: always a latency and a bandwidth, with how they were read;
an implausible single line is a note, never the headline."""

import re

import numpy as np
import pytest

from pingpong_lab.analysis import headline, model, stats
from pingpong_lab.analysis.synthetic import synthetic_sweep, write_sweep_csv
from pingpong_lab.apps import report
from pingpong_lab.apps.report.numbers import analyse
from pingpong_lab.apps.report.pages import headline_rows, sections, to_markdown
from pingpong_lab.data import results

ALPHA, BETA = 1.5e-6, 1.0 / (8 * 2**30)


def _headline(tmp_path, path):
    sweeps = {"c_blocking": report.load_sweep(path)}
    analysis = analyse(sweeps)
    text = to_markdown(sections(sweeps, analysis, [], {"mode": "test"}), "report")
    return analysis, text


def test_a_single_protocol_step_is_read_from_the_piecewise_segments(tmp_path):
    sweep = synthetic_sweep(ALPHA, BETA, noise="gaussian", reps=30, breakpoint=65536, alpha2=2e-5)
    analysis, text = _headline(tmp_path, write_sweep_csv(sweep, tmp_path / "c_blocking.csv"))
    n = analysis["numbers"]
    pw = model.fit_piecewise(sweep.nbytes, sweep.medians)
    assert n["headline_method"] == "piecewise" and n["alpha_s"] == pytest.approx(pw.lower.alpha_s)
    # the bandwidth from the largest four sizes, the same sizes whatever BIC chose
    assert n["bandwidth_Bps"] == pytest.approx(pw.upper.bandwidth_Bps, rel=0.03)
    big = sweep.nbytes[-headline.BANDWIDTH_SIZES :]
    assert n["bandwidth_bytes"] == [int(big[0]), int(big[-1])]
    line = model.fit_linear(big, sweep.medians[-headline.BANDWIDTH_SIZES :])
    assert n["bandwidth_Bps"] == pytest.approx(line.bandwidth_Bps)
    assert n["latency_bytes"] == [1, 32768] and n["breakpoint_bytes"] == 65536
    assert "single_line_problems" not in n and "WARNING" not in text
    assert "| method (C blocking) | piecewise fit, 2 lines (break at 64 KiB) |" in text
    assert "| one line over all sizes | R^2 = " in text and "(fits, but more lines" in text


def test_an_implausible_single_line_is_a_note_and_the_headline_still_has_every_number(tmp_path):
    # 4x steeper from 64 KiB on: one line misses (R^2 0.68), the upper segment's alpha < 0
    sweep = synthetic_sweep(ALPHA, BETA, breakpoint=65536, beta2=4 * BETA, noise="gaussian")
    analysis, text = _headline(tmp_path, write_sweep_csv(sweep, tmp_path / "c_blocking.csv"))
    n = analysis["numbers"]
    for key in ("alpha_s", "beta_s_per_byte", "bandwidth_Bps", "n_half_bytes", "r2"):
        assert np.isfinite(n[key]) and n[key] > 0, key
    assert n["alpha_s"] == pytest.approx(ALPHA, rel=0.05)
    assert n["bandwidth_Bps"] == pytest.approx(1 / (4 * BETA), rel=0.05)
    assert n["single_line_problems"][0].startswith("R^2 = ")
    assert "One line over all sizes is not used: R^2 = " in text
    assert "intercept is no latency" in text
    assert "(not used: R^2 = 0.6" in text and "implausible fit" not in text


def test_a_step_and_a_cliff_give_three_segments_in_the_headline(tmp_path):
    sizes = 2 ** np.arange(27)
    t = np.where(sizes < 8192, 1.2e-6 + sizes / 7.5e9, 3.5e-6 + sizes / 16e9)
    t = np.where(sizes > 4 << 20, 3.5e-6 + (4 << 20) / 16e9 + (sizes - (4 << 20)) / 6.4e9, t)
    t = t * (1 + 0.02 * np.random.default_rng(3).standard_normal(sizes.size))
    rows = [stats.summary_row(int(n), 1, 0, [tn]) for n, tn in zip(sizes, t, strict=True)]
    path = results.write_results(tmp_path / "c_blocking.csv", rows, {"kernel": "c"})
    analysis, text = _headline(tmp_path, path)
    n = analysis["numbers"]
    assert n["headline_method"] == "piecewise" and n["piecewise_lines"] == 3
    assert [g["from_bytes"] for g in n["segments"]][:2] == [1, 8192]
    assert n["alpha_s"] == pytest.approx(1.2e-6, rel=0.05)
    assert n["bandwidth_Bps"] == pytest.approx(6.4e9, rel=0.1)
    assert (
        "| piecewise breakpoints | 8 KiB, " in text and "(3 lines better than one by BIC)" in text
    )


def _interleaved_csv(tmp_path, slow_rounds=(1,), rounds=4):
    """A C blocking sweep in `rounds` interleaved rounds; `slow_rounds` ran 2x slower."""
    sweep = synthetic_sweep(ALPHA, BETA, sizes=2 ** np.arange(25), noise="gaussian", reps=40)
    raw, rows = {}, []
    for n, samples in zip(sweep.nbytes, sweep.samples, strict=True):
        blocks = np.split(samples, rounds)
        a = np.hstack([b * (2.0 if r in slow_rounds else 1.0) for r, b in enumerate(blocks)])
        raw[int(n)] = a[None, :]
        rows.append(stats.summary_row(int(n), a.size, 0, a, rounds=rounds, stop_reason="fixed"))
    info = {"kernel": "c", "mode": "blocking", "interleaved": True, "rounds": rounds}
    return results.write_results(tmp_path / "c_blocking.csv", rows, info, raw)


def test_interleaved_rounds_give_the_quieter_rounds_and_the_spread_between_rounds(tmp_path):
    analysis, text = _headline(tmp_path, _interleaved_csv(tmp_path))
    n = analysis["numbers"]
    assert n["headline_method"] == "single line"
    assert n["headline_times"].startswith("median of 4 interleaved rounds")
    assert n["alpha_s"] == pytest.approx(ALPHA, rel=0.05)  # the pooled medians are slower
    assert n["rounds"]["rounds"] == 4
    assert n["rounds"]["latency_max_s"] == pytest.approx(2 * n["rounds"]["latency_min_s"], rel=0.1)
    assert re.search(r"\| latency per round \| 1\.\d+ µs \.\. 3\.\d+ µs in 4 rounds \(spread", text)
    assert "| latency: this run's interval | n/a (a 95 % interval needs 6 rounds" in text
    assert "| bandwidth per round | " in text


def test_headline_rows_without_a_headline_say_why():
    assert headline_rows({}) == [
        ["latency and bandwidth", "n/a (no C blocking sweep they could be read from)"]
    ]


def test_headline_rows_name_the_method_the_numbers_and_their_sizes():
    sizes = 2 ** np.arange(25)
    h = headline.choose(sizes, ALPHA + BETA * sizes, min_r2=1.1)  # force the regime reading
    from pingpong_lab.apps.report.numbers import headline_numbers

    n = headline_numbers({"headline": h, "x": sizes, "t": ALPHA + BETA * sizes, "per_round": None,
                          "times": "median of all samples per size"})  # fmt: skip
    rows = dict((q, v) for q, v in headline_rows(n))
    assert rows["method (C blocking)"] == "latency and bandwidth regimes (Hockney)"
    assert rows["alpha (latency, typical: from 1 B .. 1 KiB)"] == "1.5 µs"
    assert rows["bandwidth 1/beta (from 2 MiB .. 16 MiB)"] == "8 GiB/s (68.7 Gbit/s)"
    assert rows["n_1/2 = alpha/beta"] == "12.6 KiB"
    assert rows["latency per round"] == "n/a (not measured in interleaved rounds)"
    assert rows["one line over all sizes"].startswith("R^2 = 1.0000 (not used: R^2 = 1 is below")


def test_other_work_beside_the_ranks_is_a_busy_machine_note():
    from pingpong_lab.apps.report.sweeps import busy_note, machine_load

    quiet = {"running": 0.0, "load": [0.4, 0.5, 0.6]}
    busy = {"running": 2.0, "load": [3.5, 2.0, 1.0]}
    assert busy_note(quiet, quiet, ranks=2, cores=2) is None
    assert busy_note(quiet, quiet, ranks=2, cores=4) is None
    note = busy_note(quiet, busy, ranks=2, cores=2)
    assert note.startswith("BUSY MACHINE: 2 other process(es) were running beside the 2 ranks")
    assert "1-minute load before 0.40, after 3.50" in note
    assert busy_note({}, {}, ranks=2, cores=2) is None  # no /proc/loadavg: nothing to say
    now = machine_load(samples=2, interval_s=0.0)
    assert now == {} or (now["running"] >= 0 and len(now["load"]) == 3)


def test_the_busy_note_leads_the_headline_notes(tmp_path):
    sweep = synthetic_sweep(ALPHA, BETA, noise="gaussian", reps=30)
    (tmp_path / "data").mkdir()
    path = write_sweep_csv(sweep, tmp_path / "data" / "c_blocking.csv")
    sweeps = {"c_blocking": report.load_sweep(path)}
    meta = {"mode": "test", "busy": "BUSY MACHINE: test", "machine_load": {"before": {
        "running": 2.0, "load": [2.5, 1.0, 1.0]}}}  # fmt: skip
    report.write_report(sweeps, tmp_path, meta)
    md = (tmp_path / "summary.md").read_text()
    assert md.index("BUSY MACHINE: test") < md.index("| method (C blocking)")
    assert "before measuring 2 other process(es) running, 1-minute load 2.50" in md


def test_headline_rows_give_the_typical_alpha_and_the_floor_beside_it_as_a_bound():
    from pingpong_lab.apps.report.numbers import headline_numbers

    sizes = 2 ** np.arange(25)
    t = ALPHA + BETA * sizes
    floor = {int(n): (0.8 * tn, 9000) for n, tn in zip(sizes, t, strict=True) if n <= 64}
    h = headline.choose(sizes, t, min_r2=1.1, floor=floor)
    n = headline_numbers({"headline": h, "x": sizes, "t": t, "per_round": None,
                          "times": "median of all samples per size"})  # fmt: skip
    assert n["alpha_s"] == pytest.approx(ALPHA) and n["alpha_floor_s"] == pytest.approx(0.8 * ALPHA)
    rows = dict((q, v) for q, v in headline_rows(n))
    assert rows["alpha (latency, typical: from 1 B .. 1 KiB)"] == "1.5 µs"
    floor_row = (
        "latency floor (best case, a bound: from 1 B .. 64 B, the fastest 0.1 % of each size's "
        "round trips)"
    )
    assert rows[floor_row] == "1.2 µs"
