"""`pingpong-lab bench`: is our measurement fair? Ratios, all measured in one run.

    pingpong-lab bench [--np 2] [--out bench-results] [--rounds 7] [--quick]

A shared 2-core machine is noisy, so every number here is a RATIO of two things measured in the
same run, interleaved (A B A B ...) over several rounds. Each side is summarised by the median
over rounds; the ratios with a target are the median of the per-round ratios (paired, so a slow
round slows both sides and drift cancels). Comparisons:

- launcher: the same C kernel (kernels_c, blocking) under plain mpiexec and on ipyparallel
  engines (MPICluster + measure), at 8 B, 64 KiB, 1 MiB and 16 MiB (target: within 5 %);
- OSU methodology: our C sweep at 1 MiB vs the same C kernel run the OSU way
  (kernels_c/build/pp_blocking: OSU's iteration counts, mean of the iterations) and vs
  mpi4py.bench pingpong (the real OSU micro-benchmarks are not packaged here);
- mpi4py.bench: our Python kernel vs `mpi4py.bench pingpong` (same MPI, same sizes, same
  iteration counts, same statistic: mean of rank 0's half round trips; target: within 10 %),
  as shipped and with its numpy.empty() buffers written once (the fair peer: unwritten pages
  all map the kernel's zero page, which flatters large messages);
- MPI build: the same C kernel with the same arguments on Debian's MPICH (installed by
  `make bench` when it can) and on the PyPI wheel's, run in turn (what the build alone changes);
- hardware floor (kernels_c/build/hw_floor, no MPI): MPI latency / cache-line ping-pong between
  two pinned processes, MPI bandwidth / single-core memcpy bandwidth;
- course costs: engine start time, a full 1 B..64 MiB C sweep at the default precision.

Writes OUT/bench.csv, OUT/bench.md and OUT/bench.json (provenance), prints the table, and leaves
no process behind (engines and mpiexec jobs are stopped, also on errors and Ctrl-C).

The pipeline, like `pingpong-lab report`'s: `rounds` (the interleaved rounds) and `oneoffs`
(the second MPICH build, a full sweep, the course's costs) measure into one raw dict, `ratios`
turns it into the rows of a `table.Table`, and `write_bench` writes the three files.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import subprocess
import sys
import time
from pathlib import Path

from ...data.jsonable import jsonable
from ...mpi import environment
from ...mpi.ckernels import DEFAULT_LIBRARY, KERNELS_BUILD, KERNELS_DIR
from ..hardware import HW_FLOOR, parse_hw_floor
from . import oneoffs, ratios, rounds
from .peers import LAUNCH_SIZES, PP_BLOCKING, c_fixed_sizes, parse_pp_table
from .settings import Settings, log
from .table import COLUMNS, Table, markdown_table, print_table

__all__ = ["COLUMNS", "HW_FLOOR", "LAUNCH_SIZES", "Settings", "c_fixed_sizes", "main"]
__all__ += ["markdown_table", "measure", "parse_hw_floor", "parse_pp_table", "print_table"]
__all__ += ["write_bench"]


def measure(s: Settings) -> tuple[dict, dict]:
    """Everything the bench measures, in order: (raw measurements, MPI provenance)."""
    raw: dict = {"rounds": []}
    provenance = rounds.interleaved_rounds(s, raw)
    oneoffs.mpi_builds(s, raw)
    oneoffs.full_sweep(s, raw)
    oneoffs.course_costs(s, raw)
    return raw, provenance


def machine(provenance: dict) -> str:
    """One line: CPU model, usable cores, OS, Python and the MPI the jobs ran on."""
    m = environment.machine()
    mpi = provenance.get("mpi_vendor") or m.get("mpi_vendor", "?")
    return (
        f"{m['cpu']}, {m['cores_usable']} cores usable, {m['os']}, Python {m['python']}, MPI {mpi}"
    )


def write_bench(s: Settings, table: Table, raw: dict, provenance: dict) -> dict:
    """OUT/bench.csv, OUT/bench.md and OUT/bench.json (provenance and every raw number)."""
    s.out.mkdir(parents=True, exist_ok=True)
    table.write_csv(s.out / "bench.csv")
    (s.out / "bench.md").write_text(markdown_table(table.rows, machine(provenance)))
    info = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(provenance),
        "ranks": s.np,
        "rounds": s.rounds,
        "quick": s.quick,
        "mpi": provenance,
        "raw": jsonable(raw),
    }
    (s.out / "bench.json").write_text(json.dumps(info, indent=1, default=str))
    return info


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pingpong-lab bench", description=__doc__.split("\n")[0])
    p.add_argument("--np", type=int, default=2, help="MPI ranks (default 2)")
    p.add_argument("--out", default="bench-results", help="output folder")
    p.add_argument("--rounds", type=int, help="interleaved rounds (default 7, quick 2)")
    p.add_argument("--quick", action="store_true", help="tiny sizes and counts (for tests)")
    p.add_argument(
        "--class-size", type=int, default=30, help="submissions graded as a class (default 30)"
    )
    return p


def _build_kernels() -> None:
    """Build kernels_c (make) when a kernel the bench runs is missing; failures show later."""
    if DEFAULT_LIBRARY.exists() and PP_BLOCKING.exists() and HW_FLOOR.exists():
        return
    log("building kernels_c (make)")
    cmd = ["make", "--no-print-directory", "-C", str(KERNELS_DIR)]
    cmd += [f"MPICC={environment.mpicc()}", f"BUILD={KERNELS_BUILD.name}"]
    subprocess.run(cmd, check=False, capture_output=True)


def main(argv=None) -> int:
    a = parser().parse_args(argv)
    if a.np < 2:
        print("bench: error: --np must be at least 2", file=sys.stderr)
        return 2
    s = Settings(a.np, Path(a.out), a.rounds or (2 if a.quick else 7), a.quick, a.class_size)
    s.out.mkdir(parents=True, exist_ok=True)
    _build_kernels()
    t_start = time.perf_counter()
    try:
        raw, provenance = measure(s)
        table = ratios.build_table(s, raw, oneoffs.sweep_note(s))
    except KeyboardInterrupt:
        print("bench: interrupted; engines and MPI jobs were stopped", file=sys.stderr)
        return 130
    except Exception as exc:  # one line, not a traceback
        print(f"bench: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    raw["total_s"] = time.perf_counter() - t_start
    write_bench(s, table, raw, provenance)
    print_table(table.rows)
    log(f"wrote {s.out}/bench.csv, bench.md, bench.json (total {raw['total_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
