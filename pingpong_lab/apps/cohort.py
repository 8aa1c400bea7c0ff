"""``pingpong-lab cohort``: the instructor's view of the class, from an nbgrader course folder.

Usage::

    pingpong-lab cohort course [--out course/cohort]       # or: make cohort

Reads the results every student's notebooks saved into their submission
(course/submitted/<student>/<assignment>/my_results/) and writes cohort.csv, cohort.html (the
class: a row per student with flags, alpha and 1/beta per CPU model) and
students/<student>.html (their numbers and provenance beside their written answers and the mark
scheme); see pingpong_lab.grader.cohort. A course folder that does not exist or has no
submitted/ is one line on stderr (``pingpong-lab cohort: error: ...``) with exit status 2; a
page that cannot be written exits with 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..grader import cohort, cohort_pages
from .usage import OneLineParser, UsageError

PROG = "pingpong-lab cohort"


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog=PROG,
        description="Each student's measured numbers beside their written answers, with flags "
        "(implausible fits, missing results, copied samples), as HTML and CSV.",
    )
    p.add_argument("course", help="the nbgrader course folder (holding submitted/ and source/)")
    p.add_argument("--out", help="where to write the pages (default: COURSE/cohort/)")
    return p


def _fail(message: str, status: int) -> int:
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)
    return status


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 2 usage or input error, 1 failed write)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except UsageError as exc:
        return _fail(str(exc), 2)
    course = Path(args.course)
    try:
        cohort.students(course)  # the course folder and its submitted/ exist
    except OSError as exc:
        return _fail(str(exc), 2)
    out = Path(args.out) if args.out else course / "cohort"
    try:
        path = cohort_pages.write(course, out)
    except OSError as exc:
        return _fail(f"could not write the pages in {out}: {exc}", 1)
    print(f"the class: {path}; one page per student in {path.parent / 'students'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
