"""The docs check: every command shown in README.md and docs/ names things that exist.

Each line of a bash block is read as a reader would type it: a make target of the Makefile,
a `pingpong-lab` command whose own parser accepts the arguments shown, a job of mpi.jobs with
a JSON spec, a Slurm template or script of slurm/, a C program that kernels_c/ builds. Links
to files of the repository must point at files that exist. (Running them is the other tiers'
work: the CLI, the report, Slurm and links each have tests of their own.)
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from pingpong_lab.apps import cli
from pingpong_lab.mpi import jobs

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TARGETS = set(re.findall(r"^([A-Za-z][\w-]*):", (ROOT / "Makefile").read_text(), flags=re.M))
KERNELS = (ROOT / "kernels_c" / "Makefile").read_text()
NOTEBOOKS = {p.name for p in (ROOT / "course" / "source").iterdir() if p.is_dir()}


def _commands(page: Path) -> list[list[str]]:
    """Every command of the page's bash blocks as argv (comments, sudo and loops removed)."""
    out = []
    for block in re.findall(r"```(?:bash|sh)\n(.*?)```", page.read_text(), flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            for part in " ".join(shlex.quote(w) for w in words).split(" ; "):
                argv = shlex.split(part)
                while argv and argv[0] in ("sudo", "do", "done", "then"):
                    argv = argv[1:]
                if argv and argv[0] not in ("for", "done", "#!/bin/bash"):
                    out.append([a.rstrip(";") for a in argv if a not in (";", ">")])
    return out


def _check(argv: list[str]) -> None:
    while re.match(r"^[A-Z_][A-Z0-9_]*=", argv[0]):  # VAR=value before a command
        argv = argv[1:]
    program = argv[0]
    if program == "make":
        targets = [a for a in argv[1:] if "=" not in a]
        assert targets and set(targets) <= TARGETS, f"no such make target: {targets}"
        for arg in argv[1:]:
            if arg.startswith("NB="):
                assert set(arg[3:].split()) <= NOTEBOOKS, arg
    elif program.endswith("/pingpong-lab"):
        module = cli.command(argv[1])
        try:
            module.parser().parse_args(argv[2:])
        except SystemExit as exc:
            raise AssertionError(f"pingpong-lab {argv[1]} refuses {argv[2:]}") from exc
    elif program in ("srun", "sbatch") or program.endswith("/mpiexec"):
        rest = argv[3:] if argv[1] == "-n" else argv[1:]
        while rest and rest[0].startswith("-"):  # the launcher's own options
            rest = rest[1:]
        assert rest, argv
        _check(rest)
    elif program.endswith("/python") and argv[1:3] == ["-m", "pingpong_lab.grader"]:
        from pingpong_lab.grader.__main__ import parser

        try:
            parser().parse_args(argv[3:])
        except SystemExit as exc:
            raise AssertionError(f"the grader refuses {argv[3:]}") from exc
    elif program.endswith("/python") and argv[1:3] == ["-m", "pingpong_lab.mpi.jobs"]:
        jobs.resolve(argv[3])
        json.loads(argv[4])
    elif program.startswith("kernels_c/build/"):
        assert re.search(rf"\b{Path(program).name}\b", KERNELS), f"kernels_c builds no {program}"
    elif program.startswith("slurm/"):
        assert (ROOT / program).is_file(), program
    elif program == ".venv/bin/jupyter" and argv[1] == "nbconvert":  # run in a test, verbatim
        assert (ROOT / argv[-1]).is_file(), argv[-1]  # tests/course/test_validate.py
    else:
        raise AssertionError(f"the docs check does not know the command {argv}")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_command_in_the_docs_names_what_exists(page):
    commands = _commands(page)
    for argv in commands:
        _check(argv)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_to_a_file_of_the_repository_points_at_one(page):
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text())
    local = [lnk for lnk in links if "://" not in lnk]
    missing = [lnk for lnk in local if not (page.parent / lnk).exists()]
    assert missing == []


def test_the_readme_opens_with_the_two_commands_and_requirements_for_every_role():
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= 120
    first_block = re.search(r"```bash\n(.*?)```", text, flags=re.S).group(1)
    assert [ln.split()[:2] for ln in first_block.splitlines()] == [
        ["make", "lab"],
        ["make", "test"],
    ]
    assert text.index("## Requirements") < text.index("## Where to start")
    for page in ("students", "instructors", "workshops", "deploying", "clusters", "developing"):
        assert f"docs/{page}.md" in text
    assert (ROOT / "LICENSE").is_file() and (ROOT / "CITATION.cff").is_file()


@pytest.mark.parametrize(
    "line",
    [
        "make no-such-target",
        "make validate NB=07_nothing",
        ".venv/bin/pingpong-lab sweep --no-such-flag",
        ".venv/bin/python -m pingpong_lab.mpi.jobs sweep '{}'",
        "sbatch slurm/missing.sbatch",
        ".venv/bin/mpiexec -n 2 kernels_c/build/pp_missing",
        "rm -rf build",
    ],
)
def test_the_docs_check_refuses_what_does_not_exist(line, tmp_path):
    page = tmp_path / "page.md"
    page.write_text(f"```bash\n{line}\n```\n")
    with pytest.raises((AssertionError, ValueError)):
        for argv in _commands(page):
            _check(argv)
