"""`pingpong-lab hub`: the course on a JupyterHub, every student and the instructor a Unix
account of their own.

    sudo .venv/bin/pingpong-lab hub accounts --instructor ines ana ben   # once, as root
    sudo make hub                                                         # serve the hub

`accounts` creates the local accounts that are missing (each with a new password, printed
once, and a home closed to the other accounts), gives the instructor a copy of the course
(`~ines/course`: the master notebooks and the course settings), creates nbgrader's exchange
folder (writable by every account, as nbgrader's exchange needs) and writes the roster
(`.hub/roster.json`, or $PINGPONG_LAB_HUB). It also takes the
answers out of the students' reach: the master notebooks, the solutions, the tests and the git
history in this repository are closed to other accounts (the servers read the package, the
student settings and the C kernels, which stay open).

`hub/jupyterhub_config.py` reads the roster (`configure`): users log in with their Unix
password (PAM); each server runs as its user. A student's server opens their home folder with
the student lab's settings (jupyter/student: Validate as the grader runs it, the Assignment List,
the cell check); the instructor's opens `~/course` with Formgrader. $PINGPONG_LAB_HUB_SPAWNER
picks how servers start: `local` (processes of the hub's machine, the default) or `slurm`
(batchspawner's SlurmSpawner: each server a batch job, its MPI engines on that job's CPUs).

`pingpong-lab hub remove` deletes the roster's accounts and their homes (a test's teardown).
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

from .. import runtime
from ..grader.sandbox import REPO

HUB_CONFIG = REPO / "hub" / "jupyterhub_config.py"
PROXY = REPO / ".hub-tools" / "node_modules" / ".bin" / "configurable-http-proxy"
DEFAULT_EXCHANGE = "/srv/pingpong-lab/exchange"
COURSE_FOLDER = "course"  # in the instructor's home
# what a student's account must not read: answers, hidden tests, the history that holds both
CLOSED = ("course/source", "course/release", "solutions", "tests", ".git")
NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")  # a portable Unix user name
SPAWNERS = {
    "local": "jupyterhub.spawner.LocalProcessSpawner",
    "slurm": "batchspawner.SlurmSpawner",
}


class HubError(Exception):
    """A hub that cannot be set up or served as asked (the message says why and what to do)."""


def state_dir() -> Path:
    """Where the hub keeps its roster, database, cookie secret and logs."""
    return Path(runtime.setting("PINGPONG_LAB_HUB", str(REPO / ".hub"))).resolve()


def read_roster(state: Path | None = None) -> dict:
    """{"instructor", "students", "exchange"} as `accounts` wrote them."""
    path = (state or state_dir()) / "roster.json"
    if not path.exists():
        raise HubError(
            f"no roster at {path}: create the accounts first, as root: "
            "`.venv/bin/pingpong-lab hub accounts --instructor NAME STUDENT...`"
        )
    return json.loads(path.read_text())


def _check_names(names: list[str]) -> None:
    bad = [n for n in names if not NAME.match(n)]
    if bad:
        raise HubError(
            f"not a user name: {', '.join(map(repr, bad))} (lower-case letters, digits, _ and -, "
            "starting with a letter or _, at most 32 characters)"
        )
    if len(set(names)) != len(names):
        raise HubError("a name is given twice: the instructor and each student need their own")


def _exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
        return True
    except KeyError:
        return False


def _run(command: list[str], stdin: str | None = None) -> None:
    done = subprocess.run(command, input=stdin, capture_output=True, text=True)
    if done.returncode:
        raise HubError(f"`{' '.join(command)}` failed: {done.stderr.strip() or done.returncode}")


def _give_course(instructor: str) -> Path:
    """The instructor's own copy of the course: master notebooks and settings (no results)."""
    entry = pwd.getpwnam(instructor)
    course = Path(entry.pw_dir) / COURSE_FOLDER
    if not course.exists():
        shutil.copytree(REPO / "course" / "source", course / "source")
        shutil.copy2(REPO / "course" / "nbgrader_config.py", course / "nbgrader_config.py")
        for path in [course, *course.rglob("*")]:
            os.chown(path, entry.pw_uid, entry.pw_gid, follow_symlinks=False)
    return course


def _close_answers() -> list[str]:
    """Take other accounts' access to the answers away (the owner and root keep theirs)."""
    closed = []
    for name in CLOSED:
        path = REPO / name
        if path.exists():
            path.chmod(path.stat().st_mode & ~0o007)
            closed.append(name)
    return closed


def closed_folder(path: Path) -> Path | None:
    """The first folder on the way to `path` that other accounts cannot enter, or None."""
    for folder in reversed(path.parents):
        if not folder.stat().st_mode & 0o001:
            return folder
    return None


def add_accounts(
    instructor: str, students: list[str], exchange: str = DEFAULT_EXCHANGE, out=sys.stdout
) -> dict[str, str]:
    """Create the accounts that are missing ({user: new password}), the instructor's course,
    the exchange and the roster; root only."""
    if os.geteuid() != 0:
        raise HubError("creating accounts needs root: run it with sudo")
    _check_names([instructor, *students])
    if shutil.which("useradd") is None or shutil.which("chpasswd") is None:
        raise HubError("useradd and chpasswd are missing (Debian: apt-get install passwd)")
    python = Path(sys.executable).resolve()
    if folder := closed_folder(python):
        raise HubError(
            f"the environment's Python ({python}) is inside {folder}, which other accounts cannot "
            "enter, so no server could start: build the environment from a Python they can run "
            "(`make setup PYTHON=/usr/bin/python3`, or conda), or let them pass through "
            f"(`chmod o+x {folder}`)"
        )
    passwords = {}
    for user in [instructor, *students]:
        if not _exists(user):
            _run(["useradd", "--create-home", "--shell", "/bin/bash", user])
            passwords[user] = secrets.token_urlsafe(12)
            _run(["chpasswd"], stdin=f"{user}:{passwords[user]}\n")
            Path(pwd.getpwnam(user).pw_dir).chmod(0o700)  # useradd's default (umask 022): 755
        elif Path(pwd.getpwnam(user).pw_dir).stat().st_mode & 0o077:
            print(f"{user} exists; other accounts can read their home: chmod 700 it", file=out)
    course = _give_course(instructor)
    Path(exchange).mkdir(parents=True, exist_ok=True)
    Path(exchange).chmod(0o777)  # nbgrader's exchange: every account writes into it
    closed = _close_answers()
    state = state_dir()
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    roster = {"instructor": instructor, "students": list(students), "exchange": exchange}
    runtime.atomic_write(state / "roster.json", json.dumps(roster, indent=1) + "\n")
    for user, password in passwords.items():
        print(f"{user}: password {password}  (shown once)", file=out)
    print(f"the instructor's course: {course}; the exchange: {exchange}", file=out)
    print(f"closed to students: {', '.join(closed)}; roster: {state / 'roster.json'}", file=out)
    return passwords


def remove_accounts(out=sys.stdout) -> list[str]:
    """Delete the roster's accounts with their homes, and the roster."""
    if os.geteuid() != 0:
        raise HubError("removing accounts needs root: run it with sudo")
    state = state_dir()
    roster = read_roster(state)
    removed = []
    for user in [roster["instructor"], *roster["students"]]:
        if _exists(user):
            _run(["userdel", "--remove", user])
            removed.append(user)
    (state / "roster.json").unlink()
    print(f"removed: {', '.join(removed) or 'nobody'}", file=out)
    return removed


def server_environment(user: str, roster: dict) -> dict[str, str]:
    """What one user's server starts with: the lab's settings, the exchange, this environment's
    tools first on PATH, and what the lab writes kept in the user's home; for the instructor, the
    course's nbgrader settings (Formgrader reads nbgrader_config.py from the config path or the
    server's working folder, which is the home)."""
    lab = "instructor" if user == roster["instructor"] else "student"
    env = {
        "JUPYTER_CONFIG_DIR": str(REPO / "jupyter" / lab),
        "PINGPONG_LAB_EXCHANGE": roster["exchange"],
        "PATH": os.pathsep.join(
            [str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]
        ),  # fmt: skip
    }
    home = Path(pwd.getpwnam(user).pw_dir)
    env["JUPYTERLAB_SETTINGS_DIR"] = str(home / ".jupyter" / "lab" / "user-settings")
    env["JUPYTERLAB_WORKSPACES_DIR"] = str(home / ".jupyter" / "lab" / "workspaces")
    if lab == "student":
        env["JUPYTER_PATH"] = str(REPO / "jupyter" / "student" / "share")
    else:
        env["JUPYTER_CONFIG_PATH"] = str(home / COURSE_FOLDER)
    return env


def configure(c, state: Path | None = None) -> None:
    """Set JupyterHub's configuration `c` for the course (hub/jupyterhub_config.py)."""
    state = state or state_dir()
    roster = read_roster(state)
    kind = runtime.setting("PINGPONG_LAB_HUB_SPAWNER", "local")
    if kind not in SPAWNERS:
        raise HubError(f"PINGPONG_LAB_HUB_SPAWNER={kind!r}: one of {', '.join(SPAWNERS)}")
    c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(state / "cookie_secret")
    c.JupyterHub.pid_file = str(state / "jupyterhub.pid")
    if PROXY.exists():
        c.ConfigurableHTTPProxy.command = [str(PROXY)]
    c.ConfigurableHTTPProxy.pid_file = str(state / "proxy.pid")
    c.JupyterHub.authenticator_class = "jupyterhub.auth.PAMAuthenticator"
    c.Authenticator.allowed_users = {roster["instructor"], *roster["students"]}
    c.Authenticator.admin_users = {roster["instructor"]}
    c.JupyterHub.spawner_class = SPAWNERS[kind]
    if kind == "slurm":
        slurm_servers(c)
    c.Spawner.cmd = [str(Path(sys.executable).parent / "jupyterhub-singleuser")]
    c.Spawner.default_url = "/lab"
    c.Spawner.start_timeout = 120
    c.Spawner.http_timeout = 120

    def settings(spawner) -> None:
        user = spawner.user.name
        spawner.environment = {**spawner.environment, **server_environment(user, roster)}
        home = Path(pwd.getpwnam(user).pw_dir)
        mine = home / COURSE_FOLDER if user == roster["instructor"] else home
        spawner.notebook_dir = str(mine)

    c.Spawner.pre_spawn_hook = settings


SERVER_CPUS = 2  # a server's Slurm job: the notebooks' two ranks (05's four oversubscribe)


def slurm_servers(c) -> None:
    """Each server a Slurm batch job of its user (batchspawner's SlurmSpawner), submitted by the
    hub (root) as that user. The server runs in the batch script itself, not in a job step, so
    the job's CPUs are free for the job steps of its MPI engines (mpiexec in an allocation
    starts its ranks through srun)."""
    runuser = shutil.which("runuser") or "/usr/sbin/runuser"  # not on a server's PATH
    c.SlurmSpawner.exec_prefix = f"{runuser} -u {{username}} --"  # batchspawner's: sudo
    c.SlurmSpawner.req_srun = ""
    c.SlurmSpawner.req_nprocs = str(SERVER_CPUS)
    c.SlurmSpawner.req_runtime = "8:00:00"
    # MPICH's mpiexec in the job starts its ranks on the job's node itself, not as srun steps
    # (a step per check would cost seconds): the job's CPUs (its cgroup, where Slurm confines)
    c.SlurmSpawner.environment = {"HYDRA_LAUNCHER": "fork"}
    # sbatch and the job's srun find this Slurm (SLURM_CONF names a private one, as in tests)
    c.SlurmSpawner.env_keep = ["JUPYTERHUB_SINGLEUSER_APP", "LANG", "LC_ALL", "SLURM_CONF"]


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="pingpong-lab hub", description=__doc__.split("\n\n")[0])
    sub = top.add_subparsers(dest="action", required=True)
    add = sub.add_parser("accounts", help="create the instructor's and students' accounts (root)")
    add.add_argument("--instructor", required=True, help="the instructor's user name")
    add.add_argument("students", nargs="+", help="the students' user names")
    add.add_argument("--exchange", default=DEFAULT_EXCHANGE, help="nbgrader's exchange folder")
    sub.add_parser("remove", help="delete the roster's accounts and their homes (root)")
    return top


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.action == "accounts":
            add_accounts(args.instructor, args.students, args.exchange)
        else:
            remove_accounts()
    except HubError as exc:
        print(f"pingpong-lab hub: error: {exc}", file=sys.stderr)
        return 1
    return 0
