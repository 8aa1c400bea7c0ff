"""Claims about kernels_c/linreg.c, the C regression challenge reference."""

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pingpong_lab.synthetic import synthetic_sweep, write_sweep_csv

SOURCE = Path(__file__).resolve().parents[1] / "kernels_c" / "linreg.c"
CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler (cc)")

OUTPUT = re.compile(r"^alpha_s=(\S+) beta_s_per_byte=(\S+)\n$")


@pytest.fixture(scope="module")
def linreg(tmp_path_factory):
    exe = tmp_path_factory.mktemp("linreg") / "linreg"
    build = subprocess.run(
        [CC, "-O2", "-Wall", "-Wextra", "-o", str(exe), str(SOURCE), "-lm"],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    assert build.stderr == "", f"compiler warnings:\n{build.stderr}"
    return exe


def _run(exe, *args):
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True)


def _parse(stdout):
    m = OUTPUT.match(stdout)
    assert m, f"unexpected output {stdout!r}"
    return float(m.group(1)), float(m.group(2))


@pytest.fixture(scope="module")
def noisy_csv(tmp_path_factory):
    sweep = synthetic_sweep(
        1.2e-6, 1 / (6 * 2**30), sizes=2 ** np.arange(27), noise="heavy", reps=15, seed=9
    )
    return write_sweep_csv(sweep, tmp_path_factory.mktemp("data") / "sweep.csv"), sweep


@pytest.mark.parametrize("weighted", [False, True])
def test_linreg_agrees_with_numpy_polyfit_to_1e9_relative(linreg, noisy_csv, weighted):
    path, sweep = noisy_csv
    args = ["--weighted", path] if weighted else [path]
    result = _run(linreg, *args)
    assert result.returncode == 0, result.stderr
    alpha, beta = _parse(result.stdout)
    w = 1 / sweep.medians if weighted else None
    beta_np, alpha_np = np.polyfit(sweep.nbytes, sweep.medians, 1, w=w)
    assert alpha == pytest.approx(alpha_np, rel=1e-9)
    assert beta == pytest.approx(beta_np, rel=1e-9)


def test_linreg_fits_the_column_named_by_option(linreg, noisy_csv):
    path, sweep = noisy_csv
    alpha, beta = _parse(_run(linreg, "--column", "t_min_s", path).stdout)
    beta_np, alpha_np = np.polyfit(sweep.nbytes, sweep.samples.min(axis=1), 1)
    assert (alpha, beta) == pytest.approx((alpha_np, beta_np), rel=1e-9)


def test_linreg_finds_columns_by_header_name_in_any_order(linreg, tmp_path):
    path = tmp_path / "reordered.csv"
    path.write_text("# comment\nt_median_s,kernel,nbytes\n3e-6,c,1\n# mid\n5e-6,c,2\n7e-6,c,3\n")
    alpha, beta = _parse(_run(linreg, path).stdout)
    assert alpha == pytest.approx(1e-6, rel=1e-12) and beta == pytest.approx(2e-6, rel=1e-12)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty (no header line)"),
        ("nbytes,t_median_s\n8,1e-6\n", "1 data row(s); a fit needs at least 2"),
        ("nbytes,t_median_s\n8,1e-6\n16,2e-6,5\n", "malformed line 3: expected 2 fields"),
        ("nbytes,t_median_s\n8,1e-6\n16,abc\n", "malformed line 3: t_median_s='abc'"),
        ("nbytes,t_max_s\n8,1e-6\n16,2e-6\n", "no 't_median_s' column"),
        ("size,t_median_s\n8,1e-6\n16,2e-6\n", "no 'nbytes' column"),
        ("nbytes,t_median_s\n0,1e-6\n16,2e-6\n", "nbytes must be positive"),
        ("nbytes,t_median_s\n8,1e-6\n8,2e-6\n", "all message sizes are equal"),
    ],
)
def test_linreg_rejects_bad_input_with_one_error_line(linreg, tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    result = _run(linreg, path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("linreg: error: ") and result.stderr.count("\n") == 1
    assert message in result.stderr


def test_linreg_reports_a_missing_file_and_bad_options(linreg, tmp_path):
    missing = _run(linreg, tmp_path / "none.csv")
    assert missing.returncode == 2 and "cannot open" in missing.stderr
    assert "no input file" in _run(linreg).stderr
    assert "unknown option '--fast'" in _run(linreg, "--fast", "x.csv").stderr
