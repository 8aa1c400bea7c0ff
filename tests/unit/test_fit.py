"""Claims about `pingpong-lab fit` (pingpong_lab.fitcli): output and bad-input handling."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from pingpong_lab.analysis.synthetic import synthetic_sweep, write_sweep_csv
from pingpong_lab.apps import fit

ALPHA, BETA = 1.5e-6, 1.0 / (8 * 2**30)


@pytest.fixture(scope="module")
def line_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("fit") / "line.csv"
    return write_sweep_csv(synthetic_sweep(ALPHA, BETA), path)


@pytest.fixture(scope="module")
def jump_csv(tmp_path_factory):
    sweep = synthetic_sweep(
        ALPHA, BETA, noise="gaussian", reps=30, seed=2, breakpoint=65536, alpha2=20e-6
    )
    return write_sweep_csv(sweep, tmp_path_factory.mktemp("fit") / "jump.csv")


def _run(capsys, *argv):
    code = fit.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_text_output_reports_alpha_beta_bandwidth_r2_and_n_half(capsys, line_csv):
    code, out, err = _run(capsys, line_csv)
    assert code == 0 and err == ""
    assert "alpha:      1.5e-06 s (1.5 us)" in out
    assert "beta:       1.164e-10 s/byte" in out
    assert "= 8 GiB/s" in out and "Mbit/s" in out
    assert "R^2:        1.000000" in out
    assert "n_1/2:      1.288e+04 bytes" in out
    assert "weighted (relative error)" in out
    assert "headline:   single line over all sizes: one line fits all sizes" in out
    assert "WARNING" not in out and "times:" not in out


def test_json_output_is_one_object_with_the_fit(capsys, line_csv):
    code, out, _ = _run(capsys, line_csv, "--json")
    assert code == 0 and out.count("\n") == 1
    result = json.loads(out)
    assert result["alpha_s"] == pytest.approx(ALPHA, rel=1e-9)
    assert result["beta_s_per_byte"] == pytest.approx(BETA, rel=1e-9)
    assert result["bandwidth_Bps"] == pytest.approx(8 * 2**30, rel=1e-9)
    assert result["n_half_bytes"] == pytest.approx(ALPHA / BETA, rel=1e-9)
    assert result["r2"] == pytest.approx(1.0) and result["method"] == "weighted"
    assert "breakpoint_bytes" not in result


def test_ols_flag_selects_plain_least_squares(capsys, line_csv):
    _, out, _ = _run(capsys, line_csv, "--json", "--ols")
    assert json.loads(out)["method"] == "ols"
    _, text, _ = _run(capsys, line_csv, "--ols")
    assert "method:     OLS" in text


def test_piecewise_json_reports_the_breakpoint_and_both_segments(capsys, jump_csv):
    code, out, _ = _run(capsys, jump_csv, "--piecewise", "--json")
    result = json.loads(out)
    assert code == 0
    assert result["breakpoint_bytes"] == 65536 and result["two_segments_better"] is True
    lower, upper = result["segments"]
    assert lower["from_bytes"] == 1 and lower["to_bytes"] == 32768
    assert upper["from_bytes"] == 65536 and upper["to_bytes"] == 2**24
    assert lower["alpha_s"] == pytest.approx(ALPHA, rel=0.05)
    assert upper["alpha_s"] == pytest.approx(20e-6, rel=0.1)


def test_piecewise_text_names_the_breakpoint(capsys, jump_csv):
    _, out, _ = _run(capsys, jump_csv, "--piecewise")
    assert "breakpoint: 65536 bytes (two segments better: yes" in out
    assert "headline:   piecewise fit, 2 lines (break at 64 KiB): 2 lines fit better" in out


def test_column_option_fits_another_time_column(capsys, line_csv):
    _, out, _ = _run(capsys, line_csv, "--json", "--column", "t_min_s")
    assert json.loads(out)["column"] == "t_min_s"


def test_negative_ols_alpha_is_flagged_and_json_stays_valid(capsys, tmp_path):
    sweep = synthetic_sweep(ALPHA, BETA, sizes=2 ** np.arange(27), noise="gaussian", reps=1, seed=1)
    path = write_sweep_csv(sweep, tmp_path / "neg.csv")
    code, out, _ = _run(capsys, path, "--ols")
    assert code == 0
    assert "WARNING: implausible single-line fit (not quoted as results), because:" in out
    assert "  - alpha = -" in out and "plain least-squares" in out
    # the line's numbers stay for diagnosis, indented under the warning ...
    assert "implausible single-line fit, for diagnosis only:" in out
    assert "  alpha:      -" in out
    # ... and the headline is read another way, and says which
    (method,) = [line for line in out.splitlines() if line.startswith("headline:")]
    assert "one line does not fit all sizes (alpha = -" in method
    (alpha,) = [line for line in out.splitlines() if line.startswith("alpha:")]
    assert not alpha.startswith("alpha:      -")
    _, out, _ = _run(capsys, path, "--ols", "--json")
    result = json.loads(out)
    assert result["n_half_bytes"] is None  # NaN becomes null, not invalid JSON
    assert result["plausible"] is False and result["problems"][0].startswith("alpha = -")
    assert result["headline"]["alpha_s"] > 0 and result["headline"]["method"] != "single line"


def test_the_headline_of_a_step_and_a_cliff_is_read_from_three_segments(capsys, tmp_path):
    sizes = 2 ** np.arange(27)
    t = np.where(sizes < 8192, 1.2e-6 + sizes / 7.5e9, 3.5e-6 + sizes / 16e9)
    t = np.where(sizes > 4 << 20, 3.5e-6 + (4 << 20) / 16e9 + (sizes - (4 << 20)) / 6.4e9, t)
    t = t * (1 + 0.02 * np.random.default_rng(3).standard_normal(sizes.size))
    path = tmp_path / "shm.csv"
    path.write_text("nbytes,t_median_s\n" + "".join(f"{n},{x:.6e}\n" for n, x in zip(sizes, t)))
    code, out, _ = _run(capsys, path, "--piecewise")
    assert code == 0
    assert "WARNING: implausible single-line fit" in out  # R^2 below 0.9
    assert "headline:   piecewise fit, 3 lines (breaks at 8 KiB, " in out
    assert "alpha:      1.2" in out and "latency from 1 .. 4096 bytes" in out
    assert "breakpoints: 8192, " in out and "(3 lines better than one; BIC " in out
    assert [ln.split(":")[0] for ln in out.splitlines() if ln.startswith("  below ")] == [
        "  below 8192"
    ]
    _, out, _ = _run(capsys, path, "--json")
    result = json.loads(out)
    assert result["headline"]["method"] == "piecewise"
    assert result["headline"]["bandwidth_Bps"] == pytest.approx(6.4e9, rel=0.1)
    assert result["times"] == "column" and "rounds" not in result


def test_a_sweep_in_interleaved_rounds_is_read_from_its_quieter_rounds(capsys, tmp_path):
    from pingpong_lab.analysis import stats
    from pingpong_lab.data import results

    sweep = synthetic_sweep(ALPHA, BETA, noise="gaussian", reps=40, seed=5)
    raw, rows = {}, []
    for n, samples in zip(sweep.nbytes, sweep.samples, strict=True):
        a = np.hstack([b * f for b, f in zip(np.split(samples, 4), (2.0, 1.0, 1.0, 1.0))])
        raw[int(n)] = a[None, :]
        rows.append(stats.summary_row(int(n), a.size, 0, a, rounds=4, stop_reason="fixed"))
    info = {"kernel": "c", "interleaved": True, "rounds": 4}
    path = results.write_results(tmp_path / "rounds.csv", rows, info, raw)
    code, out, _ = _run(capsys, path)
    assert code == 0
    assert "times:      median of 4 interleaved rounds per size" in out
    (alpha,) = [float(ln.split()[1]) for ln in out.splitlines() if ln.startswith("alpha:")]
    assert alpha == pytest.approx(ALPHA, rel=0.05)  # not 2x: the slowed round does not count
    assert re.search(r"rounds:     latency 1\.\d+ µs \.\. [23]\.\d+ µs in 4 rounds \(spread ", out)
    assert "interval:   latency n/a (a 95 % interval needs 6 rounds" in out
    _, out, _ = _run(capsys, path, "--json")
    result = json.loads(out)
    assert result["rounds"]["rounds"] == 4
    assert result["rounds"]["latency_max_s"] == pytest.approx(2 * ALPHA, rel=0.05)
    _, out, _ = _run(capsys, path, "--json", "--column", "t_median_s")  # the column as it is
    result = json.loads(out)
    assert result["times"] == "column"
    assert result["headline"]["alpha_s"] == pytest.approx(alpha, rel=0.05)  # a quarter slowed


def test_a_plausible_fit_carries_no_warning(capsys, line_csv, jump_csv):
    _, out, _ = _run(capsys, line_csv)
    assert "WARNING" not in out and "alpha:      " in out
    _, out, _ = _run(capsys, jump_csv, "--piecewise", "--json")
    result = json.loads(out)
    assert result["plausible"] is True and result["problems"] == []
    assert result["segment_problems"] == []


def test_an_implausible_segment_is_flagged_under_the_breakpoint(capsys, tmp_path):
    sweep = synthetic_sweep(ALPHA, BETA, breakpoint=65536, beta2=4 * BETA, noise="gaussian")
    path = write_sweep_csv(sweep, tmp_path / "steeper.csv")
    _, out, _ = _run(capsys, path, "--piecewise")
    assert "WARNING: implausible segments" in out
    assert "  - upper segment: alpha = -" in out
    flagged = [line for line in out.splitlines() if line.endswith("(implausible)")]
    assert len(flagged) == 1 and flagged[0].startswith("  from ")
    _, out, _ = _run(capsys, path, "--piecewise", "--json")
    assert json.loads(out)["segment_problems"][0].startswith("upper segment: alpha = -")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty (no header line)"),
        ("nbytes,t_median_s\n", "no data rows"),
        ("nbytes,t_median_s\n8,1e-6\n", "only one data row"),
        ("nbytes,t_median_s\n8,1e-6\n16,2e-6,9\n", "malformed line 3"),
        ("nbytes,t_median_s\n8,1e-6\n16,slow\n", "malformed line 3"),
        ("nbytes,t_max_s\n8,1e-6\n16,2e-6\n", "no column 't_median_s'"),
        ("nbytes,t_median_s\n-8,1e-6\n16,2e-6\n", "nbytes must be positive"),
    ],
)
def test_bad_csv_gives_one_error_line_and_exit_status_2(capsys, tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    code, out, err = _run(capsys, path)
    assert code == 2 and out == ""
    assert err.startswith("pingpong-lab fit: error: ") and err.count("\n") == 1
    assert message in err


def test_missing_file_gives_one_error_line(capsys, tmp_path):
    code, _, err = _run(capsys, tmp_path / "missing.csv")
    assert code == 2
    assert err == f"pingpong-lab fit: error: no such file: {tmp_path / 'missing.csv'}\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [([], "required: csv"), (["x.csv", "--bogus"], "unrecognized arguments: --bogus")],
)
def test_usage_errors_give_one_line_and_exit_status_2(capsys, argv, message):
    code, _, err = _run(capsys, *argv)
    assert code == 2 and err.count("\n") == 1 and message in err


def test_piecewise_with_too_few_sizes_is_an_input_error(capsys, tmp_path):
    path = tmp_path / "short.csv"
    path.write_text("nbytes,t_median_s\n1,1e-6\n2,1e-6\n4,1e-6\n8,1.1e-6\n")
    code, _, err = _run(capsys, path, "--piecewise")
    assert code == 2 and "piecewise fit needs at least 6 distinct sizes" in err


def test_help_exits_0(capsys):
    code, out, _ = _run(capsys, "--help")
    assert code == 0 and out.startswith("usage: pingpong-lab fit")


def test_module_runs_as_a_script_without_traceback(line_csv, tmp_path):
    ok = subprocess.run(
        [sys.executable, "-m", "pingpong_lab", "fit", str(line_csv), "--json"],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0 and json.loads(ok.stdout)["method"] == "weighted"
    bad = subprocess.run(
        [sys.executable, "-m", "pingpong_lab", "fit", str(tmp_path / "nope.csv")],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.startswith("pingpong-lab fit: error: no such file")


def test_a_sweep_with_thousands_of_round_trips_shows_its_latency_floor_beside_alpha(
    capsys, tmp_path
):
    from pingpong_lab.analysis import headline, stats
    from pingpong_lab.data import results

    gen = np.random.default_rng(3)
    raw, rows = {}, []
    for n in 2 ** np.arange(0, 25, 2):
        reps = 6000 if n <= 1024 else 50
        slow = np.where(gen.random(reps) < 0.7, 1.4, 1.0)  # mostly the slow placement
        a = (ALPHA + BETA * n) * slow * (1 + 0.01 * np.abs(gen.standard_normal(reps)))
        raw[int(n)] = a[None, :]
        rows.append(stats.summary_row(int(n), a.size, 0, a, stop_reason="fixed"))
    path = results.write_results(tmp_path / "floor.csv", rows, {"kernel": "c"}, raw)
    code, out, _ = _run(capsys, path)
    assert code == 0 and "floor:      1.5" in out and "(best case, a bound" in out
    assert "note:       Best case: the latency floor is 1.5" in out and "per size" in out
    _, out, _ = _run(capsys, path, "--json")
    h = json.loads(out)["headline"]
    assert h["alpha_floor_s"] == pytest.approx(ALPHA, rel=0.02)
    assert h["alpha_s"] > 1.3 * ALPHA  # the typical message: mostly the slow placement
    assert headline.FLOOR_MIN_SAMPLES <= 6000
