"""Submitting notebooks to a copy of the course, and reading what autograde made of them."""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from pathlib import Path

import psutil


def notebook(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def submit(course: Path, student: str, name: str, source: Path, edit=None) -> None:
    """Put `source` (each cell's text passed through `edit`) in submitted/<student>/<name>/."""
    nb = notebook(source)
    if edit is not None:
        for cell in nb["cells"]:
            text = "".join(cell["source"])
            cell["source"] = edit(text)
    submit_notebook(course, student, name, nb)


def submit_notebook(course: Path, student: str, name: str, nb: dict) -> None:
    """Write the notebook `nb` as submitted/<student>/<name>/<name>.ipynb."""
    target = course / "submitted" / student / name
    target.mkdir(parents=True, exist_ok=True)
    (target / f"{name}.ipynb").write_text(json.dumps(nb))


def grade_cells(nb: dict) -> dict:
    """grade_id -> cell, for the graded cells of a notebook."""
    return {
        c["metadata"]["nbgrader"]["grade_id"]: c
        for c in nb["cells"]
        if c.get("metadata", {}).get("nbgrader", {}).get("grade")
    }


def cell_score(course: Path, student: str, name: str, grade_id: str) -> float:
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        return gb.find_grade(grade_id, name, name, student).score


def tagged_processes(tag: str) -> list[str]:
    """Live processes (not zombies) whose environment carries PINGPONG_LAB_TEST_TAG=tag."""
    found = []
    me = os.getpid()
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if proc.pid == me or proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("PINGPONG_LAB_TEST_TAG") == tag:
                found.append(f"{proc.pid}: {' '.join(proc.info['cmdline'] or [])[:120]}")
        except (psutil.Error, OSError):
            continue
    return found


def processes_left(tag: str, wait_s: float = 15.0) -> list[str]:
    """tagged_processes(tag), after giving them up to wait_s seconds to end."""
    deadline = time.monotonic() + wait_s
    left = tagged_processes(tag)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = tagged_processes(tag)
    return left


def scratch_course(root: Path, repo_course: Path, names=None) -> Path:
    """A course folder under root with the repository's config and the sources of `names`
    (every assignment when None): what the tests release, submit to and grade."""
    course = Path(root) / "course"
    if names is None:
        shutil.copytree(repo_course / "source", course / "source")
    for name in names or ():
        shutil.copytree(repo_course / "source" / name, course / "source" / name)
    shutil.copy(repo_course / "nbgrader_config.py", course / "nbgrader_config.py")
    return course


def grading_env(root: Path) -> tuple[str, dict]:
    """(tag, environment) for nbgrader runs: grading mode, C builds and the exchange under
    root, and a tag that marks every process they start (see tagged_processes)."""
    tag = uuid.uuid4().hex
    return tag, {
        **os.environ,
        "PINGPONG_LAB_TEST_TAG": tag,
        "PINGPONG_LAB_GRADING": "1",
        "PINGPONG_LAB_BUILD": str(Path(root) / "c-build"),
        "PINGPONG_LAB_EXCHANGE": str(Path(root) / "exchange"),
    }
