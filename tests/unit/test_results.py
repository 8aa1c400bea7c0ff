"""Claims about data.schema and data.results: one schema, one reader-writer, every column
everywhere.

A column added to the schema must show up in the CSV header and rows, in the JSON sidecar, in
what the report reads and in what notebooks load, with no other change.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field

import numpy as np
import pytest

from pingpong_lab.analysis import model, stats
from pingpong_lab.analysis.synthetic import synthetic_sweep, write_sweep_csv
from pingpong_lab.apps import report
from pingpong_lab.data import results, schema
from pingpong_lab.data.schema import COL, COLUMNS, SweepRow


def _rows(row_type=SweepRow, **extra):
    rng = np.random.default_rng(0)
    out = []
    for nbytes in (8, 64, 512):
        t = 1e-6 * (1 + 0.1 * rng.random(50)) + 1e-10 * nbytes
        row = stats.summary_row(nbytes, t.size, 5, t, batch=2, stop_reason="ci")
        out.append(row_type(**{**row.to_dict(), "timer_resolution_s": 1e-9, **extra}))
    return out


def _raw():
    return {n: np.full((2, 50), 1e-6) for n in (8, 64, 512)}


def test_columns_come_from_the_row_type_in_csv_order():
    assert COLUMNS == tuple(SweepRow.__dataclass_fields__)
    assert COLUMNS[:4] == ("nbytes", "reps", "warmup", "t_median_s")
    assert COL.t_median_s == "t_median_s" and tuple(COL) == COLUMNS
    assert schema.UNITS["t_median_s"] == "s" and schema.UNITS["bandwidth_Bps"] == "B/s"
    with pytest.raises(AttributeError):
        COL.t_medain_s  # noqa: B018 - a mistyped column fails loudly


def test_a_row_converts_its_values_and_round_trips_through_a_dict():
    row = SweepRow(nbytes=np.int64(8), reps=10.0, t_median_s=np.float64(1e-6))
    assert type(row.nbytes) is int and type(row.reps) is int and type(row.t_median_s) is float
    assert SweepRow.from_dict(row.to_dict()) == row
    assert list(row.to_dict()) == list(COLUMNS)
    assert SweepRow.from_dict({"nbytes": "8", "reps": 3, "t_median_s": "1e-6"}).nbytes == 8


@pytest.mark.parametrize(
    "values,message",
    [
        ({"nbytes": 8, "reps": 1}, "missing column.*'t_median_s'"),
        ({"nbytes": 8, "reps": 1, "t_median_s": 1.0, "colour": "red"}, "unknown column.*colour"),
        ({"nbytes": 8.5, "reps": 1, "t_median_s": 1.0}, "nbytes: 8.5 is not a whole number"),
        ({"nbytes": 8, "reps": 1, "t_median_s": "fast"}, "t_median_s: 'fast' is not a number"),
    ],
)
def test_a_row_that_does_not_fit_the_schema_is_refused_by_name(values, message):
    with pytest.raises(ValueError, match=message):
        SweepRow.from_dict(values)


def test_write_then_read_gives_back_every_value_exactly(tmp_path):
    rows = _rows()
    path = results.write_results(tmp_path / "r.csv", rows, {"kernel": "c"}, _raw(), comment="x")
    text = path.read_text().splitlines()
    assert text[0] == "# x" and text[1] == ",".join(COLUMNS)
    back, info = results.read_results(path)
    written = [dataclasses.replace(r, kernel="c") for r in rows]  # the run's kernel, from info
    assert [SweepRow.from_dict(r) for r in back] == written  # floats written with repr
    assert info["kernel"] == "c" and info["columns"] == list(COLUMNS)
    assert info["units"] == schema.UNITS and info["samples_file"] == "r.samples.npz"
    samples = results.read_samples(results.samples_path(path))
    assert list(samples) == [8, 64, 512] and samples[8].shape == (2, 50)
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave nothing behind


def test_dict_rows_are_checked_against_the_schema(tmp_path):
    row = _rows()[0].to_dict()
    results.write_results(tmp_path / "ok.csv", [row], {})
    with pytest.raises(ValueError, match="unknown column.*colour"):
        results.write_results(tmp_path / "bad.csv", [{**row, "colour": "red"}], {})
    assert not (tmp_path / "bad.csv").exists()


def _everywhere(path, column):
    """Where a column of a results CSV must show up: (header, sidecar, read_results,
    read_table, report's loader, the notebooks' loader)."""
    header = next(ln for ln in path.read_text().splitlines() if not ln.startswith("#"))
    rows, info = results.read_results(path)
    sweep = report.load_sweep(path)
    table = model.read_sweep_table(path)
    return {
        "csv header": column in header.split(","),
        "sidecar columns": column in info["columns"],
        "sidecar units": column in info["units"],
        "read_results": all(column in r for r in rows),
        "read_table": column in table,
        "report": all(column in r for r in sweep.rows),
    }


@pytest.mark.parametrize("column", COLUMNS)
def test_every_schema_column_is_written_and_read_everywhere(tmp_path, column):
    measured = results.write_results(tmp_path / "m.csv", _rows(), {})
    synthetic = write_sweep_csv(synthetic_sweep(1e-6, 1e-10, sizes=[8, 64]), tmp_path / "s.csv")
    for path in (measured, synthetic):
        assert all(_everywhere(path, column).values()), (path.name, _everywhere(path, column))


@dataclass(frozen=True, kw_only=True)
class WithP50(SweepRow):
    """The schema with one more column."""

    t_p50_s: float = field(default=math.nan, metadata={"unit": "s"})


def test_a_new_column_reaches_the_csv_the_sidecar_the_report_and_the_notebooks(tmp_path):
    rows = _rows(WithP50, t_p50_s=3e-6)
    path = results.write_results(tmp_path / "new.csv", rows, {"kernel": "c"}, _raw())
    assert schema.columns(WithP50) == (*COLUMNS, "t_p50_s")
    found = _everywhere(path, "t_p50_s")
    assert all(found.values()), found
    header = path.read_text().splitlines()[0].split(",")
    assert header[-1] == "t_p50_s"
    assert [r["t_p50_s"] for r in results.read_results(path)[0]] == [3e-6] * 3
    assert json.loads(results.sidecar_path(path).read_text())["units"]["t_p50_s"] == "s"
    assert report.load_sweep(path).col("t_p50_s").tolist() == [3e-6] * 3
    nbytes, t = model.load_sweep_csv(path, column="t_p50_s")  # what notebooks call
    assert nbytes.tolist() == [8, 64, 512] and t.tolist() == [3e-6] * 3
    written = [dataclasses.replace(r, kernel="c") for r in rows]
    assert [WithP50.from_dict(r) for r in results.read_results(path)[0]] == written


def test_rows_of_different_schemas_do_not_mix_in_one_file(tmp_path):
    with pytest.raises(ValueError, match="same columns"):
        results.write_results(tmp_path / "mix.csv", [*_rows(), *_rows(WithP50)], {})


def test_read_table_keeps_text_columns_and_skips_comments(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("# run 1\nnbytes,stop_reason\n\n8,ci\n# more\n16,budget\n")
    table, lines = results.read_table(path)
    assert table["nbytes"].tolist() == [8.0, 16.0] and lines.tolist() == [4, 6]
    assert table["stop_reason"].tolist() == ["ci", "budget"]
    rows, info = results.read_results(path)
    run = {"kernel": "", "mode": "", "ranks": 0, "transport": "default", "link": "none"}
    assert rows == [
        {**run, "nbytes": 8, "stop_reason": "ci"},
        {**run, "nbytes": 16, "stop_reason": "budget"},
    ]
    assert info == {}


RUN = {"kernel": "c", "mode": "nonblocking", "ranks": 4, "transport": "tcp", "link": "10GbE"}


def test_the_run_columns_come_from_the_provenance_so_files_concatenate(tmp_path):
    a = results.write_results(tmp_path / "a.csv", _rows(), {**RUN, "date": "today"})
    b = results.write_results(tmp_path / "b.csv", _rows(), {"kernel": "python", "ranks": 2})
    header = a.read_text().splitlines()[0].split(",")
    assert header[-5:] == list(schema.RUN_COLUMNS)
    rows = results.read_results(a)[0] + results.read_results(b)[0]
    assert {tuple(r) for r in rows} == {COLUMNS}  # one table: every row has every column
    assert {r["kernel"] for r in rows} == {"c", "python"}
    assert [r["link"] for r in rows] == ["10GbE"] * 3 + ["none"] * 3  # none: not emulated
    assert [r["transport"] for r in rows] == ["tcp"] * 3 + ["default"] * 3
    table = results.read_table(a)[0]
    assert table["ranks"].tolist() == [4.0] * 3 and table["mode"].tolist() == ["nonblocking"] * 3


def test_a_row_that_names_its_run_keeps_it(tmp_path):
    rows = [dataclasses.replace(r, kernel="python", ranks=8) for r in _rows()]
    path = results.write_results(tmp_path / "r.csv", rows, RUN)
    back = results.read_results(path)[0]
    assert {(r["kernel"], r["ranks"], r["mode"]) for r in back} == {("python", 8, "nonblocking")}


def test_an_old_file_without_run_columns_gets_them_from_its_sidecar(tmp_path):
    path = results.write_results(tmp_path / "old.csv", _rows(), RUN)
    lines = path.read_text().splitlines()
    cut = len(lines[0].split(",")) - len(schema.RUN_COLUMNS)
    path.write_text("\n".join(",".join(ln.split(",")[:cut]) for ln in lines) + "\n")
    assert "kernel" not in path.read_text().splitlines()[0]
    rows = results.read_results(path)[0]
    assert all({k: r[k] for k in RUN} == RUN for r in rows)
    assert [SweepRow.from_dict(r) for r in rows] == [dataclasses.replace(r, **RUN) for r in _rows()]


def test_a_run_value_of_the_wrong_kind_is_refused_by_name():
    with pytest.raises(ValueError, match="ranks: 'many' is not a whole number"):
        schema.run_values({"ranks": "many"})


def test_read_samples_reads_arrays_named_by_size(tmp_path):
    path = tmp_path / "run.samples.npz"
    np.savez(path, n1024=np.ones((2, 3)), n8=np.full((2, 3), np.nan))
    data = results.read_samples(path)
    assert list(data) == [8, 1024] and data[1024].shape == (2, 3)


def test_read_samples_rejects_missing_and_foreign_files(tmp_path):
    with pytest.raises(ValueError, match="no such samples file"):
        results.read_samples(tmp_path / "none.npz")
    (tmp_path / "junk.npz").write_text("not a zip")
    with pytest.raises(ValueError, match="not a readable .npz"):
        results.read_samples(tmp_path / "junk.npz")
    np.savez(tmp_path / "odd.npz", times=np.ones(3))
    with pytest.raises(ValueError, match="unexpected array name 'times'"):
        results.read_samples(tmp_path / "odd.npz")
