"""The class view (`pingpong-lab cohort`): a scratch course whose students saved their results
into their submissions; the flags name exactly the copied pair, the missing result and the
implausible fit, and the pages escape what students wrote."""

from __future__ import annotations

import csv
import html
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from pingpong_lab.apps import cli
from pingpong_lab.apps import cohort as cohort_app
from pingpong_lab.course import handoff
from pingpong_lab.grader import cohort, cohort_pages

GIB = 2**30
NAME_WITH_HTML = "<b>gus"
SCRIPT = "<script>alert('answer')</script>"
SCHEME = "Full marks: names the eager limit."
QUESTION = "**F1 (3 points). Are your alpha and 1/beta reasonable?**"
# student -> (CPU model, alpha in s, bandwidth in GiB/s, seed of the samples)
CLASS = {
    "ann": ("Xeon Gold 6230", 2e-6, 5.0, 1),
    "bob": ("EPYC 7742", 1e-6, 10.0, 2),
    "cid": ("Xeon Gold 6230", 3e-6, 4.0, 3),
    "dee": ("Xeon Gold 6230", 2.5e-6, 6.0, 4),  # copies cid's 02_samples below
    "eve": ("EPYC 7742", 1.5e-6, 8.0, 5),  # no 04_fit
    "fay": ("EPYC 7742", 5e-3, 8.0, 6),  # alpha of 5 ms: implausible
    NAME_WITH_HTML: ("EPYC 7742", 1.2e-6, 9.0, 7),
}
SIZES = np.array([1, 1024, 65536, 1 << 20])


def _results(course: Path, student: str, assignment: str) -> Path:
    return course / "submitted" / student / assignment / "my_results"


def _as_if_measured_on(folder: Path, name: str, cpu: str, student: str) -> None:
    meta = folder / f"{name}.json"
    values = json.loads(meta.read_text())
    values.update(_cpu=cpu, _host=f"{student}-laptop", _cores=8)
    meta.write_text(json.dumps(values))


def save_all(course: Path, student: str, cpu: str, alpha: float, gibps: float, seed: int):
    """The five results one student's notebooks save, as if measured on a machine with `cpu`."""
    rng = np.random.default_rng(seed)
    beta = 1.0 / (gibps * GIB)
    t = alpha + beta * SIZES * (1 + 0.01 * rng.random(SIZES.size))
    slowdown = np.array([1.0, 1.1, 1.5, 1.9])
    results = {
        ("01_pingpong", "01_deadlock"): dict(
            first_deadlock_bytes=65536, ssend_first_deadlock_bytes=1, sizes_tried=SIZES
        ),
        ("02_timing", "02_sweep"): dict(
            nbytes=SIZES, t_median_s=t, ci_lo_s=t * 0.99, ci_hi_s=t * 1.01, kernel="C",
            method="median",
        ),
        ("02_timing", "02_samples"): dict(
            nbytes=SIZES, reps=np.full(4, 10), samples_s=rng.random((2, 40)), kernel="C"
        ),
        ("04_model", "04_fit"): dict(
            alpha_s=alpha, beta_s_per_byte=beta, breakpoint_bytes=65536, kernel="C"
        ),
        ("05_contention", "05_contention"): dict(
            nbytes=SIZES, pairs=np.array([1, 2]), slowest_s=np.outer(t, [1.0, 1.5]),
            slowdown=slowdown, oversubscribed=False,
        ),
    }  # fmt: skip
    for (assignment, name), values in results.items():
        folder = _results(course, student, assignment)
        handoff.save(name, directory=folder, **values)
        _as_if_measured_on(folder, name, cpu, student)


def _cell(cell_type: str, text: str, **nbgrader) -> dict:
    meta = {"nbgrader": {"schema_version": 3, **nbgrader}} if nbgrader else {}
    return {"cell_type": cell_type, "metadata": meta, "source": text.splitlines(True)}


def _notebook(path: Path, cells: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                                "nbformat_minor": 5}))  # fmt: skip


def _task(text: str) -> dict:
    return _cell("markdown", text, grade=False, solution=False, task=True,
                 grade_id="interpret_alpha_beta", points=3)  # fmt: skip


def write_notebooks(course: Path) -> None:
    """04_model: the source with its mark scheme; ann's and gus's answers (bob has none)."""
    source = f"{QUESTION}\n=== BEGIN MARK SCHEME ===\n{SCHEME}\n=== END MARK SCHEME ===\n"
    _notebook(course / "source" / "04_model" / "04_model.ipynb", [_task(source)])
    answers = {"ann": "My alpha is 2 us: shared memory.", NAME_WITH_HTML: SCRIPT}
    for student, answer in answers.items():
        path = course / "submitted" / student / "04_model" / "04_model.ipynb"
        _notebook(path, [_cell("markdown", "intro"), _task(QUESTION), _cell("markdown", answer)])


def make_class(root: Path) -> Path:
    """A course folder with the students of CLASS, their results and a few notebooks."""
    course = root / "course"
    for student, (cpu, alpha, gibps, seed) in CLASS.items():
        save_all(course, student, cpu, alpha, gibps, seed)
    for suffix in (".npz", ".json"):  # dee hands in cid's raw samples ...
        shutil.copy(
            _results(course, "cid", "02_timing") / f"02_samples{suffix}",
            _results(course, "dee", "02_timing") / f"02_samples{suffix}",
        )
    meta = _results(course, "dee", "02_timing") / "02_samples.json"  # ... and edits the digest
    meta.write_text(meta.read_text().replace('"_sha256": "', '"_sha256": "0'))
    for suffix in (".npz", ".json"):
        (_results(course, "eve", "04_model") / f"04_fit{suffix}").unlink()
    write_notebooks(course)
    return course


@pytest.fixture
def course(tmp_path) -> Path:
    return make_class(tmp_path)


def _rows(course) -> dict[str, dict]:
    return {r["student"]: r for r in cohort.collect(course)}


def test_the_flags_name_the_copied_pair_the_missing_fit_and_the_implausible_one(course):
    rows = _rows(course)
    assert sorted(rows) == sorted(CLASS)
    flags = {s: r["flags"] for s, r in rows.items() if r["flags"]}
    assert set(flags) == {"cid", "dee", "eve", "fay"}
    assert flags["cid"] == ["identical raw samples with dee"]
    assert flags["dee"] == ["identical raw samples with cid"]  # although its JSON was edited
    assert flags["eve"] == ["missing results: 04_fit"] and rows["eve"]["missing"] == ["04_fit"]
    assert len(flags["fay"]) == 1 and flags["fay"][0].startswith("implausible fit: alpha")


def test_the_numbers_are_the_students_fits_and_machines(course):
    rows = _rows(course)
    assert rows["ann"]["alpha_us"] == pytest.approx(2.0)
    assert rows["ann"]["bandwidth_GiBps"] == pytest.approx(5.0)
    assert rows["bob"]["bandwidth_GiBps"] == pytest.approx(10.0)
    assert rows["ann"]["breakpoint_bytes"] == 65536 and rows["ann"]["deadlock_bytes"] == 65536
    assert rows["ann"]["contention_slowdown"] == pytest.approx(1.9)  # at the largest size
    assert rows["eve"]["alpha_us"] is None and rows["eve"]["bandwidth_GiBps"] is None
    assert rows["ann"]["cpu"] == "Xeon Gold 6230" and rows["bob"]["cpu"] == "EPYC 7742"
    assert rows["bob"]["host"] == "bob-laptop" and rows["bob"]["cores"] == "8"


def test_identical_sweeps_are_flagged_too(course):
    for suffix in (".npz", ".json"):
        shutil.copy(
            _results(course, "ann", "02_timing") / f"02_sweep{suffix}",
            _results(course, "bob", "02_timing") / f"02_sweep{suffix}",
        )
    rows = _rows(course)
    assert rows["ann"]["flags"] == ["identical sweep with bob"]
    assert rows["bob"]["flags"] == ["identical sweep with ann"]


@pytest.mark.parametrize(
    "alpha, beta, plausible",
    [
        (2e-6, 1 / (5 * GIB), True),
        (0.0, 1 / (5 * GIB), False),
        (2e-3, 1 / (5 * GIB), False),
        (2e-6, -1e-10, False),
        (2e-6, 1 / (0.001 * GIB), False),
        (2e-6, 1 / (5000 * GIB), False),
        (float("nan"), 1e-10, False),
    ],
)
def test_a_fit_is_implausible_outside_the_bounds(alpha, beta, plausible):
    problem = cohort.fit_problem({"alpha_s": alpha, "beta_s_per_byte": beta})
    assert (problem is None) is plausible
    assert problem is None or problem.startswith("implausible fit")


def test_the_csv_has_every_student_and_joins_lists(course, tmp_path):
    page = cohort_pages.write(course, tmp_path / "out")
    rows = list(csv.DictReader((page.parent / "cohort.csv").open()))
    assert sorted(r["student"] for r in rows) == sorted(CLASS)
    fay = next(r for r in rows if r["student"] == "fay")
    assert float(fay["alpha_us"]) == pytest.approx(5000)
    eve = next(r for r in rows if r["student"] == "eve")
    assert eve["missing"] == "04_fit" and eve["flags"] == "missing results: 04_fit"


def test_the_page_lists_every_student_and_escapes_what_they_wrote(course, tmp_path):
    page = cohort_pages.write(course, tmp_path / "out")
    text = page.read_text()
    for student in CLASS:
        assert html.escape(student) in text
    assert NAME_WITH_HTML not in text and "&lt;b&gt;gus" in text
    assert "identical raw samples with dee" in text and "class='flagged'" in text
    assert text.count("data:image/png;base64,") == 2
    students = sorted(p.name for p in (page.parent / "students").iterdir())
    assert len(students) == len(CLASS) and "%3Cb%3Egus.html" in students
    assert "href='students/%3Cb%3Egus.html'" in text


def test_a_students_page_shows_answers_beside_the_mark_scheme(course, tmp_path):
    page = cohort_pages.write(course, tmp_path / "out")
    ann = (page.parent / "students" / "ann.html").read_text()
    assert "My alpha is 2 us: shared memory." in ann and SCHEME in ann
    assert html.escape(QUESTION) in ann and "BEGIN MARK SCHEME" not in ann
    assert "Xeon Gold 6230" in ann and "ann-laptop" in ann and "matches the arrays" in ann
    gus = (page.parent / "students" / "%3Cb%3Egus.html").read_text()
    assert SCRIPT not in gus and html.escape(SCRIPT) in gus
    bob = (page.parent / "students" / "bob.html").read_text()
    assert "notebook missing" in bob and SCHEME in bob  # the question, with no answer
    dee = (page.parent / "students" / "dee.html").read_text()
    assert "DIFFERS from the arrays" in dee


def test_a_damaged_result_or_notebook_is_reported_not_a_crash(course, tmp_path):
    (_results(course, "ann", "04_model") / "04_fit.npz").write_bytes(b"not a zip")
    (course / "submitted" / "ann" / "04_model" / "04_model.ipynb").write_text("{")
    row = _rows(course)["ann"]
    assert row["missing"] == ["04_fit"] and row["flags"][0].startswith("missing results: 04_fit")
    page = cohort_pages.write(course, tmp_path / "out")
    assert "notebook unreadable" in (page.parent / "students" / "ann.html").read_text()


def test_the_command_writes_the_pages_and_says_where(course, capsys):
    assert "cohort" in cli.COMMANDS
    assert cli.main(["cohort", str(course)]) == 0
    out = capsys.readouterr().out
    assert str(course / "cohort" / "cohort.html") in out
    assert (course / "cohort" / "cohort.csv").is_file()


@pytest.mark.parametrize("make", ["nothing", "no submitted"])
def test_a_bad_course_folder_is_one_line_and_status_2(tmp_path, capsys, make):
    if make == "no submitted":
        (tmp_path / "course").mkdir()
    assert cohort_app.main([str(tmp_path / "course")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("pingpong-lab cohort: error: ") and "course" in err
