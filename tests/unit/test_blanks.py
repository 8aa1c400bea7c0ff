"""Which written answers a submission left blank (grader/blanks.py): only what is certainly
blank, so that no written answer is scored 0 unread."""

from __future__ import annotations

from pingpong_lab.grader import blanks


def _md(text, **nbgrader):
    meta = {"nbgrader": {"schema_version": 3, **nbgrader}} if nbgrader else {}
    return {"cell_type": "markdown", "metadata": meta, "source": text}


ANSWER = dict(grade=True, solution=True, grade_id="explain", points=3)
TASK = dict(task=True, grade_id="discuss", points=2)
PLACEHOLDER = "*Your answer (replace this line):*"
RELEASE = [
    _md("Intro"),
    _md(blanks.STUB, **ANSWER),
    _md("**Discuss** ...", **TASK),
    _md(PLACEHOLDER),
    _md("Next part"),
]


def _submitted(*changes):
    cells = [dict(c) for c in RELEASE]
    for at, cell in changes:
        if cell is None:
            del cells[at]
        elif at < 0:
            cells.insert(-at, cell)
        else:
            cells[at] = cell
    return cells


def test_an_untouched_release_has_both_answers_blank():
    assert blanks.blank_cells(_submitted(), RELEASE) == {"explain", "discuss"}


def test_written_answers_are_not_blank():
    written = _submitted((1, _md("Eager below 8 KiB.", **ANSWER)), (3, _md("The median.")))
    assert blanks.blank_cells(written, RELEASE) == set()


def test_an_emptied_answer_or_placeholder_is_blank():
    emptied = _submitted((1, _md("  \n", **ANSWER)), (3, _md("")))
    assert blanks.blank_cells(emptied, RELEASE) == {"explain", "discuss"}


def test_an_answer_written_in_a_cell_of_its_own_beside_the_placeholder_is_read():
    after = _submitted((-4, _md("My answer, below the placeholder.")))
    before = _submitted((-3, _md("My answer, above the placeholder.")))
    for cells in (after, before):
        assert blanks.blank_cells(cells, RELEASE) == {"explain"}


def test_a_deleted_placeholder_is_read_by_a_person():
    assert blanks.blank_cells(_submitted((3, None)), RELEASE) == {"explain"}


def test_an_unreadable_notebook_has_no_blank_answers(tmp_path):
    (tmp_path / "submitted" / "ann" / "01_x").mkdir(parents=True)
    (tmp_path / "submitted" / "ann" / "01_x" / "01_x.ipynb").write_text("{not json")
    assert blanks.unanswered(tmp_path, "ann", ["01_x"]) == set()
