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
    assert "02_sweep.npz" in got.source and got.yours
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
    assert not got.yours  # notebooks label it as the shipped data, not "your sweep"
    assert not handoff.load(
        "r", fallback=lambda: handoff.shipped("02_sweep"), directory=tmp_path
    ).yours


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


def test_results_live_in_the_writing_notebooks_folder_and_siblings_read_them(
    tmp_path, monkeypatch, capsys
):
    """02 saves into exercises/02_timing/my_results/ (part of its submission); 04 reads it
    there; results kept where older versions of the course put them still load."""
    monkeypatch.delenv(handoff.RESULTS_ENV, raising=False)
    course = tmp_path / "exercises"
    (course / "02_timing").mkdir(parents=True)
    (course / "04_model").mkdir()
    monkeypatch.chdir(course / "02_timing")
    path = handoff.save("02_sweep", nbytes=[1, 2], t_median_s=[1e-6, 2e-6])
    assert path == course / "02_timing" / "my_results" / "02_sweep.npz"
    monkeypatch.chdir(course / "04_model")
    data = handoff.load("02_sweep", fallback={}, writer="02_timing")
    assert list(data["nbytes"]) == [1, 2]
    assert "written by 02_timing" in capsys.readouterr().out
    handoff.save("01_deadlock", directory=course / "my_results", first_deadlock_bytes=8192)
    old = handoff.load("01_deadlock", fallback={}, writer="01_pingpong")
    assert int(old["first_deadlock_bytes"]) == 8192


def test_a_result_records_where_it_was_measured_and_a_digest_of_its_data(tmp_path):
    handoff.save("02_samples", directory=tmp_path, samples_s=np.arange(6.0).reshape(2, 3))
    meta = handoff.load("02_samples", fallback={}, directory=tmp_path)
    assert meta["_host"] and meta["_cpu"] and meta["_cores"] >= 1 and meta["_mpi"]
    same = handoff.samples_digest({"samples_s": np.arange(6.0).reshape(2, 3)})
    assert meta["_sha256"] == same
    assert handoff.samples_digest({"samples_s": np.arange(6.0)}) != same  # another shape
    assert handoff.samples_digest({"samples_s": np.arange(1.0, 7.0).reshape(2, 3)}) != same
