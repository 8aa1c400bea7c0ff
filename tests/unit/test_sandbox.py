"""The grading sandbox shows a submission nothing of the class, and its code cannot write the
gradebook nbgrader records its scores in (real bubblewrap; skipped where it cannot run)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pingpong_lab.grader import sandbox

pytestmark = pytest.mark.skipif(sandbox.problem() is not None, reason=str(sandbox.problem()))

# a course outside /tmp (as course/ in a clone is): the sandbox must hide it by itself
OUTSIDE_TMP = sandbox.REPO / "build"

# in each probe: write a file (and its folders), saying "written" or why not
TRIES = """\
def tries(path):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a") as f:
            f.write("x")
        return "written"
    except OSError as exc:
        return exc.strerror
"""

PROBE = r"""
import os, sys, json
course, work, stage = sys.argv[1:4]
report = {"course": sorted(os.listdir(course)) if os.path.isdir(course) else None}
{TRIES}report["class gradebook"] = tries(os.path.join(course, "gradebook.db"))
report["root"] = tries("/vandal")
report["stage gradebook"] = tries(os.path.join(stage, "gradebook.db"))
report["own folder"] = tries(os.path.join(stage, "autograded", "ann", "x.txt"))
report["work"] = tries(os.path.join(work, "tmp", "x"))
report["home"] = sorted(os.listdir(os.path.expanduser("~")))
print(json.dumps(report))
""".replace("{TRIES}", TRIES)


@pytest.fixture
def class_course():
    OUTSIDE_TMP.mkdir(exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="sandbox-test-", dir=OUTSIDE_TMP))
    course = root / "course"
    (course / "submitted" / "bob").mkdir(parents=True)
    (course / "gradebook.db").write_text("the class's grades")
    work = Path(tempfile.mkdtemp(prefix="pingpong-grade-ann-"))
    stage = work / "course"
    (stage / "autograded" / "ann").mkdir(parents=True)
    (stage / "gradebook.db").write_text("ann's scores")
    (work / "tmp").mkdir()
    yield course, work, stage
    shutil.rmtree(root)
    shutil.rmtree(work)


def _run(args, course, work, stage):
    import json

    cmd = [*args, sys.executable, "-c", PROBE, str(course), str(work), str(stage)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_class_course_and_the_home_are_not_there_and_only_the_work_folder_is_writable(
    class_course,
):
    course, work, stage = class_course
    seen = _run(sandbox.grading_args(course, work), course, work, stage)
    assert seen["course"] == []  # no gradebook, no other student's submission
    assert seen["root"] == "Read-only file system"  # a write to the class path stays inside
    assert seen["stage gradebook"] == "written" and seen["work"] == "written"
    assert Path.home().name not in seen["home"] or seen["home"] == []
    assert (course / "gradebook.db").read_text() == "the class's grades"


def test_the_learners_code_cannot_write_the_gradebook_of_its_own_stage(class_course):
    course, work, stage = class_course
    confined = sandbox.confine_prefix([str(stage)], [str(stage / "autograded" / "ann")])
    seen = _run(sandbox.grading_args(course, work) + confined, course, work, stage)
    assert seen["stage gradebook"] == "Read-only file system"
    assert seen["own folder"] == "written" and seen["work"] == "written"
    assert (stage / "gradebook.db").read_text() == "ann's scores"


def test_the_confined_code_cannot_lift_the_confinement(class_course):
    course, work, stage = class_course
    confined = sandbox.confine_prefix([str(stage)], [])
    undo = f"umount {stage} || mount -o remount,rw {stage}; echo x >> {stage}/gradebook.db"
    cmd = sandbox.grading_args(course, work) + confined + ["sh", "-c", undo]
    subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert (stage / "gradebook.db").read_text() == "ann's scores"


def test_a_clone_in_tmp_keeps_its_code_and_hides_its_course(monkeypatch):
    """CI may clone the repository under /tmp: the sandbox's private /tmp must not hide the
    code, and the clone's course/ must still be hidden."""
    clone = Path(tempfile.mkdtemp(prefix="clone-", dir="/tmp"))
    work = Path(tempfile.mkdtemp(prefix="pingpong-grade-ann-"))
    try:
        (clone / "pingpong_lab").mkdir()
        (clone / "pingpong_lab" / "code.py").write_text("the course's code")
        course = clone / "course"
        (course / "submitted" / "bob").mkdir(parents=True)
        (course / "gradebook.db").write_text("the class's grades")
        monkeypatch.setattr(sandbox, "REPO", clone)
        probe = (
            "import os, sys; c = sys.argv[1]; "
            "print(open(os.path.join(c, 'pingpong_lab', 'code.py')).read()); "
            "print(sorted(os.listdir(os.path.join(c, 'course'))))"
        )
        cmd = [*sandbox.grading_args(course, work), sys.executable, "-c", probe, str(clone)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines() == ["the course's code", "[]"]
    finally:
        shutil.rmtree(clone)
        shutil.rmtree(work)


LEAVE_BEHIND = r"""
import json, os, signal, sys
home, scratch = os.environ["HOME"], os.environ["IPYTHONDIR"]
seen = {"home": sorted(os.listdir(home)), "scratch": sorted(os.listdir(os.path.dirname(scratch)))}
{TRIES}seen["home startup"] = tries(os.path.join(home, ".ipython/profile_default/startup/a.py"))
seen["scratch startup"] = tries(os.path.join(scratch, "profile_default/startup/a.py"))
seen["kept"] = os.listdir(sys.argv[1])
try:
    os.kill(int(sys.argv[2]), signal.SIGTERM)
    seen["signal outside"] = "sent"
except ProcessLookupError:
    seen["signal outside"] = "no such process"
seen["safe path"] = sys.flags.safe_path
print(json.dumps(seen))
""".replace("{TRIES}", TRIES)


def test_a_confined_process_keeps_nothing_and_reaches_no_process_outside(tmp_path):
    """An empty read-only home (but the folders it must read), a scratch of its own that the
    next process does not see, its own pid namespace, and Python that ignores its folder."""
    stage = tmp_path / "stage"
    (stage / "mine").mkdir(parents=True)
    kept = Path.home() / ".local" / "share" / "pingpong-lab-test-runtime"
    kept.mkdir(parents=True, exist_ok=True)
    (kept / "kernel-1.json").write_text("{}")
    outside = subprocess.Popen(["sleep", "60"])
    try:
        confined = sandbox.confine_prefix([str(stage)], [str(stage / "mine")], keep=[kept])
        runs = []
        for _ in range(2):
            cmd = [*confined, sys.executable, "-c", LEAVE_BEHIND, str(kept), str(outside.pid)]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, proc.stderr
            runs.append(__import__("json").loads(proc.stdout))
        assert outside.poll() is None  # still running: the confined process could not end it
    finally:
        outside.kill()
        outside.wait()
        shutil.rmtree(kept)
    first, second = runs
    assert first["home startup"] == "Read-only file system"
    assert first["scratch startup"] == "written"
    assert second["scratch"] == ["tmp"]  # what the first one wrote is gone: an empty $TMPDIR
    assert first["kept"] == ["kernel-1.json"]
    assert first["signal outside"] == "no such process" and first["safe path"]
    assert not (Path.home() / ".ipython" / "profile_default" / "startup" / "a.py").exists()
