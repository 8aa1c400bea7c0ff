"""Claims about the report's headline: an implausible fit is flagged, never quoted."""

import pytest

from pingpong_lab.analysis import model
from pingpong_lab.analysis.synthetic import synthetic_sweep, write_sweep_csv
from pingpong_lab.apps import report
from pingpong_lab.apps.report.numbers import analyse
from pingpong_lab.apps.report.pages import sections, to_markdown

ALPHA, BETA = 1.5e-6, 1.0 / (8 * 2**30)


def _headline(tmp_path, sweep):
    path = write_sweep_csv(sweep, tmp_path / "c_blocking.csv")
    sweeps = {"c_blocking": report.load_sweep(path)}
    analysis = analyse(sweeps)
    text = to_markdown(sections(sweeps, analysis, [], {"mode": "test"}), "report")
    return analysis, text


def test_a_plausible_fit_is_the_headline(tmp_path):
    sweep = synthetic_sweep(ALPHA, BETA, noise="gaussian", reps=30, breakpoint=65536, alpha2=2e-5)
    analysis, text = _headline(tmp_path, sweep)
    n = analysis["numbers"]
    assert n["alpha_s"] == pytest.approx(model.fit_linear(sweep.nbytes, sweep.medians).alpha_s)
    assert "fit_problems" not in n and "segment_problems" not in n
    assert "lower_alpha_s" in n and "WARNING" not in text


def test_an_implausible_fit_is_a_warning_and_its_numbers_leave_the_headline(tmp_path):
    # 4x steeper from 64 KiB on: one line misses (R^2 0.68), the upper segment's alpha < 0
    sweep = synthetic_sweep(ALPHA, BETA, breakpoint=65536, beta2=4 * BETA, noise="gaussian")
    analysis, text = _headline(tmp_path, sweep)
    n = analysis["numbers"]
    for key in ("alpha_s", "beta_s_per_byte", "bandwidth_Bps", "n_half_bytes", "r2"):
        assert key not in n, key
    for key in ("upper_alpha_s", "upper_bandwidth_Bps"):
        assert key not in n, key
    assert n["fit_problems"][0].startswith("R^2 = ")
    assert n["segment_problems"][0].startswith("upper segment: alpha = -")
    assert "WARNING: implausible single-line fit of the C blocking sweep" in text
    assert "WARNING: implausible piecewise segments of the C blocking sweep" in text
    assert "implausible fit (see the warning)" in text
    assert n["breakpoint_bytes"] > 0  # where the protocol switches is still worth quoting
