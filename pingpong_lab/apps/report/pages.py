"""The report as sections (data), then as Markdown and as HTML."""

from __future__ import annotations

import html

from ...analysis import headline
from ...analysis.formatting import (
    format_bandwidth,
    format_bytes,
    format_number,
    format_ratio,
    format_time,
    is_finite_number,
)
from .numbers import SMALL_MAX


def _load_text(meta: dict) -> str:
    """' Other work: ...' from the report's machine_load (empty when it was not recorded)."""
    parts = []
    for when in ("before", "after"):
        d = meta.get("machine_load", {}).get(when) or {}
        if d:
            parts.append(
                f"{when} measuring {d['running']:g} other process(es) running, 1-minute load "
                f"{d['load'][0]:.2f}"
            )
    return (" Other work on the machine: " + "; ".join(parts) + ".") if parts else ""


def _range(pair) -> str:
    return f"{format_bytes(pair[0])} .. {format_bytes(pair[1])}" if pair else "n/a"


def _alpha_rows(n: dict) -> list[list[str]]:
    """alpha (the typical latency), and beside it the latency floor when one was read."""
    rows = [
        [
            f"alpha (latency, typical: from {_range(n.get('latency_bytes'))})",
            format_time(n["alpha_s"]),
        ]
    ]
    if is_finite_number(n.get("alpha_floor_s")):
        rows.append(
            [
                f"latency floor (best case, a bound: from {_range(n.get('floor_bytes'))}, the "
                "fastest 0.1 % of each size's round trips)",
                format_time(n["alpha_floor_s"]),
            ]
        )
    return rows


def _single_line_text(n: dict) -> str:
    """R^2 of one line over all sizes, and whether the headline used it."""
    single = f"R^2 = {format_number(n.get('single_r2'), '.4f')}"
    if n.get("single_line_problems"):
        single += " (not used: " + n["single_line_problems"][0].split(":")[0] + ")"
    elif n["headline_method"] == "single line":
        single += " (used)"
    else:
        single += " (fits, but more lines are better)"
    return single


def _piecewise_rows(n: dict) -> list[list[str]]:
    """The breakpoints found and each segment's alpha and bandwidth."""
    lines = n.get("piecewise_lines", 2)
    segs = n.get("segments", [])
    if n.get("piecewise_better"):
        where = ", ".join(format_bytes(g["from_bytes"]) for g in segs[1:])
        text = f"{where} ({lines} lines better than one by BIC)"
    else:
        text = f"{format_bytes(n['breakpoint_bytes'])} (best split; one line is enough by BIC)"
    rows = [["piecewise breakpoints", text]]
    for g in segs:
        rows.append(
            [
                f"  segment {format_bytes(g['from_bytes'])} .. {format_bytes(g['to_bytes'])}",
                f"alpha {format_time(g['alpha_s'])}, "
                f"bandwidth {format_bandwidth(g['bandwidth_Bps'], True)}",
            ]
        )
    return rows


def headline_rows(n: dict) -> list[list[str]]:
    """The latency and bandwidth rows of the headline table, from summary.json's numbers."""
    if "headline_method" not in n:
        return [["latency and bandwidth", "n/a (no C blocking sweep they could be read from)"]]
    beta = n.get("beta_s_per_byte")
    no_bw = "n/a (no bandwidth: see the notes)"
    rows = [
        ["method (C blocking)", n["headline_label"]],
        ["why", n["headline_why"]],
        ["times read", n["headline_times"]],
        *_alpha_rows(n),
        [
            "beta (inverse asymptotic bandwidth)",
            f"{beta:.4g} s/B" if is_finite_number(beta) and beta > 0 else no_bw,
        ],
        [
            f"bandwidth 1/beta (from {_range(n.get('bandwidth_bytes'))})",
            format_bandwidth(n.get("bandwidth_Bps"), True, no_bw),
        ],
        ["n_1/2 = alpha/beta", format_bytes(n.get("n_half_bytes"))],
        ["R^2 (weighted, of the model used)", format_number(n.get("r2"), ".4f")],
    ]
    r = n.get("rounds")
    spread = headline.RoundSpread(tuple(r["latency_s"]), tuple(r["bandwidth_Bps"])) if r else None
    rows += [
        ["latency: this run's interval", headline.interval_text(spread, "latency")],
        ["bandwidth: this run's interval", headline.interval_text(spread, "bandwidth")],
        ["latency per round", headline.spread_text(spread, "latency")],
        ["bandwidth per round", headline.spread_text(spread, "bandwidth")],
    ]
    rows.append(["one line over all sizes", _single_line_text(n)])
    if "breakpoint_bytes" in n:
        rows += _piecewise_rows(n)
    return rows


def _images(figs, *prefixes) -> list:
    """The figures whose file names start with one of `prefixes`."""
    return [f for f in figs if f[0].startswith(prefixes)]


def _where_and_how(sweeps, analysis, figs, meta) -> dict:
    """Provenance of the run and one row per data file."""
    prov = next(iter(sweeps.values())).info if sweeps else {}
    return {
        "title": "Where and how",
        "text": [
            f"Date: {prov.get('date', '?')}; MPI: {prov.get('mpi_vendor', '?')} "
            f"({prov.get('mpi_source') or 'source not recorded'}: "
            f"{prov.get('mpi_library_path') or '?'}); mpi4py "
            f"{prov.get('mpi4py_version', '?')}; Python {prov.get('python', '?')}; hosts: "
            f"{', '.join(prov.get('hosts', [])) or '?'}; platform {prov.get('platform', '?')}.",
            f"Mode: {meta['mode']}. {meta.get('timing', '')}" + _load_text(meta),
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


def _ratio_rows(n: dict) -> list[list[str]]:
    """The headline table's rows after latency and bandwidth: measured values and ratios."""
    most = n.get("contention_max_ranks", "?")
    return [
        ["peak measured bandwidth", format_bandwidth(n.get("peak_bandwidth_Bps"), bits=True)],
        [
            f"measured latency at {format_bytes(n.get('smallest_bytes'))}",
            format_time(n.get("latency_smallest_s")),
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
            f"contention slowdown at {most} ranks, small messages",
            format_ratio(n.get("contention_slowdown_small")),
        ],
        [
            f"contention slowdown at {most} ranks, large messages",
            format_ratio(n.get("contention_slowdown_large")),
        ],
    ]


def _section(title: str, text: list[str], images: list, table: list | None = None) -> dict:
    """One section: its paragraphs, its table (header row first) when it has one, its figures."""
    return {"title": title, "text": text, **({"table": table} if table else {}), "images": images}


def _headline_section(sweeps, analysis, figs, meta) -> dict:
    """The notes, the headline table and the latency and bandwidth figures."""
    n = analysis["numbers"]
    table = [["quantity", "value"]] + headline_rows(n) + _ratio_rows(n)
    return _section(
        "Headline numbers", analysis["notes"], _images(figs, "latency", "bandwidth"), table
    )


_MODEL_TEXT = (
    "T(b) = alpha + beta b fitted with weights 1/t (relative residuals), so that every size "
    "counts. The piecewise fit searches one or two breakpoints (the eager/rendezvous switch, a "
    "cache cliff) and keeps more lines only when each step lowers the BIC by more than 10. The "
    "headline is read from the piecewise segments when they are better, from one line when it "
    "fits, and otherwise from the two ends of the sweep (Hockney: latency from the smallest "
    "sizes, bandwidth from the largest); the figure draws the model that was used."
)
_KERNELS_TEXT = (
    "Python pays the interpreter on every call: compare small-message latencies; large "
    "messages are dominated by the copy and converge."
)


def _model_section(sweeps, analysis, figs, meta) -> dict:
    """How the model is fitted and chosen, with its figure and residuals."""
    return _section("Model fit", [_MODEL_TEXT], _images(figs, "model", "residuals"))


def _kernels_section(sweeps, analysis, figs, meta) -> dict:
    """C vs Python, blocking vs non-blocking."""
    return _section("Kernels compared", [_KERNELS_TEXT], _images(figs, "compare"))


def _transport_section(sweeps, analysis, figs, meta) -> dict:
    """Shared memory vs TCP loopback, and how TCP was forced."""
    text = f"TCP forced with: {analysis['numbers'].get('tcp_env_recorded', 'n/a')}."
    return _section("Shared memory vs TCP loopback", [text], _images(figs, "shm_vs_tcp"))


def _variability_row(r: dict) -> list[str]:
    return [
        format_bytes(r["nbytes"]),
        str(r["n"]),
        format_time(r["median_s"]),
        format_time(r["mean_s"]),
        format_time(r["p99_s"]),
        format_time(r["max_s"]),
        f"{r['mean_over_median']:.3f}",
        str(r["outliers_iqr"]),
    ]


def _variability_section(sweeps, analysis, figs, meta) -> dict | None:
    """The tails of the per-iteration times, where raw samples were kept."""
    n = analysis["numbers"]
    if not n.get("variability"):
        return None
    head = ["size", "samples", "median", "mean", "p99", "max", "mean/median", "outliers"]
    text = f"From {n.get('variability_source')}: heavy right tails pull the mean above the median."
    table = [head] + [_variability_row(r) for r in n["variability"]]
    return _section("Variability", [text], _images(figs, "variability"), table)


_CONTENTION_HEAD = ["ranks", "pairs", "small size", "time", "slowdown", "large size", "time"]
_CONTENTION_HEAD += ["slowdown", "aggregate bandwidth"]


def _contention_row(r: dict) -> list[str]:
    return [
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


def _contention_section(sweeps, analysis, figs, meta) -> dict | None:
    """Pairwise exchange at several rank counts, where it was measured."""
    n = analysis["numbers"]
    if not n.get("contention"):
        return None
    text = (
        "All ranks exchange in pairs (r <-> r + size/2) at once; slowdown is relative to one "
        "pair. More ranks than cores are oversubscribed (ranks take turns)."
    )
    table = [list(_CONTENTION_HEAD)] + [_contention_row(r) for r in n["contention"]]
    return _section("Contention (pairwise exchange)", [text], _images(figs, "contention"), table)


# the report's sections in order; each returns its section, or None when there is no data
_SECTIONS = (
    _where_and_how,
    _headline_section,
    _model_section,
    _kernels_section,
    _transport_section,
    _variability_section,
    _contention_section,
)


def sections(sweeps, analysis, figs, meta) -> list[dict]:
    """The report as data: [{"title", "text": [..], "table": [[header], rows..], "images"}]."""
    out = [section(sweeps, analysis, figs, meta) for section in _SECTIONS]
    return [s for s in out if s is not None]


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
