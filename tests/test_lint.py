"""Code quality gates: ruff on the Python, no compiler warnings in C (-Wall -Wextra)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT


def _ruff() -> str:
    found = Path(sys.executable).with_name("ruff")
    return str(found) if found.exists() else (shutil.which("ruff") or "")


def test_the_python_passes_ruff():
    if not _ruff():
        pytest.skip("ruff is not installed")
    proc = subprocess.run(
        [_ruff(), "check", "pingpong_lab", "tests", "course/nbgrader_config.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "sources",
    [
        ["pp_util.c", "pp_build_info.c", "pp_blocking.c", "pp_nonblocking.c", "pp_pairwise.c"],
        ["pp_main.c", "pp_util.c", "pp_build_info.c", "pp_blocking.c"],
    ],
)
def test_the_c_kernels_compile_without_a_single_warning(tmp_path, sources):
    from pingpong_lab import mpi_env

    kernels = ROOT / "kernels_c"
    cmd = [mpi_env.mpicc(), "-O2", "-Wall", "-Wextra", "-Werror", "-c"]
    cmd += ["-DPP_KERNEL=pp_pingpong_blocking", '-DPP_TITLE="t"']
    for src in sources:
        proc = subprocess.run(
            [*cmd, str(kernels / src), "-o", str(tmp_path / (src + ".o"))],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
