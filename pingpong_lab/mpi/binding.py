"""Where ranks run: pin each rank to a logical CPU chosen by placement name.

    cpus_for("cores", 2)       # [0, 1]: two physical cores (the first thread of each)
    cpus_for("same-core", 2)   # [0, 0]: both ranks take turns on one hardware thread
    cpus_for("smt", 2)         # [0, 8]: two hardware threads of one core (SMT siblings)
    cpus_for([2, 3], 2)        # exactly these logical CPUs
    pin(cpus[rank])            # in the rank itself: every thread of this process

Pinning is done by the rank after it starts (sched_setaffinity on each of its threads), so it
works the same under any mpiexec or srun. Placements the machine cannot give (SMT siblings
without SMT, two cores on one core) raise PlacementError saying why, so a notebook can say
"this machine cannot show it" instead of measuring something else.
"""

from __future__ import annotations

import os
from pathlib import Path

PLACEMENTS = {
    "same-core": "every rank on one hardware thread: they take turns on it",
    "smt": "ranks on hardware threads (SMT siblings) of one physical core",
    "cores": "each rank on a physical core of its own",
}
CPU_ROOT = Path("/sys/devices/system/cpu")


class PlacementError(ValueError):
    """A placement this machine (or this process's allowed CPUs) cannot give."""


def allowed_cpus() -> list[int]:
    """Logical CPUs this process may run on (all of them where the OS cannot say)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def parse_cpu_list(text: str) -> list[int]:
    """'0-2,8' -> [0, 1, 2, 8] (the kernel's cpulist format)."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def physical_cores(allowed=None, root: Path = CPU_ROOT) -> list[list[int]]:
    """The allowed logical CPUs grouped by physical core (SMT siblings together), in order.

    Where the kernel does not list siblings, each logical CPU counts as a core of its own."""
    allowed = allowed_cpus() if allowed is None else sorted(allowed)
    cores: dict[tuple[int, ...], list[int]] = {}
    for cpu in allowed:
        path = root / f"cpu{cpu}" / "topology" / "thread_siblings_list"
        try:
            siblings = tuple(parse_cpu_list(path.read_text()))
        except (OSError, ValueError):
            siblings = (cpu,)
        cores.setdefault(siblings, []).append(cpu)
    return sorted(cores.values())


def cpus_for(bind, nranks: int, allowed=None, root: Path = CPU_ROOT) -> list[int]:
    """The logical CPU of each of `nranks` ranks for placement `bind` (see PLACEMENTS), or a
    list of CPUs given by hand (checked against the allowed ones)."""
    allowed = allowed_cpus() if allowed is None else sorted(allowed)
    cores = physical_cores(allowed, root)
    if isinstance(bind, (list, tuple)):
        cpus = [int(c) for c in bind]
        if len(cpus) != nranks:
            raise PlacementError(f"bind= lists {len(cpus)} CPU(s) for {nranks} rank(s)")
        refused = sorted(set(cpus) - set(allowed))
        if refused:
            raise PlacementError(f"CPU(s) {refused} are not among this process's {allowed}")
        return cpus
    if bind == "same-core":
        return [allowed[0]] * nranks
    if bind == "cores":
        if len(cores) < nranks:
            raise PlacementError(
                f"{nranks} ranks need {nranks} physical cores; this process may use "
                f"{len(cores)} ({allowed})"
            )
        return [core[0] for core in cores[:nranks]]
    if bind == "smt":
        shared = next((core for core in cores if len(core) >= nranks), None)
        if shared is None:
            raise PlacementError(
                f"no physical core here has {nranks} hardware threads (SMT is off or absent: "
                f"{len(cores)} core(s), one thread each), so SMT siblings cannot be shown"
            )
        return shared[:nranks]
    known = ", ".join(repr(name) for name in PLACEMENTS)
    raise PlacementError(f"unknown placement {bind!r}; known: {known}, or a list of CPUs")


def pin(cpu: int) -> list[int]:
    """Pin every thread of this process to logical CPU `cpu`; the CPUs it may now use."""
    tasks = Path("/proc/self/task")
    tids = [int(t) for t in os.listdir(tasks)] if tasks.is_dir() else [0]
    for tid in tids:
        try:
            os.sched_setaffinity(tid, {int(cpu)})
        except ProcessLookupError:  # a thread that ended meanwhile
            pass
    return sorted(os.sched_getaffinity(0))


def available(nranks: int = 2, allowed=None, root: Path = CPU_ROOT) -> dict:
    """placement name -> the CPUs it would use here, or the reason it cannot be shown."""
    found = {}
    for name in PLACEMENTS:
        try:
            found[name] = cpus_for(name, nranks, allowed, root)
        except PlacementError as exc:
            found[name] = str(exc)
    return found
