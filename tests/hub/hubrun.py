"""The course's JupyterHub for one test module: accounts made by `pingpong-lab hub accounts`,
the hub started from hub/jupyterhub_config.py on a free port, users logged in through its login
page in Debian's chromium.

    with running_hub(tmp) as hub, hub.browser() as chromium:  # root, the proxy, chromium
        user = hub.login(chromium, hub.instructor)  # logged in, its lab open
        user.page.goto(user.server + "formgrader/manage_assignments")

On exit the hub is stopped by its PID (it stops the servers it started), the accounts and their
homes are deleted, the folders the accounts step closed get their modes back, and the test
fails if a process of any of the accounts is still alive.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from pingpong_lab.apps import hub as hubapp

from ..browser.lab import chromium_path, free_port, http_status
from ..conftest import ROOT

BIN = ROOT / ".venv" / "bin"
START_TIMEOUT_S = 60
SPAWN_TIMEOUT_S = 150


def problem() -> str | None:
    """Why the course's hub cannot run here, or None."""
    if os.geteuid() != 0:
        return "the hub tier needs root (accounts, servers run as their users)"
    if not (BIN / "jupyterhub").exists():
        return "jupyterhub is not installed (make setup installs the hub extras)"
    if not hubapp.PROXY.exists():
        return "configurable-http-proxy is not installed (make hub-tools: node and npm)"
    return None


class User:
    """A logged-in user: their browser page and their server's URL."""

    def __init__(self, hub, name: str, context, page):
        self.hub, self.name, self.context, self.page = hub, name, context, page
        self.server = f"{hub.base}/user/{name}/"

    @property
    def home(self) -> Path:
        import pwd

        return Path(pwd.getpwnam(self.name).pw_dir)


class Hub:
    def __init__(self, base, passwords, roster, state, log, executable, extra_env):
        self.base, self.passwords, self.state, self.log = base, passwords, state, log
        self.extra_env = extra_env  # what every command of the accounts needs too (SLURM_CONF)
        self.instructor, self.students = roster["instructor"], roster["students"]
        self.exchange = Path(roster["exchange"])
        self.executable = executable

    @contextmanager
    def browser(self):
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            chromium = p.chromium.launch(
                executable_path=self.executable, args=["--disable-dev-shm-usage", "--no-sandbox"]
            )
            try:
                yield chromium
            finally:
                chromium.close()

    def login(self, chromium, name: str) -> User:
        """Log `name` in through the hub's login page and wait for their lab."""
        context = chromium.new_context(viewport={"width": 1400, "height": 900})
        page = context.new_page()
        page.set_default_timeout(60_000)
        page.goto(f"{self.base}/hub/login")
        page.locator("#username_input").fill(name)
        page.locator("#password_input").fill(self.passwords[name])
        page.locator("#login_submit").click()
        page.wait_for_url(re.compile(rf"/user/{name}/lab"), timeout=SPAWN_TIMEOUT_S * 1000)
        page.locator(".jp-LabShell").wait_for(timeout=SPAWN_TIMEOUT_S * 1000)
        return User(self, name, context, page)

    def run_as(
        self, name: str, *command: str, cwd=None, timeout: float = 600
    ) -> subprocess.CompletedProcess:
        """`command` run as user `name` (from their home, or `cwd`), as their terminal would."""
        home = hubapp.pwd.getpwnam(name).pw_dir
        env = {"HOME": home, "USER": name, "LOGNAME": name, "PATH": f"{BIN}:/usr/bin:/bin"}
        env.update(self.extra_env)
        return subprocess.run(
            ["runuser", "-u", name, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
             *command],
            cwd=cwd or home, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip


def _users_processes(names) -> list[str]:
    left = []
    for p in psutil.process_iter(["username", "cmdline"]):
        if p.info["username"] in names:
            left.append(f"{p.info['username']}: {' '.join(p.info['cmdline'] or [])[:120]}")
    return left


@contextmanager
def running_hub(root: Path, spawner: str = "local", extra_env: dict | None = None):
    """Accounts (an instructor, two students), the hub serving them; everything undone after."""
    if reason := problem():
        pytest.skip(reason)
    executable = chromium_path()
    suffix = os.urandom(2).hex()
    instructor, students = f"ppi{suffix}", [f"ppa{suffix}", f"ppb{suffix}"]
    state = root / "hub-state"
    shared = Path(tempfile.mkdtemp(prefix="pingpong-lab-hub-"))  # pytest's tmp is root's only
    shared.chmod(0o755)
    exchange = shared / "exchange"
    env = {**os.environ, "PINGPONG_LAB_HUB": str(state), "PINGPONG_LAB_HUB_SPAWNER": spawner}
    env.update(extra_env or {})
    modes = {name: (ROOT / name).stat().st_mode for name in hubapp.CLOSED if (ROOT / name).exists()}
    closed = hubapp.closed_folder(Path(sys.executable).resolve())  # a Python under /root, say
    if closed is not None:
        modes[str(closed)] = closed.stat().st_mode
        closed.chmod(closed.stat().st_mode | 0o001)  # pass through, not list (undone after)
    cli = [str(BIN / "pingpong-lab"), "hub"]
    made = subprocess.run(
        [*cli, "accounts", "--instructor", instructor, *students, "--exchange", str(exchange)],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    passwords = dict(re.findall(r"^(\S+): password (\S+)", made.stdout, re.M))
    log = root / "hub.log"
    port = free_port()
    proc = None
    try:
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [str(BIN / "jupyterhub"), "-f", str(hubapp.HUB_CONFIG), "--ip", "127.0.0.1",
                 "--port", str(port)],
                cwd=state, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_TIMEOUT_S
        while http_status(f"{base}/hub/health") != 200:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the hub did not start:\n" + log.read_text()[-3000:])
            time.sleep(0.5)
        roster = hubapp.read_roster(state)
        yield Hub(base, passwords, roster, state, log, executable, extra_env or {})
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGTERM)  # the hub stops the servers it started
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        names = {instructor, *students}
        deadline = time.monotonic() + 30
        while (left := _users_processes(names)) and time.monotonic() < deadline:
            time.sleep(0.5)
        for p in psutil.process_iter(["username"]):
            if p.info["username"] in names:
                p.kill()
        removed = subprocess.run([*cli, "remove"], env=env, capture_output=True, text=True)
        for name, mode in modes.items():
            (ROOT / name).chmod(mode)
        shutil.rmtree(shared, ignore_errors=True)
        assert removed.returncode == 0, removed.stderr
        assert left == [], f"processes of the hub's accounts outlived it: {left}"
