"""The judge: the kernel where grading runs a notebook's test cells, apart from the learner's.

The learner's cells run in the learner's kernel. Each test cell runs in the judge, a second
kernel that never runs a learner's line: before the cell, the grader starts servant.serve() in
the learner's kernel and calls begin() here with the names the test cell reads; begin() asks
the learner's kernel for them over the data-only channel of proxy.py and binds each in the
judge's namespace:

- data (numbers, strings, arrays, lists, dicts...) as a copy;
- a module (numpy, the course's) as the judge's own import of it, the course's wrapped below;
- a course function or class as the judge's own (CourseCall);
- anything else (a learner's function, the engines' client) as a stand-in: calling it runs the
  learner's function in the learner's kernel, with the arguments sent as data; an object of
  the judge passed to it (a fake communicator, a fake clock, a test's helper) stays here, and
  the learner's calls on it come back here, so what it records is the judge's.

So a test cell's assertions, and the fakes they read, are evaluated where no learner code ran,
on values that came as data. The course's checks that need no object of the learner's kernel
run here too (JUDGE_SIDE):

- those that trace a learner's function on fake ranks: the fakes, the payloads and the verdict
  stay in the judge, and the learner's function, run in its own kernel, sees the judge's fake
  communicators and, for the call, a fake `MPI` in its globals (proxy.Stand_in.with_globals);
- those that build a learner's C program (bench.c, linfit.c) from its source in the learner's
  folder and run it as a process of its own: the judge reads its output, files and the
  profiling layer's log as data. The program runs beside the judge, which it cannot reach:
  the judge's connection file is gone once it answers and its process is not dumpable;
- those that run a learner's function or C library on real MPI (engine_checks, ctiming): not
  on the learner's engines but on ranks of the check's own, a fresh mpiexec job started here
  (fresh_ranks). A learner's function reaches the job packed by the learner's kernel, as bytes
  the judge passes on and never unpickles (proxy.Stand_in.packed_by_owner); a C library is
  built here from the learner's source (cbuild.compile_student_c). The ranks report as JSON.

Course code that needs the learner's own objects (the MPI engines the learner's kernel
borrows, for a learner's cells) runs in the learner's kernel (CourseCall, LEARNER_SIDE) and
sends back its result or its error as data. end() tells the learner's kernel it is done.
"""

from __future__ import annotations

import socket
import time
import types

from ..runtime import not_dumpable
from .proxy import ByName, ChannelClosed, Peer, Stand_in, listen

# course code that runs where the learner's engines, C builds and working folder are
LEARNER_SIDE = (
    "pingpong_lab.course.grading.cbuild",
    "pingpong_lab.engines",
)
# course code that always runs in the judge: traces of a learner's function on the judge's
# fakes, and the learner's C programs run as processes whose output is data
JUDGE_SIDE = (
    "pingpong_lab.course.grading.engine_checks",
    "pingpong_lab.course.grading.ctiming",
    "pingpong_lab.course.grading.fresh_ranks",
    "pingpong_lab.course.grading.cbuild.compile_student_c",
    "pingpong_lab.course.grading.trace",
    "pingpong_lab.course.grading.fakempi",
    "pingpong_lab.course.grading.timing",
    "pingpong_lab.course.grading.cbench",
    "pingpong_lab.course.grading.cbuild.build_linfit",
    "pingpong_lab.course.grading.cbuild.c_linfit",
)


class _Session:
    server: socket.socket | None = None
    port: int = 0
    token: str = ""
    peer: Peer | None = None


_session = _Session()


def open_channel() -> str:
    """Listen on the loopback for the learner's kernel: 'PORT TOKEN' for the grader.

    The judge's process also becomes non-dumpable: a program it runs (a learner's bench.c)
    can then neither trace it nor read its memory or its /proc files (that takes a capability
    the confinement drops)."""
    not_dumpable()
    _session.server, _session.port, _session.token = listen()
    return f"{_session.port} {_session.token}"


def begin(names, connect_s: float = 60.0) -> None:
    """Accept the learner's kernel, then bind `names` of its namespace in the judge's."""
    peer = _accept(connect_s)
    peer.names_ok = True  # the learner's variables may name modules and course functions
    try:
        found = peer.request({"op": "describe", "names": sorted(set(names))})
    finally:
        peer.names_ok = False
    from IPython import get_ipython

    get_ipython().user_ns.update({name: judged(value) for name, value in found.items()})


def end() -> None:
    """Tell the learner's kernel the test cell is over; forget every stand-in."""
    peer, _session.peer = _session.peer, None
    if peer is not None:
        try:
            peer.send({"op": "done"})
        except OSError:
            pass
        peer.sock.close()


def _accept(connect_s: float) -> Peer:
    if _session.server is None:
        raise RuntimeError("the judge's channel is not open (open_channel)")
    deadline = time.monotonic() + connect_s
    while True:
        _session.server.settimeout(max(0.1, deadline - time.monotonic()))
        conn, _ = _session.server.accept()  # socket.timeout past the deadline
        conn.settimeout(connect_s)
        peer = Peer(conn, "judge")
        try:
            hello = peer.receive()
        except (ChannelClosed, OSError, ValueError):
            conn.close()
            continue
        if hello.get("token") == _session.token:
            conn.settimeout(None)
            _session.peer = peer
            return peer
        conn.close()


def peer() -> Peer:
    if _session.peer is None:
        raise ChannelClosed("no learner's kernel is connected to the judge")
    return _session.peer


def judged(value):
    """What the judge binds for a value named by the learner's kernel."""
    if isinstance(value, Stand_in):
        return value
    if isinstance(value, types.ModuleType) and value.__name__.startswith("pingpong_lab"):
        return CourseModule(value)
    if callable(value) and getattr(value, "__module__", "").startswith("pingpong_lab"):
        return CourseCall(value)
    return value


def _holds_stand_in(value) -> bool:
    if isinstance(value, Stand_in):
        return True
    if isinstance(value, (list, tuple, set)):
        return any(_holds_stand_in(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_stand_in(v) for v in value.values())
    return False


class CourseCall(ByName):
    """A course function or class in the judge: run here, unless it needs what only the
    learner's kernel has (outside the JUDGE_SIDE checks: a LEARNER_SIDE module, or a stand-in
    among its arguments): then it runs there, by name, with this judge's own functions sent as
    code."""

    def __init__(self, function):
        self.function = function
        self.name = f"{function.__module__}.{function.__qualname__}"
        self.__doc__ = function.__doc__

    def __call__(self, *args, **kwargs):
        there = not self.name.startswith(JUDGE_SIDE) and (
            self.name.startswith(LEARNER_SIDE) or _holds_stand_in((args, kwargs))
        )
        if there:
            channel = peer()
            return channel.request(
                {"op": "course", "name": self.name,
                 "args": channel.encode(list(args), by_value=True),
                 "kwargs": channel.encode(kwargs, by_value=True)}
            )  # fmt: skip
        return self.function(*args, **kwargs)

    def packed_by_owner(self) -> bytes:
        """This course function packed for a check's own MPI job (engines.shipping.packed):
        the job imports it by its module and name."""
        from ..engines.shipping import packed

        return packed(self.function)

    def __repr__(self):
        return f"<course {self.name}>"


class CourseModule(types.ModuleType):
    """A course module as test cells see it in the judge: its functions and classes as
    CourseCall, its submodules wrapped too, everything else as it is."""

    def __init__(self, module: types.ModuleType):
        super().__init__(module.__name__, module.__doc__)
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "_wrapped", {})

    def __getattr__(self, name):
        if name.startswith("__"):
            return getattr(self._module, name)
        if name not in self._wrapped:
            self._wrapped[name] = judged(getattr(self._module, name))
        return self._wrapped[name]
