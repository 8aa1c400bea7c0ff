"""Claims about pingpong_lab.reference: literature values, transcribed with units and sources."""

import numpy as np
import pytest

from pingpong_lab.analysis import reference as ref


def test_agh_tables_cover_both_apis_in_all_four_placements():
    keys = set(ref.AGH2020_BANDWIDTH_MBITPS)
    assert keys == {
        (api, p) for api in ("send_recv", "isend_irecv") for p in ref.AGH2020_PLACEMENTS
    }
    assert "Tomkowicz" in ref.AGH2020_SOURCE and ref.AGH2020_ITERATIONS == 10000


def test_agh_table_values_are_transcribed_from_the_report():
    t = ref.AGH2020_BANDWIDTH_MBITPS
    assert t[("send_recv", "one_node_shm")][64] == 347.872  # table 2.1, first row
    assert t[("isend_irecv", "one_node_shm")][262144] == 119653  # table 2.2 peak
    assert t[("send_recv", "two_hosts")][524288] == 1917.71  # table 2.7, last row
    assert t[("isend_irecv", "two_hosts")][1048576] == 3153.6  # table 2.8, last row
    assert (
        len(t[("send_recv", "one_node_net")]) == 7 and len(t[("isend_irecv", "one_node_net")]) == 8
    )


def test_agh_sizes_are_bits_and_the_helper_converts_them_to_bytes():
    nbytes, mbitps = ref.agh2020_bandwidth("isend_irecv", "one_node_shm")
    assert nbytes.tolist() == [8, 32, 128, 512, 2048, 8192, 32768, 131072]
    assert mbitps.argmax() == 6  # the report's peak at 32768 B


def test_agh_latency_table_is_consistent_with_the_smallest_bandwidth_entry():
    # a 64-bit message at 347.872 Mbit/s takes 0.184 us; table 2.9 gives 0.194 us
    nbytes, t = ref.agh2020_one_way_time("send_recv", "one_node_shm")
    lat = ref.AGH2020_LATENCY_64BIT_S["send_recv"]["one_node_shm"]
    assert nbytes[0] == 8 and t[0] == pytest.approx(lat, rel=0.1)


def test_agh_two_hosts_are_two_orders_of_magnitude_slower_for_small_messages():
    lat = ref.AGH2020_LATENCY_64BIT_S["send_recv"]
    assert lat["two_hosts"] / lat["one_node_shm"] > 100
    assert ref.AGH2020_LATENCY_64BIT_S["isend_irecv"]["two_hosts"] == 6.07103e-06


def test_unknown_agh_table_lists_the_choices():
    with pytest.raises(ValueError, match="placements: one_node_shm"):
        ref.agh2020_bandwidth("send_recv", "moon")


def test_durham_values_match_the_figure_captions():
    rows = {(r["machine"], r["placement"]): r for r in ref.DURHAM_HAMILTON}
    assert rows[("Hamilton 6", "intra")]["alpha_s"] == 436e-9
    assert rows[("Hamilton 8", "intra")]["bandwidth_GiBps"] == 20
    assert rows[("Hamilton 6", "inter")]["alpha_s"] == 6e-6
    assert rows[("Hamilton 8", "inter")]["bandwidth_GiBps"] == 19
    assert "Marcotte" in ref.DURHAM_SOURCE


def test_durham_alpha_beta_converts_gib_per_second_to_seconds_per_byte():
    alpha, beta = ref.durham_alpha_beta("Hamilton 7", "inter")
    assert alpha == 5e-6 and 1 / beta == pytest.approx(3 * 2**30)
    with pytest.raises(ValueError, match="placements: intra, inter"):
        ref.durham_alpha_beta("Hamilton 9", "intra")


def test_inter_node_latency_exceeds_intra_node_latency_on_every_hamilton():
    for machine in ("Hamilton 6", "Hamilton 7", "Hamilton 8"):
        assert (
            ref.durham_alpha_beta(machine, "inter")[0] > ref.durham_alpha_beta(machine, "intra")[0]
        )


def test_ufrn_transition_lies_between_its_latency_and_bandwidth_regimes():
    u = ref.UFRN2025
    assert u["latency_regime_bytes"][1] <= u["transition_bytes"][0]
    assert u["transition_bytes"][1] <= u["bandwidth_regime_bytes"][0]
    assert "de Souza Barradas" in u["source"]


def test_hpc4ds_records_placements_but_no_numbers():
    assert ref.HPC4DS2025["numbers"] is None and len(ref.HPC4DS2025["placements"]) == 4


def test_literature_rows_are_positive_and_cite_author_and_institution():
    rows = ref.literature_alpha_beta()
    assert len(rows) == 10
    for row in rows:
        assert row["alpha_s"] > 0 and row["beta_s_per_byte"] > 0
        assert row["source"] in ("Marcotte, Durham University", "Tomkowicz, AGH 2020")
        assert row["bandwidth_GiBps"] == pytest.approx(1 / row["beta_s_per_byte"] / 2**30)
    assert np.isclose(
        [r["alpha_s"] for r in rows if r["label"] == "Send/Recv exchange two_hosts"], 2.06115e-05
    ).all()


def test_citations_name_documents_not_files():
    import inspect

    text = inspect.getsource(ref)
    assert "seed" not in text and ".txt" not in text
    for source in (ref.AGH2020_SOURCE, ref.DURHAM_SOURCE, ref.UFRN2025["source"]):
        assert any(year in source for year in ("2020", "2025")) or "Durham University" in source


def test_agh_rows_say_they_time_an_exchange_not_a_ping_pong():
    agh = [r for r in ref.literature_alpha_beta() if r["source"].startswith("Tomkowicz")]
    assert agh and all("exchange" in r["label"] for r in agh)
    assert "sends first" in ref.AGH2020_PATTERN


def test_inter_node_sweep_is_the_two_host_table_in_bytes_and_seconds():
    sw = ref.inter_node_sweep()
    nbytes, mbitps = ref.agh2020_bandwidth("send_recv", "two_hosts")
    assert np.array_equal(sw["nbytes"], nbytes) and sw["nbytes"][0] == 8
    # 8 bytes at 3.09821 Mbit/s: the 20.6 us of the latency table
    assert np.isclose(sw["t_median_s"][0], 64 / 3.09821e6)
    assert sw["t_median_s"][-1] > 10 * sw["t_median_s"][0]  # 64 KiB vs 8 B
    assert "Tomkowicz" in sw["source"] and "2.7" in sw["source"]
    assert "2.8" in ref.inter_node_sweep("isend_irecv")["source"]
    with pytest.raises(ValueError, match="apis"):
        ref.inter_node_sweep("put_get")
