"""The hardware floor of a shared-memory ping-pong, measured without MPI.

`kernels_c/build/hw_floor` (built by `make kernels`) measures two things that bound what any
MPI library can do between two processes on one machine:

- latency: two processes (one per core when there are two) pass a counter through one shared
  64-byte cache line; one-way time = round trip / 2 (`floor_latency`);
- bandwidth: single-core `memcpy` between two separate page-aligned buffers (`memcpy_bandwidth`).

    >>> from pingpong_lab import hardware
    >>> hardware.floor_latency()["latency_s"]          # median one-way seconds
    >>> hardware.memcpy_bandwidth([65536, 1 << 20])    # {nbytes: bytes per second}

Every run has a deadline: on timeout the program and the process it forked are killed
(`subprocess.TimeoutExpired` is raised). A missing executable raises `FloorMissingError`,
whose message says how to build it. Nothing is written to stderr. Every function takes
`path=` (default: HW_FLOOR, looked up at call time) to run another build of the program.
"""

from __future__ import annotations

from pathlib import Path

from ..mpi.ckernels import KERNELS_BUILD
from ..mpi.processes import run_group

HW_FLOOR = KERNELS_BUILD / "hw_floor"
TIMEOUT_S = 30.0


class FloorMissingError(FileNotFoundError):
    """hw_floor has not been built."""


def parse_hw_floor(text: str) -> dict:
    """{"latency_s": median one-way, "cpus", "pinned", "memcpy": {nbytes: B/s}} from hw_floor.

    Also "latency_min_s" (the fastest round) and "cpu_parent"/"cpu_child" when the latency
    lines are present; "memcpy" is empty when no bandwidth was measured.
    """
    out: dict = {"memcpy": {}}
    for line in text.splitlines():
        p = line.split()
        if not p:
            continue
        if p[0] == "cpus":
            kv = dict(zip(p[0::2], p[1::2]))
            out.update({k: int(v) for k, v in kv.items()})
        elif p[0] == "latency_oneway_s":
            kv = dict(zip(p[1::2], p[2::2]))
            out["latency_s"] = float(kv["median"])
            out["latency_min_s"] = float(kv["min"])
        elif p[0] == "memcpy" and len(p) >= 4:
            out["memcpy"][int(p[1])] = float(p[3])
    return out


def _resolve(path) -> Path:
    return Path(HW_FLOOR if path is None else path)


def available(path: Path | str | None = None) -> bool:
    """True when the hw_floor executable (default: HW_FLOOR) exists."""
    return _resolve(path).is_file()


def run_hw_floor(*args, timeout: float = TIMEOUT_S, path: Path | str | None = None) -> str:
    """Run hw_floor with `args` and return its stdout.

    The program runs in its own process group, which is killed on timeout (the latency test
    forks a partner process that would otherwise spin on). Raises FloorMissingError when it is
    not built, subprocess.TimeoutExpired after `timeout` seconds, RuntimeError when it fails.
    """
    path = _resolve(path)
    if not available(path):
        raise FloorMissingError(f"{path} is not built: run `make kernels` first")
    proc = run_group([path, *args], timeout)
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        raise RuntimeError(f"{path.name} {' '.join(map(str, args))} failed: {tail}")
    return proc.stdout


def floor_latency(
    iters: int = 20000, rounds: int = 5, timeout: float = TIMEOUT_S, path=None
) -> dict:
    """Cache-line ping-pong between two processes, no MPI.

    Returns {"latency_s": median one-way seconds over `rounds` batches of `iters` round trips,
    "latency_min_s", "cpus": CPUs allowed, "pinned": 1 when the two processes had a core each}.
    """
    if iters < 1 or rounds < 1:
        raise ValueError(f"iters and rounds must be positive, got {iters} and {rounds}")
    parsed = parse_hw_floor(
        run_hw_floor("-l", "-i", iters, "-r", rounds, timeout=timeout, path=path)
    )
    parsed.pop("memcpy", None)
    if "latency_s" not in parsed:
        raise RuntimeError("hw_floor printed no latency line")
    return parsed


def memcpy_bandwidth(
    sizes, seconds: float = 0.01, timeout: float = TIMEOUT_S, path=None
) -> dict[int, float]:
    """Single-core memcpy bandwidth in bytes per second for each size in `sizes` (bytes).

    Each size is copied for about `seconds` and the best of ten batches is kept (the floor,
    not the typical copy). `timeout` applies to each size.
    """
    sizes = sorted({int(n) for n in sizes})
    if not sizes or sizes[0] < 1:
        raise ValueError(f"sizes must be positive byte counts, got {sizes}")
    out = {}
    for n in sizes:
        text = run_hw_floor("-b", "-m", f"{n}:{n}", "-t", seconds, timeout=timeout, path=path)
        parsed = parse_hw_floor(text)["memcpy"]
        if n not in parsed:
            raise RuntimeError(f"hw_floor printed no memcpy line for {n} bytes")
        out[n] = parsed[n]
    return out
