"""A real single-node Slurm in a temporary directory, for the `slurm` test tier.

    with LocalSlurm(tmp_path) as slurm:           # slurmctld + slurmd, children of this process
        subprocess.run(["sbatch", "--wait", "job.sh"], env=slurm.env)

It writes a slurm.conf (one node, `localhost`, with this machine's CPUs and memory; one
partition; state, spool, logs and PID files under the directory; its own free ports, so it never
meets a site's Slurm), starts slurmctld and slurmd in the foreground as child processes and
waits until `sinfo` shows the node idle. Authentication is `auth/none` (Slurm 22.05 still ships
the plugin), so no munge key or daemon is needed: the daemons listen on 127.0.0.1 for a test's
lifetime only. `MpiDefault=pmi2`: MPICH's PMI client talks to srun's PMI-2 server, so srun'd
ranks form one MPI job (with `--mpi=none` every rank would be a singleton of size 1).

On exit it cancels every job, stops the two daemons it started (by PID, SIGTERM then SIGKILL),
ends whatever still carries its tag (job steps, slurmstepd) and removes its files.
`problem()` says in one line why a Slurm cannot run here (not root, not installed).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import psutil

DAEMONS = ("slurmctld", "slurmd", "sinfo", "sbatch", "srun", "squeue", "scancel")
START_TIMEOUT_S = 30.0
TAG_VARIABLE = "PINGPONG_LAB_TEST_TAG"


def problem() -> str | None:
    """Why a private single-node Slurm cannot start here, or None."""
    if os.geteuid() != 0:
        return "the slurm tier needs root (slurmd runs jobs as their user)"
    missing = [name for name in DAEMONS if shutil.which(name) is None]
    if missing:
        return f"Slurm is not installed ({', '.join(missing)} missing): run `make slurm` as root"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _memory_mb() -> int:
    return max(256, int(psutil.virtual_memory().total / 2**20 * 0.9))


def slurm_conf(root: Path, cpus: int, memory_mb: int) -> str:
    """The text of a slurm.conf for one node, `localhost`, with everything under `root`."""
    return "\n".join(
        [
            "ClusterName=pingponglab",
            # job ids that an earlier private Slurm did not use: MPICH names its shared-memory
            # segments after the job, and a segment that a cancelled job left in /dev/shm would
            # be reopened by the next job of the same id (MPI_Init then fails or hangs)
            f"FirstJobId={random.randint(10**5, 6 * 10**7)}",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/none",
            "CredType=cred/none",
            "MpiDefault=pmi2",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "SchedulerType=sched/backfill",
            "SwitchType=switch/none",
            "JobCompType=jobcomp/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "MailProg=/bin/true",
            "ReturnToService=2",
            # the node as configured here, whatever slurmd detects (sockets vs cores)
            "SlurmdParameters=config_overrides",
            "KillWait=2",
            "InactiveLimit=0",
            f"StateSaveLocation={root / 'state'}",
            f"SlurmdSpoolDir={root / 'spool'}",
            f"SlurmctldPidFile={root / 'slurmctld.pid'}",
            f"SlurmdPidFile={root / 'slurmd.pid'}",
            f"SlurmctldLogFile={root / 'slurmctld.log'}",
            f"SlurmdLogFile={root / 'slurmd.log'}",
            f"NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} "
            "State=UNKNOWN",
            "PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


class SlurmStartError(RuntimeError):
    """The daemons did not come up; the message quotes their logs."""


class LocalSlurm:
    """slurmctld and slurmd for one node, configured and run under `root`."""

    def __init__(self, root: Path, cpus: int | None = None):
        self.root = Path(root) / f"slurm-{uuid.uuid4().hex[:8]}"
        # this machine's CPUs, at least 2: a ping-pong job asks for 2 tasks (config_overrides
        # lets slurmd offer more than it has)
        self.cpus = cpus or max(2, os.cpu_count() or 1)
        self.tag = uuid.uuid4().hex
        self.conf = self.root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf), TAG_VARIABLE: self.tag}
        for name in list(self.env):  # an allocation around the tests is not ours
            if name.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_")) and name != "SLURM_CONF":
                del self.env[name]
        self.daemons: dict[str, subprocess.Popen] = {}

    # -- life cycle -------------------------------------------------------------------------
    def start(self) -> LocalSlurm:
        for sub in ("state", "spool"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.conf.write_text(slurm_conf(self.root, self.cpus, _memory_mb()))
        try:
            self._spawn("slurmctld", ["slurmctld", "-D", "-c", "-i", "-f", str(self.conf)])
            self._spawn("slurmd", ["slurmd", "-D", "-N", "localhost", "-f", str(self.conf)])
            self._wait_idle()
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, name: str, cmd: list[str]) -> None:
        out = open(self.root / f"{name}.out", "w")
        with out:
            self.daemons[name] = subprocess.Popen(
                cmd, env=self.env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
            )

    def _wait_idle(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        state = ""
        while time.monotonic() < deadline:
            for name, proc in self.daemons.items():
                if proc.poll() is not None:
                    raise SlurmStartError(f"{name} exited with {proc.returncode}: {self.log(name)}")
            state = self.sinfo()
            if state == "idle":
                return
            time.sleep(0.2)
        raise SlurmStartError(
            f"the node is {state or 'unknown'} after {START_TIMEOUT_S:.0f} s, not idle: "
            f"{self.log('slurmd')}"
        )

    def sinfo(self) -> str:
        """The node's state as sinfo prints it (idle, mix, alloc, down, ...), or ''."""
        proc = self.command(["sinfo", "-h", "-n", "localhost", "-o", "%t"], check=False)
        return proc.stdout.strip().rstrip("*~#!%$@^-")

    def log(self, name: str, lines: int = 6) -> str:
        """The last lines a daemon wrote (its log file, else its output)."""
        for path in (self.root / f"{name}.log", self.root / f"{name}.out"):
            if path.is_file() and path.stat().st_size:
                return " | ".join(path.read_text(errors="replace").splitlines()[-lines:])
        return "(no output)"

    def stop(self) -> None:
        """Cancel every job, stop the daemons this object started, end what carries its tag."""
        if self.daemons.get("slurmctld") and self.daemons["slurmctld"].poll() is None:
            jobs = self.command(["squeue", "-h", "-o", "%A"], check=False).stdout.split()
            if jobs:
                self.command(["scancel", *jobs], check=False)
                self._wait_for(lambda: not self.tagged_processes(), 10.0)
        for name in ("slurmd", "slurmctld"):
            proc = self.daemons.get(name)
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
        for pid in self.tagged_processes():  # job steps whose slurmd is gone
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._wait_for(lambda: not self.tagged_processes(), 5.0)
        self.daemons.clear()
        shutil.rmtree(self.root, ignore_errors=True)

    def tagged_processes(self) -> list[int]:
        """PIDs of live processes that carry this Slurm's tag: its daemons' children, job
        steps (slurmstepd inherits slurmd's environment) and the jobs submitted with `env`."""
        found = []
        for proc in psutil.process_iter(["pid", "status"]):
            try:
                if proc.pid == os.getpid() or proc.info["status"] == psutil.STATUS_ZOMBIE:
                    continue
                if proc.environ().get(TAG_VARIABLE) == self.tag:
                    found.append(proc.pid)
            except (psutil.Error, OSError):
                continue
        return [pid for pid in found if pid not in {p.pid for p in self.daemons.values()}]

    @staticmethod
    def _wait_for(condition, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > end:
                return False
            time.sleep(0.2)
        return True

    # -- use --------------------------------------------------------------------------------
    def command(self, cmd: list[str], check: bool = True, timeout: float = 60, **kw):
        """Run a Slurm client command against this Slurm; its CompletedProcess."""
        proc = subprocess.run(
            cmd, env=self.env, capture_output=True, text=True, timeout=timeout, **kw
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited with {proc.returncode}: {proc.stderr}")
        return proc

    def __enter__(self) -> LocalSlurm:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
