"""The grader's one command: `python -m pingpong_lab.grader <command> [options]`.

    release                 exercises/ and solutions/ from course/source (make release)
    autograde [--jobs N]    grade course/submitted/* as a class, N at a time (make autograde)
    solutions               run the solution notebooks, HTML in build/solutions-html
    check                   exit 1 when exercises/ or solutions/ drifted from course/source
    validate [NB ...]       run notebooks as the grader will and say what fails (make validate)
    array-count             how many Slurm array tasks grade the class
    array-task [INDEX]      grade one student as array task INDEX ($SLURM_ARRAY_TASK_ID)
    array-merge             merge the array tasks' checked gradebooks into the class gradebook

Every command but validate works on the course folder (--course, default: the current one).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .. import runtime
from . import arraygrade, build, classgrade


def _course(parser, folder: str) -> Path:
    course = Path(folder).resolve()
    if not (course / "nbgrader_config.py").is_file():
        parser.error(f"{course} has no nbgrader_config.py: run from course/ or pass --course")
    return course


def _array_task(args) -> int:
    index = args.index
    if index is None:
        index = os.environ.get("SLURM_ARRAY_TASK_ID")
        if index is None:
            raise IndexError("array-task needs an index (or $SLURM_ARRAY_TASK_ID)")
    return arraygrade.run_task(args.course, int(index), args.timeout)


def _array_count(args) -> int:
    print(len(arraygrade.todo(args.course)))
    return 0


COMMANDS = {
    "release": lambda args: build.cmd_release(args.course),
    "autograde": lambda args: build.cmd_autograde(args.course, args.jobs or None),
    "solutions": lambda args: build.cmd_solutions(args.course),
    "check": lambda args: build.cmd_check(args.course),
    "array-count": _array_count,
    "array-task": _array_task,
    "array-merge": lambda args: arraygrade.merge(args.course),
}


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="python -m pingpong_lab.grader",
        description="Release, grade and check the nbgrader course.",
    )
    sub = top.add_subparsers(dest="command", required=True, metavar="command")
    helps = dict(line.split(None, 1) for line in __doc__.split("\n\n")[1].strip().splitlines())
    helps = {k.strip(): v.strip() for k, v in helps.items()}
    for name in COMMANDS:
        one = sub.add_parser(name, help=helps[name].split("  ")[-1].strip())
        one.add_argument("--course", default=".", help="the course folder (default: .)")
        if name == "autograde":
            one.add_argument("--jobs", type=int, default=0, help="students at once (0: cores)")
        if name == "array-task":
            one.add_argument("index", nargs="?", help="the array index")
            one.add_argument(
                "--timeout",
                type=float,
                default=classgrade.SUBMISSION_TIMEOUT_S,
                help="seconds for one submission",
            )
    validate = sub.add_parser("validate", help=helps["validate"].split("  ")[-1].strip())
    validate.add_argument("notebooks", nargs="*", help="names (03_variability) or .ipynb paths")
    return top


def main(argv=None) -> int:
    runtime.own_tools_on_path()  # nbgrader runs alembic by name, venv activated or not
    runtime.without_iri_grammars()
    top = parser()
    args = top.parse_args(argv)
    if args.command == "validate":
        from . import validation

        return validation.main(args.notebooks)
    args.course = _course(top, args.course)
    if getattr(args, "jobs", 0) < 0:
        top.error("--jobs must be 0 (the cores) or more")
    # nbgrader runs `alembic` from PATH: this Python's environment first
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    try:
        return COMMANDS[args.command](args)
    except (IndexError, FileNotFoundError, ValueError) as exc:
        print(f"{args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
