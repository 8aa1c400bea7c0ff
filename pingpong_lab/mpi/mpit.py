"""MPI's control variables, as the library reports them through its tool interface (MPI_T).

`control_variables(match, env)` starts one fresh rank with environment `env`, and the course's
C function `pp_cvars` (kernels_c/pp_cvars.c) lists every control variable whose name contains
`match`, with the value in effect in that process: what the MPI that runs actually read, not
what a page says it should. A name that MPI does not list is not a setting of this MPI
(`unknown`). When the library refuses the environment (MPICH aborts at start-up on a value out
of its range) the error says which settings and what MPI printed.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import tempfile
from pathlib import Path

from . import jobs
from .processes import run_group

TIMEOUT_S = 60.0


class SettingsRefused(RuntimeError):
    """The MPI library would not start with these settings."""


def control_variables(match: str = "", env: dict | None = None, timeout=TIMEOUT_S) -> dict:
    """{name: value as text} of MPI's control variables whose names contain `match`, read
    through MPI_T in a fresh rank started with `env` (default: this process's environment)."""
    with tempfile.TemporaryDirectory(prefix="pp-mpit-") as tmp:
        out = Path(tmp, "cvars.json")
        cmd = jobs.command(cvars_job, {"match": str(match), "out": str(out)}, 1)
        try:
            proc = run_group(cmd, timeout, env=dict(os.environ if env is None else env))
        except subprocess.TimeoutExpired:
            raise SettingsRefused(f"MPI did not start within {timeout:g} s") from None
        if proc.returncode != 0 or not out.is_file():
            raise SettingsRefused(_refusal(env, proc.stderr))
        return json.loads(out.read_text())


def unknown(names, env: dict | None = None) -> list[str]:
    """The names among `names` that this MPI does not list as control variables."""
    known = control_variables("MPIR_CVAR_", env)
    return [name for name in names if name not in known]


def _refusal(env, stderr: str) -> str:
    settings = {k: v for k, v in (env or {}).items() if k.startswith("MPIR_CVAR_")}
    shown = ", ".join(f"{k}={v}" for k, v in sorted(settings.items())) or "its defaults"
    said = [line.strip() for line in stderr.splitlines() if "rror" in line or "Abort" in line]
    detail = said[0][:160] if said else (stderr.strip().splitlines() or ["no message"])[-1][:160]
    return f"MPI refused to start with {shown}: {detail}"


@jobs.job
def cvars_job(spec: dict, comm) -> int:
    """The "cvars" job (one rank): MPI_T's control variables matching spec["match"], as JSON."""
    from . import ckernels

    lib = ckernels.load()
    lib.pp_cvars.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
    buffer = ctypes.create_string_buffer(1 << 20)
    count = lib.pp_cvars(spec["match"].encode(), buffer, len(buffer))
    if count < 0:
        raise RuntimeError(f"MPI_T could not be read (pp_cvars returned {count})")
    values = dict(line.split("=", 1) for line in buffer.value.decode().splitlines() if "=" in line)
    Path(spec["out"]).write_text(json.dumps(values))
    return 0
