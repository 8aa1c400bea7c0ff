"""MPI engines started once and lent to one notebook kernel after another (grading).

    pool = EnginePool(mpiexec_prefix=limits)     # in the grading process of one submission
    os.environ.update(pool.env)                  # the kernels it starts inherit the folder
    pool.ready([2, 4])                           # before each notebook: fresh, answering engines
    ...                                          # MPICluster(n=2).start() in a kernel borrows
    pool.close()

Starting an MPI job of engines costs seconds (a controller, mpiexec and n Python processes that
import ipyparallel); grading starts one per notebook and size otherwise. A pool starts each size
once and writes how to reach it to <folder>/<n>.json; MPICluster.start() in a kernel whose
environment names the folder connects to those engines instead (cluster.py).

Lending is safe for one submission: before each notebook the engines' namespaces are cleared
and they must answer within seconds, or they are replaced. A borrower whose engines deadlock or
crash ends them itself and removes their file, so the next ready() starts new ones. The pool's
processes are tracked like any MPICluster's and end with the process that owns the pool (its
watchdog, or the grading sandbox). One pool must never serve two students.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from .. import runtime
from ..errors import ClusterStartError
from .cluster import POOL_ENV, MPICluster
from .watchdog import end_processes

ANSWER_TIMEOUT_S = 5.0  # engines that do not answer a ping in this time are replaced


class EnginePool:
    """Pre-started MPI engines of the sizes asked for, lent through files in a private folder."""

    def __init__(self, mpiexec_prefix: list[str] | tuple[str, ...] = ()):
        self.mpiexec_prefix = list(mpiexec_prefix)
        self.folder = Path(tempfile.mkdtemp(prefix="pingpong-lab-pool-"))
        self.clusters: dict[int, MPICluster] = {}
        self.starts = 0  # engine jobs started (a measure of what the pool saves)

    @property
    def env(self) -> dict[str, str]:
        """The environment that lets a kernel borrow these engines."""
        return {POOL_ENV: str(self.folder)}

    def entry(self, n: int) -> Path:
        return self.folder / f"{n}.json"

    def ready(self, sizes) -> None:
        """Make engines of each size in `sizes` available: cleared, answering, or new.

        A size whose engines cannot start is left out (a kernel then starts its own and gets
        the usual error there)."""
        for n in sorted(set(sizes)):
            cluster = self.clusters.get(n)
            if (
                cluster is not None
                and self.entry(n).is_file()
                and cluster.responsive(ANSWER_TIMEOUT_S)
            ):
                continue
            self._replace(n)

    def _replace(self, n: int) -> None:
        self.entry(n).unlink(missing_ok=True)
        old = self.clusters.pop(n, None)
        if old is not None:
            old.stop()
        cluster = MPICluster(n=n, mpiexec_prefix=self.mpiexec_prefix)
        try:
            cluster.start()
        except ClusterStartError:
            return
        self.starts += 1
        self.clusters[n] = cluster
        runtime.atomic_write(self.entry(n), json.dumps(cluster.lent))

    def close(self) -> None:
        """Stop every engine of the pool and remove its folder.

        The engines are ended at once (a graceful ipyparallel shutdown takes seconds and there
        is nothing to save), then each cluster is stopped (its watchdog, its files)."""
        end_processes([pid for c in self.clusters.values() for pid in c.job_pids], grace_s=1.0)
        for cluster in self.clusters.values():
            cluster.stop()
        self.clusters.clear()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> EnginePool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
