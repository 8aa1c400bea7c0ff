"""What a sweep measures and how precisely: one object from the command line to the ranks.

`SweepSettings` is what `pingpong-lab sweep` parses, what `report` plans, what the "sweep" job
receives as JSON (`settings.to_dict()` plus the output path) and what `measure.sweep_rows`
runs. It checks itself when made, so a bad setting is one clear ValueError before any MPI job.
"""

from __future__ import annotations

import dataclasses
import json
import math
import operator
from dataclasses import dataclass

KINDS = ("c", "python")
MODES = ("blocking", "nonblocking", "pairwise", "pickle")
TARGET_S = 0.25  # measured time of the first round at each message size
REL_CI = 0.02  # stop when the median's 95% CI is within +/- 2% of it ...
BUDGET_S = 1.0  # ... or when this much time was spent on the size
MIN_REPS = 20
MAX_REPS = 100_000
TRANSPORTS = {
    "default": {},
    "shm": {},
    # MPICH: no shared memory between local ranks; UCX restricted to TCP loopback.
    "tcp": {"MPIR_CVAR_NOLOCAL": "1", "UCX_TLS": "tcp,self", "FI_PROVIDER": "tcp"},
}
"""Transport name -> environment variables set for the MPI job (before MPI starts)."""


@dataclass(frozen=True, kw_only=True)
class SweepSettings:
    """One sweep: which kernel, which message sizes, when to stop measuring a size.

    kind/mode: the kernel ('c' | 'python'; 'pickle' is Python only). sizes: bytes, each >= 0.
    reps: fixed repetitions, one round (None: adaptive, rounds until the median's 95% CI is
    within +/- rel_ci or budget_s seconds were spent on the size; rel_ci None: one round).
    target_s: seconds of the first round; min_reps/max_reps bound its repetitions. batch:
    round trips per timed sample (None: chosen from the timer's resolution). shared_buffer:
    one buffer per rank (the answering rank echoes what it received). library: the C kernel
    library (None: the default build). transport: a key of TRANSPORTS (set by the launcher,
    recorded with the results). rounds: measure in this many interleaved rounds instead (each
    round runs every size once, in alternating order, reps or a calibrated target_s per size
    and round; rel_ci and budget_s are then not used): load on a busy machine spreads over all
    sizes instead of spoiling a few, and the rounds show how much the numbers move.
    """

    kind: str = "c"
    mode: str = "blocking"
    sizes: tuple[int, ...]
    reps: int | None = None
    rel_ci: float | None = REL_CI
    budget_s: float = BUDGET_S
    target_s: float = TARGET_S
    min_reps: int = MIN_REPS
    max_reps: int = MAX_REPS
    batch: int | None = None
    shared_buffer: bool = False
    library: str | None = None
    transport: str = "default"
    rounds: int | None = None

    def __post_init__(self):
        def fix(name, value):
            object.__setattr__(self, name, value)

        if self.kind not in KINDS:
            raise ValueError(f"unknown kernel kind {self.kind!r}; choose one of {KINDS}")
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; choose one of {MODES}")
        if self.mode == "pickle" and self.kind != "python":
            raise ValueError("mode 'pickle' exists only for kind 'python' (it pickles objects)")
        if isinstance(self.sizes, str | bytes) or not hasattr(self.sizes, "__iter__"):
            raise ValueError(f"sizes must be a list of byte counts, got {self.sizes!r}")
        fix("sizes", tuple(_whole("a message size", n, lowest=0) for n in self.sizes))
        if not self.sizes:
            raise ValueError("sizes is empty: give at least one message size")
        for name in ("reps", "batch", "rounds"):
            if getattr(self, name) is not None:
                fix(name, _whole(name, getattr(self, name), lowest=1))
        fix("min_reps", _whole("min_reps", self.min_reps, lowest=1))
        fix("max_reps", _whole("max_reps", self.max_reps, lowest=self.min_reps))
        if self.rel_ci is not None:
            fix("rel_ci", _positive("rel_ci", self.rel_ci))
        fix("budget_s", _positive("budget_s", self.budget_s))
        fix("target_s", _positive("target_s", self.target_s))
        if self.shared_buffer not in (True, False):
            raise ValueError(f"shared_buffer must be true or false, got {self.shared_buffer!r}")
        fix("shared_buffer", bool(self.shared_buffer))
        if self.library is not None:
            fix("library", str(self.library))
        if self.transport not in TRANSPORTS:
            raise ValueError(
                f"unknown transport {self.transport!r}; choose one of {tuple(TRANSPORTS)}"
            )

    @property
    def kernel_options(self) -> dict:
        """Keyword arguments every kernel call of this sweep gets."""
        return {"shared_buffer": self.shared_buffer}

    def to_dict(self) -> dict:
        """The settings as a JSON-ready dict (sizes as a list)."""
        out = dataclasses.asdict(self)
        out["sizes"] = list(self.sizes)
        return out

    @classmethod
    def from_dict(cls, values: dict) -> SweepSettings:
        """Settings from a dict such as to_dict() gives; unknown or missing keys: ValueError."""
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = [k for k in values if k not in known]
        if unknown:
            names = ", ".join(map(repr, unknown))
            raise ValueError(f"unknown sweep setting(s) {names}; known: {', '.join(known)}")
        if "sizes" not in values:
            raise ValueError("missing sweep setting 'sizes'")
        return cls(**values)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> SweepSettings:
        try:
            values = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"sweep settings are not valid JSON: {exc}") from None
        if not isinstance(values, dict):
            raise ValueError("sweep settings must be a JSON object")
        return cls.from_dict(values)

    def describe(self) -> str:
        """One line for logs: kernel, sizes and the stopping rule."""
        sizes = f"{self.sizes[0]}..{self.sizes[-1]} B ({len(self.sizes)} sizes)"
        if self.rounds is not None:
            each = f"{self.reps} reps" if self.reps is not None else f"{self.target_s:g} s"
            stop = f"{self.rounds} interleaved rounds of {each} per size"
        elif self.reps is not None:
            stop = f"{self.reps} reps"
        elif self.rel_ci is None:
            stop = f"one round of {self.target_s:g} s"
        else:
            stop = f"+/-{self.rel_ci:g} CI or {self.budget_s:g} s, first round {self.target_s:g} s"
        extra = "".join(
            [
                ", shared buffer" if self.shared_buffer else "",
                f", transport {self.transport}" if self.transport != "default" else "",
            ]
        )
        return f"{self.kind} {self.mode}, {sizes}, {stop}{extra}"


def _whole(name: str, value, lowest: int) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        if isinstance(value, float) and value.is_integer():
            number = int(value)
        else:
            raise ValueError(f"{name} must be a whole number, got {value!r}") from None
    if number < lowest:
        raise ValueError(f"{name} must be at least {lowest}, got {number}")
    return number


def _positive(name: str, value) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return number
