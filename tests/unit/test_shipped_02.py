"""The datasets notebooks 01 and 02 ship as fallbacks have the contract's shapes and say what
they are (handoff names "02_sweep", "02_samples", "01_deadlock")."""

from __future__ import annotations

import numpy as np

from pingpong_lab.course import handoff, notebook


def test_the_shipped_sweep_is_a_median_per_size_with_its_interval():
    sweep = handoff.shipped("02_sweep")
    n = sweep["nbytes"]
    assert n.dtype.kind == "i" and np.all(np.diff(n) > 0)
    for key in ("t_one_way_s", "ci_lo_s", "ci_hi_s"):
        assert sweep[key].shape == n.shape and np.all(sweep[key] > 0), key
    assert np.all(sweep["ci_lo_s"] <= sweep["t_one_way_s"])
    assert np.all(sweep["t_one_way_s"] <= sweep["ci_hi_s"])
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
