"""What the report measures (the plan) and how it finds and reads sweeps again."""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...analysis import headline
from ...data import results
from ...data.schema import COL
from ...mpi import measure
from ...mpi.settings import SweepSettings
from ...progress import bar, echo

KIB, MIB = 1 << 10, 1 << 20


@dataclass
class Plan:
    """What to measure: one entry per sweep (role, ranks, settings).

    The main sweeps run in interleaved rounds (`rounds`, and `headline_rounds` for the C
    blocking sweep the headline is read from): each round runs every size once for about
    target_s (at least round_min_reps repetitions), so that a busy spell of the machine falls on
    a few rounds of many sizes and the headline can be read from each size's quieter rounds.
    Large messages need more rounds than small ones: one 64 MiB round trip lasts longer than a
    scheduler time slice, so most of its repetitions in a round are hit while any other process
    runs, and only a round at a quiet moment shows the machine's bandwidth.
    """

    target_s: float
    main_range: tuple[int, int]
    python_range: tuple[int, int]
    tcp_range: tuple[int, int]
    variability_range: tuple[int, int]
    variability_reps: int
    contention_ranks: tuple[int, ...]
    contention_range: tuple[int, int]
    contention_target_s: float
    rounds: int
    headline_rounds: int
    round_min_reps: int

    def runs(self, np_: int) -> list[tuple[str, int, SweepSettings]]:
        def sweep(kind, mode, size_range, target_s=self.target_s, **more):
            sizes = measure.message_sizes(*size_range)
            return SweepSettings(kind=kind, mode=mode, sizes=sizes, target_s=target_s, **more)

        def rounds(kind, mode, size_range, n=self.rounds, **more):
            """Interleaved rounds: every size in each round, target_s per size and round."""
            return sweep(kind, mode, size_range, rounds=n, min_reps=self.round_min_reps, **more)

        runs = [
            ("c_blocking", np_, rounds("c", "blocking", self.main_range, self.headline_rounds)),
            ("c_nonblocking", np_, rounds("c", "nonblocking", self.main_range)),
            ("python_blocking", np_, rounds("python", "blocking", self.python_range)),
            ("python_nonblocking", np_, rounds("python", "nonblocking", self.python_range)),
            (
                "variability",
                np_,
                sweep(
                    "c",
                    "blocking",
                    self.variability_range,
                    target_s=measure.TARGET_S,
                    reps=self.variability_reps,
                ),
            ),
            ("c_blocking_tcp", np_, rounds("c", "blocking", self.tcp_range, transport="tcp")),
        ]
        for n in self.contention_ranks:
            pairwise = sweep("c", "pairwise", self.contention_range, self.contention_target_s)
            runs.append((f"contention_{n}", n, pairwise))
        return runs


FULL = Plan(
    target_s=0.01,
    main_range=(1, 64 * MIB),
    python_range=(1, 16 * MIB),
    tcp_range=(1, 16 * MIB),
    variability_range=(8, MIB),
    variability_reps=1000,
    contention_ranks=(2, 4, 8),
    contention_range=(8, MIB),
    contention_target_s=0.02,
    rounds=6,
    headline_rounds=12,
    round_min_reps=8,
)
QUICK = Plan(
    target_s=0.002,
    main_range=(1, 4 * KIB),
    python_range=(1, 4 * KIB),
    tcp_range=(1, 4 * KIB),
    variability_range=(8, 1 * KIB),
    variability_reps=100,
    contention_ranks=(2, 4),
    contention_range=(8, 1 * KIB),
    contention_target_s=0.002,
    rounds=3,
    headline_rounds=3,
    round_min_reps=5,
)


def machine_load(samples: int = 10, interval_s: float = 0.05) -> dict:
    """Other work on this machine now: {"running": runnable processes besides this one (median of
    a few /proc/loadavg snapshots), "load": the 1, 5 and 15 minute load averages}; {} where
    there is no /proc/loadavg."""
    counts, load = [], None
    for k in range(int(samples)):
        try:
            fields = Path("/proc/loadavg").read_text().split()
        except OSError:
            return {}
        load = [float(v) for v in fields[:3]]
        counts.append(int(fields[3].split("/")[0]) - 1)  # this process is running, reading it
        if k + 1 < samples:
            time.sleep(interval_s)
    return {"running": float(np.median(counts)), "load": load}


def busy_note(before: dict, after: dict, ranks: int, cores: int) -> str | None:
    """A report note when other work shared the cores with the ranks (None when it did not).

    Other runnable processes are counted just before and just after measuring (the report's own
    ranks are not running then); when they and the ranks are more than the cores, the ranks
    took turns with them and every number describes a busy machine, however it is read.
    """
    other = max(before.get("running", 0.0), after.get("running", 0.0))
    if other + ranks <= cores:
        return None
    loads = ", ".join(
        f"{k} {d['load'][0]:.2f}" for k, d in (("before", before), ("after", after)) if d
    )
    return (
        f"BUSY MACHINE: {other:g} other process(es) were running beside the {ranks} ranks on "
        f"{cores} cores (1-minute load {loads}): the ranks took turns with them, so latency and "
        "bandwidth are those of a busy machine (compare the spread between rounds); measure "
        "again when it is idle."
    )


def log(message: str) -> None:
    echo(f"[report {time.strftime('%H:%M:%S')}] {message}")


def measure_all(data_dir: Path, np_: int, quick: bool) -> dict:
    """Run every sweep of the plan into data_dir; {role: seconds}; a failed run is skipped."""
    from .. import sweep

    plan = QUICK if quick else FULL
    data_dir.mkdir(parents=True, exist_ok=True)
    runs = plan.runs(np_)
    times = {}
    for k, (role, ranks, settings) in enumerate(bar(runs, "report", unit="run"), start=1):
        out = data_dir / f"{role}.csv"
        log(f"({k}/{len(runs)}) {role}: {ranks} ranks, {settings.describe()}")
        t0 = time.perf_counter()
        code = sweep.launch_sweep(settings, ranks, out)
        times[role] = time.perf_counter() - t0
        if code != 0:
            log(f"({k}/{len(runs)}) {role} FAILED (exit {code}); the report goes on without it")
        else:
            log(f"({k}/{len(runs)}) {role} done in {times[role]:.1f} s")
    return times


@dataclass
class Sweep:
    path: Path
    rows: list[dict]
    info: dict
    samples: dict = field(default_factory=dict)

    def col(self, name: str) -> np.ndarray:
        return np.array([float(r[name]) for r in self.rows])

    @property
    def nbytes(self) -> np.ndarray:
        return self.col(COL.nbytes)

    @property
    def t(self) -> np.ndarray:
        return self.col(COL.t_median_s)

    def at(self, nbytes: int, column: str = COL.t_median_s) -> float:
        for r in self.rows:
            if int(r[COL.nbytes]) == int(nbytes):
                return float(r[column])
        return math.nan

    @property
    def rounds(self) -> int | None:
        """Interleaved rounds of this sweep (None when it was not measured in rounds)."""
        return headline.interleaved_rounds(self.info)

    def headline_times(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, str]:
        """(sizes, times to read the headline from, per-round medians or None, what they are)."""
        x = self.nbytes
        t, per_round, what = headline.headline_times(x, self.t, self.samples, self.rounds)
        return x, t, per_round, what

    def table(self) -> dict:
        return {k: self.col(k) for k in (COL.nbytes, COL.t_median_s, COL.ci_lo_s, COL.ci_hi_s)}


def load_sweep(path: Path) -> Sweep:
    rows, info = results.read_results(path)
    rows = [r for r in rows if isinstance(r.get(COL.nbytes), int | float)]
    samples = {}
    sp = results.samples_path(path)
    if sp.exists():
        try:
            samples = results.read_samples(sp)
        except Exception:  # a damaged sample file must not stop the report
            samples = {}
    return Sweep(Path(path), rows, info, samples)


ROLES = (
    "c_blocking",
    "c_nonblocking",
    "python_blocking",
    "python_nonblocking",
    "c_blocking_tcp",
    "variability",
)


def discover(folder: Path) -> dict[str, Sweep]:
    """Sweeps in folder (and folder/data) by role: file names first, then provenance."""
    paths = sorted({*folder.glob("*.csv"), *folder.glob("data/*.csv")})
    found: dict[str, Sweep] = {}
    others = []
    for p in paths:
        try:
            sw = load_sweep(p)
        except Exception as exc:
            log(f"skipping {p}: {exc}")
            continue
        if not sw.rows:
            continue
        stem = p.stem
        if stem in ROLES or re.fullmatch(r"contention_\d+", stem):
            found[stem] = sw
        else:
            others.append(sw)
    for sw in others:  # cluster files with other names: classify by provenance
        info = sw.info
        kind, mode = info.get("kernel"), info.get("mode")
        transport = info.get("transport", "default")
        if mode == "pairwise":
            role = f"contention_{info.get('ranks', len(sw.rows))}"
        elif transport == "tcp" or info.get("transport_env", {}).get("MPIR_CVAR_NOLOCAL") == "1":
            role = "c_blocking_tcp" if kind == "c" else None
        elif kind and mode:
            role = f"{kind}_{mode}"
        else:
            role = None
        if role and role in found and len(found[role].rows) >= len(sw.rows):
            continue
        if role:
            found[role] = sw
    return found
