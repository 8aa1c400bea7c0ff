"""pingpong_lab.hardware: parsing hw_floor's output, running it with a deadline, notebook 04."""

from __future__ import annotations

import json
import math
import stat
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from pingpong_lab.apps import bench, hardware

ROOT = Path(__file__).resolve().parents[2]

CANNED = """\
cpus 2 pinned 1 cpu_parent 0 cpu_child 1
latency_oneway_s median 1.612275e-07 min 1.606292e-07 mean 1.649020e-07 rounds 5 iters 2000
memcpy 4096 4.359277e-08 9.396053e+10 40960
memcpy 65536 1.170414e-06 5.599386e+10 2560

memcpy 1048576 2.242344e-05 4.676250e+10 160
"""

built = pytest.mark.skipif(not hardware.available(), reason="hw_floor not built (make kernels)")


def test_parse_canned_output():
    got = hardware.parse_hw_floor(CANNED)
    assert got["cpus"] == 2 and got["pinned"] == 1
    assert got["cpu_parent"] == 0 and got["cpu_child"] == 1
    assert got["latency_s"] == pytest.approx(1.612275e-07)
    assert got["latency_min_s"] == pytest.approx(1.606292e-07)
    assert got["memcpy"] == {
        4096: pytest.approx(9.396053e10),
        65536: pytest.approx(5.599386e10),
        1048576: pytest.approx(4.676250e10),
    }


def test_parse_partial_and_empty_output():
    only_copy = hardware.parse_hw_floor("memcpy 8 1e-9 8e9 100\n")
    assert only_copy == {"memcpy": {8: 8e9}}
    assert hardware.parse_hw_floor("") == {"memcpy": {}}


def test_bench_uses_the_one_parser():
    assert bench.parse_hw_floor is hardware.parse_hw_floor
    assert bench.HW_FLOOR == hardware.HW_FLOOR


def test_missing_program_says_how_to_build_it(tmp_path):
    missing = tmp_path / "hw_floor"
    assert not hardware.available(missing)
    with pytest.raises(hardware.FloorMissingError, match="make kernels"):
        hardware.floor_latency(path=missing)
    with pytest.raises(FileNotFoundError):  # FloorMissingError is one
        hardware.memcpy_bandwidth([64], path=missing)


def test_bad_arguments_are_refused_before_running():
    with pytest.raises(ValueError):
        hardware.floor_latency(iters=0)
    with pytest.raises(ValueError):
        hardware.memcpy_bandwidth([])
    with pytest.raises(ValueError):
        hardware.memcpy_bandwidth([0, 64])


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "fake_hw_floor"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_failing_program_raises_with_its_message(tmp_path):
    fake = _script(tmp_path, 'echo "hw_floor: cannot allocate" >&2\nexit 1\n')
    with pytest.raises(RuntimeError, match="cannot allocate"):
        hardware.floor_latency(path=fake)


def test_output_without_a_latency_line_is_an_error(tmp_path):
    fake = _script(tmp_path, 'echo "cpus 1 pinned 0 cpu_parent -1 cpu_child -1"\n')
    with pytest.raises(RuntimeError, match="no latency"):
        hardware.floor_latency(path=fake)


def test_timeout_kills_the_program_and_what_it_forked(tmp_path):
    pidfile = tmp_path / "child.pid"
    fake = _script(tmp_path, f"sleep 60 &\necho $! > {pidfile}\nsleep 60\n")
    start = time.perf_counter()
    with pytest.raises(subprocess.TimeoutExpired):
        hardware.run_hw_floor("-l", timeout=1.0, path=fake)
    assert time.perf_counter() - start < 10
    child = int(pidfile.read_text())
    deadline = time.time() + 5
    while psutil.pid_exists(child) and time.time() < deadline:
        try:
            if psutil.Process(child).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    alive = psutil.pid_exists(child) and psutil.Process(child).status() != psutil.STATUS_ZOMBIE
    assert not alive, "the forked child outlived the timeout"


@built
def test_the_real_program_quickly(capfd):
    floor = hardware.floor_latency(iters=500, rounds=3, timeout=20)
    assert math.isfinite(floor["latency_s"]) and floor["latency_s"] > 0
    assert floor["latency_min_s"] <= floor["latency_s"]
    assert floor["cpus"] >= 1 and floor["pinned"] in (0, 1)
    assert floor["pinned"] == (1 if floor["cpus"] >= 2 else 0)
    bw = hardware.memcpy_bandwidth([4096, 3000, 4096], seconds=0.001, timeout=20)
    assert sorted(bw) == [3000, 4096]  # any size, each once
    assert all(math.isfinite(v) and v > 0 for v in bw.values())
    assert capfd.readouterr().err == "", "nothing may go to stderr (nbgrader)"


# -- the notebook section --------------------------------------------------------------------
def _cells():
    nb = json.loads((ROOT / "course/source/04_model/04_model.ipynb").read_text())
    return [(c, "".join(c["source"])) for c in nb["cells"]]


def test_notebook_04_has_an_ungraded_hardware_section_before_the_key_points():
    cells = _cells()
    titles = [i for i, (c, s) in enumerate(cells) if "## How far is MPI from the hardware?" in s]
    keys = [i for i, (c, s) in enumerate(cells) if "## Key points" in s]
    assert len(titles) == 1 and keys == [len(cells) - 1] and titles[0] < keys[0]
    # up to the next part (the written answers) or the key points
    ends = [i for i, (c, s) in enumerate(cells) if i > titles[0] and "\n## " in f"\n{s}"]
    section = cells[titles[0] : ends[0]]
    assert all("nbgrader" not in c["metadata"] for c, _ in section), "the section is ungraded"
    code = "\n".join(s for c, s in section if c["cell_type"] == "code")
    assert "hardware.floor_latency" in code and "hardware.memcpy_bandwidth" in code
    assert "FloorMissingError" in code and "hw_floor is not built" in code
    assert "make kernels" not in code  # a learner of the released notebook cannot run it
    assert "**Predict**" in "".join(s for _, s in section)
    header = cells[0][1]
    assert "about 140 minutes" in header and "hardware floor" in header


def test_the_section_hint_when_hw_floor_is_missing(tmp_path, monkeypatch, capsys):
    """The measuring cell prints a two-line hint (nothing on stderr) when hw_floor is absent."""
    cells = _cells()
    cell = next(s for c, s in cells if c["cell_type"] == "code" and "floor_latency" in s)
    monkeypatch.setattr(hardware, "HW_FLOOR", tmp_path / "hw_floor")  # as if never built
    from pingpong_lab.course import grading

    scope = {"hardware": hardware, "grading": grading, "US": 1e-6, "MAX_BYTES": 1 << 18}
    exec(compile(cell, "04_model section cell", "exec"), scope)  # noqa: S102
    out = capsys.readouterr()
    assert scope["floor"] is None
    assert out.err == ""
    assert out.out.count("\n") == 2 and "hw_floor is not built" in out.out
    assert "make kernels" not in out.out


def test_the_default_program_is_the_one_make_kernels_builds():
    assert hardware.HW_FLOOR == ROOT / "kernels_c" / "build" / "hw_floor"
