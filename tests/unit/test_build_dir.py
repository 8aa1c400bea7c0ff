"""Learners' C is built in a folder of the process that builds it: nothing another process
wrote (an earlier kernel, a learner's program) is ever taken for a build."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from pingpong_lab.mpi import ckernels

SHOW_FOLDER = "from pingpong_lab.mpi import ckernels; print(ckernels.build_dir(), flush=True)"


def test_each_process_builds_in_a_new_folder_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("PINGPONG_LAB_BUILD", str(tmp_path))
    mine = ckernels.build_dir()
    assert mine.parent == tmp_path and ckernels.build_dir() == mine  # cached in this process
    env = {**os.environ, "PINGPONG_LAB_BUILD": str(tmp_path)}
    other = subprocess.run(
        [sys.executable, "-c", SHOW_FOLDER], capture_output=True, text=True, env=env, check=True
    ).stdout.strip()
    assert other != str(mine)
    assert not os.path.exists(other)  # removed when that process ended
    assert mine.is_dir()


def test_a_killed_process_leaves_its_folder_only_until_the_next_build(tmp_path):
    env = {**os.environ, "PINGPONG_LAB_BUILD": str(tmp_path)}
    code = SHOW_FOLDER + "; import time; time.sleep(60)"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        folder = proc.stdout.readline().strip()
        (tmp_path / os.path.basename(folder) / "libstudent_planted.so").write_text("planted")
        ckernels._remove_orphans(tmp_path)
        assert os.path.isdir(folder)  # its process still runs: kept
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        ckernels._remove_orphans(tmp_path)
        assert not os.path.exists(folder)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
