"""The datasets notebooks 01 and 02 ship as fallbacks have the contract's shapes and say what
they are (handoff names "02_sweep", "02_samples", "01_deadlock")."""

from __future__ import annotations

import numpy as np
import pytest

from pingpong_lab.course import handoff, notebook


def test_the_shipped_sweep_is_a_median_per_size_with_its_interval():
    sweep = handoff.shipped("02_sweep")
    n = sweep["nbytes"]
    assert n.dtype.kind == "i" and np.all(np.diff(n) > 0)
    for key in ("t_median_s", "ci_lo_s", "ci_hi_s"):
        assert sweep[key].shape == n.shape and np.all(sweep[key] > 0), key
    assert np.all(sweep["ci_lo_s"] <= sweep["t_median_s"])
    assert np.all(sweep["t_median_s"] <= sweep["ci_hi_s"])
    assert sweep["method"] in ("echo", "OSU") and sweep["kernel"] and sweep["about"]


def test_the_shipped_samples_are_thousands_of_round_trips_per_small_size_over_whole_runs():
    samples = handoff.shipped("02_samples")
    by_size = notebook.samples_by_size(samples)
    assert list(by_size) == [int(b) for b in samples["nbytes"]] and samples["about"]
    for nbytes, a in by_size.items():
        assert a.shape[0] >= 2 and a.shape[1] >= 10, nbytes
        assert np.all(np.isfinite(a)) and np.all(a > 0), nbytes
    assert by_size[int(samples["nbytes"][0])].shape[1] >= 2000  # a latency-bound size


def test_the_shipped_deadlock_sizes_are_where_a_head_to_head_exchange_hung():
    found = handoff.shipped("01_deadlock")
    tried = found["sizes_tried"]
    first = int(found["first_deadlock_bytes"])
    assert tried.dtype.kind == "i" and (first == -1 or first == tried[-1])
    assert int(found["ssend_first_deadlock_bytes"]) == int(tried[0]) and found["about"]


def test_the_shipped_fit_is_the_fit_of_the_shipped_sweep():
    """04_fit and 02_sweep are one learner's results: 05 predicts from the fit of 02's sweep."""
    from pingpong_lab.course import shipdata

    shipped, expected = handoff.shipped("04_fit"), shipdata.fit_of(handoff.shipped("02_sweep"))
    for key in ("alpha_s", "beta_s_per_byte"):
        assert shipped[key] == pytest.approx(expected[key], rel=1e-6)
    assert int(shipped["breakpoint_bytes"]) == expected["breakpoint_bytes"]
    assert shipped["kernel"] == handoff.shipped("02_sweep")["kernel"]


def test_the_mark_scheme_of_05_quotes_the_half_performance_length_of_the_shipped_fit():
    import json
    import re
    from pathlib import Path

    fit = handoff.shipped("04_fit")
    n_half_kib = float(fit["alpha_s"]) / float(fit["beta_s_per_byte"]) / 1024
    source = Path(__file__).resolve().parents[2] / "course/source/05_contention"
    cells = json.loads((source / "05_contention.ipynb").read_text())["cells"]
    text = "".join("".join(c["source"]) for c in cells)
    quoted = re.search(r"against ([\d.]+) KiB here", text)
    assert quoted and float(quoted.group(1)) == pytest.approx(n_half_kib, abs=0.05)


def test_the_shipped_sweep_and_samples_are_the_same_round_trips():
    """02_sweep's medians are those of 02_samples (one run of notebook 02), so 03's analysis and
    04's fit read one machine at one time."""
    from pingpong_lab.course import shipdata

    gap = shipdata.disagreement(handoff.shipped("02_sweep"), handoff.shipped("02_samples"))
    assert gap < 0.1
    sweep, samples = handoff.shipped("02_sweep"), handoff.shipped("02_samples")
    assert sweep["about"] == samples["about"]


def _run(folder, samples_scale=1.0, seed=0):
    """A run's 02_sweep and 02_samples as notebook 02 saves them (synthetic round trips); with
    samples_scale the samples come from another, slower run."""
    rng = np.random.default_rng(seed)
    nbytes = np.array([1 << k for k in range(0, 24, 3)])
    samples = [rng.lognormal(np.log(1e-6 + n * 1e-10), 0.1, size=(2, 300)) for n in nbytes]

    def rows(scale):
        return [{"nbytes": int(n), "reps": 300, "one_way": float(np.median(s.max(axis=0))),
                 "samples": s * scale} for n, s in zip(nbytes, samples)]  # fmt: skip

    handoff.save("02_sweep", directory=folder, **notebook.sweep_result(rows(1.0)))
    handoff.save("02_samples", directory=folder, **notebook.samples_result(rows(samples_scale)))


def test_one_runs_results_are_shipped_together_and_two_runs_are_refused(tmp_path):
    from pingpong_lab.course import shipdata

    _run(tmp_path / "one")
    out = tmp_path / "shipped"
    paths = shipdata.ship_run(tmp_path / "one", "a test run", directory=out)
    assert {p.stem for p in paths} == {"02_sweep", "02_samples", "04_fit"}
    assert handoff.read(out, "02_samples")["about"] == "a test run"
    _run(tmp_path / "two", samples_scale=3.0)  # samples three times the sweep's medians
    with pytest.raises(ValueError, match="not one run of notebook 02"):
        shipdata.ship_run(tmp_path / "two", "mixed", directory=out)
