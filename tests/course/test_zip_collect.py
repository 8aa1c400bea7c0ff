"""docs/instructors.md's LMS path, verbatim: archives downloaded from a learning platform,
`nbgrader zip_collect`, `nbgrader autograde`, `nbgrader generate_feedback` and
`nbgrader release_feedback`, each run by its full path as an instructor types it in course/."""

from __future__ import annotations

import getpass
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from pingpong_lab.grader import build, zipcollect

from .submissions import grading_env, processes_left, scratch_course

ROOT = Path(__file__).resolve().parents[2]
NAME = "00_setup"
NBGRADER = Path(sys.executable).parent / "nbgrader"  # the environment's, not activated


def _archive(path: Path, files: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)


def _nbgrader(course: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [str(NBGRADER), *args], cwd=course, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, f"nbgrader {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_the_course_regexp_reads_both_layouts_and_skips_platform_litter():
    def match(path):
        import re

        m = re.match(zipcollect.NAMED_REGEXP, path)
        return m and (m["student_id"], m["file_id"])

    base = "/c/downloaded/02_timing/extracted"
    assert match(f"{base}/alice/02_timing.ipynb") == ("alice", "02_timing.ipynb")
    assert match(f"{base}/alice/my_results/02_sweep.npz") == ("alice", "my_results/02_sweep.npz")
    assert match(f"{base}/bob/02_timing/bench.c") == ("bob", "bench.c")
    assert match(f"{base}/bob/02_timing/my_results/a.json") == ("bob", "my_results/a.json")
    assert not match(f"{base}/bob/__MACOSX/02_timing/._02_timing.ipynb")
    assert not match(f"{base}/bob/02_timing/._02_timing.ipynb")


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="grading confines kernels (bubblewrap)")
def test_lms_archives_are_collected_with_their_results_graded_and_their_feedback_released(
    tmp_path,
):
    course = scratch_course(tmp_path, ROOT / "course", [NAME])
    tag, env = grading_env(tmp_path)
    env["PATH"] = "/usr/bin:/bin"  # nothing of the environment on PATH: full paths only
    _nbgrader(course, env, "generate_assignment", NAME, "--force")
    exchange = env["PINGPONG_LAB_EXCHANGE"]
    answered = (ROOT / "solutions" / NAME / f"{NAME}.ipynb").read_bytes()
    archive = course / "downloaded" / NAME / "archive"
    archive.mkdir(parents=True)
    # alice zipped the files themselves, bob the assignment's folder (on a Mac)
    _archive(
        archive / "alice.zip",
        {f"{NAME}.ipynb": answered, "my_results/00_check.json": b"{}", "probe.c": b"int x;\n"},
    )
    _archive(
        archive / "bob.zip",
        {f"{NAME}/{NAME}.ipynb": answered, f"__MACOSX/{NAME}/._{NAME}.ipynb": b"\0\5\26\7"},
    )

    # and one student through nbgrader's exchange (this Unix user, from a folder of their own)
    _nbgrader(course, env, "release_assignment", NAME)
    home, flags = tmp_path / "student", ["--course", "mpi-pingpong", f"--Exchange.root={exchange}"]
    home.mkdir()
    _nbgrader(home, env, "fetch_assignment", NAME, *flags)
    (home / NAME / f"{NAME}.ipynb").write_bytes(answered)
    _nbgrader(home, env, "submit", NAME, *flags)
    _nbgrader(course, env, "collect", NAME)
    me = getpass.getuser()

    _nbgrader(course, env, "zip_collect", NAME)  # docs/instructors.md, step 3
    alice, bob = (course / "submitted" / s / NAME for s in ("alice", "bob"))
    assert sorted(p.relative_to(alice).as_posix() for p in alice.rglob("*") if p.is_file()) == [
        f"{NAME}.ipynb",
        "my_results/00_check.json",
        "probe.c",
        "timestamp.txt",
    ]
    assert sorted(p.name for p in bob.iterdir()) == [f"{NAME}.ipynb", "timestamp.txt"]

    _nbgrader(course, env, "autograde", NAME)
    _nbgrader(course, env, "generate_feedback", "--force", NAME)  # step 7, verbatim
    released = _nbgrader(course, env, "release_feedback", NAME)
    (warning,) = [x for x in released.stderr.splitlines() if "Not released through" in x]
    assert "alice, bob." in warning and me not in warning
    full = build._autograded_points(course, [NAME])[NAME]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {s: gb.find_submission(NAME, s).score for s in ("alice", "bob", me)}
    assert scores == {"alice": full, "bob": full, me: full}
    for student in ("alice", "bob", me):
        assert (course / "feedback" / student / NAME / f"{NAME}.html").is_file()
    assert len(list(Path(exchange).glob("*/feedback/*.html"))) == 1  # the exchange's student
    _nbgrader(home, env, "fetch_feedback", NAME, *flags)
    assert list(home.glob(f"{NAME}/feedback/*/{NAME}.html"))
    assert processes_left(tag) == []
