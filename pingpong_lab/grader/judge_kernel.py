"""The judge's kernel, as the grader drives it (CrashTolerantExecute runs each test cell there).

JudgeKernel starts a second kernel for a notebook, opens its channel (judge.open_channel) and,
around each test cell, runs judge.begin / judge.end there while the learner's kernel runs
servant.serve. Everything sent to either kernel here is the grader's own code, never a cell.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import os
from time import monotonic

from jupyter_client.utils import ensure_async, run_sync

# names a test cell may read that the learner's kernel must not answer for
NOT_FROM_THE_LEARNER = frozenset({"In", "Out", "get_ipython", "exit", "quit", "open"})

SERVE = "__import__('pingpong_lab.grader.servant', fromlist=['serve']).serve({port}, {token!r})"
BEGIN = "__import__('pingpong_lab.grader.judge', fromlist=['begin']).begin({names!r})"
END = "__import__('pingpong_lab.grader.judge', fromlist=['end']).end()"
OPEN = "__import__('pingpong_lab.grader.judge', fromlist=['open_channel']).open_channel()"


class JudgeError(RuntimeError):
    """The judge's kernel could not do what the grader asked (its message says what)."""


def names_read(source: str) -> list[str]:
    """The names a test cell reads that it does not bind itself: what the judge asks the
    learner's kernel for (underscored names, IPython's own and builtins' are never asked)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    loaded, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    import builtins

    return sorted(
        n
        for n in loaded - bound
        if not n.startswith("_") and n not in NOT_FROM_THE_LEARNER and not hasattr(builtins, n)
    )


class JudgeKernel:
    """A kernel manager and client for the judge, with the channel's port and token."""

    def __init__(self, km, startup_timeout: float = 60.0):
        self.km, self.kc = km, None
        self.port, self.token = 0, ""
        self.startup_timeout = startup_timeout

    def launch(self, cwd: str | None, extra_arguments=()) -> None:
        """Start the kernel's process and return at once (it boots while the learner's cells
        run); connect() waits for it."""
        _now(self.km.start_kernel(cwd=cwd, extra_arguments=list(extra_arguments)))

    def connect(self) -> None:
        """Wait until the launched kernel answers, then open its channel."""
        if self.kc is not None:
            return
        self.kc = self.km.client()
        self.kc.start_channels()
        _now(self.kc.wait_for_ready(timeout=self.startup_timeout))
        # the kernel has read its connection file: no program it runs later may (its key
        # lets whoever reads it run code in the judge)
        with contextlib.suppress(OSError):
            os.unlink(self.km.connection_file)
        port, token = self.evaluate(OPEN).split()
        self.port, self.token = int(port), token

    def start(self, cwd: str | None, extra_arguments=()) -> None:
        self.launch(cwd, extra_arguments)
        self.connect()

    @property
    def serve_code(self) -> str:
        return SERVE.format(port=self.port, token=self.token)

    def run(self, code: str, timeout: float = 60.0) -> dict:
        """Run code silently; its execute_reply's content (JudgeError past the timeout)."""
        return run_sync(_reply)(self.kc, self.kc.execute(code, silent=True), timeout)

    def evaluate(self, expression: str, timeout: float = 60.0) -> str:
        """The value of a str expression in the judge (JudgeError if it raised)."""
        msg_id = self.kc.execute("", silent=True, user_expressions={"v": expression})
        content = run_sync(_reply)(self.kc, msg_id, timeout)
        value = content.get("user_expressions", {}).get("v", {})
        if value.get("status") != "ok":
            raise JudgeError(f"{value.get('ename')}: {value.get('evalue')}")
        return ast.literal_eval(value["data"]["text/plain"])

    def begin(self, names, timeout: float) -> None:
        content = self.run(BEGIN.format(names=list(names)), timeout)
        if content.get("status") != "ok":
            raise JudgeError(
                f"the learner's kernel did not answer the judge ({content.get('ename')}: "
                f"{content.get('evalue')})"
            )

    def end(self) -> None:
        try:
            self.run(END, timeout=10)
        except JudgeError:
            pass

    def alive(self) -> bool:
        return bool(_now(self.km.is_alive()))

    def stop(self) -> None:
        """Shut the judge down now (its process and everything it started)."""
        if self.kc is not None:
            self.kc.stop_channels()
        try:
            _now(self.km.shutdown_kernel(now=True))
        except RuntimeError:
            pass  # not running any more
        _now(self.km.cleanup_resources())


def _now(value):
    """value, or what it gives when awaited (the async kernel manager's methods)."""
    if inspect.isawaitable(value):
        return run_sync(_awaited)(value)
    return value


async def _awaited(awaitable):
    return await awaitable


async def _reply(kc, msg_id: str, timeout: float) -> dict:
    deadline = monotonic() + timeout
    while (left := deadline - monotonic()) > 0:
        try:
            msg = await ensure_async(kc.shell_channel.get_msg(timeout=min(left, 1.0)))
        except Exception:  # queue.Empty: not yet
            continue
        if msg.get("parent_header", {}).get("msg_id") == msg_id:
            return msg["content"]
    raise JudgeError(f"no answer within {timeout:g} s")


async def learner_reply(kc, msg_id: str, timeout: float) -> dict | None:
    """The learner kernel's reply to servant.serve, or None past the timeout."""
    try:
        return await _reply(kc, msg_id, timeout)
    except JudgeError:
        return None
