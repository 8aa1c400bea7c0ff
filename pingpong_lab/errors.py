"""Exceptions with messages a learner can act on."""


class PingPongLabError(RuntimeError):
    """Base class of every error this package raises on purpose."""


class MPINotFoundError(PingPongLabError):
    """No usable MPI (mpiexec or mpi4py) in this environment."""


class ClusterStartError(PingPongLabError):
    """The MPI engines did not start or do not form one MPI job."""


class DeadlockError(PingPongLabError, TimeoutError):
    """Ranks did not answer within the deadline; they were restarted."""


class EngineCrashError(PingPongLabError):
    """An engine process died (for example a segfault in C code); engines were restarted."""


class RemoteError(PingPongLabError):
    """Code running on the engines raised an exception."""


class KernelError(PingPongLabError):
    """A ping-pong kernel refused its arguments or failed."""


class PayloadError(KernelError):
    """The echoed payload did not match what was sent."""


class ABIMismatchError(PingPongLabError):
    """A C library was built against another MPI than the one mpi4py uses."""


class CompileError(PingPongLabError):
    """The C compiler rejected a source file."""
