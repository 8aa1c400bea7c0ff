"""The MPI program behind `pingpong-lab sweep`: run with mpiexec, every rank runs main().

    mpiexec -n 2 python -m pingpong_lab.sweep_job '{"kind": "c", "mode": "blocking", ...}'

Rank 0 prints one progress line per size and writes the results; an error is printed as one
line on stderr by rank 0 and every rank exits with status 1 (no rank is left waiting).
"""

from __future__ import annotations

import json
import sys

from . import measure, results
from .errors import PingPongLabError


def _progress(index, total, row, seconds):
    ci = row["ci_rel_halfwidth"] * 100
    print(
        f"[{index + 1:>2}/{total}] {row['nbytes']:>10} B  median {row['t_median_s'] * 1e6:10.2f} us"
        f" +/-{ci:5.2f}%  min {row['t_min_s'] * 1e6:10.2f} us  reps {row['reps']:>6}"
        f" x{row['batch']}  {row['stop_reason']:<6} ({seconds:.2f} s)",
        flush=True,
    )


def main(argv=None) -> int:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    args = json.loads((argv or sys.argv[1:])[0])
    try:
        out = measure.sweep(
            args["kind"],
            args["mode"],
            args["sizes"],
            target_s=args.get("target_s", measure.TARGET_S),
            rel_ci=args.get("rel_ci", measure.REL_CI),
            budget_s=args.get("budget_s", measure.BUDGET_S),
            reps=args.get("reps"),
            shared_buffer=args.get("shared_buffer", False),
            library=args.get("library"),
            comm=comm,
            progress=_progress,
        )
        info = results.provenance(
            comm,
            kernel=args["kind"],
            mode=args["mode"],
            sizes=args["sizes"],
            buffers="shared" if args.get("shared_buffer") else "separate",
            launcher="mpiexec",
            precision={"rel_ci": args.get("rel_ci"), "budget_s_per_size": args.get("budget_s")},
            transport=args.get("transport", "default"),
        )
        if comm.Get_rank() == 0:
            rows, raw = out
            info["repetitions"] = {str(r["nbytes"]): r["reps"] for r in rows}
            info["stop_reasons"] = {str(r["nbytes"]): r["stop_reason"] for r in rows}
            met = sum(r["stop_reason"] in ("ci", "fixed") for r in rows)
            print(f"precision target met at {met} of {len(rows)} sizes", flush=True)
            results.write_results(args["out"], rows, info, raw)
            print(f"wrote {args['out']} ({len(rows)} sizes)", flush=True)
        return 0
    except (PingPongLabError, OSError, ValueError) as exc:
        if comm.Get_rank() == 0:
            print(f"pingpong-lab sweep: error: {exc}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
