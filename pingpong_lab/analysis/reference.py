"""Published ping-pong figures from the course's source documents, as data with citations.

Each dataset cites the document it was read from (author, title, institution, year) and says
what was measured. Units are part of every name. Numbers are transcribed as printed; where a
source is internally inconsistent, both readings are kept and the disagreement is noted.

Sources:

- ``AGH2020``: I. Tomkowicz, MPI ping-pong lab report (in Polish), AGH University of Science
  and Technology, Krakow, 8 March 2020. C ping-pong with MPI_Send/MPI_Recv and
  with MPI_Isend/MPI_Irecv, 10000 iterations, message sizes 64 bit .. 1 Mbit, four placements.
- ``DURHAM``: C. Marcotte, "Measuring point-to-point message latency with ping-pong", course
  exercise, Durham University. alpha-beta fits on the Hamilton
  6, 7 and 8 clusters, intra- and inter-node, messages 1 B .. 16 MB.
- ``UFRN2025``: W. A. de Souza Barradas, course slides for DCA3703 (in Portuguese), Universidade
  Federal do Rio Grande do Norte (UFRN), 25 September 2025. 2 ranks, 1000 iterations, 8 B .. 64 MB
  in the text; the code the slides show stops at 4 MB.
- ``HPC4DS2025``: G. Boi and M. Piccoli, "HPC4DS - Benchmark", course report, 17 October
  2025. Four PBS placements; the report gives plots only, no numbers.
- ``UFSC``: S. T. Sari, A. B. Sales and C. B. Westphall, slides on network latency measurement
  (in Portuguese), Universidade Federal de Santa Catarina (UFSC). netperf TCP latency vs
  segment size with linear fits.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "AGH2020_BANDWIDTH_MBITPS",
    "AGH2020_ITERATIONS",
    "AGH2020_LATENCY_64BIT_S",
    "AGH2020_NOTES",
    "AGH2020_PLACEMENTS",
    "AGH2020_SOURCE",
    "DURHAM_HAMILTON",
    "DURHAM_NOTES",
    "DURHAM_PROTOCOL_SWITCH_BYTES",
    "DURHAM_SOURCE",
    "AGH2020_PATTERN",
    "HPC4DS2025",
    "UFRN2025",
    "UFSC_NETPERF_FITS",
    "agh2020_bandwidth",
    "agh2020_one_way_time",
    "inter_node_sweep",
    "durham_alpha_beta",
    "literature_alpha_beta",
]

# --------------------------------------------------------------------------------------------
# AGH 2020
# --------------------------------------------------------------------------------------------

AGH2020_SOURCE = (
    "I. Tomkowicz, MPI ping-pong lab report (in Polish), AGH University of Science and "
    "Technology, Krakow, 2020, tables 2.1-2.9"
)

AGH2020_ITERATIONS = 10000
"""Ping-pong iterations per measurement (section 2 of the report)."""

AGH2020_PLACEMENTS = {
    "one_node_shm": "one node, shared memory (program started on that node), task 1",
    "one_node_net": "one node via the network (started from another node), task 2",
    "two_vnodes_one_host": "two virtual nodes on the same physical host, network, task 3",
    "two_hosts": "two virtual nodes on different physical hosts, network, task 4",
}
"""Placement keys used below -> what the report measured (its sections 1.3-1.6)."""

# Message sizes are in BITS in the report (column "rozmiar [bit]"): 64 bit = 8 bytes.
# Bandwidth is one-way: 8 * bytes / (elapsed / (2 * iterations)) / 1e6, in Mbit/s.
AGH2020_BANDWIDTH_MBITPS: dict[tuple[str, str], dict[int, float]] = {
    ("send_recv", "one_node_shm"): {  # table 2.1
        64: 347.872,
        256: 1328.89,
        1024: 4148.32,
        4096: 12235.5,
        16384: 38741.4,
        65536: 60750.5,
        262144: 61720.4,
        1048576: 51421.7,
    },
    ("isend_irecv", "one_node_shm"): {  # table 2.2
        64: 75.871,
        256: 322.474,
        1024: 1240.93,
        4096: 7566.22,
        16384: 27147.9,
        65536: 81429.6,
        262144: 119653.0,
        1048576: 55264.7,
    },
    ("send_recv", "one_node_net"): {  # table 2.3
        64: 339.148,
        256: 1354.45,
        1024: 4119.87,
        4096: 13120.9,
        16384: 36961.9,
        65536: 46702.7,
        262144: 54996.8,
    },
    ("isend_irecv", "one_node_net"): {  # table 2.4
        64: 74.3444,
        256: 275.714,
        1024: 1601.85,
        4096: 4002.86,
        16384: 25237.1,
        65536: 71933.1,
        262144: 75605.2,
        1048576: 43859.2,
    },
    ("send_recv", "two_vnodes_one_host"): {  # table 2.5
        64: 319.243,
        256: 1156.55,
        1024: 4638.69,
        4096: 12530.4,
        16384: 31242.5,
        65536: 59722.3,
        262144: 53988.5,
    },
    ("isend_irecv", "two_vnodes_one_host"): {  # table 2.6
        64: 74.64,
        256: 337.766,
        1024: 1003.36,
        4096: 4407.19,
        16384: 26874.5,
        65536: 60076.7,
        262144: 120085.0,
        1048576: 36403.5,
    },
    ("send_recv", "two_hosts"): {  # table 2.7
        64: 3.09821,
        256: 12.1787,
        1024: 49.11,
        4096: 76.0858,
        16384: 120.212,
        65536: 440.153,
        262144: 1206.13,
        524288: 1917.71,
    },
    ("isend_irecv", "two_hosts"): {  # table 2.8
        64: 9.89011,
        256: 36.2111,
        1024: 92.1024,
        4096: 360.693,
        16384: 895.855,
        65536: 2388.71,
        262144: 2862.97,
        1048576: 3153.6,
    },
}
"""{(api, placement): {size_bits: one-way bandwidth in Mbit/s}} from tables 2.1-2.8."""

AGH2020_LATENCY_64BIT_S: dict[str, dict[str, float]] = {  # table 2.9, 64-bit (8-byte) message
    "send_recv": {
        "one_node_shm": 1.94335e-07,
        "one_node_net": 2.21586e-07,
        "two_vnodes_one_host": 1.99199e-07,
        "two_hosts": 2.06115e-05,
    },
    "isend_irecv": {
        "one_node_shm": 7.73275e-07,
        "one_node_net": 8.59272e-07,
        "two_vnodes_one_host": 8.57234e-07,
        "two_hosts": 6.07103e-06,
    },
}
"""{api: {placement: one-way time of a 64-bit message in seconds}} (table 2.9, rows zad_1..4)."""

AGH2020_NOTES = (
    "Sizes are bits, not bytes (the code prints 8*sizeof(buffer) and the tables are headed "
    "'[bit]'; 262144 bit = 32 KiB matches the report's 32768 B peak), although section 2 "
    "says the sizes start at 64 B.",
    "In the Send/Recv code both ranks call MPI_Send first and MPI_Recv second: a head-to-head "
    "exchange that completes only while messages are sent eagerly, which is presumably why "
    "the Send/Recv tables mostly stop at 262144 bit (the report: larger sizes blocked).",
    "The Isend/Irecv variant also posts its send and receive on both ranks at once (on the "
    "same buffer), so it is a simultaneous exchange rather than a strict ping-pong; its "
    "large-message figures (up to ~120 Gbit/s) are not comparable one-to-one with Send/Recv.",
    "Times are total elapsed / (2 * iterations): an average, no per-iteration statistics.",
)


AGH2020_PATTERN = (
    "head-to-head exchange: in both of the report's codes each rank sends first and receives "
    "second (Send/Recv), or posts both at once (Isend/Irecv); the time per message is the "
    "total / (2 * iterations). It is not the echo ping-pong of this course (one rank sends "
    "first, the other answers), and it completes only while messages go out eagerly."
)
"""What the AGH 2020 numbers time, in one sentence (quote it next to any AGH value)."""


def agh2020_bandwidth(api: str, placement: str) -> tuple[np.ndarray, np.ndarray]:
    """(sizes in bytes, one-way bandwidth in Mbit/s) of one AGH 2020 table.

    ``api`` is ``"send_recv"`` or ``"isend_irecv"``; ``placement`` a key of
    :data:`AGH2020_PLACEMENTS`.
    """
    key = (api, placement)
    if key not in AGH2020_BANDWIDTH_MBITPS:
        apis = sorted({a for a, _ in AGH2020_BANDWIDTH_MBITPS})
        raise ValueError(
            f"no AGH 2020 table for api={api!r}, placement={placement!r}; "
            f"apis: {', '.join(apis)}; placements: {', '.join(AGH2020_PLACEMENTS)}"
        )
    table = AGH2020_BANDWIDTH_MBITPS[key]
    bits = np.array(sorted(table), dtype=np.int64)
    return bits // 8, np.array([table[b] for b in bits], dtype=float)


def agh2020_one_way_time(api: str, placement: str) -> tuple[np.ndarray, np.ndarray]:
    """(sizes in bytes, one-way time in seconds) derived from an AGH 2020 bandwidth table."""
    nbytes, mbitps = agh2020_bandwidth(api, placement)
    return nbytes, nbytes * 8.0 / (mbitps * 1e6)


def inter_node_sweep(api: str = "send_recv") -> dict:
    """A small inter-node sweep from the sources: AGH 2020, two physical hosts (task 4).

    Returns ``nbytes`` (bytes), ``t_median_s`` (seconds per message, derived from table 2.7
    for Send/Recv or 2.8 for Isend/Irecv), ``source``, ``label``, ``pattern`` and ``note``.
    The only per-size multi-node table among the course's sources; Durham's inter-node
    results are fits (see :func:`durham_alpha_beta`), HPC4DS gives plots only.
    """
    nbytes, t = agh2020_one_way_time(api, "two_hosts")
    table = {"send_recv": "2.7", "isend_irecv": "2.8"}[api]
    return {
        "nbytes": nbytes,
        "t_median_s": t,
        "source": f"{AGH2020_SOURCE.split(', tables')[0]}, table {table}",
        "label": f"AGH 2020, two hosts, {api.replace('_', '/')} (exchange)",
        "pattern": AGH2020_PATTERN,
        "note": "A 2020 teaching cluster of virtual nodes on commodity Ethernet; sizes "
        f"{int(nbytes[0])} B .. {int(nbytes[-1] // 1024)} KiB only (larger ones blocked).",
    }


# --------------------------------------------------------------------------------------------
# Durham, Hamilton 6/7/8
# --------------------------------------------------------------------------------------------

DURHAM_SOURCE = (
    'C. Marcotte, "Measuring point-to-point message latency with ping-pong", course exercise, '
    "Durham University, captions of figures 2 (intra-node) and 3 (inter-node)"
)

DURHAM_HAMILTON: tuple[dict, ...] = (
    {"machine": "Hamilton 6", "placement": "intra", "alpha_s": 436e-9, "bandwidth_GiBps": 2.0},
    {"machine": "Hamilton 7", "placement": "intra", "alpha_s": 163e-9, "bandwidth_GiBps": 12.0},
    {"machine": "Hamilton 8", "placement": "intra", "alpha_s": 100e-9, "bandwidth_GiBps": 20.0},
    {"machine": "Hamilton 6", "placement": "inter", "alpha_s": 6e-6, "bandwidth_GiBps": 1.0},
    {"machine": "Hamilton 7", "placement": "inter", "alpha_s": 5e-6, "bandwidth_GiBps": 3.0},
    {"machine": "Hamilton 8", "placement": "inter", "alpha_s": 1e-6, "bandwidth_GiBps": 19.0},
)
"""Approximate fitted alpha (s) and 1/beta (GiB/s), as given in the figure captions."""

DURHAM_PROTOCOL_SWITCH_BYTES = {
    ("Hamilton 6", "intra"): (512 * 1024, 1024 * 1024),
    ("Hamilton 6", "inter"): (256 * 1024, 256 * 1024),
}
"""Where the Hamilton 6 time jumps (likely an eager -> rendezvous switch), as a byte range:
between 512 KB and 1 MB within a node, about 256 KB across nodes (KB read as KiB)."""

DURHAM_NOTES = (
    "Values are approximate ('~') and read from the figure captions.",
    "The body text gives Hamilton 7 intra-node alpha ~ 1 us and 1/beta ~ 6 GiB/s, which "
    "disagrees with the figure 2 caption (163 ns, 12 GiB/s); the caption values are used.",
    "For Hamilton 6 inter-node the text writes beta ~ 2 s/GiB (i.e. 0.5 GiB/s) but concludes "
    "1/beta ~ 1 GiB/s, as does the figure 3 caption; 1 GiB/s is used.",
    "Hamilton 8 above ~64 KiB departs from the single-line model (the author's remark).",
)


def durham_alpha_beta(machine: str, placement: str) -> tuple[float, float]:
    """(alpha in s, beta in s/byte) for a Hamilton machine and placement ('intra'/'inter')."""
    for row in DURHAM_HAMILTON:
        if row["machine"] == machine and row["placement"] == placement:
            return row["alpha_s"], 1.0 / (row["bandwidth_GiBps"] * 2.0**30)
    machines = sorted({r["machine"] for r in DURHAM_HAMILTON})
    raise ValueError(
        f"no Durham value for {machine!r}/{placement!r}; machines: {', '.join(machines)}; "
        "placements: intra, inter"
    )


# --------------------------------------------------------------------------------------------
# UFRN 2025, HPC4DS 2025, UFSC
# --------------------------------------------------------------------------------------------

UFRN2025 = {
    "source": "W. A. de Souza Barradas, DCA3703 course slides (in Portuguese), Universidade "
    "Federal do Rio Grande do Norte (UFRN), 2025",
    "ranks": 2,
    "iterations": 1000,
    "sizes_bytes": (8, 64 * 10**6),
    "latency_regime_bytes": (16, 8 * 10**3),
    "bandwidth_regime_bytes": (64 * 10**3, 4 * 10**6),
    "transition_bytes": (10 * 10**3, 60 * 10**3),
    "note": "The slides write KB/MB without saying 1000 or 1024; read here as powers of 10. "
    "The transition is where latency ~ size/bandwidth (about 10-60 KB). The slides state "
    "8 B .. 64 MB; the code they show lists 8 B .. 4 MB.",
}
"""Regimes reported for a 2-rank C ping-pong; no fitted alpha/beta values are given."""

HPC4DS2025 = {
    "source": 'G. Boi and M. Piccoli, "HPC4DS - Benchmark", course report, 2025',
    "ranks": 2,
    "runs_averaged": 100,
    "sizes_bytes": (1, 2**30),
    "placements": ("pack", "scatter", "pack:excl", "scatter:excl"),
    "placement_meaning": {
        "pack": "both ranks on one node (PBS place=pack): shared memory",
        "scatter": "each rank on a different node (PBS place=scatter): the network",
        "excl": "the job has its node(s) to itself (no other jobs share them)",
    },
    "throughput_definition": "2 * bytes / average round-trip time, B/s",
    "findings": (
        "exclusive placements reach a higher rate than the shared ones",
        "scatter (two nodes) is slightly faster than pack (one node)",
    ),
    "numbers": None,
    "note": "Only plots are given, so there are no figures to reuse.",
}
"""PBS placement study (qualitative only)."""

UFSC_NETPERF_FITS: tuple[dict, ...] = (
    {"cluster": "AIX", "intercept": 0.925607, "slope_per_byte": 0.000615, "r2": 0.834197},
    {"cluster": "Linux", "intercept": 0.273835, "slope_per_byte": 0.000336, "r2": 0.913747},
    {"cluster": "SP2", "intercept": 1.735339, "slope_per_byte": 0.000677, "r2": 0.231976},
)
"""netperf TCP latency = intercept + slope * segment size (64..1518 bytes), from the UFSC
slides (Sari, Sales and Westphall). The slides do not state the latency unit (likely ms), so
these are not converted; they illustrate a linear fit with a poor R^2 (SP2)."""


def literature_alpha_beta() -> list[dict]:
    """Rows (source, label, alpha_s, beta_s_per_byte, bandwidth_GiBps) for comparison.

    Durham values come from the fits; AGH 2020 Send/Recv rows use the 64-bit latency of table
    2.9 as alpha and the best tabulated Send/Recv bandwidth as 1/beta (a rough reading). The
    AGH rows time a head-to-head exchange, not a ping-pong (:data:`AGH2020_PATTERN`), and their
    labels say so.
    """
    rows = []
    for r in DURHAM_HAMILTON:
        alpha, beta = durham_alpha_beta(r["machine"], r["placement"])
        rows.append(
            {
                "source": "Marcotte, Durham University",
                "label": f"{r['machine']} {r['placement']}-node",
                "alpha_s": alpha,
                "beta_s_per_byte": beta,
                "bandwidth_GiBps": r["bandwidth_GiBps"],
            }
        )
    for placement in AGH2020_PLACEMENTS:
        best_mbitps = max(AGH2020_BANDWIDTH_MBITPS[("send_recv", placement)].values())
        bps = best_mbitps * 1e6 / 8.0
        rows.append(
            {
                "source": "Tomkowicz, AGH 2020",
                "label": f"Send/Recv exchange {placement}",
                "alpha_s": AGH2020_LATENCY_64BIT_S["send_recv"][placement],
                "beta_s_per_byte": 1.0 / bps,
                "bandwidth_GiBps": bps / 2.0**30,
            }
        )
    return rows
