"""bubblewrap sandboxes: one around each submission's grading, one more around its code.

Two walls, because two kinds of code run while a submission is graded:

- **The grading sandbox** (`grading_args`) holds nbgrader, its kernels and the MPI engines of
  one submission. The file system is read-only; the course folder the instructor grades
  (its class gradebook, every student's submissions, grades and feedback) and the grader's
  home are not there at all (empty folders in their place); /tmp and /dev/shm are private and
  empty; there is no network (a private loopback only); the process tree is private and ends
  with the grader. Only the submission's stage (see stage.py: a scratch course with this
  student's submission and a gradebook of their own), a home and a build folder are
  writable.
- **The code's confinement** (`confine_prefix`), inside that, starts each kernel and each MPI
  engine job: the stage is read-only there except the student's autograded/ folder (their
  notebooks' working folder), and the process has no capabilities, so it cannot remount
  anything. nbgrader, outside the confinement, is the only writer of the stage's gradebook: a
  submission cannot write its own scores either.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .. import runtime

REPO = Path(__file__).resolve().parents[2]  # the course's code, notebooks and C kernels


def _bwrap() -> str | None:
    return shutil.which("bwrap")


def problem() -> str | None:
    """Why grading cannot be sandboxed here (bubblewrap missing or refused), or None."""
    bwrap = _bwrap()
    if bwrap is None:
        return "bubblewrap is not installed (`make sandbox` installs it as root)"
    inner = [bwrap, "--dev-bind", "/", "/", "--cap-drop", "ALL", "true"]
    outer = [bwrap, "--dev-bind", "/", "/", "--unshare-net", "--unshare-pid"]
    probe = subprocess.run([*outer, *inner], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"bubblewrap cannot start here ({probe.stderr.strip()[:120]})"
    return None


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def grading_args(course: Path, work: Path) -> list[str]:
    """bubblewrap arguments that run one submission's grading, writing only `work` (the
    submission's folder: its stage, a home, a build folder).

    `course` (the class's course folder) and the grader's home are hidden; everything else
    is read-only."""
    course, work = Path(course).resolve(), Path(work).resolve()
    args = [_bwrap() or "bwrap", "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev"]
    args += ["--proc", "/proc", "--unshare-net", "--unshare-pid", "--die-with-parent"]
    # hidden: the grader's home, any exchange, and the private /tmp, /dev/shm, /var/tmp (MPI
    # names its shared-memory segments after process ids, which repeat between sandboxes)
    hidden = [Path.home().resolve()]
    exchange = runtime.setting("PINGPONG_LAB_EXCHANGE")
    if exchange:
        hidden.append(Path(exchange).resolve())
    hidden = [h for h in hidden if h != Path("/") and h.is_dir()]
    hidden += [Path(p).resolve() for p in ("/tmp", "/dev/shm", "/var/tmp") if Path(p).is_dir()]
    for folder in hidden:
        args += ["--tmpfs", str(folder)]
    # the code the grading runs, where a hidden folder holds it (a clone in the home or in
    # /tmp): the clone, its environment, and the Python that environment was made from
    code = {REPO, Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    code.add(Path(sys.executable).resolve().parents[1])
    shown = [c for c in sorted(code) if any(_inside(c, h) for h in hidden)]
    for folder in shown:
        args += ["--ro-bind", str(folder), str(folder)]
    # the class's course: hidden unless a hidden folder hides it already (and no code shown
    # again holds it, as a clone holds course/)
    if course.is_dir() and (
        not any(_inside(course, h) for h in hidden) or any(_inside(course, c) for c in shown)
    ):
        args += ["--tmpfs", str(course)]
    args += ["--bind", str(work), str(work)]
    return args


@functools.cache
def can_confine() -> bool:
    """True when bubblewrap can start a confinement here (in the grading sandbox too)."""
    bwrap = _bwrap()
    if bwrap is None:
        return False
    probe = [bwrap, "--dev-bind", "/", "/", "--cap-drop", "ALL", "--die-with-parent", "true"]
    return subprocess.run(probe, capture_output=True).returncode == 0


# Inside a confinement, what IPython, matplotlib and Python read at start-up comes only from
# the process's own scratch (an empty tmpfs that ends with it): no startup file, profile,
# matplotlibrc or module planted by an earlier kernel is found. PYTHONSAFEPATH keeps the
# working folder (the learner's own) off sys.path, so a planted `numpy.py` is never imported.
SCRATCH = ".pingpong-lab-scratch"  # under the read-only home


# the line a grading kernel runs as it starts (IPKernelApp.exec_lines): see runtime.not_dumpable
NOT_DUMPABLE_LINE = "__import__('pingpong_lab.runtime', fromlist=['x']).not_dumpable()"


def confined_env(home: str) -> dict[str, str]:
    """The variables a confined process starts with (home: the folder it sees as $HOME)."""
    scratch = os.path.join(home, SCRATCH)
    return {
        "HOME": home,
        "TMPDIR": os.path.join(scratch, "tmp"),
        "IPYTHONDIR": os.path.join(scratch, "ipython"),
        "MPLCONFIGDIR": os.path.join(scratch, "matplotlib"),
        "PYTHONSAFEPATH": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONSTARTUP": "",
    }


def confine_prefix(readonly: list[str], writable: list[str], keep=(), hidden=()) -> list[str]:
    """The command that runs the command after it confined; nothing when bubblewrap cannot,
    or when a folder named does not exist (there is nothing to confine to).

    Confined: `readonly` folders are read-only (but the `writable` ones inside them); the
    home folder is empty and read-only, but for the `keep` folders inside it (read-only: a
    kernel's connection file, say) and the course's code where a clone lives there; a scratch
    folder in the home, its temporary folder included (see confined_env), is a tmpfs of this
    process alone; the process runs in
    a pid namespace of its own (it cannot signal or trace any process outside, and everything
    it starts ends with it) and holds no capabilities (it cannot remount anything). The
    `hidden` folders (the judge's connection files) are empty folders there."""
    bwrap = _bwrap()
    folders = [*readonly, *writable]
    if not readonly or not can_confine() or not all(os.path.isdir(f) for f in folders):
        return []
    home = Path.home().resolve()
    args = [bwrap, "--dev-bind", "/", "/"]
    hide_home = home != Path("/") and home.is_dir()
    if hide_home:
        args += ["--tmpfs", str(home), "--tmpfs", str(home / SCRATCH)]
        args += ["--dir", str(home / SCRATCH / "tmp")]
        code = {REPO, Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
        code.add(Path(sys.executable).resolve().parents[1])
        for folder in sorted(code | {Path(k).resolve() for k in keep}):
            if _inside(folder, home) and folder.is_dir():
                args += ["--ro-bind", str(folder), str(folder)]
    for folder in sorted(readonly, key=lambda f: len(Path(f).parts)):  # outer folders first
        args += ["--ro-bind", folder, folder]
    for folder in writable:
        args += ["--bind", folder, folder]
    for folder in hidden:
        if os.path.isdir(folder):
            args += ["--tmpfs", folder, "--remount-ro", folder]
    if hide_home:
        args += ["--remount-ro", str(home)]
    # its own pid namespace, and a /proc that shows it (process ids the process reads, of what
    # it started, are those it can use)
    args += ["--unshare-pid", "--proc", "/proc", "--cap-drop", "ALL", "--die-with-parent", "--"]
    # ipykernel ends itself when its parent pid turns 1 (JPY_PARENT_PID names the parent to
    # watch): in a pid namespace of its own the kernel's parent is that namespace's init, pid
    # 1. The namespace already ends the kernel with its parent.
    env = [shutil.which("env") or "env", "-u", "JPY_PARENT_PID"]
    return [*args, *env, *(f"{k}={v}" for k, v in confined_env(str(home)).items())]
