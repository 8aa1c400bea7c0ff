"""NetPIPE as a peer benchmark (Debian's netpipe-mpich2 and netpipe-tcp builds).

NetPIPE times a ping-pong for many sizes and writes one line per size to its output file:
bytes, throughput in Mbit/s and the one-way time in seconds (the best of its trials). Debian's
MPI build links Debian's own MPICH (not the pip wheel's), so it runs with that MPICH's
mpiexec; the TCP build needs no MPI at all: a receiver and a transmitter over loopback.
`make bench` installs both packages when it can (root with apt-get); otherwise the bench rows
say "not measured" and why.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from ..mpi.processes import kill_group, run_group

NP_MPI = "NPmpich2"
NP_TCP = "NPtcp"
DEBIAN_MPIEXEC = "mpiexec.mpich"  # Debian's MPICH launcher, the one NPmpich2 was built for
DEBIAN_MPICC = "mpicc.mpich"  # to build our C kernel against the same MPICH
TIMEOUT_S = 300


def parse_output(text: str) -> dict[int, float]:
    """{nbytes: one-way seconds} from a NetPIPE output file (bytes, Mbit/s, seconds)."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        try:
            out[int(parts[0])] = float(parts[2])
        except ValueError:
            continue
    return out


def missing(kind: str) -> str:
    """Why NetPIPE's `kind` ("mpi" or "tcp") cannot run here, or "" when it can."""
    tools = [NP_MPI, DEBIAN_MPIEXEC] if kind == "mpi" else [NP_TCP]
    absent = [t for t in tools if shutil.which(t) is None]
    if absent:
        return f"{', '.join(absent)} not installed (Debian: netpipe-mpich2, netpipe-tcp)"
    return ""


def debian_mpich_version() -> str:
    """The version of Debian's MPICH that NPmpich2 links, or "" when unknown."""
    try:
        proc = run_group(["dpkg-query", "-W", "-f", "${Version}", "libmpich12"], timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def _args(max_bytes: int, out: Path | None = None) -> list[str]:
    # -p 0: exact powers of two and the points between them, no perturbed sizes
    sizes = ["-l", "8", "-u", str(max_bytes), "-p", "0"]
    return sizes + (["-o", str(out)] if out else [])


def run_mpi(max_bytes: int, out: Path) -> dict[int, float]:
    """NPmpich2 on 2 ranks with Debian's mpiexec: {nbytes: one-way seconds}."""
    cmd = [shutil.which(DEBIAN_MPIEXEC), "-n", "2", shutil.which(NP_MPI), *_args(max_bytes, out)]
    proc = run_group(cmd, TIMEOUT_S)
    if proc.returncode != 0:
        raise RuntimeError(f"{NP_MPI} failed ({proc.returncode}): {proc.stderr.strip()[-300:]}")
    return parse_output(out.read_text())


def run_tcp(max_bytes: int, out: Path) -> dict[int, float]:
    """NPtcp receiver and transmitter over 127.0.0.1: {nbytes: one-way seconds}."""
    receiver = subprocess.Popen(  # both ends must be given the same sizes
        [shutil.which(NP_TCP), *_args(max_bytes)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        cwd=out.parent,
    )
    try:
        time.sleep(0.5)  # let the receiver listen
        cmd = [shutil.which(NP_TCP), "-h", "127.0.0.1", *_args(max_bytes, out)]
        proc = run_group(cmd, TIMEOUT_S)
        if proc.returncode != 0:
            raise RuntimeError(f"{NP_TCP} failed ({proc.returncode}): {proc.stderr.strip()[-300:]}")
        receiver.wait(timeout=30)  # it ends with the transmitter
    finally:
        if receiver.poll() is None:
            kill_group(receiver)
    return parse_output(out.read_text())
