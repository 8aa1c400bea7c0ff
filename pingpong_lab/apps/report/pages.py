"""The report as sections (data), then as Markdown and as HTML."""

from __future__ import annotations

import html

from ...analysis.formatting import (
    format_bandwidth,
    format_bytes,
    format_number,
    format_ratio,
    format_time,
)
from .numbers import SMALL_MAX


def sections(sweeps, analysis, figs, meta) -> list[dict]:
    """The report as data: [{"title", "text": [..], "table": [[header], rows..], "images"}]."""
    n = analysis["numbers"]
    out = []
    prov = next(iter(sweeps.values())).info if sweeps else {}
    out.append(
        {
            "title": "Where and how",
            "text": [
                f"Date: {prov.get('date', '?')}; MPI: {prov.get('mpi_vendor', '?')} "
                f"({prov.get('mpi_source') or 'source not recorded'}: "
                f"{prov.get('mpi_library_path') or '?'}); mpi4py "
                f"{prov.get('mpi4py_version', '?')}; Python {prov.get('python', '?')}; hosts: "
                f"{', '.join(prov.get('hosts', [])) or '?'}; platform {prov.get('platform', '?')}.",
                f"Mode: {meta['mode']}. {meta.get('timing', '')}",
                "Times are one-way (half a round trip), the per-iteration maximum over ranks, "
                "summarised by the median; every CSV has a .csv.json provenance sidecar and a "
                ".samples.npz file with every sample.",
            ],
            "table": [["data file", "kernel", "mode", "transport", "ranks", "sizes"]]
            + [
                [
                    sw.path.name,
                    str(sw.info.get("kernel", "?")),
                    str(sw.info.get("mode", "?")),
                    str(sw.info.get("transport", "?")),
                    str(sw.info.get("ranks", "?")),
                    f"{format_bytes(sw.nbytes.min())} .. {format_bytes(sw.nbytes.max())} "
                    f"({len(sw.rows)})",
                ]
                for _, sw in sorted(sweeps.items())
            ],
        }
    )
    head = [["quantity", "value"]]
    fit_gap = "implausible fit (see the warning)" if "fit_problems" in n else "n/a"
    seg_gap = "implausible (see the warning)" if "segment_problems" in n else "n/a"
    rows = [
        ["alpha (latency, weighted fit, C blocking)", format_time(n.get("alpha_s"), fit_gap)],
        [
            "beta (inverse bandwidth)",
            f"{n['beta_s_per_byte']:.4g} s/B"
            if isinstance(n.get("beta_s_per_byte"), float)
            else fit_gap,
        ],
        ["bandwidth 1/beta", format_bandwidth(n.get("bandwidth_Bps"), True, fit_gap)],
        ["peak measured bandwidth", format_bandwidth(n.get("peak_bandwidth_Bps"), bits=True)],
        ["n_1/2 = alpha/beta", format_bytes(n.get("n_half_bytes"), fit_gap)],
        ["R^2 (weighted)", format_number(n.get("r2"), ".4f", fit_gap)],
        [
            f"measured latency at {format_bytes(n.get('smallest_bytes'))}",
            format_time(n.get("latency_smallest_s")),
        ],
        [
            "piecewise breakpoint",
            format_bytes(n.get("breakpoint_bytes"))
            + (
                ""
                if "two_segments_better" not in n
                else (
                    " (two segments better by BIC)"
                    if n["two_segments_better"]
                    else " (not better than one line by BIC)"
                )
            ),
        ],
        [
            "  lower segment alpha, bandwidth",
            f"{format_time(n.get('lower_alpha_s'), seg_gap)}, "
            f"{format_bandwidth(n.get('lower_bandwidth_Bps'), True, seg_gap)}",
        ],
        [
            "  upper segment alpha, bandwidth",
            f"{format_time(n.get('upper_alpha_s'), seg_gap)}, "
            f"{format_bandwidth(n.get('upper_bandwidth_Bps'), True, seg_gap)}",
        ],
        [
            f"Python overhead: Python/C latency (sizes <= {SMALL_MAX} B)",
            format_ratio(n.get("python_over_c_latency")),
        ],
        [
            f"Python/C at {format_bytes(n.get('python_over_c_largest_bytes'))}",
            format_ratio(n.get("python_over_c_at_largest")),
        ],
        [
            "non-blocking/blocking latency (C)",
            format_ratio(n.get("nonblocking_over_blocking_c_latency")),
        ],
        ["TCP/shared-memory latency", format_ratio(n.get("tcp_over_shm_latency"))],
        [
            f"TCP/shared-memory bandwidth at {format_bytes(n.get('tcp_compared_at_bytes'))}",
            format_ratio(n.get("tcp_over_shm_bandwidth")),
        ],
        [
            "TCP really used (latency >= 2x and MPIR_CVAR_NOLOCAL=1)",
            {True: "yes", False: "NO"}.get(n.get("tcp_verified"), "n/a"),
        ],
        [
            f"contention slowdown at {n.get('contention_max_ranks', '?')} ranks, small messages",
            format_ratio(n.get("contention_slowdown_small")),
        ],
        [
            f"contention slowdown at {n.get('contention_max_ranks', '?')} ranks, large messages",
            format_ratio(n.get("contention_slowdown_large")),
        ],
    ]
    out.append(
        {
            "title": "Headline numbers",
            "text": analysis["notes"],
            "table": head + rows,
            "images": [f for f in figs if f[0].startswith(("latency", "bandwidth"))],
        }
    )
    out.append(
        {
            "title": "Model fit",
            "text": [
                "T(b) = alpha + beta b fitted with weights 1/t (relative residuals), so that "
                "every size counts; the piecewise fit searches the breakpoint (eager/rendezvous "
                "switch) and keeps two segments only when the BIC improves by more than 10."
            ],
            "images": [f for f in figs if f[0].startswith(("piecewise", "residuals"))],
        }
    )
    out.append(
        {
            "title": "Kernels compared",
            "text": [
                "Python pays the interpreter on every call: compare small-message latencies; "
                "large messages are dominated by the copy and converge."
            ],
            "images": [f for f in figs if f[0].startswith("compare")],
        }
    )
    out.append(
        {
            "title": "Shared memory vs TCP loopback",
            "text": [f"TCP forced with: {n.get('tcp_env_recorded', 'n/a')}."],
            "images": [f for f in figs if f[0].startswith("shm_vs_tcp")],
        }
    )
    if n.get("variability"):
        vt = [["size", "samples", "median", "mean", "p99", "max", "mean/median", "outliers"]]
        for r in n["variability"]:
            vt.append(
                [
                    format_bytes(r["nbytes"]),
                    str(r["n"]),
                    format_time(r["median_s"]),
                    format_time(r["mean_s"]),
                    format_time(r["p99_s"]),
                    format_time(r["max_s"]),
                    f"{r['mean_over_median']:.3f}",
                    str(r["outliers_iqr"]),
                ]
            )
        out.append(
            {
                "title": "Variability",
                "text": [
                    f"From {n.get('variability_source')}: heavy right tails pull the mean "
                    "above the median."
                ],
                "table": vt,
                "images": [f for f in figs if f[0].startswith("variability")],
            }
        )
    if n.get("contention"):
        ct = [
            [
                "ranks",
                "pairs",
                "small size",
                "time",
                "slowdown",
                "large size",
                "time",
                "slowdown",
                "aggregate bandwidth",
            ]
        ]
        for r in n["contention"]:
            ct.append(
                [
                    str(r["ranks"]),
                    str(r["pairs"]),
                    format_bytes(r.get("small_bytes")),
                    format_time(r.get("small_t_s")),
                    format_ratio(r.get("small_slowdown")),
                    format_bytes(r.get("large_bytes")),
                    format_time(r.get("large_t_s")),
                    format_ratio(r.get("large_slowdown")),
                    format_bandwidth(r.get("large_aggregate_Bps"), bits=True),
                ]
            )
        out.append(
            {
                "title": "Contention (pairwise exchange)",
                "text": [
                    "All ranks exchange in pairs (r <-> r + size/2) at once; slowdown is "
                    "relative to one pair. More ranks than cores are oversubscribed (ranks take "
                    "turns)."
                ],
                "table": ct,
                "images": [f for f in figs if f[0].startswith("contention")],
            }
        )
    return out


def to_markdown(secs, title) -> str:
    lines = [f"# {title}", ""]
    for s in secs:
        lines += [f"## {s['title']}", ""]
        for t in s.get("text", []):
            lines += [t, ""]
        table = s.get("table")
        if table:
            lines.append("| " + " | ".join(table[0]) + " |")
            lines.append("| " + " | ".join("---" for _ in table[0]) + " |")
            lines += [
                "| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in table[1:]
            ]
            lines.append("")
        for name, caption in s.get("images", []):
            lines += [f"![{caption}](figures/{name})", ""]
    return "\n".join(lines)


def to_html(secs, title) -> str:
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        "<html lang='en'><head><meta charset='utf-8'>",
        f"<title>{e(title)}</title>",
        "<style>body{font-family:sans-serif;max-width:60em;margin:auto;padding:1em}"
        "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:.2em .5em;"
        "text-align:left}img{max-width:100%}figure{margin:1em 0}</style></head><body>",
        f"<h1>{e(title)}</h1>",
    ]
    for s in secs:
        parts.append(f"<h2>{e(s['title'])}</h2>")
        parts += [f"<p>{e(t)}</p>" for t in s.get("text", [])]
        table = s.get("table")
        if table:
            parts.append("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in table[0]) + "</tr>")
            parts += [
                "<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in table[1:]
            ]
            parts.append("</table>")
        for name, caption in s.get("images", []):
            parts.append(
                f"<figure><img src='figures/{e(name)}' alt='{e(caption)}'>"
                f"<figcaption>{e(caption)}</figcaption></figure>"
            )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
