"""The grader's one command: every subcommand listed, bad input answered clearly."""

from __future__ import annotations

import subprocess
import sys
import tempfile

import pytest

from pingpong_lab.grader.__main__ import COMMANDS, main, parser

from .gradebooks import NAME, make_course


def test_the_help_lists_every_command(capsys):
    with pytest.raises(SystemExit):
        parser().parse_args(["--help"])
    text = capsys.readouterr().out
    for name in [*COMMANDS, "validate"]:
        assert name in text


def test_a_folder_without_a_course_is_named(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["check", "--course", str(tmp_path)])
    assert "has no nbgrader_config.py" in capsys.readouterr().err


def test_an_array_task_without_an_index_says_how_to_give_one(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("SLURM_ARRAY_TASK_ID", raising=False)
    course = make_course(tmp_path)
    assert main(["array-task", "--course", str(course)]) == 2
    assert "needs an index" in capsys.readouterr().err


def test_an_array_task_past_the_class_says_how_many_there_are(tmp_path, capsys):
    course = make_course(tmp_path)
    assert main(["array-task", "7", "--course", str(course)]) == 2
    assert "3 submission(s), tasks 0..2" in capsys.readouterr().err


def test_the_array_count_is_the_number_of_students(tmp_path, capsys):
    course = make_course(tmp_path)
    assert main(["array-count", "--course", str(course)]) == 0
    assert capsys.readouterr().out.strip() == "3"


def test_a_grading_process_validates_notebooks_without_building_iri_parsers():
    """without_iri_grammars: nbformat still validates (a broken notebook is refused), and the
    parsers that jsonschema's optional IRI check would build are never imported."""
    script = (
        "import sys\n"
        "from pingpong_lab import runtime\n"
        "runtime.without_iri_grammars()\n"
        "import nbformat\n"
        "nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('x = 1')])\n"
        "nbformat.validate(nb)\n"
        "nb.cells[0]['execution_count'] = 'one'\n"
        "try:\n"
        "    nbformat.validate(nb)\n"
        "except nbformat.ValidationError:\n"
        "    print('refused', 'lark' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.stdout.strip() == "refused False", out.stderr


def test_grading_compiles_the_package_before_a_sandbox_sees_it_read_only(tmp_path):
    """Every module gets its bytecode from the grading process before a student's sandbox
    starts, also one grading never imports and with PYTHONDONTWRITEBYTECODE set: a sandbox
    cannot write it, and each of its processes would compile the package again."""
    import importlib.util
    import os
    from pathlib import Path

    import pingpong_lab.apps.report.sweeps as module

    course = make_course(tmp_path, students=())
    source = Path(module.__file__)
    cached = Path(importlib.util.cache_from_source(str(source)))
    cached.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    grade = "import sys; from pingpong_lab.grader import classgrade as c; "
    grade += "c.grade_one(sys.argv[1], sys.argv[2], [], 5)"
    command = [sys.executable, "-c", grade, str(course), "nobody"]
    assert subprocess.run(command, env=env, capture_output=True).returncode == 0
    assert cached.exists(), f"{cached.name} was not written"
    header = cached.read_bytes()[:16]
    assert header[:4] == importlib.util.MAGIC_NUMBER
    assert int.from_bytes(header[8:12], "little") == int(source.stat().st_mtime)


def test_every_process_of_a_submission_starts_light(tmp_path, monkeypatch):
    """What grading starts for a submission (kernels, engines, ranks) inherits one thread of
    OpenBLAS and UCX without its memory hooks (half of an MPI job's start-up), besides the
    grading mode and a private home, scratch and C build folder."""
    from pingpong_lab.grader import classgrade

    seen = {}

    def record(staged, student, left, env, wrap):
        seen.update(env)
        raise RuntimeError("stopped after the environment was made")

    monkeypatch.setattr(classgrade, "_grade_in_group", record)
    monkeypatch.setenv("UCX_MEM_EVENTS", "yes")
    course = make_course(tmp_path, students=("ann",))
    outcome = classgrade.grade_one(course, "ann", [NAME], 30, isolate=False)
    assert outcome.status == "failed" and "stopped after" in outcome.why
    assert seen["UCX_MEM_EVENTS"] == "no"
    assert seen["OPENBLAS_NUM_THREADS"] == seen["OMP_NUM_THREADS"] == "1"
    assert seen["PINGPONG_LAB_GRADING"] == "1"
    private = [seen[k] for k in ("HOME", "TMPDIR", "PINGPONG_LAB_BUILD")]
    assert all(p.startswith(tempfile.gettempdir()) and "pingpong-grade-ann-" in p for p in private)
