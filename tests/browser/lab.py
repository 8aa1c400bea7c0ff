"""A JupyterLab served by `make lab` or `make instructor` for one test module, and a Chromium
driven by Playwright.

The browser is Debian's chromium (`make browser` installs it as root); Playwright never
downloads one. The server runs in its own process group, started on a free port with a token,
and is stopped by its PID; every process it starts carries a tag, so a test can check that none
is left behind.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from ..conftest import ROOT

ARTIFACTS = ROOT / "test-artifacts" / "browser"
START_TIMEOUT_S = 180


def chromium_path() -> str:
    """Debian's chromium (or $PINGPONG_LAB_CHROMIUM), else skip the test with the reason."""
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (dev extras)")
    path = os.environ.get("PINGPONG_LAB_CHROMIUM") or shutil.which("chromium")
    if not path:
        pytest.skip("chromium is not installed (`make browser` installs it as root)")
    if not (ROOT / ".venv" / "bin" / "jupyter").exists() and not os.environ.get("CONDA_PREFIX"):
        pytest.skip("the environment is not set up (run `make test`)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_status(url: str) -> int:
    """The HTTP status of a GET of `url`; 0 while nothing answers there."""
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


class Lab:
    """A running lab: its base URL, token and log."""

    def __init__(self, base: str, token: str, log: Path):
        self.base, self.token, self.log = base, token, log

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}{path}{sep}token={self.token}"

    def status(self, path: str) -> int:
        return http_status(self.url(path))


@contextmanager
def serve(target: str, env: dict, log: Path, **make_vars: str):
    """Run `make <target>` (lab or instructor) until the block ends; stop it by its PID."""
    port, token = free_port(), secrets.token_hex(8)
    variables = [f"{k}={v}" for k, v in {"PORT": port, "TOKEN": token, **make_vars}.items()]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["make", "--no-print-directory", target, *variables],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    lab = Lab(f"http://127.0.0.1:{port}", token, log)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"make {target} exited:\n" + log.read_text()[-3000:])
            try:
                if lab.status("/api/status") == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"make {target} did not answer within {START_TIMEOUT_S} s")
            time.sleep(1)
        yield lab
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server shuts its kernels down
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@contextmanager
def browser(executable: str, lab: Lab):
    """A headless chromium page (1400x900) from Playwright that sends the lab's token with every
    request (pages such as Formgrader fetch their data without it), closed at the end."""
    from playwright.sync_api import sync_playwright

    args = ["--disable-dev-shm-usage"] + (["--no-sandbox"] if os.geteuid() == 0 else [])
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable, args=args)
        try:
            context = chromium.new_context(
                viewport={"width": 1400, "height": 900},
                extra_http_headers={"Authorization": f"token {lab.token}"},
            )
            page = context.new_page()
            page.set_default_timeout(60_000)
            yield page
        finally:
            chromium.close()


def screenshot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def menu_items(page, menu: str) -> str:
    """The text of a menu of the lab's menu bar (opened, read, closed)."""
    page.locator(".lm-MenuBar-itemLabel", has_text=menu).click()
    text = page.locator(".lm-Menu-content").first.inner_text()
    page.keyboard.press("Escape")
    return text
