"""The conda environments (environment.yml, binder/environment.yml) hold what the package needs,
from conda-forge only; binder/postBuild installs the package and builds the C kernels; Binder
sessions get the student lab's settings."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from ..conftest import ROOT

yaml = pytest.importorskip("yaml")
tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ENVIRONMENTS = [ROOT / "environment.yml", ROOT / "binder" / "environment.yml"]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ \[;]", requirement.strip(), maxsplit=1)[0].lower()


def _needed() -> set[str]:
    """What the course runs with: the package's dependencies, its course extras and an MPI."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return {_name(r) for r in [*project["dependencies"], *extras["course"], *extras["mpi"]]}


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_conda_environment_has_every_dependency_from_conda_forge(path):
    env = yaml.safe_load(path.read_text())
    assert env["channels"] == ["conda-forge"]
    names = {_name(d) for d in env["dependencies"] if isinstance(d, str)}
    assert _needed() - names == set(), f"{path.name} lacks {sorted(_needed() - names)}"
    assert {"c-compiler", "make", "python"} <= names  # mpicc needs a compiler; the kernels make


def test_postbuild_installs_the_package_and_builds_the_kernels_with_mpicc():
    script = ROOT / "binder" / "postBuild"
    assert os.access(script, os.X_OK)
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    assert "set -euo pipefail" in text
    assert re.search(r"pip install --no-deps -e \.", text)
    assert re.search(r"make -C kernels_c MPICC=", text)


def test_binder_sessions_start_with_the_student_lab_settings(tmp_path):
    script = ROOT / "binder" / "start"
    assert os.access(script, os.X_OK)
    out = subprocess.run(
        [str(script), "bash", "-c", 'echo "$JUPYTER_CONFIG_DIR"; echo "$JUPYTER_PATH"'],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if k != "JUPYTER_PATH"},
    ).stdout.split("\n")
    assert out[0] == str(ROOT / "jupyter" / "student")
    assert out[1] == str(ROOT / "jupyter" / "student" / "share")  # the lab's cell check
    assert (ROOT / "jupyter" / "student" / "nbgrader_config.py").is_file()


def test_the_student_image_keeps_the_exercises_and_loses_every_answer(tmp_path):
    """binder/strip-answers (run by postBuild) on a scratch tree shaped like the repository."""
    answers = ["course/source/01_x", "course/release/01_x", "solutions/01_x", "tests/course"]
    kept = ["exercises/01_x", "pingpong_lab/course", "kernels_c", "course"]
    for folder in [*answers, *kept, ".git"]:
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "f.txt").write_text("x")
    (tmp_path / "course" / "nbgrader_config.py").write_text("")
    script = ROOT / "binder" / "strip-answers"
    proc = subprocess.run([str(script), str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for folder in answers:
        assert not (tmp_path / folder.split("/")[0] / folder.split("/")[1]).exists(), folder
    assert not (tmp_path / ".git").exists() and not (tmp_path / "solutions").exists()
    for folder in kept:
        assert (tmp_path / folder).is_dir(), folder
    assert "strip-answers" in (ROOT / "binder" / "postBuild").read_text()


def test_stripping_a_tree_without_exercises_is_refused(tmp_path):
    proc = subprocess.run(
        [str(ROOT / "binder" / "strip-answers"), str(tmp_path)], capture_output=True, text=True
    )
    assert proc.returncode == 1 and "no exercises/" in proc.stderr
