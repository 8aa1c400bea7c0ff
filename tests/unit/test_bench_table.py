"""The bench's tables: times, bandwidths and sizes written as the report writes them."""

from __future__ import annotations

import math

from pingpong_lab.apps import bench


def _row(**fields):
    row = {k: "" for k in bench.COLUMNS}
    row.update(fields)
    return row


ROWS = [
    _row(
        group="launcher",
        metric="C blocking one-way median",
        nbytes=65536,
        a_label="mpiexec",
        a_value=2.5e-6,
        b_label="engines",
        b_value=2.6e-6,
        unit="s",
        ratio=1.04,
        within_target="yes",
    ),
    _row(
        group="hw-floor",
        metric="bandwidth: MPI / memcpy",
        nbytes=2**20,
        a_label="memcpy",
        a_value=8 * 2**30,
        b_label="MPI",
        b_value=4 * 2**30,
        unit="B/s",
        ratio=0.5,
    ),
    _row(group="mpi-build", metric="builds", note="not measured: mpich missing", ratio=math.nan),
]


def test_markdown_table_formats_each_cell_with_its_unit():
    md = bench.markdown_table(ROWS, "a machine")
    assert "Machine: a machine" in md
    assert "| launcher | C blocking one-way median | 64 KiB | mpiexec: 2.5 µs |" in md
    assert "| engines: 2.6 µs | 1.040 | " in md
    assert "| 1 MiB | memcpy: 8 GiB/s | MPI: 4 GiB/s | 0.500 |" in md
    assert "| mpi-build | builds |  |  |  | - |" in md


def test_printed_table_lines_up_and_names_what_was_not_measured(capsys):
    bench.print_table(ROWS)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("group") and lines[2].startswith("launcher")
    assert lines[2].index("1.040") == lines[1].index("B/A") - 2
    assert lines[4].rstrip().endswith("(not measured: mpich missing)")
    assert "       -" in lines[4]


def _raw_rounds(rounds: int, sizes) -> dict:
    """Raw measurements as `bench.measure` records them, engines 10 % slower than mpiexec."""
    from pingpong_lab.apps.bench.peers import LAUNCH_SIZES, OSU_SIZE
    from pingpong_lab.data.schema import COL

    def one(k):
        c = {
            n: {COL.t_median_s: 1e-6 + n * 1e-10, COL.t_mean_s: 1e-6 + n * 1e-10}
            for n in LAUNCH_SIZES
        }
        e = {n: {COL.t_median_s: 1.1 * v[COL.t_median_s]} for n, v in c.items()}
        py = {n: {"ours_mean_s": 2e-6, "ours_median_s": 2e-6, "bench_mean_s": 2e-6,
                  "bench_written_mean_s": 2.5e-6, "iters": 50} for n in sizes}  # fmt: skip
        osu = {OSU_SIZE: {"avg_s": 1e-4, "median_s": 1e-4, "iters": 100}}
        return {"mpiexec_c": c, "py": py, "engines_c": e, "osu_method": osu}

    return {
        "rounds": [one(k) for k in range(rounds)],
        "cluster_start_s": 3.0,
        "mpi_builds": {
            "max_bytes": 64 * 1024,
            "debian_version": "4.2",
            "debian": [{8: {"median_s": 1e-6}, 65536: {"median_s": 8e-6}}] * 3,
            "pypi": [{8: {"median_s": 2e-6}, 65536: {"median_s": 8e-6}}] * 3,
        },
        "full_sweep_s": 10.0,
        "full_sweep_range": [1, 65536],
    }


def test_ratios_make_one_row_per_comparison_and_say_what_was_not_measured(tmp_path):
    from pingpong_lab.apps.bench import ratios

    s = bench.Settings(np=2, out=tmp_path, rounds=3, quick=True)
    rows = ratios.build_table(s, _raw_rounds(3, s.py_sizes), "a note").rows
    by_group = {}
    for r in rows:
        by_group.setdefault(r["group"], []).append(r)
    launcher = by_group["launcher"]
    assert [r["nbytes"] for r in launcher] == list(bench.LAUNCH_SIZES)
    assert all(math.isclose(r["ratio"], 1.1) and r["within_target"] == "no" for r in launcher)
    assert [r["metric"] for r in by_group["mpi4py.bench"]].count(
        "vs mpi4py.bench on written buffers"
    ) == len(s.py_sizes)
    assert by_group["hw-floor"][0]["note"].startswith("not measured")  # no "floor" in the rounds
    builds = by_group["mpi-build"]  # the same kernel and arguments on two MPICH builds
    assert [r["nbytes"] for r in builds] == [8, 65536]
    assert [r["ratio"] for r in builds] == [2.0, 1.0]
    assert builds[0]["a_label"] == "Debian MPICH 4.2" and "3 runs each" in builds[0]["note"]
    raw = _raw_rounds(3, s.py_sizes) | {"mpi_builds": {"missing": "mpicc.mpich not installed"}}
    (row,) = [r for r in ratios.build_table(s, raw, "").rows if r["group"] == "mpi-build"]
    assert row["note"] == "not measured: mpicc.mpich not installed"
    costs = by_group["course-cost"]
    assert costs[0]["b_value"] == 3.0 and costs[1]["note"] == "a note"
    assert costs[-1]["note"].startswith("not measured: skipped with --quick")
    assert all(set(r) == set(bench.COLUMNS) for r in rows)
