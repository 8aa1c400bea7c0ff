"""Claims about the project's tooling: one ruff version for make lint and pre-commit."""

import re

from ..conftest import ROOT


def test_pre_commit_runs_the_ruff_version_that_make_lint_installs():
    pinned = re.search(r'"ruff==([0-9.]+)"', (ROOT / "pyproject.toml").read_text())
    hook = re.search(
        r"ruff-pre-commit\s+rev: v([0-9.]+)", (ROOT / ".pre-commit-config.yaml").read_text()
    )
    assert pinned and hook, "ruff must be pinned in pyproject.toml and .pre-commit-config.yaml"
    assert pinned.group(1) == hook.group(1)
