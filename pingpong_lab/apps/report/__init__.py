"""`pingpong-lab report`: measure everything headless and write a report folder.

    pingpong-lab report [--np 2] [--out report] [--quick]
    pingpong-lab report --from DIR [--out DIR2]      # re-analyse CSVs (cluster data)

Measuring runs, each as one `pingpong-lab sweep` (mpiexec, no Jupyter):
blocking and non-blocking sweeps in C and Python and shared memory vs TCP loopback
(`--transport tcp`), each in interleaved rounds (`--rounds`: every size once per round), a
variability run (many raw samples at a few sizes) and a contention run (pairwise at 2, 4, 8
ranks). Then it reads latency and bandwidth (analysis.headline: piecewise segments when they are
better than one line, one line when it fits, else Hockney's two ends of the sweep; from each
size's median round, with the 95 % interval over the rounds and their spread; the small
sizes' latency floor beside it as a best-case bound), draws the figures and writes:

    OUT/data/*.csv (+ .csv.json provenance, .samples.npz raw samples)
    OUT/figures/*.png
    OUT/summary.md, OUT/summary.html, OUT/summary.json (the headline numbers)

`--from DIR` reads the CSVs in DIR (or DIR/data): their roles come from the file names this
command writes or, for other files, from the provenance sidecar (kernel, mode, transport, ranks),
so sweeps from a cluster job can be analysed the same way. The full run takes 1-2 minutes on two
cores; `--quick` (tiny sizes, a few seconds per run) is for tests.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from ...analysis.formatting import format_bandwidth, format_bytes, format_ratio, format_time
from ...data.jsonable import jsonable
from ...mpi.environment import cpu_count
from .figures import figures
from .numbers import analyse
from .pages import sections, to_html, to_markdown
from .sweeps import (
    FULL,
    QUICK,
    Sweep,
    busy_note,
    discover,
    load_sweep,
    log,
    machine_load,
    measure_all,
)

__all__ = ["FULL", "QUICK", "Sweep", "discover", "load_sweep", "measure_all", "main"]


def write_report(sweeps, out: Path, meta: dict) -> dict:
    if not sweeps:
        raise ValueError("no sweep CSVs to analyse")
    log("fitting and summarising")
    analysis = analyse(sweeps)
    if meta.get("busy"):
        analysis["notes"].insert(0, meta["busy"])
    log("drawing figures")
    figs = figures(sweeps, analysis, out / "figures")
    title = "MPI ping-pong report"
    secs = sections(sweeps, analysis, figs, meta)
    (out / "summary.md").write_text(to_markdown(secs, title), encoding="utf-8")
    (out / "summary.html").write_text(to_html(secs, title), encoding="utf-8")
    summary = {
        "meta": meta,
        "numbers": jsonable(analysis["numbers"]),
        "notes": analysis["notes"],
        "figures": [f for f, _ in figs],
        "data": {role: sw.path.name for role, sw in sorted(sweeps.items())},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pingpong-lab report",
        description="Measure (or re-analyse) and write a report folder.",
    )
    p.add_argument("--np", type=int, default=2, help="ranks for the main sweeps (default 2)")
    p.add_argument("--out", help="output folder (default: report, or the --from folder)")
    p.add_argument("--quick", action="store_true", help="tiny sizes (seconds), for tests")
    p.add_argument("--from", dest="source", help="re-analyse the CSVs in this folder")
    return p


def _error(message: str, code: int) -> int:
    print(f"report: error: {message}", file=sys.stderr)
    return code


def _reanalyse(a) -> tuple[dict, Path, dict] | int:
    """--from DIR: the sweeps already in DIR (or DIR/data); an exit code when there are none."""
    src = Path(a.source)
    if not src.is_dir():
        return _error(f"--from {src}: no such folder", 2)
    out = Path(a.out) if a.out else src
    out.mkdir(parents=True, exist_ok=True)
    sweeps = discover(src)
    if not sweeps:
        return _error(f"no sweep CSVs in {src} or {src}/data", 1)
    log(f"re-analysing {len(sweeps)} sweeps from {src}: {', '.join(sorted(sweeps))}")
    return sweeps, out, {"mode": f"re-analysis of {src} (nothing measured)"}


def _measure(a) -> tuple[dict, Path, dict] | int:
    """Run every sweep into OUT/data (a fresh folder); an exit code when nothing was measured."""
    if a.np < 2:
        return _error("--np must be at least 2", 2)
    out = Path(a.out or "report")
    data = out / "data"
    if data.exists():
        shutil.rmtree(data)  # a report describes one run
    out.mkdir(parents=True, exist_ok=True)
    load_before = machine_load()
    try:
        times = measure_all(data, a.np, a.quick)
    except KeyboardInterrupt:
        print("report: interrupted; the MPI job was stopped", file=sys.stderr)
        return 130
    load_after = machine_load()
    sweeps = discover(data)
    if not sweeps:
        return _error("every sweep failed; nothing to report", 1)
    meta = {
        "mode": "quick (tiny sizes, for tests)" if a.quick else "full",
        "ranks": a.np,
        "sweep_seconds": times,
        "timing": f"Measuring took {sum(times.values()):.0f} s.",
        "machine_load": {"before": load_before, "after": load_after},
    }
    busy = busy_note(load_before, load_after, a.np, cpu_count())
    if busy:
        meta["busy"] = busy
        log(busy)
    return sweeps, out, meta


def _percent(fraction) -> str:
    """A spread as a whole percentage; n/a where summary.json has none (no bandwidth read)."""
    return "n/a" if fraction is None else f"{100 * fraction:.0f} %"


def _log_headline(n: dict) -> None:
    """The headline numbers in one log line."""
    r = n.get("rounds") or {}
    spread = (
        f" (rounds spread {_percent(r['latency_rel_spread'])} / "
        f"{_percent(r['bandwidth_rel_spread'])})"
        if r
        else ""
    )
    log(
        f"{n.get('headline_label', 'no headline')}: "
        f"alpha {format_time(n.get('alpha_s'))}, "
        f"bandwidth {format_bandwidth(n.get('bandwidth_Bps'), True)}{spread}, "
        f"n_1/2 {format_bytes(n.get('n_half_bytes'))}, "
        f"breakpoint {format_bytes(n.get('breakpoint_bytes'))}, "
        f"Python/C {format_ratio(n.get('python_over_c_latency'))}, TCP/shm "
        f"{format_ratio(n.get('tcp_over_shm_latency'))}, contention "
        f"{format_ratio(n.get('contention_slowdown_small'))}"
    )


def main(argv=None) -> int:
    a = parser().parse_args(argv)
    t0 = time.perf_counter()
    got = _reanalyse(a) if a.source else _measure(a)
    if isinstance(got, int):
        return got
    sweeps, out, meta = got
    try:
        summary = write_report(sweeps, out, meta)
    except ValueError as exc:
        return _error(str(exc), 1)
    total = time.perf_counter() - t0
    summary["meta"]["total_seconds"] = total
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    _log_headline(summary["numbers"])
    log(f"wrote {out}/summary.md, summary.html, summary.json, figures/, data/ in {total:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
