"""The student lab (`make lab`) in a real browser: no instructor tools and no news pop-up; an
exercise runs (its engines start) and Validate gives the course's verdict."""

from __future__ import annotations

import os
import shutil
import uuid

import pytest

from ..conftest import ROOT
from ..course.submissions import processes_left
from .lab import browser, chromium_path, menu_items, screenshot, serve

pytestmark = pytest.mark.browser

NAME = "00_setup"


@pytest.fixture(scope="module")
def student_lab(tmp_path_factory):
    """`make lab` serving a copy of one exercise (the browser saves notebooks: never into the
    repository's generated exercises/)."""
    executable = chromium_path()
    root = tmp_path_factory.mktemp("student-lab")
    shutil.copytree(ROOT / "exercises" / NAME, root / "exercises" / NAME)
    tag = uuid.uuid4().hex
    env = {
        **os.environ,
        "PINGPONG_LAB_TEST_TAG": tag,
        "PINGPONG_LAB_BUILD": str(root / "c-build"),
        "PINGPONG_LAB_EXCHANGE": str(root / "exchange"),
    }
    env.pop("PINGPONG_LAB_GRADING", None)  # a learner's lab measures at full size
    with serve("lab", env, root / "lab.log", LAB_DIR=str(root)) as lab:
        yield lab, executable
    assert processes_left(tag, wait_s=30) == []


def test_the_student_lab_hides_formgrader_create_assignment_and_the_news(student_lab):
    lab, executable = student_lab
    assert lab.status("/formgrader") == 404  # the server extension is off, not only its menu
    with browser(executable, lab) as page:
        page.goto(lab.url(f"/lab/tree/exercises/{NAME}/{NAME}.ipynb"))
        page.locator(".jp-NotebookPanel").wait_for()
        page.wait_for_timeout(3000)  # the news question would come up by now
        screenshot(page, "student-lab")
        items = menu_items(page, "Nbgrader")
        assert "Assignment List" in items
        assert "Formgrader" not in items and "Course List" not in items
        assert page.locator("[title*='Create Assignment']").count() == 0
        assert page.get_by_text("official Jupyter news").count() == 0


def test_an_exercise_starts_its_engines_and_validate_gives_the_course_verdict(student_lab):
    from playwright.sync_api import expect

    lab, executable = student_lab
    with browser(executable, lab) as page:
        page.goto(lab.url(f"/lab/tree/exercises/{NAME}/{NAME}.ipynb"))
        cells = page.locator(".jp-Notebook .jp-Cell")
        cells.nth(1).locator(".jp-InputArea-editor").click()
        for _ in range(3):  # the imports, a markdown cell, the engines
            page.keyboard.press("Shift+Enter")
        engines = cells.nth(3).locator(".jp-OutputArea-output").first
        expect(engines).to_contain_text("rank", timeout=180_000)
        screenshot(page, "student-engines")

        page.locator(".jp-Toolbar").get_by_text("Validate", exact=True).click()
        dialog = page.locator(".jp-Dialog")
        expect(dialog).to_be_visible(timeout=300_000)
        screenshot(page, "student-validate")
        verdict = dialog.inner_text()
        assert "failed" in verdict.lower()
        assert "NotImplementedError" in verdict  # the tests of the parts still to be written
