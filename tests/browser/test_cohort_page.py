"""The class view (`pingpong-lab cohort`) in a real browser: the page is self-contained, its
plots decode, the copied pair's flag shows, and a student's page opens from its link."""

from __future__ import annotations

import pytest

from pingpong_lab.grader import cohort_pages

from ..unit.test_cohort import NAME_WITH_HTML, make_class
from .lab import Lab, browser, chromium_path, screenshot

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def cohort_page(tmp_path_factory):
    executable = chromium_path()
    root = tmp_path_factory.mktemp("cohort")
    course = make_class(root)
    page = cohort_pages.write(course, root / "out")
    return page, executable, Lab("file://", "", root / "unused.log")  # no server: a file


def test_the_plots_render_and_the_copied_pair_is_flagged(cohort_page):
    from playwright.sync_api import expect

    path, executable, lab = cohort_page
    with browser(executable, lab) as page:
        requests = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(path.as_uri())
        images = page.locator("img")
        expect(images).to_have_count(2)
        widths = page.eval_on_selector_all(
            "img", "els => els.map(e => e.complete ? e.naturalWidth : 0)"
        )
        assert all(w > 0 for w in widths), widths
        expect(page.get_by_text("identical raw samples with dee")).to_be_visible()
        expect(page.get_by_text("identical raw samples with cid")).to_be_visible()
        flagged = page.locator("tr.flagged")
        expect(flagged).to_have_count(4)
        background = flagged.first.locator("td").first.evaluate(
            "e => getComputedStyle(e).backgroundColor"
        )
        assert background not in ("rgba(0, 0, 0, 0)", "transparent")
        assert page.locator("b", has_text="gus").count() == 0  # the name is text, not markup
        expect(page.get_by_role("link", name=NAME_WITH_HTML)).to_be_visible()
        screenshot(page, "cohort")
        assert [u for u in requests if not u.startswith(("file:", "data:"))] == []


def test_a_students_link_opens_their_answers(cohort_page):
    from playwright.sync_api import expect

    path, executable, lab = cohort_page
    with browser(executable, lab) as page:
        page.goto(path.as_uri())
        page.get_by_role("link", name="ann", exact=True).click()
        expect(page.locator("h1")).to_contain_text("ann: results and written answers")
        expect(page.get_by_text("Full marks: names the eager limit.")).to_be_visible()
        screenshot(page, "cohort-student")
