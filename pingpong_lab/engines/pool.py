"""MPI engines started before a notebook's kernel and lent to it (grading).

    pool = EnginePool(mpiexec_prefix=limits)     # in the grading process of one submission
    os.environ.update(pool.env)                  # the kernels it starts inherit the folder
    pool.ready([2, 4])                           # before each notebook: fresh engines, started
    ...                                          # MPICluster(n=2).start() in a kernel borrows
    pool.close()

Starting an MPI job of engines costs seconds (a controller, mpiexec and n Python processes that
import ipyparallel), in a cell's time when the kernel starts them itself. A pool starts each
size while the notebook's kernel starts and runs its first cells: ready() marks each size as
coming (<folder>/<n>.coming) and returns; a thread of the pool starts the engines and writes how
to reach them to <folder>/<n>.json. MPICluster.start() in a kernel whose environment names the
folder waits for a size that is coming and connects to those engines instead (cluster.py).

Each engine job is lent to one notebook only: ready() before the next notebook (or after a
kernel died) replaces every job the pool holds, since a learner's code ran on them (Python that
can change a module there, a C library loaded into them) and nothing of one notebook may reach
the checks of the next. What the pool saves is that engines start before the kernel, outside
its cells' time. The pool's
processes are tracked like any MPICluster's and end with the process that owns the pool (its
watchdog, or the grading sandbox). A borrower reads the folder and writes only given-up/<n>
(its engines deadlocked or crashed): the pool ends that job within GIVEN_UP_POLL_S, since a
confined borrower can neither reach its processes nor change an entry. One pool must never
serve two students.
"""

from __future__ import annotations

import json
import queue
import shutil
import tempfile
import threading
from pathlib import Path

from .. import runtime
from ..errors import ClusterStartError
from .cluster import COMING, GIVEN_UP, POOL_ENV, MPICluster
from .watchdog import end_processes

GIVEN_UP_POLL_S = 0.2  # how often the pool looks for engines a borrower gave up on


class EnginePool:
    """Pre-started MPI engines of the sizes asked for, lent through files in a private folder."""

    def __init__(self, mpiexec_prefix: list[str] | tuple[str, ...] = ()):
        self.mpiexec_prefix = list(mpiexec_prefix)
        self.folder = Path(tempfile.mkdtemp(prefix="pingpong-lab-pool-"))
        self.given_up = self.folder / GIVEN_UP  # the one folder a borrower writes
        self.given_up.mkdir()
        self.clusters: dict[int, MPICluster] = {}
        self.starts = 0  # engine jobs started (a measure of what the pool saves)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        # one thread starts every engine job, and lives as long as the pool: a confined job
        # (bubblewrap's --die-with-parent) ends when the thread that started it ends
        self._requests: queue.Queue = queue.Queue()
        threading.Thread(target=self._starter, daemon=True).start()
        threading.Thread(target=self._end_given_up, daemon=True).start()

    def _end_given_up(self) -> None:
        """End the jobs whose entry a borrower removed (its engines deadlocked or crashed): a
        confined kernel cannot end them itself, since they are outside its pid namespace."""
        while not self._closed.wait(GIVEN_UP_POLL_S):
            with self._lock:
                for n in [n for n in self.clusters if (self.given_up / str(n)).exists()]:
                    self.entry(n).unlink(missing_ok=True)
                    (self.given_up / str(n)).unlink(missing_ok=True)
                    self._end(self.clusters.pop(n))

    @property
    def env(self) -> dict[str, str]:
        """The environment that lets a kernel borrow these engines."""
        return {POOL_ENV: str(self.folder)}

    def entry(self, n: int) -> Path:
        return self.folder / f"{n}.json"

    def coming(self, n: int) -> Path:
        return self.folder / f"{n}{COMING}"

    def ready(self, sizes) -> None:
        """End every job lent before, and start new engines of each size in `sizes` in the
        background: each size is marked as coming at once, and lent (its entry written) as
        soon as its engines answer.

        A size whose engines cannot start is left out (a kernel then starts its own and gets
        the usual error there)."""
        self.wait()  # the starts of the last ready() are over
        wanted = sorted(set(sizes))
        with self._lock:
            old = list(self.clusters.values())
            for n in list(self.clusters):
                self.entry(n).unlink(missing_ok=True)
            self.clusters.clear()
            for n in wanted:
                (self.given_up / str(n)).unlink(missing_ok=True)
                self.coming(n).touch()
        self._requests.put((old, wanted))

    def wait(self) -> None:
        """Return when the engines of the last ready() are lent (or could not start)."""
        self._requests.join()

    def _starter(self) -> None:
        while True:
            old, wanted = self._requests.get()
            try:
                self._start(old, wanted)
            finally:
                self._requests.task_done()

    def _start(self, old: list[MPICluster], wanted: list[int]) -> None:
        for cluster in old:
            self._end(cluster)
        for n in wanted:  # the smaller first: the one a notebook usually starts first
            try:
                if not self._closed.is_set():
                    self._lend(n)
            finally:
                self.coming(n).unlink(missing_ok=True)

    def _end(self, cluster: MPICluster) -> None:
        end_processes(cluster.job_pids, grace_s=1.0)  # nothing to save: no graceful shutdown
        cluster.stop()

    def _lend(self, n: int) -> None:
        cluster = MPICluster(n=n, mpiexec_prefix=self.mpiexec_prefix, borrow=False)
        try:
            cluster.start()
        except ClusterStartError:
            return
        with self._lock:
            self.starts += 1
            self.clusters[n] = cluster
            runtime.atomic_write(self.entry(n), json.dumps(cluster.lent))

    def close(self) -> None:
        """Stop every engine of the pool and remove its folder.

        The engines are ended at once (a graceful ipyparallel shutdown takes seconds and there
        is nothing to save), then each cluster is stopped (its watchdog, its files)."""
        self._closed.set()
        self.wait()
        with self._lock:
            jobs = [pid for c in self.clusters.values() for pid in c.job_pids]
            end_processes(jobs, grace_s=1.0)
            for cluster in self.clusters.values():
                cluster.stop()
            self.clusters.clear()
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> EnginePool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
