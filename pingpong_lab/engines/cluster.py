"""A local MPI job of ipyparallel engines, with deadlines on every call.

    with MPICluster(n=2) as cluster:
        ranks = cluster.run(lambda: MPI.COMM_WORLD.Get_rank())   # [0, 1], ordered by rank

Every call has a timeout. When ranks do not answer in time (a deadlock, most often), the engines
are stopped, fresh ones are started, and DeadlockError says what probably went wrong. An engine
that dies (a segfault in C code) gives EngineCrashError, also on fresh engines. Processes are
tracked by PID from the moment they start and are all gone after stop(), at the latest at exit.

Launchers (`launcher=`, default $PINGPONG_LAB_LAUNCHER, else "mpiexec"): "mpiexec" starts the
engines with this MPI's mpiexec; "slurm" starts them as a Slurm job through ipyparallel's
SlurmEngineSetLauncher (`srun --mpi=pmi2 ipengine` in an sbatch script, the controller stays
here), or, inside an allocation ($SLURM_JOB_ID set), as a job step of it with
`srun --mpi=pmi2`. See slurm_launch.py.

Placement (`bind=`, mpiexec only): "cores", "same-core", "smt" or a list of CPUs pins each rank
to a logical CPU once its engine runs (mpi/binding.py); `cluster.placement` shows where each
rank may run. A placement the machine cannot give raises PlacementError before anything starts.

When PINGPONG_LAB_ENGINE_POOL names a folder of pre-started engines (see pool.py: grading starts
them once per submission), start() borrows the engines of its size from there instead of
starting its own, and stop() gives them back. A borrowed cluster that deadlocks or crashes ends
the pool's engines of that size and goes on with engines of its own.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
import weakref
from pathlib import Path

import psutil

from .. import runtime
from ..errors import ClusterStartError, DeadlockError, EngineCrashError, RemoteError
from ..mpi import binding, environment, safepickle
from . import slurm_launch
from .watchdog import alive, end_processes

DEFAULT_TIMEOUT_S = 60.0
START_TIMEOUT_S = 90.0
# the controller registers an engine at its first heartbeat: ipyparallel's 3 s period made a
# start take 6.6 s here, 0.5 s took 2.1 s and 0.1 s takes 1.6 s (median of 4 starts of 2
# engines); 150 missed beats (15 s) before an engine counts as dead keeps the old tolerance of
# busy, oversubscribed engines (10 x 3 s) about the same
HEARTBEAT_ARGS = ["--HeartMonitor.period=100", "--HeartMonitor.max_heartmonitor_misses=150"]
# no nanny process beside each engine: it only relays signals (this module ends engines by PID
# and watches them itself) and took 2 s to exit on SIGTERM
NO_NANNY = ["--IPEngine.enable_nanny=False"]
STOP_GRACE_S = 1.0  # after SIGTERM, before SIGKILL, when stop() ends the processes
CRASH_POLL_S = 0.25  # how often a waiting run() checks that the engine processes still live
POOL_ENV = "PINGPONG_LAB_ENGINE_POOL"  # a folder of <n>.json: engines lent by an EnginePool
GIVEN_UP = "given-up"  # in that folder: <n> where a borrower gave its engines up (stuck, dead)
COMING = ".coming"  # in that folder: <n>.coming while the pool starts engines of size n
POOL_WAIT_S = 60.0  # how long a borrower waits for engines that are coming

_live_clusters: weakref.WeakSet = weakref.WeakSet()


class OversubscribedWarning(UserWarning):
    """More ranks than cores: ranks take turns on a core, so timings are inflated."""


def _caller_level() -> int:
    """warnings.warn's stacklevel for the first caller outside this package (the learner's cell,
    not cluster.py): a warning should point at the line that asked for the engines."""
    package = str(Path(__file__).resolve().parents[1])
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def _rank_and_size():
    """On an engine (at every start and borrow): its rank and the job's size; while grading,
    mpi4py there loads only pickles of plain data from then on (mpi/safepickle.py)."""
    from mpi4py import MPI

    if runtime.grading_mode():
        safepickle.install()
    return MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()


def _engine_placement():
    """On an engine: its rank's host, core and allowed cores (environment.rank_placement), pid."""
    from mpi4py import MPI

    return {**environment.rank_placement(MPI.COMM_WORLD.Get_rank()), "pid": os.getpid()}


def _pin_by_rank(cpus: list[int]) -> None:
    """On an engine: pin this rank to its CPU of `cpus` (binding.pin)."""
    from mpi4py import MPI

    binding.pin(cpus[MPI.COMM_WORLD.Get_rank()])


def _work_in(folder: str) -> None:
    """On a borrowed engine: work where the borrowing kernel works (files, and imports unless
    Python runs with safe paths, as confined grading starts it: sandbox.confined_env)."""
    os.chdir(folder)
    if folder not in sys.path and not getattr(sys.flags, "safe_path", False):
        sys.path.insert(0, folder)


def _pong() -> int:
    return os.getpid()


def pool_entry(n: int) -> Path | None:
    """The file that lends pre-started engines of size n to this process, if there is one
    (waiting up to POOL_WAIT_S for engines that the pool is still starting)."""
    folder = runtime.setting(POOL_ENV)
    if not folder:
        return None
    entry, coming = Path(folder) / f"{n}.json", Path(folder) / f"{n}{COMING}"
    deadline = time.monotonic() + POOL_WAIT_S
    while not entry.is_file() and coming.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return entry if entry.is_file() and not (Path(folder) / GIVEN_UP / str(n)).exists() else None


class MPICluster:
    """N ipyparallel engines started by one mpiexec, so that they share MPI.COMM_WORLD."""

    def __init__(
        self,
        n: int = 2,
        timeout: float = DEFAULT_TIMEOUT_S,
        start_timeout: float = START_TIMEOUT_S,
        env: dict | None = None,
        launcher: str | None = None,
        mpiexec_prefix: list[str] | tuple[str, ...] = (),
        bind=None,
        borrow: bool = True,
    ):
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive number of engines, got {n!r}")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive seconds, got {timeout!r}")
        self.n = n
        self.timeout = float(timeout)
        self.start_timeout = float(start_timeout)
        self.env = dict(env or {})
        self.borrow = borrow  # False: never from a pool (a pool's own engines)
        self.launcher = slurm_launch.choose(launcher)
        if bind is not None and self.launcher != "mpiexec":
            raise ValueError(
                "bind= pins ranks on this machine; under Slurm ask srun with --cpu-bind instead"
            )
        # the logical CPU of each rank (binding.PLACEMENTS), None: wherever the OS puts them
        self.cpus = None if bind is None else binding.cpus_for(bind, n)
        self.slurm_job_id: str | None = None  # the engines' own job ("slurm" outside an allocation)
        self.mpiexec_prefix = list(mpiexec_prefix)  # e.g. a command that sets limits, then execs
        self._borrowed: dict | None = None  # the pool entry of borrowed engines
        self._cluster = None
        self._client = None
        self._view = None
        self._profile_dir = None
        self._pids: set[int] = set()
        self._watchdog: subprocess.Popen | None = None
        self._engine_order: list[int] = []  # engine ids sorted by MPI rank
        self.placement: list[dict] = []

    # -- life cycle -------------------------------------------------------------------------
    def start(self) -> MPICluster:
        """Start the controller and n MPI engines; check that they form one MPI job."""
        if self._client is not None:
            return self
        lendable = self.borrow and not self.env and self.cpus is None
        if lendable and self.launcher == "mpiexec" and self._borrow():
            return self
        if self.launcher == "mpiexec":
            # fails in milliseconds when there is no MPI
            mpi_cmd = [*self.mpiexec_prefix, environment.mpiexec()]
        else:
            mpi_cmd = slurm_launch.srun_command()  # fails when Slurm is not installed
        environment.require_mpi4py()
        cores = environment.cpu_count()
        if self.n > cores and self.launcher == "mpiexec":
            warnings.warn(
                f"{self.n} ranks on {cores} cores: ranks share cores, so timings are "
                "oversubscribed (inflated and noisy). Use them for correctness, not speed.",
                OversubscribedWarning,
                stacklevel=_caller_level(),
            )
        import ipyparallel as ipp

        batch = self.launcher == "sbatch"
        # a batch job's engines read the connection files: a folder they can see
        where = slurm_launch.shared_dir() if batch else None
        self._profile_dir = tempfile.mkdtemp(prefix="pingpong-lab-ipp-", dir=where)
        self._cluster = ipp.Cluster(
            engines="slurm" if batch else "mpi",
            controller="local",
            n=self.n,
            profile_dir=self._profile_dir,
            cluster_id=f"pingpong-lab-{uuid.uuid4().hex[:8]}",
            log_level=logging.ERROR,
            engine_timeout=int(self.start_timeout),
            controller_args=HEARTBEAT_ARGS,
            **slurm_launch.controller_settings(batch),
        )
        if batch:
            slurm_launch.configure_batch(self._cluster.config, self.env, self._profile_dir)
        else:
            self._cluster.config.MPILauncher.mpi_cmd = mpi_cmd
            self._cluster.config.MPIEngineSetLauncher.environment = self.env
            self._cluster.config.MPIEngineSetLauncher.engine_args = NO_NANNY
        _live_clusters.add(self)
        self._start_watchdog()
        try:
            self._cluster.start_cluster_sync(n=self.n)
            self._client = self._cluster.connect_client_sync()
            # interactive=False: no progress-bar widget left in the learner's notebook
            self._client.wait_for_engines(
                self.n, timeout=self.start_timeout, block=True, interactive=False
            )
        except BaseException as exc:
            self._record_pids()
            where = slurm_launch.job_report(self._cluster)  # before stop() cancels the job
            self.stop()
            raise ClusterStartError(
                f"{self.n} MPI engines did not start within {self.start_timeout:.0f} s: {exc}"
                + (f"\n{where}" if where else "")
            ) from exc
        self._record_pids()
        self.slurm_job_id = slurm_launch.job_id(self._cluster)
        pin = (_pin_by_rank, self.cpus) if self.cpus is not None else None
        self._check_engines(self.start_timeout, before=pin)
        return self

    def _check_engines(self, timeout: float, before=None) -> None:
        """Order the engines by rank, read their placement, check that they are one MPI job."""
        self._view = self._client[:]
        self._view.block = False
        try:
            if before is not None:
                self._view.apply_async(*before).get(timeout=timeout)
            ranks = self._view.apply_async(_rank_and_size).get(timeout=timeout)
            placement = self._view.apply_async(_engine_placement).get(timeout=timeout)
        except BaseException as exc:
            self.stop()
            raise ClusterStartError(f"the engines started but do not answer: {exc}") from exc
        sizes = {size for _, size in ranks}
        if sizes != {self.n}:
            self.stop()
            why = (
                "mpiexec and mpi4py are probably from different MPIs."
                if self.launcher == "mpiexec"
                else slurm_launch.WRONG_PLUGIN
            )
            raise ClusterStartError(
                f"expected one MPI job of {self.n} ranks but the engines see COMM_WORLD sizes "
                f"{sorted(sizes)}: {why}"
            )
        targets = list(self._view.targets)
        by_rank = sorted(zip((r for r, _ in ranks), targets))
        self._engine_order = [eid for _, eid in by_rank]
        self.placement = sorted(placement, key=lambda p: p["rank"])

    def _borrow(self) -> bool:
        """Use the pool's pre-started engines of this size, if any answer; True when done."""
        entry = pool_entry(self.n)
        if entry is None:
            return False
        import ipyparallel as ipp

        try:
            lent = {**json.loads(entry.read_text()), "entry": str(entry)}
        except (OSError, ValueError):
            return False  # taken out of the pool meanwhile
        # a confined kernel has a pid namespace of its own: the pool's processes are not there
        lent["visible"] = all(alive(pid) for pid in lent["mpiexec"])
        try:
            self._client = ipp.Client(lent["client"])
            self._client.wait_for_engines(self.n, timeout=10, block=True, interactive=False)
            self._borrowed = lent
            self._check_engines(10, before=(_work_in, os.getcwd()))
        except Exception:  # engines that do not answer in time are ended: the pool replaces them
            self._borrowed = lent
            self._end_borrowed_engines()
            self.stop()
            return False
        if self.n > environment.cpu_count():
            warnings.warn(
                f"{self.n} ranks on {environment.cpu_count()} cores: ranks share cores, so "
                "timings are oversubscribed (inflated and noisy). Use them for correctness, "
                "not speed.",
                OversubscribedWarning,
                stacklevel=_caller_level(),
            )
        _live_clusters.add(self)
        return True

    def _end_borrowed_engines(self) -> None:
        """The borrowed engines are stuck or dead: end them and take them out of the pool."""
        lent, self._borrowed = self._borrowed, None
        if lent:  # the pool sees it and ends them (a borrower may not write the pool's entries)
            entry = Path(lent["entry"])
            (entry.parent / GIVEN_UP / entry.stem).touch()
            if lent.get("visible", True):  # not in a pid namespace of its own: at once
                end_processes(lent["pids"], grace_s=1.0)

    @property
    def lent(self) -> dict:
        """What a pool entry holds: how to connect, the mpiexec pids, every pid but the
        watchdog's (a borrower that finds the engines stuck ends them)."""
        self._record_pids()
        mpiexec = [getattr(e, "pid", None) for e in self._cluster.engines.values()]
        client = Path(self._cluster.controller.connection_files["client"])
        return {
            "client": json.loads(client.read_text()),
            "mpiexec": [pid for pid in mpiexec if pid],
            "pids": sorted(self.job_pids),
        }

    @property
    def job_pids(self) -> set[int]:
        """The processes of the MPI job and its controller (every pid but the watchdog's)."""
        return self.pids - {self._watchdog.pid if self._watchdog else -1}

    def _start_watchdog(self) -> None:
        """A separate process that ends this cluster's processes if this process dies first."""
        pid_file = os.path.join(self._profile_dir, "pids.json")
        with open(pid_file, "w") as f:
            json.dump([], f)
        watchdog = subprocess.Popen(
            [sys.executable, "-m", "pingpong_lab.engines.watchdog", str(os.getpid()), pid_file],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C in the notebook does not reach it
        )
        self._pids.add(watchdog.pid)
        self._watchdog = watchdog

    def _write_pid_file(self) -> None:
        if not self._profile_dir:
            return
        pid_file = os.path.join(self._profile_dir, "pids.json")
        try:
            runtime.atomic_write(pid_file, json.dumps(sorted(self._pids)))
        except OSError:
            pass

    def _record_pids(self) -> None:
        """Remember every process of this cluster (controller, mpiexec, proxies, engines)."""
        if self._cluster is None:
            return
        launchers = [self._cluster.controller, *self._cluster.engines.values()]
        for launcher in launchers:
            pid = getattr(launcher, "pid", None) if launcher is not None else None
            if not pid:
                continue
            try:
                proc = psutil.Process(pid)
                self._pids.add(pid)
                self._pids.update(child.pid for child in proc.children(recursive=True))
            except psutil.NoSuchProcess:
                pass
        self._write_pid_file()

    def stop(self) -> None:
        """Stop engines and controller; make sure every process this cluster started is gone.

        Borrowed engines are given back to their pool as they are (it clears them)."""
        self._borrowed = None
        self._record_pids()
        if self._client is not None:
            try:
                self._client.close()
            except Exception:
                pass
        if self._cluster is not None and not self.slurm_job_id and self.launcher == "mpiexec":
            # engines keep nothing worth a graceful exit: ending them by PID here takes under
            # a second, where ipyparallel's stop waits seconds for each launcher to exit
            self._end_processes(grace_s=STOP_GRACE_S)
        if self._cluster is not None:
            try:
                self._cluster.stop_cluster_sync()
            except Exception:
                pass
        if self.slurm_job_id:  # scancel returns at once; the engines end a little later
            slurm_launch.wait_ended(self.slurm_job_id)
        if self._profile_dir:  # the watchdog sees its pid file go and exits
            shutil.rmtree(self._profile_dir, ignore_errors=True)
        self._end_processes(grace_s=3.0)
        if self._watchdog is not None:
            try:
                self._watchdog.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            self._watchdog = None
        self._cluster = self._client = self._view = self._profile_dir = None
        self.slurm_job_id = None
        self._engine_order = []
        _live_clusters.discard(self)

    def _end_processes(self, grace_s: float) -> None:
        end_processes(self._pids, grace_s)
        self._pids.clear()

    def restart(self) -> MPICluster:
        """Replace all engines by fresh ones (never borrowed ones)."""
        self._end_borrowed_engines()
        self.stop()
        return self.start()

    @property
    def pids(self) -> set[int]:
        """PIDs of the processes of this cluster (for checking that none outlive it)."""
        self._record_pids()
        return set(self._pids)

    @property
    def running(self) -> bool:
        return self._client is not None

    def __enter__(self) -> MPICluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"MPICluster(n={self.n}, launcher={self.launcher!r}, {state})"

    # -- work -------------------------------------------------------------------------------
    def run(
        self, func, *args, timeout: float | None = None, label: str | None = None, **kwargs
    ) -> list:
        """Run func(*args, **kwargs) on every rank at once; return the results ordered by rank.

        Raises DeadlockError when some rank has not returned within `timeout` seconds (the
        engines are then restarted), EngineCrashError when an engine died, and RemoteError
        when the function raised on an engine. `label` names the work in those messages
        (default: the function's name), e.g. "your pingpong".
        """
        if self._client is None:
            self.start()
        deadline = self.timeout if timeout is None else float(timeout)
        ar = self._view.apply_async(func, *args, **kwargs)
        name = label or getattr(func, "__name__", "the function")
        try:
            self._wait(ar, deadline)
            if not ar.ready():
                self._handle_timeout(ar, name, deadline)
            results = ar.get(timeout=1)
        except (DeadlockError, EngineCrashError):
            raise
        except Exception as exc:
            self._handle_remote_failure(exc, name)
        by_engine = dict(zip(self._view.targets, results))
        return [by_engine[eid] for eid in self._engine_order]

    def _wait(self, ar, deadline: float) -> None:
        """Wait for `ar` up to `deadline` seconds, and no longer once an engine process is gone:
        a crashed rank is seen by its PID within a poll, where ipyparallel would wait for the
        engine's missed heartbeats (15 s)."""
        end = time.monotonic() + deadline
        while not ar.ready():
            left = end - time.monotonic()
            if left <= 0:
                return
            ar.wait(min(CRASH_POLL_S, left))
            if not ar.ready() and not self._engines_alive():
                return

    def _engines_alive(self) -> bool:
        if self._borrowed:  # unseen from a pid namespace: ipyparallel's heartbeats tell
            lent = self._borrowed
            return not lent["visible"] or all(alive(pid) for pid in lent["mpiexec"])
        engine_launchers = list(self._cluster.engines.values()) if self._cluster else []
        if self.slurm_job_id:  # a batch job: Slurm knows whether it still runs
            return slurm_launch.job_running(self.slurm_job_id)
        for launcher in engine_launchers:
            pid = getattr(launcher, "pid", None)
            if not pid or not psutil.pid_exists(pid):
                return False
            try:
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    return False
            except psutil.NoSuchProcess:
                return False
        return bool(engine_launchers)

    def _crash_output(self) -> str:
        """What MPI or the OS said about a dead engine (not ipyparallel's own log chatter)."""
        lines = []
        for launcher in self._cluster.engines.values() if self._cluster else []:
            try:
                lines += launcher.get_output().splitlines()
            except Exception:
                pass
        keep = ("fatal", "error", "signal", "segmentation", "abort", "exit code", "terminated")
        useful = [
            ln.strip()
            for ln in lines
            if any(k in ln.lower() for k in keep) and "[IPEngine" not in ln and ln.strip()
        ]
        return "\n".join(dict.fromkeys(useful[-8:]))

    def _handle_timeout(self, ar, name: str, deadline: float):
        pending = set(self._client.outstanding)
        rank_of = {eid: rank for rank, eid in enumerate(self._engine_order)}
        engine_ids = list(self._view.targets)
        waiting = sorted(rank_of[eid] for eid, mid in zip(engine_ids, ar.msg_ids) if mid in pending)
        if not self._engines_alive():
            output = self._crash_output()
            self.restart()
            raise EngineCrashError(_crash_message(name, output))
        self.restart()
        raise DeadlockError(
            f"{name} had not returned after {deadline:g} s on rank(s) {waiting}: the ranks are "
            "probably deadlocked. Common causes: both ranks call a blocking Send before either "
            "posts a Recv (large messages cannot be buffered), a Recv waits for a message that "
            "is never sent (wrong peer, tag or count), or only some ranks call a collective. "
            f"The {self.n} engines were restarted; the next call runs on fresh engines."
        )

    def _handle_remote_failure(self, exc: Exception, name: str):
        from ipyparallel import error as ipp_error

        died = isinstance(exc, ipp_error.EngineError) or (
            isinstance(exc, ipp_error.CompositeError)
            and any(err[0] == "EngineError" for err in exc.elist)
        )
        if died or not self._engines_alive():
            output = self._crash_output()
            self.restart()
            raise EngineCrashError(_crash_message(name, output)) from None
        if isinstance(exc, ipp_error.CompositeError):
            rank_of = {eid: rank for rank, eid in enumerate(self._engine_order)}
            parts = []
            for err in exc.elist:
                ename, evalue, _tb, info = err
                eid = info.get("engine_id") if isinstance(info, dict) else None
                where = f"rank {rank_of[eid]}" if eid in rank_of else "an engine"
                parts.append(f"{where}: {ename}: {evalue}")
            summary = "; ".join(dict.fromkeys(parts))
            raise RemoteError(f"{name} failed on the engines - {summary}") from None
        if isinstance(exc, ipp_error.RemoteError):
            raise RemoteError(f"{name} failed on an engine - {exc.ename}: {exc.evalue}") from None
        raise exc


def _crash_message(name: str, output: str) -> str:
    return (
        f"an engine died while running {name}: a segfault or an MPI error in C code, most "
        "often. Check array bounds, buffer sizes and pointers, and that MPI counts are in "
        "elements of the datatype (n elements of MPI_INT are 4n bytes: use MPI_BYTE for bytes). "
        "The engines were restarted." + (f"\nMPI said:\n{output}" if output else "")
    )


@atexit.register
def stop_all_clusters() -> None:
    for cluster in list(_live_clusters):
        try:
            cluster.stop()
        except Exception:
            pass


def wait_gone(pids, timeout: float = 10.0) -> bool:
    """True when none of `pids` is running any more (zombies count as gone)."""
    end = time.monotonic() + timeout
    while True:
        alive = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.NoSuchProcess:
                pass
        if not alive:
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.1)
