"""`make lab` serves the course on 127.0.0.1 behind a token, and stops cleanly."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from ..conftest import ROOT


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_make_lab_serves_the_exercises_on_localhost_with_a_token(tmp_path):
    if not (ROOT / ".venv" / "bin" / "jupyter").exists() and not os.environ.get("CONDA_PREFIX"):
        pytest.skip("the environment is not set up (run `make test`)")
    port, token = _free_port(), secrets.token_hex(8)
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),
    }
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "lab", f"PORT={port}", f"TOKEN={token}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail("make lab exited: " + proc.stdout.read().decode()[-2000:])
            try:
                if _get(f"{base}/api/status?token={token}") == 200:
                    break
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(1)
        else:
            pytest.fail("JupyterLab did not answer within 120 s")
        assert _get(f"{base}/api/contents/exercises?token={token}") == 200
        assert _get(f"{base}/api/contents/exercises") in (401, 403)  # no token, no course
        with socket.socket() as s:  # bound to loopback only
            s.settimeout(2)
            other = socket.gethostbyname(socket.gethostname())
            if not other.startswith("127."):
                assert s.connect_ex((other, port)) != 0
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
