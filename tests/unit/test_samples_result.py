"""samples_result ("02_samples") keeps every round trip of every size, or a subsample spread
over the whole run, never only the first round trips (the end of the warm-up)."""

from __future__ import annotations

import numpy as np
import pytest

from pingpong_lab.course import handoff, notebook


def _rows(counts, ranks=2):
    """Rows as c_sweep returns them; sample j of size k is k * 1e6 + j, so it shows its place."""
    return [
        {
            "nbytes": 1 << k,
            "reps": n,
            "samples": np.vstack([k * 1e6 + np.arange(n, dtype=float)] * ranks),
        }
        for k, n in enumerate(counts)
    ]


def test_every_round_trip_of_every_size_is_kept_even_when_sizes_measured_different_counts():
    rows = _rows([5000, 120, 2500])
    result = notebook.samples_result(rows)
    assert list(result["reps"]) == [5000, 120, 2500]
    by_size = notebook.samples_by_size(result)
    for row in rows:
        np.testing.assert_array_equal(by_size[row["nbytes"]], row["samples"])


def test_a_cap_keeps_a_uniform_subsample_of_the_whole_run_not_its_first_round_trips():
    rows = _rows([10_000, 300])
    by_size = notebook.samples_by_size(notebook.samples_result(rows, cap=2000))
    big = by_size[1][0]
    assert big.size == 2000 and np.all(np.diff(big) > 0)
    assert big[0] == 0 and big[-1] == 9999  # from the first round trip to the last
    gaps = np.diff(big)
    assert gaps.max() - gaps.min() <= 1  # evenly spread
    assert by_size[2].shape == (2, 300)  # fewer than the cap: all of them


def test_the_result_saves_and_loads_through_handoff(tmp_path, capsys):
    rows = _rows([3000, 40, 700])
    handoff.save("02_samples", directory=tmp_path, **notebook.samples_result(rows))
    loaded = handoff.load("02_samples", fallback={}, directory=tmp_path)
    by_size = notebook.samples_by_size(loaded)
    assert {b: a.shape for b, a in by_size.items()} == {1: (2, 3000), 2: (2, 40), 4: (2, 700)}


def test_the_older_rectangular_layout_still_reads():
    old = {"nbytes": np.array([8, 16]), "samples_s": np.ones((2, 2, 50))}
    assert {b: a.shape for b, a in notebook.samples_by_size(old).items()} == {
        8: (2, 50),
        16: (2, 50),
    }


def test_counts_that_do_not_split_the_samples_are_refused():
    bad = {"nbytes": np.array([8, 16]), "reps": np.array([10, 10]), "samples_s": np.ones((2, 25))}
    with pytest.raises(ValueError, match="do not split"):
        notebook.samples_by_size(bad)


def test_samples_by_size_can_cap_each_size_with_an_even_spread_over_the_run():
    from pingpong_lab.course import notebook

    ramp = np.arange(2 * 1000, dtype=float).reshape(2, 1000)
    result = {"nbytes": [8, 16], "reps": [1000, 10], "samples_s": np.hstack([ramp, ramp[:, :10]])}
    capped = notebook.samples_by_size(result, cap=100)
    assert capped[8].shape == (2, 100) and capped[16].shape == (2, 10)
    assert capped[8][0, 0] == 0 and capped[8][0, -1] == 999  # first to last, not the first 100
    assert notebook.samples_by_size(result)[8].shape == (2, 1000)
