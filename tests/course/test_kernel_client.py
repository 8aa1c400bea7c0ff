"""grader.kernel_client.ReadyClient: ready at the kernel's own answer, and then every message of
a cell arrives (no IOPub message of the cell lost, none of the start mistaken for it)."""

from __future__ import annotations

import asyncio
import time

import pytest
from jupyter_client.manager import AsyncKernelManager

from pingpong_lab.grader import kernel_client
from pingpong_lab.grader.kernel_client import ReadyClient


async def _start(**kwargs) -> tuple[AsyncKernelManager, ReadyClient]:
    km = AsyncKernelManager(kernel_name="python3", client_factory=ReadyClient, **kwargs)
    await km.start_kernel()
    kc = km.client()
    kc.start_channels()
    return km, kc


async def _stop(km, kc) -> None:
    kc.stop_channels()
    await km.shutdown_kernel(now=True)


def test_a_ready_kernel_runs_a_cell_and_every_output_of_it_arrives():
    async def scenario():
        km, kc = await _start()
        try:
            assert isinstance(kc, ReadyClient)
            await kc.wait_for_ready(timeout=60)
            outputs = []
            reply = await kc.execute_interactive(
                "for i in range(3): print(i)", timeout=30, output_hook=outputs.append
            )
            assert reply["content"]["status"] == "ok"
            text = "".join(m["content"]["text"] for m in outputs if m["msg_type"] == "stream")
            assert text == "0\n1\n2\n"
        finally:
            await _stop(km, kc)

    asyncio.run(scenario())


def test_a_kernel_that_never_answers_fails_at_its_deadline_not_later(monkeypatch):
    """A kernel paused before it answers: the wait gives up at its timeout with the reason."""
    monkeypatch.setattr(kernel_client, "SHELL_WAIT_S", 0.2)

    async def scenario():
        km, kc = await _start()
        try:
            km.provisioner.process.send_signal(19)  # SIGSTOP: alive, silent
            start = time.monotonic()
            with pytest.raises(RuntimeError, match="didn't respond in 1 seconds"):
                await kc.wait_for_ready(timeout=1)
            assert time.monotonic() - start < 30  # a bound on the 1 s deadline, not a speed claim
        finally:
            km.provisioner.process.send_signal(18)
            await _stop(km, kc)

    asyncio.run(scenario())


def test_a_kernel_that_dies_before_answering_is_named_dead():
    async def scenario():
        km, kc = await _start()
        try:
            km.provisioner.process.kill()
            with pytest.raises(RuntimeError, match="died before replying"):
                await kc.wait_for_ready(timeout=30)
        finally:
            await _stop(km, kc)

    asyncio.run(scenario())
