"""Claims about the `pingpong-lab` command: its subcommands, --version, the sweep's progress."""

import io
import subprocess
import sys

import pytest

from pingpong_lab import __version__
from pingpong_lab.apps import cli, sweep


def _main(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_version_prints_the_package_version(capsys):
    code, out, err = _main(capsys, "--version")
    assert code == 0 and out == f"pingpong-lab {__version__}\n" and err == ""


def test_the_installed_command_knows_its_version():
    proc = subprocess.run(
        [sys.executable, "-m", "pingpong_lab", "--version"], capture_output=True, text=True
    )
    assert proc.returncode == 0 and proc.stdout.strip() == f"pingpong-lab {__version__}"


@pytest.mark.parametrize("command", cli.COMMANDS)
def test_every_subcommand_answers_help_without_measuring(capsys, command):
    with pytest.raises(SystemExit) as stop:  # argparse's --help exits 0
        code = cli.main([command, "--help"])
        raise SystemExit(code)
    out, _ = capsys.readouterr()
    assert stop.value.code in (0, None)
    assert f"pingpong-lab {command}" in out and "--help" in out


def test_report_and_bench_are_subcommands_listed_in_the_usage(capsys):
    code, out, _ = _main(capsys, "--help")
    assert code == 0
    for command in ("sweep", "fit", "report", "bench"):
        assert f"pingpong-lab {command}" in out
    assert "pingpong-lab --version" in out


def test_an_unknown_subcommand_is_one_line_and_status_2(capsys):
    code, out, err = _main(capsys, "plot")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "unknown command 'plot'" in err


class Terminal(io.StringIO):
    def isatty(self):
        return True


PROGRESS_JOB = "print('[ 1/2] first size'); print('[ 2/2] second size'); print('wrote x.csv')"


def test_the_sweep_jobs_lines_pass_through_and_no_bar_reaches_a_log(capfd):
    code = sweep._run_job([sys.executable, "-c", PROGRESS_JOB], None, 60)
    out, err = capfd.readouterr()
    assert code == 0
    assert out.splitlines() == ["[ 1/2] first size", "[ 2/2] second size", "wrote x.csv"]
    assert err == ""  # stderr is not a terminal here: no bar


def test_at_a_terminal_the_sweep_jobs_events_move_a_bar(monkeypatch, capsys, tmp_path):
    monkeypatch.delenv("PINGPONG_LAB_GRADING", raising=False)
    monkeypatch.delenv("PINGPONG_LAB_PROGRESS", raising=False)
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    events = str(tmp_path / "events.jsonl")
    job = (
        "from pingpong_lab.mpi.measure import emit_event\n"
        f"emit_event({events!r}, done=1, total=2); print('first size', flush=True)\n"
        f"emit_event({events!r}, done=2, total=2); print('wrote x.csv', flush=True)\n"
    )
    assert sweep._run_job([sys.executable, "-c", job], None, 60, events) == 0
    assert "2/2" in terminal.getvalue()
    assert "wrote x.csv" in capsys.readouterr().out
