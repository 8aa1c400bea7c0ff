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
    _row(group="netpipe", metric="NPtcp", note="not measured: NPtcp missing", ratio=math.nan),
]


def test_markdown_table_formats_each_cell_with_its_unit():
    md = bench.markdown_table(ROWS, "a machine")
    assert "Machine: a machine" in md
    assert "| launcher | C blocking one-way median | 64 KiB | mpiexec: 2.5 µs |" in md
    assert "| engines: 2.6 µs | 1.040 | " in md
    assert "| 1 MiB | memcpy: 8 GiB/s | MPI: 4 GiB/s | 0.500 |" in md
    assert "| netpipe | NPtcp |  |  |  | - |" in md


def test_printed_table_lines_up_and_names_what_was_not_measured(capsys):
    bench.print_table(ROWS)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("group") and lines[2].startswith("launcher")
    assert lines[2].index("1.040") == lines[1].index("B/A") - 2
    assert lines[4].rstrip().endswith("(not measured: NPtcp missing)")
    assert "       -" in lines[4]
