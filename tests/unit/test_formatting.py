"""analysis.formatting: one way to write times, bandwidths, sizes and ratios."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pingpong_lab.analysis import formatting, plots
from pingpong_lab.analysis.formatting import (
    format_bandwidth,
    format_bytes,
    format_number,
    format_ratio,
    format_time,
)

NOT_NUMBERS = [None, math.nan, math.inf, -math.inf, np.nan, "", "12", True]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (1.234e-6, "1.23 µs"),
        (0.0, "0 µs"),
        (999e-6, "999 µs"),
        (2.5e-3, "2.5 ms"),
        (0.25, "250 ms"),
        (1.0, "1 s"),
        (42.0, "42 s"),
        (np.float64(3e-6), "3 µs"),
    ],
)
def test_format_time_picks_microseconds_milliseconds_or_seconds(seconds, text):
    assert format_time(seconds) == text


@pytest.mark.parametrize(
    ("bps", "text"), [(2**30, "1 GiB/s"), (12.5 * 2**30, "12.5 GiB/s"), (2**20, "0.000977 GiB/s")]
)
def test_format_bandwidth_is_in_gibibytes_per_second(bps, text):
    assert format_bandwidth(bps) == text


def test_format_bandwidth_adds_gigabits_on_request():
    assert format_bandwidth(1.25e9, bits=True) == "1.16 GiB/s (10 Gbit/s)"


@pytest.mark.parametrize(
    ("n", "label"),
    [
        (1, "1 B"),
        (0, "0 B"),
        (512, "512 B"),
        (1536, "1.5 KiB"),
        (2**20, "1 MiB"),
        (2**31, "2 GiB"),
        (np.int64(4096), "4 KiB"),
        (65536.0, "64 KiB"),
    ],
)
def test_format_bytes_uses_binary_prefixes(n, label):
    assert format_bytes(n) == label


def test_plots_keeps_format_bytes_for_the_notebooks():
    assert plots.format_bytes is formatting.format_bytes
    assert "format_bytes" in plots.__all__


def test_format_ratio_and_number():
    assert format_ratio(3.21) == "3.21x"
    assert format_ratio(np.float32(2.0)) == "2x"
    assert format_number(1234.56) == "1235"
    assert format_number(0.123456, ".6f") == "0.123456"


@pytest.mark.parametrize("value", NOT_NUMBERS)
@pytest.mark.parametrize(
    "formatter", [format_time, format_bandwidth, format_bytes, format_ratio, format_number]
)
def test_anything_but_a_finite_number_is_missing(formatter, value):
    assert formatter(value) == "n/a"
    assert formatter(value, missing="-") == "-"
