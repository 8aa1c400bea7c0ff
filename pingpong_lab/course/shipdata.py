"""Turn a measured sweep into a dataset the course ships (read with `handoff.shipped(name)`).

    python -m pingpong_lab.course.shipdata RESULTS.csv NAME "ABOUT"
    python -m pingpong_lab.course.shipdata --fit       # 04_fit again from the shipped 02_sweep
    python -m pingpong_lab.course.shipdata --run DIR "ABOUT"   # 02_sweep, 02_samples, 04_fit
                                                              # from one run of notebook 02

Keeps, per message size, the median and the fastest one-way time and the 95% CI of the median
(arrays nbytes, t_median_s, t_min_s, ci_lo_s, ci_hi_s) and, as plain values, ABOUT (how it was
measured) and what the sweep's provenance says about the link, MPI, kernel, CPU and date. The
files go to course/shipped/NAME.npz and .json, written atomically by `handoff.save`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .. import runtime
from ..data import results
from ..data.schema import COL
from . import handoff

ARRAYS = {
    "nbytes": COL.nbytes,
    "t_median_s": COL.t_median_s,
    "t_min_s": COL.t_min_s,
    "ci_lo_s": COL.ci_lo_s,
    "ci_hi_s": COL.ci_hi_s,
}
PROVENANCE = ("link", "mpi_library_version", "kernel", "mode", "ranks", "cpu", "date")


def ship(csv_path, name: str, about: str, directory=None) -> Path:
    """Save the sweep in `csv_path` as shipped dataset `name`; returns the .npz path."""
    if not about.strip():
        raise ValueError("say in ABOUT how the data was measured")
    table, _ = results.read_table(csv_path)
    missing = [col for col in ARRAYS.values() if col not in table]
    if missing:
        raise ValueError(f"{csv_path}: no column(s) {', '.join(missing)}")
    info = results.read_sidecar(csv_path)
    plain = {key: info.get(key) for key in PROVENANCE}
    first_line = str(plain["mpi_library_version"] or "").splitlines()
    plain["mpi_library_version"] = first_line[0] if first_line else None
    arrays = {key: table[col] for key, col in ARRAYS.items()}
    arrays["nbytes"] = arrays["nbytes"].astype("int64")
    folder = handoff.SHIPPED_DIR if directory is None else directory
    return handoff.save(name, directory=folder, about=about.strip(), **plain, **arrays)


def fit_of(sweep: dict) -> dict:
    """What notebook 04 hands to 05 for a sweep: the weighted alpha-beta fit and the first
    piecewise breakpoint (-1 when one line is enough by BIC), as `04_fit` stores them."""
    from ..analysis import model

    x, t = sweep["nbytes"], sweep["t_median_s"]
    line = model.fit_linear(x, t, weighted=True)
    pw = model.fit_piecewise(x, t)
    return {
        "alpha_s": float(line.alpha_s),
        "beta_s_per_byte": float(line.beta_s_per_byte),
        "breakpoint_bytes": int(pw.breakpoint_bytes) if pw.two_segments_better else -1,
        "kernel": str(sweep.get("kernel", "")),
    }


def ship_fit(sweep_name: str = "02_sweep", name: str = "04_fit", directory=None) -> Path:
    """Ship as `name` the fit of the shipped sweep `sweep_name` (fit_of): the two datasets are
    then what one learner's notebooks 02 and 04 would have saved."""
    folder = handoff.SHIPPED_DIR if directory is None else Path(directory)
    fit = fit_of(handoff.read(folder, sweep_name))
    about = (
        f"the weighted alpha-beta fit and first BIC breakpoint (-1: one line is enough) of the "
        f"shipped {sweep_name}, as notebook 04 saves them for a learner who measured that sweep"
    )
    return handoff.save(name, directory=folder, about=about, **fit)


def disagreement(sweep: dict, samples: dict) -> float:
    """The largest relative difference, over the sizes both have, between a sweep's medians and
    the medians of its samples (per iteration, the larger of the ranks' readings): 0 for a sweep
    and samples of the same round trips (up to the samples kept), far more for two runs."""
    import numpy as np

    from ..analysis import stats
    from .notebook import samples_by_size

    by_size = samples_by_size(samples)
    worst = 0.0
    for nbytes, median in zip(sweep["nbytes"], sweep["t_median_s"], strict=True):
        if int(nbytes) in by_size:
            mine = float(np.nanmedian(stats.max_across_ranks(by_size[int(nbytes)])))
            worst = max(worst, abs(mine - float(median)) / float(median))
    return worst


RUN_NAMES = ("02_sweep", "02_samples")


def ship_run(
    folder, about: str, directory=None, tolerance: float = 0.1, kernel: str = "solution C"
) -> list[Path]:
    """Ship 02_sweep and 02_samples as one run of notebook 02 saved them in `folder` (its
    results: run the notebook with PINGPONG_LAB_RESULTS=folder), then 04_fit from that sweep;
    `kernel` names whose C timed them (the course's solution, for the shipped datasets).
    ValueError when the two do not describe the same round trips (disagreement > tolerance)."""
    if not about.strip():
        raise ValueError("say in ABOUT how the data was measured")
    found = {name: handoff.read(folder, name) for name in RUN_NAMES}
    gap = disagreement(found["02_sweep"], found["02_samples"])
    if gap > tolerance:
        raise ValueError(
            f"{folder}: the sweep's medians and its samples' differ by up to {gap:.0%}: not "
            "one run of notebook 02"
        )
    out = handoff.SHIPPED_DIR if directory is None else Path(directory)
    paths = []
    for name, values in found.items():
        kept = {k: v for k, v in values.items() if not k.startswith("_") and k != "about"}
        kept["kernel"] = kernel  # the notebook calls every sweep its learner's
        paths.append(handoff.save(name, directory=out, about=about.strip(), **kept))
    paths.append(ship_fit(directory=out))
    return paths


def to_csv(name: str, out, sizes=None) -> Path:
    """Shipped dataset `name` written as a sweep CSV at `out` (nbytes, and the median and the
    fastest one-way times), for the message sizes `sizes` only when given; a size the dataset
    lacks raises ValueError. What a notebook reads when it cannot measure that sweep itself."""
    data = handoff.shipped(name)
    nbytes = data["nbytes"]
    keep = range(len(nbytes))
    if sizes is not None:
        where = {int(n): i for i, n in enumerate(nbytes)}
        lacking = sorted({int(n) for n in sizes} - set(where))
        if lacking:
            raise ValueError(f"shipped dataset {name!r} has no size(s) {lacking[:5]}")
        keep = [where[int(n)] for n in sizes]
    columns = (COL.nbytes, COL.t_median_s, COL.t_min_s)
    lines = [",".join(columns)]
    for i in keep:
        t_med, t_min = float(data["t_median_s"][i]), float(data["t_min_s"][i])
        lines.append(f"{int(nbytes[i])},{t_med!r},{t_min!r}")
    return runtime.atomic_write(out, "\n".join(lines) + "\n")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--fit"]:
        path = ship_fit()
        print(f"wrote {path} and {path.with_suffix('.json').name}")
        return 0
    if len(argv) == 3 and argv[0] == "--run":
        try:
            paths = ship_run(argv[1], argv[2])
        except (ValueError, FileNotFoundError) as exc:
            print(f"shipdata: error: {exc}", file=sys.stderr)
            return 1
        print("wrote", ", ".join(str(p) for p in paths))
        return 0
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    try:
        path = ship(*argv)
    except ValueError as exc:
        print(f"shipdata: error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {path} and {path.with_suffix('.json').name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
