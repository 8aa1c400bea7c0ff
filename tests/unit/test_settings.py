"""Claims about mpi.settings.SweepSettings: one object from the CLI, report and notebooks to the
ranks, checked once with clear messages (no MPI needed)."""

from __future__ import annotations

import json

import pytest

from pingpong_lab.apps import report, sweep
from pingpong_lab.course import notebook
from pingpong_lab.mpi import jobs, measure
from pingpong_lab.mpi.settings import BUDGET_S, REL_CI, TARGET_S, TRANSPORTS, SweepSettings


def test_defaults_are_the_measuring_constants_and_sizes_become_whole_numbers():
    s = SweepSettings(sizes=[1.0, 2, 4])
    assert (s.kind, s.mode, s.reps, s.library, s.transport) == (
        "c",
        "blocking",
        None,
        None,
        "default",
    )
    assert (s.target_s, s.rel_ci, s.budget_s) == (TARGET_S, REL_CI, BUDGET_S)
    assert s.sizes == (1, 2, 4) and all(type(n) is int for n in s.sizes)
    assert measure.TARGET_S == TARGET_S and sweep.TRANSPORTS is TRANSPORTS


def test_settings_round_trip_through_a_dict_and_json():
    s = SweepSettings(kind="python", mode="pickle", sizes=[0, 8], reps=30, shared_buffer=True)
    assert SweepSettings.from_dict(s.to_dict()) == s
    assert SweepSettings.from_json(s.to_json()) == s
    assert json.loads(s.to_json())["sizes"] == [0, 8]


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"kind": "fortran"}, "unknown kernel kind 'fortran'"),
        ({"mode": "rdma"}, "unknown mode 'rdma'"),
        ({"kind": "c", "mode": "pickle"}, "'pickle' exists only for kind 'python'"),
        ({"sizes": []}, "sizes is empty"),
        ({"sizes": [8, -1]}, "message size must be at least 0, got -1"),
        ({"sizes": [1.5]}, "message size must be a whole number"),
        ({"sizes": "64"}, "sizes must be a list"),
        ({"reps": 0}, "reps must be at least 1"),
        ({"rel_ci": -0.1}, "rel_ci must be a positive number"),
        ({"budget_s": float("nan")}, "budget_s must be a positive number"),
        ({"target_s": "soon"}, "target_s must be a number"),
        ({"min_reps": 50, "max_reps": 10}, "max_reps must be at least 50"),
        ({"shared_buffer": "yes"}, "shared_buffer must be true or false"),
        ({"transport": "carrier-pigeon"}, "unknown transport 'carrier-pigeon'"),
    ],
)
def test_bad_settings_are_refused_with_one_clear_message(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SweepSettings(**{"sizes": [8], **kwargs})


def test_from_dict_names_unknown_and_missing_keys():
    with pytest.raises(ValueError, match="unknown sweep setting.*'colour'"):
        SweepSettings.from_dict({"sizes": [8], "colour": "red"})
    with pytest.raises(ValueError, match="missing sweep setting 'sizes'"):
        SweepSettings.from_dict({"kind": "c"})
    with pytest.raises(ValueError, match="not valid JSON"):
        SweepSettings.from_json("{kind: c}")


def test_the_sweep_job_spec_is_the_settings_plus_the_output_path():
    s = SweepSettings(sizes=[1, 2], transport="tcp", reps=40)
    spec = {**s.to_dict(), "out": "/tmp/r.csv"}
    cmd = jobs.command(measure.sweep_job, spec, 2, launcher="mpiexec")
    spec = json.loads(cmd[-1])
    assert spec.pop("out") == "/tmp/r.csv" and SweepSettings.from_dict(spec) == s


class _Rank0:
    def Get_rank(self):  # noqa: N802 - the mpi4py name
        return 0


def test_the_sweep_job_refuses_bad_settings_before_any_mpi_call(capsys):
    assert (
        measure.sweep_job({"kind": "c", "mode": "pickle", "sizes": [8], "out": "r"}, _Rank0()) == 1
    )
    assert "pingpong-lab sweep: error: mode 'pickle'" in capsys.readouterr().err
    assert measure.sweep_job({"sizes": [8]}, _Rank0()) == 1
    assert "needs 'out'" in capsys.readouterr().err


def test_the_keyword_sweep_checks_its_settings_before_measuring():
    with pytest.raises(ValueError, match="sizes is empty"):
        measure.sweep("c", "blocking", [])
    with pytest.raises(TypeError, match="repz"):
        measure.sweep("c", "blocking", [8], repz=3)


def test_the_cli_and_the_report_launch_settings_through_the_same_function(monkeypatch, tmp_path):
    launched = []
    monkeypatch.setattr(sweep, "launch_sweep", lambda s, n, out, **kw: launched.append((s, n)) or 0)
    out = str(tmp_path / "r.csv")
    args = ["--np", "4", "--kernel", "python", "--mode", "pairwise", "--max-bytes", "4"]
    assert sweep.main([*args, "--reps", "7", "--transport", "tcp", "--out", out]) == 0
    settings, ranks = launched.pop()
    assert ranks == 4 and settings == SweepSettings(
        kind="python", mode="pairwise", sizes=[1, 2, 4], reps=7, transport="tcp"
    )
    report.measure_all(tmp_path / "data", 2, quick=True)
    plan = report.QUICK.runs(2)
    assert launched == [(settings, ranks) for _, ranks, settings in plan]
    roles = {role: s for role, _, s in plan}
    assert roles["c_blocking_tcp"].transport == "tcp"
    assert roles["variability"].reps == report.QUICK.variability_reps
    assert roles["contention_4"].mode == "pairwise"


def test_launch_problems_are_found_before_mpiexec(tmp_path):
    s = SweepSettings(mode="pairwise", sizes=[8])
    assert "at least 2 ranks" in sweep.launch_problem(s, 1, tmp_path / "r.csv")
    assert "even number of ranks" in sweep.launch_problem(s, 3, tmp_path / "r.csv")
    assert "is a directory" in sweep.launch_problem(s, 2, tmp_path)
    assert sweep.launch_problem(s, 2, tmp_path / "r.csv") is None


class _Cluster:
    def __init__(self):
        self.calls = []

    def run(self, fn, *args, timeout=None):
        self.calls.append((fn, args))
        from pingpong_lab.analysis import stats

        rows = [stats.summary_row(n, 3, 0, [1e-6, 2e-6, 3e-6]) for n in args[0].sizes]
        return [(rows, {}), None]


def test_the_notebook_sweep_sends_one_settings_object_per_size_and_gets_dict_rows():
    cluster = _Cluster()  # one call per size, so that a progress bar can follow the sweep
    rows = notebook.kernel_sweep(cluster, "python", "blocking", [8, 64], reps=5)
    assert len(cluster.calls) == 2
    for (fn, (settings,)), size in zip(cluster.calls, [8, 64]):
        assert fn is measure.sweep_rows
        assert settings == SweepSettings(
            kind="python", mode="blocking", sizes=[size], reps=5, target_s=0.05
        )
    assert [r["nbytes"] for r in rows] == [8, 64] and rows[0]["t_median_s"] == 2e-6


def test_a_job_is_named_by_its_module_and_only_marked_functions_run():
    assert jobs.target(measure.sweep_job) == "pingpong_lab.mpi.measure:sweep_job"
    assert jobs.resolve("pingpong_lab.mpi.measure:sweep_job") is measure.sweep_job
    with pytest.raises(ValueError, match="not a job"):
        jobs.command(measure.message_sizes, {}, 2, launcher="mpiexec")
    for name in ("os:system", "pingpong_lab.mpi.measure:message_sizes", "no-colon"):
        with pytest.raises(ValueError, match="not a job"):
            jobs.resolve(name)
    assert jobs.main(["os:system", "{}"]) == 2


def test_the_job_module_names_itself_also_when_run_as_main():
    assert jobs.MODULE == jobs.__name__ == "pingpong_lab.mpi.jobs"
    assert jobs.program(measure.sweep_job, {})[2] == jobs.MODULE
