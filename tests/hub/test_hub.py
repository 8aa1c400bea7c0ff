"""A term of the course on its JupyterHub, in a real browser: an instructor and two students,
each a Unix account of their own, logged in through the hub's login page.

The instructor generates and releases 01_pingpong from Formgrader; each student fetches it from
the Assignment List, starts the MPI engines in their notebook, Validates and submits (one with
the work done, one with the exercise untouched); the instructor collects, grades the class with
the course's grader from their own account, scores a written answer by hand in Formgrader,
generates and releases feedback; each student fetches their own feedback and sees no one
else's. Students cannot read the answers on the machine.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from ..browser.lab import screenshot
from ..conftest import ROOT
from ..slurm import localslurm
from .hubrun import BIN, running_hub

pytestmark = [pytest.mark.hub, pytest.mark.browser]

NAME = "01_pingpong"
WRITTEN = "explain_deadlocks"  # 01's written answer, scored by hand


@pytest.fixture(scope="module", params=["local", "slurm"])
def hub(request, tmp_path_factory):
    """The hub with each spawner: servers as local processes, or as Slurm jobs of a private
    single-node Slurm (8 CPUs configured, 2 per server); no job left after."""
    root = tmp_path_factory.mktemp(f"hub-{request.param}")
    if request.param == "local":
        with running_hub(root) as running:
            yield running
        return
    if reason := localslurm.problem():
        pytest.skip(reason)
    readable = Path(tempfile.mkdtemp(prefix="pingpong-lab-hub-slurm-"))  # sbatch runs as users
    readable.chmod(0o755)
    slurm = localslurm.LocalSlurm(readable, cpus=8)
    try:
        slurm.start()
    except (localslurm.SlurmStartError, OSError) as exc:
        pytest.skip(f"a single-node Slurm cannot start here: {exc}")
    try:
        with running_hub(root, "slurm", {"SLURM_CONF": slurm.env["SLURM_CONF"]}) as running:
            yield running
        queue = subprocess.run(["squeue", "-h"], env=slurm.env, capture_output=True, text=True)
        assert queue.stdout.strip() == "", f"jobs left: {queue.stdout}"
    finally:
        slurm.stop()
        shutil.rmtree(readable, ignore_errors=True)


def test_students_cannot_read_the_answers_but_can_run_the_course(hub):
    student = hub.students[0]
    for path in ("course/source/01_pingpong/01_pingpong.ipynb", "solutions", "tests", ".git"):
        done = hub.run_as(student, "ls", str(ROOT / path))
        assert done.returncode != 0, f"{student} can read {path}"
    for other in (hub.students[1], hub.instructor):  # their work, the course's gradebook
        home = hub.run_as(other, "bash", "-c", "echo ~").stdout.strip()
        done = hub.run_as(student, "ls", home)
        assert done.returncode != 0, f"{student} can read {other}'s home"
    done = hub.run_as(student, str(BIN / "python"), "-c", "import pingpong_lab.course.grading")
    assert done.returncode == 0, done.stderr


def _assignment_list(user):
    page = user.page
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
    page.locator(".lm-Menu-content").get_by_text("Assignment List").click()
    return page.locator("#nbgrader-assignment-list, .nbgrader-AssignmentList, #assignments").first


def _engines_cell(user) -> int:
    """The index of the first cell of the user's 01 that starts MPI engines."""
    nb = json.loads((user.home / NAME / f"{NAME}.ipynb").read_text())
    return next(i for i, c in enumerate(nb["cells"]) if "MPICluster(" in "".join(c["source"]))


def _start_engines_and_validate(user, expect_pass: bool, validate: bool = True) -> str:
    from playwright.sync_api import expect

    page = user.page
    page.goto(f"{user.server}lab/tree/{NAME}/{NAME}.ipynb")
    cells = page.locator(".jp-Notebook .jp-Cell")
    cells.first.wait_for()
    engines = _engines_cell(user)
    page.locator(".jp-StatusBar-Widget", has_text="| Idle").first.wait_for(timeout=120_000)
    cells.first.click()  # selected in command mode: Shift+Enter runs it and moves on
    for _ in range(engines + 1):
        page.keyboard.press("Shift+Enter")
    output = cells.nth(engines).locator(".jp-OutputArea-output").first
    try:
        expect(output).to_contain_text("running", timeout=180_000)
    except AssertionError:
        screenshot(page, f"hub-engines-{user.name}")
        raise
    if not validate:
        return ""
    page.locator(".jp-Toolbar").get_by_text("Validate", exact=True).click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_be_visible(timeout=300_000)
    verdict = dialog.inner_text()
    page.keyboard.press("Escape")
    if expect_pass:
        assert "Success" in verdict, verdict[:2000]
    else:
        assert "NotImplementedError" in verdict, verdict[:2000]
    return verdict


def _formgrader(teacher, column: str) -> str:
    """Click 01's button in `column` of Formgrader's Manage Assignments table ("assign" is
    Generate, "release", "collect", "generate-feedback", "release-feedback"), as the
    instructor does, and wait for the dialog it opens; its text (a success dialog)."""
    page = teacher.page
    page.goto(f"{teacher.server}formgrader/manage_assignments")
    row = page.locator("table tbody tr", has=page.locator("td.name", has_text=NAME))
    row.locator(f"td.{column} a").click()
    dialog = page.locator("#success-modal, #error-modal")
    dialog.wait_for(state="visible", timeout=300_000)
    text = dialog.inner_text()
    if dialog.get_attribute("id") != "success-modal":
        screenshot(page, f"hub-formgrader-{column}")
        raise AssertionError(f"Formgrader's {column}: {text[-2000:]}")
    return text


def _cell_check_refuses(user, after: int) -> None:
    """A cell the learner adds below cell `after` with a line grading refuses is not run, and
    says why: the student lab's cell check is loaded in the kernel of a hub's server."""
    from playwright.sync_api import expect

    page = user.page
    cells = page.locator(".jp-Notebook .jp-Cell")
    cells.nth(after).click()
    page.keyboard.press("Escape")  # command mode on that cell
    page.keyboard.press("b")  # a new cell below it
    page.keyboard.press("Enter")
    page.keyboard.type("import sys")
    page.keyboard.press("Shift+Enter")
    output = cells.nth(after + 1).locator(".jp-OutputArea-output").first
    try:
        expect(output).to_contain_text("This cell was not run", timeout=60_000)
    except AssertionError:
        screenshot(page, f"hub-cell-check-{user.name}")
        raise


def _scores(course) -> dict:
    """{student: {"score", "max", "written": (auto score, manual score, needs manual grading)}}
    of 01 in the instructor's gradebook."""
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as book:
        for student in book.students:
            mine = book.find_submission(NAME, student.id)
            grade = book.find_grade(WRITTEN, NAME, NAME, student.id)
            written = (grade.auto_score, grade.manual_score, bool(grade.needs_manual_grade))
            out[student.id] = {"score": mine.score, "max": mine.max_score, "written": written}
    return out


def documented(start: str) -> str:
    """The command line of docs/deploying.md that starts with `start` (run verbatim)."""
    text = (ROOT / "docs" / "deploying.md").read_text()
    (line,) = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(start)]
    return line


def _grade_the_class(hub) -> None:
    """The instructor grades the collected class from a terminal of their server, in the
    repository's folder, with the command docs/deploying.md gives: the grader on the hub's
    machine, or the Slurm array where servers are Slurm jobs (the queue is empty after)."""
    if "SLURM_CONF" not in hub.extra_env:
        line = documented(".venv/bin/python -m pingpong_lab.grader autograde")
        graded = hub.run_as(hub.instructor, "bash", "-c", line, cwd=ROOT)
        assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
        return
    line = documented("PINGPONG_LAB_COURSE=~/course slurm/grade-class.sh")
    submitted = hub.run_as(hub.instructor, "bash", "-c", line, cwd=ROOT)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    assert "grading 2 submission(s)" in submitted.stdout, submitted.stdout
    deadline = time.monotonic() + 600
    grading = ["squeue", "-h", "--name=pingpong-grade,pingpong-grade-merge"]  # not the servers
    while queue := hub.run_as(hub.instructor, *grading).stdout.strip():
        assert time.monotonic() < deadline, f"the grading jobs did not end: {queue}"
        time.sleep(2)
    logs = hub.run_as(hub.instructor, "bash", "-c", "cat ~/course/slurm-logs/*.out").stdout
    assert "merged 2 of 2 submission(s)" in logs, logs[-3000:]


@pytest.mark.timeout(900)
def test_a_term_on_the_hub(hub):
    done, untouched = hub.students
    with hub.browser() as chromium:
        teacher = hub.login(chromium, hub.instructor)
        course = teacher.home / "course"
        assert "Successfully created the student version" in _formgrader(teacher, "assign")
        assert "Successfully released" in _formgrader(teacher, "release")

        users = {}
        for student in (done, untouched):
            user = users[student] = hub.login(chromium, student)
            listing = _assignment_list(user)
            listing.get_by_role("button", name="Fetch").first.click()
            notebook = user.home / NAME / f"{NAME}.ipynb"
            user.page.wait_for_timeout(500)
            for _ in range(60):
                if notebook.exists():
                    break
                user.page.wait_for_timeout(500)
            assert notebook.exists(), f"{student}'s fetch left no {notebook}"
            if student == done:  # the work a student did: the solution, in their own file
                stat = notebook.stat()
                shutil.copy(ROOT / "solutions" / NAME / f"{NAME}.ipynb", notebook)
                nb = json.loads(notebook.read_text())
                for cell in nb["cells"]:
                    if cell["metadata"].get("nbgrader", {}).get("grade_id") == WRITTEN:
                        cell["source"] = "A blocking send waits for its receive: both block."
                notebook.write_text(json.dumps(nb, indent=1))
                import os

                os.chown(notebook, stat.st_uid, stat.st_gid)
            # on Slurm, the failing verdict is the local hub's: the work done is validated
            validate = student == done or "SLURM_CONF" not in hub.extra_env
            _start_engines_and_validate(user, student == done, validate)
            if student == untouched:  # nothing of theirs is graded: a refused line costs nothing
                _cell_check_refuses(user, _engines_cell(user))
            listing = _assignment_list(user)
            listing.get_by_role("button", name="Submit").first.click()
            user.page.wait_for_timeout(1000)

        assert "Successfully collected" in _formgrader(teacher, "collect")
        _grade_the_class(hub)
        scores = _scores(course)
        assert set(scores) == {done, untouched}
        assert scores[done]["written"][2], "the written answer waits for its hand score"
        assert scores[untouched]["written"][:3] == (0.0, None, False), "a blank answer is 0"

        # Manual Grading: 01's notebook, the student's submission (names shown by its eye)
        teacher.page.goto(f"{teacher.server}formgrader/gradebook/{NAME}/{NAME}")
        row = teacher.page.locator("table tbody tr", has=teacher.page.locator(
            "a.name-shown", has_text=done))  # fmt: skip
        row.locator("td.reveal span.name-hidden").click()
        row.locator("a.name-shown").click()
        heading = teacher.page.locator(".panel-heading", has=teacher.page.locator(f"#{WRITTEN}"))
        heading.locator("button.full-credit").click()  # Formgrader saves the score at once
        for _ in range(60):
            if _scores(course)[done]["written"][1] is not None:
                break
            teacher.page.wait_for_timeout(500)
        scores = _scores(course)
        assert scores[done]["score"] == scores[done]["max"], scores[done]
        assert scores[untouched]["score"] < scores[untouched]["max"]

        _formgrader(teacher, "generate-feedback")
        _formgrader(teacher, "release-feedback")

        for student, user in users.items():
            user.page.reload()
            _assignment_list(user).get_by_role("button", name="Fetch Feedback").first.click()
            folder = user.home / NAME / "feedback"
            theirs = (course / "feedback" / student / NAME / f"{NAME}.html").read_bytes()
            for _ in range(60):  # until the fetch has copied the whole page
                pages = sorted(folder.rglob("*.html"))
                if pages and pages[0].read_bytes() == theirs:
                    break
                user.page.wait_for_timeout(500)
            assert len(pages) == 1, f"{student} has {len(pages)} feedback pages"
            assert pages[0].read_bytes() == theirs, f"{student} got another page"
            user.context.close()
