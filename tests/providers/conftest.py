"""A loopback HTTP/1.1 server that replays recorded provider responses.

Each connection serves one request (``Connection: close``) with the next scripted
reply: a status, headers, and either a fixed body or a list of streamed body chunks
(bytes) and pauses (floats, seconds), sent with chunked transfer encoding. A reply may
keep the connection open after its chunks (to test abort) or drop it without the final
chunk (a server dying mid-stream). The server records what it received.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

Reply = dict[str, Any]
"""Keys: status (200), headers ({}), body (bytes: sent whole) or events (list of bytes or
float pauses, streamed), hold_open (False), drop (False), silent (False: send nothing). A callable receiving the
Received request may stand in for a reply."""


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class LoopbackServer:
    replies: list[Reply | Callable[[Received], Reply]]
    requests: list[Received] = field(default_factory=list)
    client_closed_at: float | None = None
    port: int = 0
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> LoopbackServer:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # type: ignore[arg-type]
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            self.client_closed_at = time.monotonic()
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            self._tasks.discard(task)  # type: ignore[arg-type]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        request_line, *header_lines = head.strip("\r\n").split("\r\n")
        method, path, _ = request_line.split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, v in (h.split(":", 1) for h in header_lines)}
        raw = await reader.readexactly(int(headers.get("content-length", "0")))
        received = Received(method, path, headers, json.loads(raw) if raw else None)
        self.requests.append(received)
        reply = (
            self.replies.pop(0)
            if self.replies
            else {"status": 500, "body": b'{"error": "unscripted"}'}
        )
        if callable(reply):
            try:
                reply = reply(received)
            except AssertionError as exc:  # a check on the request failed: answer 400
                reply = {
                    "status": 400,
                    "body": json.dumps({"error": f"test check: {exc}"}).encode(),
                }
        if reply.get("silent"):  # never answer: wait until the client gives up
            while await reader.read(1024):
                pass
            self.client_closed_at = time.monotonic()
            return
        status = reply.get("status", 200)
        out = [f"HTTP/1.1 {status} X", "Connection: close"]
        out += [f"{k}: {v}" for k, v in reply.get("headers", {}).items()]
        if "body" in reply:
            body: bytes = reply["body"]
            out += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
            writer.write(("\r\n".join(out) + "\r\n\r\n").encode() + body)
            await writer.drain()
            return
        out += ["Content-Type: text/event-stream", "Transfer-Encoding: chunked"]
        writer.write(("\r\n".join(out) + "\r\n\r\n").encode())
        for item in reply.get("events", []):
            if isinstance(item, float | int):
                await asyncio.sleep(item)
                continue
            writer.write(f"{len(item):x}\r\n".encode() + item + b"\r\n")
            await writer.drain()
        if reply.get("drop"):
            return  # no terminating chunk: the client sees a truncated body
        if reply.get("hold_open"):
            while await reader.read(1024):
                pass
            self.client_closed_at = time.monotonic()
            return
        writer.write(b"0\r\n\r\n")
        await writer.drain()


@pytest.fixture
async def loopback() -> AsyncIterator[Callable[..., Awaitable[LoopbackServer]]]:
    """``await loopback(reply, ...)`` starts a server that answers with those replies."""
    servers: list[LoopbackServer] = []

    async def start(*replies: Reply | Callable[[Received], Reply]) -> LoopbackServer:
        server = await LoopbackServer(list(replies)).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.close()


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
