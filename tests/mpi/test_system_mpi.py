"""`make MPI=system`: the MPI on PATH instead of the mpich wheel, and results that say so."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_VENV = ROOT / ".venv-system"


def _system_path() -> str:
    """PATH without this checkout's Python environments (the wheel's mpicc lives there)."""
    ours = (ROOT / ".venv", SYSTEM_VENV)
    keep = [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not any(Path(d).resolve().is_relative_to(v.resolve()) for v in ours)
    ]
    return os.pathsep.join(keep)


def _system_mpi() -> tuple[str | None, str | None]:
    path = _system_path()
    return shutil.which("mpicc", path=path), shutil.which("mpiexec", path=path)


@pytest.fixture(scope="module")
def system_mpi():
    """(mpicc, mpiexec) of the system MPI; Debian's MPICH is installed when root."""
    mpicc, mpiexec = _system_mpi()
    if not (mpicc and mpiexec):
        subprocess.run(["make", "-s", "system-mpi"], cwd=ROOT, capture_output=True, timeout=900)
        mpicc, mpiexec = _system_mpi()
    if not (mpicc and mpiexec):
        pytest.skip("no system MPI on PATH (module load one, or `make system-mpi` as root)")
    return mpicc, mpiexec


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("MPICC", "MPIEXEC", "VIRTUAL_ENV")}
    return {**env, "PATH": _system_path(), "PINGPONG_LAB_PROGRESS": "0"}


# Not in `make test` (building mpi4py from source takes minutes): `make test-system-mpi`.
pytestmark = pytest.mark.system_mpi


@pytest.mark.timeout(1800)  # builds mpi4py from source the first time (minutes)
def test_make_mpi_system_builds_against_the_mpi_on_path_and_the_results_name_it(
    system_mpi, tmp_path
):
    _, mpiexec = system_mpi
    wheel_python = (ROOT / ".venv" / "bin" / "python").resolve()
    wheel_before = wheel_python.stat().st_mtime if wheel_python.exists() else None
    build = subprocess.run(
        ["make", "--no-print-directory", "MPI=system", "setup"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=1700,
    )
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    assert (ROOT / "kernels_c" / "build-system" / "libpingpong.so").exists()
    if wheel_before is not None:  # the wheel's environment is left as it was
        assert wheel_python.stat().st_mtime == wheel_before
    out = tmp_path / "system.csv"
    sweep = subprocess.run(
        [str(SYSTEM_VENV / "bin" / "python"), "-m", "pingpong_lab", "sweep", "--np", "2"]
        + ["--max-bytes", "64", "--reps", "20", "--out", str(out)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert sweep.returncode == 0, sweep.stderr
    info = json.loads(out.with_name("system.csv.json").read_text())
    assert info["mpi_source"] == "system"
    library = Path(info["mpi_library_path"])
    assert library.name.startswith("libmpi") and not library.is_relative_to(ROOT)
    assert Path(info["mpiexec_path"]).resolve() == Path(mpiexec).resolve()
    rows = out.read_text().splitlines()
    assert len(rows) == 1 + 7 and rows[1].endswith(",c,blocking,2,default,none")  # 1 .. 64 B
