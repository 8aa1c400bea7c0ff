"""Building and running learners' C: the instrumented ping-pong and notebook 04's linfit.

The C lives in kernels_c/grading/: pp_graded.h turns a learner's MPI_Send/Recv/Isend/Irecv/Ssend
into calls of pp_graded.c's recording wrappers; linfit_main.c is the driver that runs a learner's
linfit() on numbers read from stdin. Builds are cached by content (mpi.ckernels.build_cached).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import subprocess
from pathlib import Path

import numpy as np

from ...errors import CompileError
from ...mpi import environment
from ...mpi.ckernels import KERNELS_DIR, build_cached, compile_c
from .mode import MPIEXEC_TIMEOUT_S

GRADING_C = KERNELS_DIR / "grading"
NOT_IMPLEMENTED = -99  # what the C stub of a released exercise returns (`#define` in its cell)
# pp_graded_calls() kinds, as in pp_graded.h
GRADED_KINDS = {1: "Send", 2: "Recv", 3: "Isend", 4: "Irecv", 5: "Ssend"}


def _learner_source(path) -> Path:
    source_path = Path(path)
    if not source_path.is_file():
        raise AssertionError(f"{path} does not exist: run the %%writefile {path} cell first")
    return source_path


def instrument_c(source: str, filename: str = "student.c") -> str:
    """C source whose MPI_Send/Recv/Isend/Irecv/Ssend calls are recorded (peer, tag, bytes).

    Link it with kernels_c/grading/pp_graded.c; compiler messages keep the learner's lines.
    """
    return f'#include "grading/pp_graded.h"\n#line 1 "{filename}"\n{source}'


def compile_student_c(path="pingpong.c", name="pingpong", instrument=False):
    """Compile the learner's C file (written by a %%writefile cell) into a library on disk."""
    source_path = _learner_source(path)
    source = source_path.read_text()
    extra = []
    if instrument:
        source = instrument_c(source, source_path.name)
        name = f"{name}_graded"
        extra = [GRADING_C / "pp_graded.c"]
    with contextlib.redirect_stdout(io.StringIO()):  # compiler warnings are not test output
        return str(compile_c(source, name=name, extra=extra))


# -- notebook 04's C regression challenge ---------------------------------------------------------
def _c_compiler() -> str:
    """A plain C compiler: $CC, else cc, else the environment's mpicc (also a C compiler)."""
    return shutil.which(os.environ.get("CC", "cc")) or environment.mpicc()


def build_linfit(path="linfit.c", timeout=MPIEXEC_TIMEOUT_S) -> str:
    """Compile the learner's linfit.c with the course's driver; the executable's path.

    Compiler errors become an AssertionError that quotes them (nothing goes to stderr).
    """
    source_path = _learner_source(path)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exe = build_cached(
                "linfit",
                source_path.read_text(),
                compiler=_c_compiler(),
                flags=["-O2", "-Wall", "-Wextra"],
                extra=[GRADING_C / "linfit_main.c"],
                shared=False,
                timeout=timeout,
            )
    except CompileError as exc:
        raise AssertionError(str(exc).replace("linfit.c", source_path.name)) from None
    return str(exe)


def c_linfit(exe, x, y, w=None, timeout=10.0):
    """Run a linfit executable on (x, y[, w]); returns (status, alpha, beta).

    ``w`` weights the *squared* residuals (None: unweighted). A crash, a deadline overrun or
    unreadable output raise AssertionError with a readable message.
    """
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    weighted = w is not None
    w = np.ones_like(x) if w is None else np.asarray(w, dtype=float).ravel()
    if not (x.size == y.size == w.size):
        raise ValueError(f"x, y and w differ in length ({x.size}, {y.size}, {w.size})")
    lines = [f"{x.size} {int(weighted)}"]
    lines += [f"{a!r} {b!r} {c!r}" for a, b, c in zip(x.tolist(), y.tolist(), w.tolist())]
    try:
        proc = subprocess.run(
            [str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True,
            timeout=timeout,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"linfit did not finish within {timeout:g} s (an endless loop?)"
        ) from None
    if proc.returncode < 0:
        sig = -proc.returncode
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else sig
        raise AssertionError(
            f"linfit crashed ({name}): an array index out of range or an uninitialised pointer?"
        )
    if proc.returncode != 0:
        raise AssertionError(f"the linfit driver failed (exit {proc.returncode})")
    parts = proc.stdout.split()
    try:
        status, alpha, beta = int(parts[-3]), float(parts[-2]), float(parts[-1])
    except (IndexError, ValueError):
        raise AssertionError(f"unexpected output from linfit: {proc.stdout[-200:]!r}") from None
    if status == NOT_IMPLEMENTED:
        raise AssertionError("linfit is not implemented yet (it returned NOT_IMPLEMENTED)")
    return status, alpha, beta


def assert_fit_matches(alpha, beta, x, y, w_numpy=None, rtol=1e-6, what="fit"):
    """alpha and beta agree with numpy.polyfit(x, y, 1, w=w_numpy) (w multiplies residuals).

    beta within ``rtol``; alpha within ``rtol`` of itself or 1e-9 of the largest time, whichever
    is larger (an intercept computed from sums of huge sizes loses a few digits legitimately).
    """
    ref_beta, ref_alpha = np.polyfit(np.asarray(x, float), np.asarray(y, float), 1, w=w_numpy)
    tol_alpha = max(rtol * abs(ref_alpha), 1e-9 * float(np.max(np.abs(y))))
    if not (np.isfinite(alpha) and abs(alpha - ref_alpha) <= tol_alpha):
        raise AssertionError(f"{what}: alpha should be {ref_alpha:.6g} s, got {alpha:.6g} s")
    if not (np.isfinite(beta) and np.isclose(beta, ref_beta, rtol=rtol, atol=0)):
        raise AssertionError(f"{what}: beta should be {ref_beta:.6g} s/B, got {beta:.6g} s/B")
    return True
