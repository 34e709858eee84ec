"""Helpers of the MCP tests: the toy server, a scripted approval UI, waiting for files."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from pi_notebook.approvals import ApprovalOutcome, ApprovalRequest

TOY_SERVER = str(Path(__file__).with_name("toy_server.py"))


def toy_stdio(**extra: Any) -> dict[str, Any]:
    """The toy server's settings for ``mcp_extension`` (stdio)."""
    return {"command": sys.executable, "args": [TOY_SERVER], **extra}


def start_toy_http(port: int = 0) -> tuple[subprocess.Popen[str], str]:
    """Start the toy server over streamable HTTP; returns the process and its URL."""
    proc = subprocess.Popen(
        [sys.executable, TOY_SERVER, "--http", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("LISTENING "):
        proc.kill()
        raise RuntimeError(f"toy server did not start: {line!r}")
    return proc, line.split()[1]


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)
    if proc.stdout is not None:
        proc.stdout.close()


async def wait_for_text(path: Path, text: str, timeout: float = 10.0) -> str:
    """Wait until the file at ``path`` holds ``text`` (written by another process)."""
    deadline = time.monotonic() + timeout
    file = anyio.Path(path)
    while True:
        found = await file.read_text() if await file.exists() else ""
        if text in found or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.02)


class ScriptedUI:
    """An approval UI that answers from a script and records what it was asked.

    ``answers`` are consumed in order (``True`` approves); an empty script rejects.
    """

    def __init__(self, answers: Sequence[bool] = ()) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    def _answer(self) -> bool:
        return self.answers.pop(0) if self.answers else False

    async def request_approval(self, request: ApprovalRequest) -> ApprovalOutcome:
        self.asked.append(request.tool_name)
        return ApprovalOutcome("approved" if self._answer() else "rejected", approver="test")

    async def confirm(self, title: str, message: str, **_: Any) -> bool:
        self.asked.append(title)
        return self._answer()


def child_env(**extra: str) -> dict[str, str]:
    """Environment for a child Python that imports this worktree's pi_notebook."""
    env = {"PYTHONPATH": os.environ.get("PYTHONPATH", os.getcwd())}
    env.update(extra)
    return env


class Relay:
    """A model whose script is set per test: ``relay.script([...])`` (a fresh ScriptedModel)."""

    id = "relay"
    provider = "scripted"

    def __init__(self) -> None:
        from pi_notebook.testing import ScriptedModel

        self.model = ScriptedModel([])

    def script(self, steps: Sequence[Any]) -> Any:
        from pi_notebook.testing import ScriptedModel

        self.model = ScriptedModel(steps)
        return self.model

    async def stream(self, context: Any, *, signal: Any = None) -> Any:
        async for event in self.model.stream(context, signal=signal):
            yield event


class OwnedClient:
    """An SDK ``Client`` entered and left in a task of its own.

    anyio's cancel scopes must be left in the task that entered them, and pytest-asyncio runs
    a fixture's setup and teardown in different tasks; so the client lives in its own task.
    """

    def __init__(self, make: Any) -> None:
        self._make = make
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.client: Any = None

    async def __aenter__(self) -> Any:
        ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        async def own() -> None:
            try:
                async with self._make() as client:
                    ready.set_result(client)
                    await self._stop.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                raise

        self._task = asyncio.ensure_future(own())
        self.client = await ready
        return self.client

    async def __aexit__(self, *exc: Any) -> None:
        self._stop.set()
        assert self._task is not None
        await self._task
