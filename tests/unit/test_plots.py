"""Claims about pingpong_lab.plots: axes, scales, labels and series (not pixels)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from pingpong_lab.analysis import model, plots, stats  # noqa: E402
from pingpong_lab.analysis.synthetic import synthetic_sweep  # noqa: E402

ALPHA, BETA = 1e-6, 1.0 / (8 * 2**30)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def sweep():
    return synthetic_sweep(ALPHA, BETA, sizes=2 ** np.arange(0, 21, 2), noise="heavy", reps=60)


@pytest.fixture(scope="module")
def ci(sweep):
    summaries = [stats.summarize(row, n_boot=0) for row in sweep.samples]
    return np.array([s.ci_lo for s in summaries]), np.array([s.ci_hi for s in summaries])


def _markers_only(ax):
    """Lines that carry data markers (measured data), leaving out error-bar caps."""
    return [ln for ln in ax.get_lines() if ln.get_marker() not in ("None", "", None, "_", "|")]


def test_latency_plot_is_log_log_with_units_error_bars_and_a_model_line(sweep, ci):
    fit = model.fit_linear(sweep.nbytes, sweep.medians)
    ax = plots.latency_plot(sweep.nbytes, sweep.medians, *ci, fit=fit)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_xlabel() == "message size [bytes]"
    assert ax.get_ylabel() == "one-way time [µs]"
    data = _markers_only(ax)
    assert len(data) == 1 and data[0].get_linestyle() == "None"
    np.testing.assert_allclose(data[0].get_ydata(), sweep.medians * 1e6)
    assert len(ax.containers) == 1 and ax.containers[0].has_yerr
    models = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-"]
    assert len(models) == 1 and models[0].get_label().startswith("fit: α =")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "measured (median)" in labels


def test_latency_plot_in_seconds_and_without_ci_has_no_error_bars(sweep):
    ax = plots.latency_plot(sweep.nbytes, sweep.medians, time_unit="s")
    assert ax.get_ylabel() == "one-way time [s]"
    assert not ax.containers[0].has_yerr


def test_latency_plot_draws_a_piecewise_model_as_two_separate_pieces():
    s = synthetic_sweep(ALPHA, BETA, sizes=2 ** np.arange(21), breakpoint=2**12, alpha2=8e-6)
    pw = model.fit_piecewise(s.nbytes, s.medians)
    ax = plots.latency_plot(s.nbytes, s.medians, fit=pw)
    pieces = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-"]
    assert len(pieces) == 2
    assert pieces[0].get_xdata().max() < 2**12 <= pieces[1].get_xdata().min()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "piecewise fit, break at 4 KiB" in legend


def test_a_piecewise_fit_that_is_not_better_than_one_line_is_drawn_without_a_break():
    s = synthetic_sweep(ALPHA, BETA, sizes=2 ** np.arange(21), noise="gaussian", seed=3)
    pw = model.fit_piecewise(s.nbytes, s.medians)
    assert not pw.two_segments_better, "a straight line with noise must not earn two segments"
    for quantity in ("time", "bandwidth"):
        fig, ax = plt.subplots()
        if quantity == "time":
            plots.latency_plot(s.nbytes, s.medians, fit=pw, ax=ax)
        else:
            plots.bandwidth_plot(s.nbytes, s.medians, fit=pw, ax=ax, second_unit=None)
        pieces = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-"]
        assert len(pieces) == 1, f"{quantity}: one line, no break"
        x = pieces[0].get_xdata()
        assert x.min() == s.nbytes.min() and x.max() == s.nbytes.max()
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert not any("break" in t for t in legend), legend
        assert any(t.startswith("fit: α =") for t in legend), legend


@pytest.mark.parametrize(("unit", "scale"), [("B/s", 1.0), ("GiB/s", 2.0**30), ("Mbit/s", 1.25e5)])
def test_bandwidth_plot_converts_units_and_marks_the_asymptote(sweep, ci, unit, scale):
    fit = model.fit_linear(sweep.nbytes, sweep.medians)
    ax = plots.bandwidth_plot(sweep.nbytes, sweep.medians, *ci, fit=fit, unit=unit)
    assert ax.get_ylabel() == f"bandwidth [{unit}]"
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    data = _markers_only(ax)
    np.testing.assert_allclose(data[0].get_ydata(), sweep.nbytes / sweep.medians / scale)
    asymptote = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert len(asymptote) == 1
    assert asymptote[0].get_ydata()[0] == pytest.approx(fit.bandwidth_Bps / scale)


@pytest.mark.parametrize("kind", ["box", "violin"])
def test_variability_plot_has_one_distribution_per_size_and_marks_the_mean(sweep, kind):
    ax = plots.variability_plot(sweep.samples, sweep.nbytes, kind=kind)
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks[:3] == ["1 B", "4 B", "16 B"] and ticks[-1] == "1 MiB"
    assert ax.get_yscale() == "log"
    assert ax.get_ylabel() == "one-way time per iteration [µs]"
    means = [ln for ln in ax.get_lines() if ln.get_label() == "mean"]
    assert len(means) == 1 and len(means[0].get_xdata()) == len(sweep.nbytes)
    if kind == "violin":
        assert len(ax.collections[0].get_paths()) >= 1


def test_variability_plot_accepts_a_dict_and_shows_outliers():
    rng = np.random.default_rng(0)
    data = {64: rng.normal(2e-6, 1e-8, 200), 8: np.r_[rng.normal(1e-6, 1e-8, 199), 50e-6]}
    ax = plots.variability_plot(data, kind="box", show_mean=False)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["8 B", "64 B"]
    fliers = [ln for ln in ax.get_lines() if ln.get_marker() == "o"]
    assert any(np.isclose(ln.get_ydata(), 50.0).any() for ln in fliers)


def test_variability_plot_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="samples must have shape"):
        plots.variability_plot(np.ones((3, 4)), [1, 2])
    with pytest.raises(ValueError, match="kind must be"):
        plots.variability_plot({1: [1.0]}, kind="pie")


def test_residual_plot_shows_relative_residuals_around_zero(sweep):
    fit = model.fit_linear(sweep.nbytes, sweep.medians)
    ax = plots.residual_plot(fit, sweep.nbytes, sweep.medians)
    assert ax.get_ylabel() == "relative residual [%]" and ax.get_xscale() == "log"
    data = _markers_only(ax)
    expected = 100 * fit.residuals / sweep.medians
    np.testing.assert_allclose(data[0].get_ydata(), expected)
    ax2 = plots.residual_plot(fit, sweep.nbytes, sweep.medians, relative=False, time_unit="ns")
    assert ax2.get_ylabel() == "residual [ns]"


def test_compare_plot_draws_one_labelled_series_per_entry(sweep, ci):
    py = synthetic_sweep(2.2e-6, BETA, sizes=sweep.nbytes)
    series = {
        "C": {
            "nbytes": sweep.nbytes,
            "t_median_s": sweep.medians,
            "ci_lo_s": ci[0],
            "ci_hi_s": ci[1],
        },
        "Python": (py.nbytes, py.medians),
        "Isend/Irecv": {"nbytes": sweep.nbytes, "t_median_s": sweep.medians * 1.1},
    }
    fits = {"Python": model.fit_linear(py.nbytes, py.medians)}
    ax = plots.compare_plot(series, fits=fits)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == list(series)
    assert len(_markers_only(ax)) == 3
    assert all(ln.get_linestyle() == "None" for ln in _markers_only(ax))
    assert len([ln for ln in ax.get_lines() if ln.get_linestyle() == "-"]) == 1
    assert ax.containers[0].has_yerr and not ax.containers[1].has_yerr
    assert ax.get_ylabel() == "one-way time [µs]"
    bw = plots.compare_plot(series, quantity="bandwidth", unit="Mbit/s")
    assert bw.get_ylabel() == "bandwidth [Mbit/s]" and bw.get_yscale() == "log"


def test_compare_plot_explains_what_a_series_is_missing():
    with pytest.raises(ValueError, match="series 'shm' needs 'nbytes' and 't_median_s'"):
        plots.compare_plot({"shm": {"size": [1, 2]}})
    with pytest.raises(ValueError, match="non-empty mapping"):
        plots.compare_plot({})


def test_contention_plot_shows_time_and_aggregate_bandwidth_against_pairs():
    pairs, t = [1, 2, 4, 8], np.array([10e-6, 11e-6, 14e-6, 30e-6])
    ax_t, ax_bw = plots.contention_plot(pairs, t, nbytes=2**16)
    assert ax_t.figure is ax_bw.figure
    assert ax_t.get_xlabel() == ax_bw.get_xlabel() == "number of pairs"
    assert ax_t.get_ylabel() == "one-way time [µs]"
    assert ax_bw.get_ylabel() == "aggregate bandwidth [GiB/s]"
    agg = _markers_only(ax_bw)[0].get_ydata()
    np.testing.assert_allclose(agg, np.array(pairs) * 2**16 / t / 2**30)
    assert ax_t.get_title() == "64 KiB messages"


def test_functions_draw_on_a_given_axes():
    fig, ax = plt.subplots()
    assert plots.latency_plot([1, 2], [1e-6, 1.1e-6], ax=ax) is ax
    assert len(fig.axes) == 1


def test_save_writes_a_png_and_refuses_other_suffixes(tmp_path):
    ax = plots.latency_plot([1, 2, 4], [1e-6, 1.1e-6, 1.2e-6])
    out = plots.save(ax.figure, tmp_path / "sub" / "lat.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plots.save(ax, tmp_path / "again.png").exists()
    with pytest.raises(ValueError, match="must end in .png"):
        plots.save(ax.figure, tmp_path / "lat.pdf")


@pytest.mark.parametrize(
    ("n", "label"), [(1, "1 B"), (1536, "1.5 KiB"), (2**20, "1 MiB"), (2**31, "2 GiB")]
)
def test_format_bytes_uses_binary_prefixes(n, label):
    assert plots.format_bytes(n) == label


def test_bad_units_are_refused_with_the_list_of_choices():
    with pytest.raises(ValueError, match="time_unit must be one of s, ms, us, ns"):
        plots.latency_plot([1, 2], [1e-6, 2e-6], time_unit="min")
    with pytest.raises(ValueError, match="unit must be one of B/s"):
        plots.bandwidth_plot([1, 2], [1e-6, 2e-6], unit="furlong/s")


def _error_segments(ax):
    (container,) = [c for c in ax.containers if hasattr(c, "has_yerr")]
    return np.array([seg for coll in container.lines[2] for seg in coll.get_segments()])


@pytest.mark.parametrize("quantity", ["time", "bandwidth"])
def test_one_series_gets_the_same_error_bars_alone_and_in_a_comparison(sweep, ci, quantity):
    lo, hi = ci
    alone = plots.latency_plot if quantity == "time" else plots.bandwidth_plot
    ax = alone(sweep.nbytes, sweep.medians, lo, hi)
    table = {"nbytes": sweep.nbytes, "t_median_s": sweep.medians, "ci_lo_s": lo, "ci_hi_s": hi}
    ax2 = plots.compare_plot({"run": table}, quantity=quantity)
    assert ax.get_ylabel() == ax2.get_ylabel()
    np.testing.assert_allclose(_error_segments(ax), _error_segments(ax2))
    if quantity == "bandwidth":  # the shortest time is the highest bandwidth
        segments = _error_segments(ax)
        np.testing.assert_allclose(segments[:, 1, 1], sweep.nbytes / lo / 2**30)


def test_a_ci_of_the_wrong_length_is_refused(sweep, ci):
    lo, hi = ci
    for draw in (plots.latency_plot, plots.bandwidth_plot):
        with pytest.raises(ValueError, match="one value per size"):
            draw(sweep.nbytes, sweep.medians, lo[:-1], hi[:-1])


def test_bandwidth_plot_reads_gib_on_the_left_and_gbit_on_the_right():
    ax = plots.bandwidth_plot([1 << 20, 1 << 24], [1e-4, 1e-3])
    right = [c for c in ax.child_axes if "Gbit/s" in c.get_ylabel()]
    assert "GiB/s" in ax.get_ylabel() and len(right) == 1
    assert plots.BANDWIDTH_UNITS["GiB/s"] / plots.BANDWIDTH_UNITS["Gbit/s"] == 8 * 2**30 / 1e9
    plain = plots.bandwidth_plot([1, 2], [1e-6, 1e-6], second_unit=None)
    assert not [c for c in plain.child_axes if "Gbit/s" in c.get_ylabel()]
