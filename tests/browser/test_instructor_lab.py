"""The instructor lab (`make instructor`) in a real browser: Formgrader lists the assignments
and a student's submission, and takes a manual score."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ..conftest import ROOT
from ..course.submissions import grading_env, processes_left, scratch_course, submit
from .lab import browser, chromium_path, menu_items, screenshot, serve

pytestmark = pytest.mark.browser

NAME = "00_setup"
STUDENT = "ada"


def _nbgrader(course, env, *args):
    subprocess.run(
        [sys.executable, "-m", "nbgrader", *args, "--log-level=WARN"],
        cwd=course,
        env=env,
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="module")
def instructor_lab(tmp_path_factory):
    """`make instructor` on a scratch course holding one autograded submission (the release
    itself, handed in untouched)."""
    executable = chromium_path()
    root = tmp_path_factory.mktemp("instructor-lab")
    course = scratch_course(root, ROOT / "course", [NAME])
    tag, env = grading_env(root)
    _nbgrader(course, env, "generate_assignment", NAME)
    submit(course, STUDENT, NAME, course / "release" / NAME / f"{NAME}.ipynb")
    _nbgrader(course, env, "autograde", NAME)
    with serve("instructor", env, root / "lab.log", COURSE=str(course)) as lab:
        yield lab, executable, course
    assert processes_left(tag, wait_s=30) == []


def _manual_score(course, grade_id: str):
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        return gb.find_grade(grade_id, NAME, NAME, STUDENT).manual_score


def test_the_instructor_lab_has_formgrader_and_create_assignment(instructor_lab):
    lab, executable, _ = instructor_lab
    with browser(executable, lab) as page:
        page.goto(lab.url("/lab"))
        page.locator(".jp-LabShell").wait_for()
        page.wait_for_timeout(2000)
        screenshot(page, "instructor-lab")
        assert "Formgrader" in menu_items(page, "Nbgrader")
        assert page.get_by_text("official Jupyter news").count() == 0


def test_formgrader_lists_the_submission_and_takes_a_manual_score(instructor_lab):
    from playwright.sync_api import expect

    lab, executable, course = instructor_lab
    with browser(executable, lab) as page:
        page.goto(lab.url("/formgrader/manage_assignments"))
        expect(page.locator("table")).to_contain_text(NAME)
        screenshot(page, "formgrader-assignments")

        page.goto(lab.url(f"/formgrader/manage_submissions/{NAME}"))
        expect(page.locator("table")).to_contain_text(STUDENT)

        page.goto(lab.url(f"/formgrader/gradebook/{NAME}/{NAME}"))
        page.get_by_role("link", name="Submission #1").click()
        page.wait_for_load_state("networkidle")  # the grades load after the page
        score = page.locator("input.score#test_by_rank")
        score.click()
        score.press_sequentially("1")
        score.press("Tab")  # formgrader saves a score when its box loses focus
        page.wait_for_load_state("networkidle")
        screenshot(page, "formgrader-manual-score")
        # the save is an asynchronous request: on a busy machine it may land a little later
        for _ in range(60):
            if _manual_score(course, "test_by_rank") == 1.0:
                break
            page.wait_for_timeout(500)
    assert _manual_score(course, "test_by_rank") == 1.0
