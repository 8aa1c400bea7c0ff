"""One submission's stage: a scratch course it is graded in, and what comes back from it.

    work/course/nbgrader_config.py          the class course's settings (copied)
    work/course/source/<assignment>/        the master notebooks of the graded assignments
    work/course/submitted/<student>/        this student's submission (copied)
    work/course/gradebook.db                the course's cells, no student (gradebook.py)
    work/course/autograded/, feedback/      written by the grading
    work/home/, work/tmp/, work/c-build/    $HOME, $TMPDIR and the student's C build

Nothing of the class course is reachable from the stage; the grading writes only here. What
comes back is plain data: the stage's gradebook, checked and merged by gradebook.py, and the
student's graded notebooks and feedback, regular files only (never a link) copied into the
class course's autograded/<student>/ and feedback/<student>/.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from . import gradebook

MAX_FILE_BYTES = 256 << 20  # a graded notebook or feedback page bigger than this is not copied


def make(course: Path, work: Path, student: str, assignments: list[str]) -> Path:
    """Set up the stage of `student`'s `assignments` in `work`; returns its course folder."""
    course, stage = Path(course), Path(work) / "course"
    for folder in ("home", "tmp", "c-build"):
        (Path(work) / folder).mkdir(parents=True, exist_ok=True)
    stage.mkdir(parents=True)
    shutil.copy(course / "nbgrader_config.py", stage / "nbgrader_config.py")
    for name in assignments:
        shutil.copytree(course / "source" / name, stage / "source" / name, symlinks=True)
        submitted = course / "submitted" / student / name
        _copy_files(submitted, stage / "submitted" / student / name)
    for name in ("autograded", "feedback"):
        (stage / name / student).mkdir(parents=True)
    gradebook.for_one_student(course / "gradebook.db", stage / "gradebook.db")
    return stage


def _copy_files(src: Path, dest: Path) -> list[str]:
    """Copy the regular files under src to dest (links, devices and oversized files left out,
    and named in the returned list)."""
    skipped = []
    dest.mkdir(parents=True, exist_ok=True)
    for item in sorted(src.rglob("*")):
        rel = item.relative_to(src)
        if any(p.is_symlink() for p in [item, *item.parents][: len(rel.parts)]):
            skipped.append(f"{rel} (a link)")
            continue
        target = dest / rel
        if item.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif not item.is_file():
            skipped.append(f"{rel} (not a regular file)")
        elif item.stat().st_size > MAX_FILE_BYTES:
            skipped.append(f"{rel} (over {MAX_FILE_BYTES >> 20} MiB)")
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(item, target, follow_symlinks=False)
    return skipped


def bring_back(stage: Path, course: Path, student: str, assignments: list[str]) -> list[str]:
    """Copy the student's graded notebooks and feedback from the stage into the class course,
    replacing those of the same assignments. Returns what was left out, and why."""
    skipped = []
    for kind in ("autograded", "feedback"):
        for name in assignments:
            src = Path(stage) / kind / student / name
            dest = Path(course) / kind / student / name
            if dest.is_symlink() or dest.is_file():
                dest.unlink()
            elif dest.exists():
                shutil.rmtree(dest)
            if src.is_dir() and not src.is_symlink():
                skipped += [f"{kind}/{name}/{s}" for s in _copy_files(src, dest)]
    return skipped
