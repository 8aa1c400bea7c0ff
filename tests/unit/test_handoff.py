"""Results handed from one notebook to the next: saved atomically, loaded, or a fallback."""

import numpy as np
import pytest

from pingpong_lab.course import handoff


@pytest.fixture(autouse=True)
def not_grading(monkeypatch):
    monkeypatch.setenv("PINGPONG_LAB_GRADING", "0")


def test_save_then_load_round_trip(tmp_path, capsys):
    handoff.save(
        "02_sweep",
        directory=tmp_path,
        nbytes=[1, 2, 4],
        t=np.array([1e-6, 2e-6, 3e-6]),
        kernel="student C",
        reps=100,
    )
    got = handoff.load("02_sweep", fallback={}, directory=tmp_path)
    np.testing.assert_array_equal(got["nbytes"], [1, 2, 4])
    assert got["t"].dtype == np.float64 and got["kernel"] == "student C" and got["reps"] == 100
    assert "02_sweep.npz" in got.source
    said = capsys.readouterr().out
    assert (
        said.startswith("Using your result 02_sweep.npz (saved ") and "an earlier notebook" in said
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["02_sweep.json", "02_sweep.npz"]


def test_missing_file_says_which_and_uses_fallback(tmp_path, capsys):
    got = handoff.load(
        "03_runs", fallback=lambda: {"x": np.ones(2)}, writer="03_variability", directory=tmp_path
    )
    out = capsys.readouterr().out
    assert "03_runs.npz" in out and "03_variability" in out and "instead" in out
    np.testing.assert_array_equal(got["x"], [1, 1])


def test_unreadable_file_falls_back(tmp_path, capsys):
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    got = handoff.load("bad", fallback={"x": 1}, directory=tmp_path)
    assert got == {"x": 1} and "Could not read" in capsys.readouterr().out


def test_grading_mode_always_uses_the_fallback(tmp_path, monkeypatch, capsys):
    handoff.save("r", directory=tmp_path, x=[5])
    monkeypatch.setenv("PINGPONG_LAB_GRADING", "1")
    assert handoff.load("r", fallback={"x": 0}, directory=tmp_path) == {"x": 0}
    assert capsys.readouterr().out == ""


def test_results_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(handoff.RESULTS_ENV, str(tmp_path / "elsewhere"))
    handoff.save("r", x=[1])
    assert (tmp_path / "elsewhere" / "r.npz").exists()


@pytest.mark.parametrize("name", ["", "../up", "a/b", None])
def test_bad_names_are_refused(name, tmp_path):
    with pytest.raises(ValueError, match="result name"):
        handoff.save(name, directory=tmp_path, x=[1])


def test_objects_are_refused(tmp_path):
    with pytest.raises(TypeError, match="numbers, arrays or strings"):
        handoff.save("r", directory=tmp_path, x=[{"a": 1}, 2])
    with pytest.raises(ValueError, match="at least one"):
        handoff.save("r", directory=tmp_path)


def test_unknown_shipped_dataset_lists_what_exists():
    with pytest.raises(FileNotFoundError, match="ships"):
        handoff.shipped("no_such_dataset")


def test_a_dry_run_measures_small_but_saves_and_loads_like_a_learner(tmp_path, monkeypatch):
    from pingpong_lab.course import grading

    monkeypatch.setenv("PINGPONG_LAB_QUICK", "1")
    assert grading.scale(1000, 10) == 10 and not grading.grading_mode()
    handoff.save("r", directory=tmp_path, x=[5])
    assert handoff.load("r", fallback={"x": 0}, directory=tmp_path)["x"].tolist() == [5]
    monkeypatch.setenv("PINGPONG_LAB_QUICK", "0")
    assert grading.scale(1000, 10) == 1000


def test_results_saved_with_the_old_column_name_load_with_the_schemas(tmp_path):
    from pingpong_lab.data.schema import COL

    handoff.save("02_sweep", directory=tmp_path, nbytes=[1, 2], t_one_way_s=[1e-6, 2e-6])
    data = handoff.load("02_sweep", fallback={}, directory=tmp_path)
    assert list(data[COL.t_median_s]) == [1e-6, 2e-6] and "t_one_way_s" not in data
