"""The emulated link's settings, command line and error messages (no root needed)."""

from __future__ import annotations

import pytest

from pingpong_lab.apps import cli
from pingpong_lab.course import handoff
from pingpong_lab.mpi import environment, link


def test_a_rate_alone_gets_a_burst_of_one_millisecond_and_jumbo_frames():
    spec = link.parse_link("rate=1gbit")
    assert spec.rate_bit_per_s == 1e9
    assert spec.burst_bytes == 125_000  # 1 ms at 1 Gbit/s
    assert spec.latency_s == pytest.approx(0.05) and spec.mtu == 9000
    assert spec.describe() == "tbf rate=1gbit burst=125000B latency=50ms mtu=9000"


def test_every_setting_is_read_with_tc_units():
    spec = link.parse_link(" rate=100mbit , burst=64kb, latency=20ms, mtu=1500 ")
    assert spec.rate_bit_per_s == 1e8 and spec.burst_bytes == 64 * 1024
    assert spec.latency_s == pytest.approx(0.02) and spec.mtu == 1500
    assert spec.tbf_args() == ["tbf", "rate", "100000000bit", "burst", "65536"] + [
        "latency",
        "20000us",
    ]
    assert link.parse_link("rate=125mbps").rate_bit_per_s == 1e9  # bytes per second, as tc


def test_a_slow_link_still_lets_whole_frames_through():
    assert link.parse_link("rate=10mbit").burst_bytes == 4 * (9000 + 14)
    assert link.parse_link("rate=10mbit,mtu=1500").burst_bytes == 4 * 1514


@pytest.mark.parametrize(
    "text,expected",
    [
        ("", "not key=value"),
        ("1gbit", "not key=value"),
        ("burst=128kb", "needs a rate"),
        ("rate=fast", "not understood"),
        ("rate=1gbyte", "not understood"),
        ("rate=1bit", "out of range"),
        ("rate=1gbit,speed=2", "unknown link setting 'speed'"),
        ("rate=1gbit,rate=2gbit", "given twice"),
        ("rate=1gbit,burst=8kb", "smaller than one frame"),
        ("rate=1gbit,mtu=100", "576 to 65535"),
        ("rate=1gbit,latency=1h", "not understood"),
        ("rate=1gbit,latency=20s", "out of range"),
    ],
)
def test_bad_link_settings_are_refused_with_a_reason(text, expected):
    with pytest.raises(ValueError, match=expected):
        link.parse_link(text)


def test_each_rank_runs_in_its_own_namespace_in_one_mpmd_command():
    net = link.EmulatedLink(link.parse_link("rate=1gbit"), 3, owner=4242)
    assert net.names == ["pplab4242-r0", "pplab4242-r1", "pplab4242-r2", "pplab4242-sw"]
    cmd = net.command("mpiexec", ["prog", "arg"])
    blocks = " ".join(cmd[1:]).split(" : ")
    assert cmd[0] == "mpiexec" and len(blocks) == 3
    for rank, block in enumerate(blocks):
        assert block == f"-n 1 ip netns exec pplab4242-r{rank} prog arg"


def test_mpi_is_kept_off_shared_memory_and_on_the_link_interface():
    net = link.EmulatedLink(link.parse_link("rate=1gbit"), 2, owner=1)
    env = net.env
    assert env["MPIR_CVAR_NOLOCAL"] == "1" and env["UCX_TLS"] == "tcp,self"
    assert env["UCX_NET_DEVICES"] == env["FI_TCP_IFACE"] == link.IFACE
    assert env[environment.LINK_ENV].startswith("tbf rate=1gbit burst=125000B")


@pytest.mark.parametrize("ranks", [1, link.MAX_RANKS + 1])
def test_a_link_joins_a_sensible_number_of_ranks(ranks):
    with pytest.raises(ValueError, match="joins 2 to"):
        link.EmulatedLink(link.parse_link("rate=1gbit"), ranks)


def test_without_root_the_link_says_why_and_where_the_shipped_measurement_is(monkeypatch):
    monkeypatch.setattr(link.os, "geteuid", lambda: 1000)
    why = link.problem()
    assert "needs root" in why and "network namespaces" in why
    assert "handoff.shipped('link_1gbit')" in why
    data = handoff.shipped("link_1gbit")  # the dataset the message points to exists
    assert "link" in data and data["nbytes"].size == data["t_median_s"].size


def test_only_namespaces_whose_owner_is_gone_are_stale():
    assert link._owner("pplab123-r0") == 123 and link._owner("pplab123-sw") == 123
    assert link._owner("pplab123-x") is None and link._owner("other-r0") is None


@pytest.mark.parametrize(
    "args,expected",
    [
        (["--link", "rate=fast"], "--link: rate 'fast' is not understood"),
        (["--link", "rate=1gbit", "--transport", "shm"], "not --transport shm"),
    ],
)
def test_bad_link_arguments_give_one_line_and_exit_status_2(args, expected, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["sweep", *args])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0]


def test_a_shipped_sweep_keeps_its_times_and_says_how_it_was_measured(tmp_path, monkeypatch):
    from pingpong_lab.analysis import model, synthetic
    from pingpong_lab.course import shipdata

    sweep = synthetic.synthetic_sweep(alpha=50e-6, beta=8e-9, sizes=[1 << k for k in range(16, 25)])
    csv = synthetic.write_sweep_csv(sweep, tmp_path / "sweep.csv")
    shipdata.ship(csv, "demo", "synthetic, 1 Gbit/s", directory=tmp_path)
    monkeypatch.setenv("PINGPONG_LAB_GRADING", "0")  # load() reads the file, not the fallback
    data = handoff.load("demo", fallback={}, directory=tmp_path)
    assert data["about"] == "synthetic, 1 Gbit/s" and data["kernel"] == "synthetic"
    assert data["link"] is None and data["nbytes"].dtype.kind == "i"
    fit = model.fit_linear(data["nbytes"], data["t_median_s"])
    assert fit.bandwidth_Mbitps == pytest.approx(1000, rel=1e-6)
    with pytest.raises(ValueError, match="how the data was measured"):
        shipdata.ship(csv, "demo", " ", directory=tmp_path)
