"""``McpConnection``: one MCP server, started on demand, restarted after it fails.

The SDK's ``Client`` must be entered and left in one task (its transports hold anyio cancel
scopes), so a connection owns a background task that enters the client and waits; calls run
in the callers' tasks. A server that dies mid-call (``Connection closed``), refuses to start,
or does not answer within its timeout makes the call fail with
:class:`~pi_notebook.mcp.errors.McpServerUnavailable`; the connection is dropped (a hung
server is stopped) and the next call starts it again. An aborted call is cancelled through
the SDK, which tells the server (``notifications/cancelled``); the connection stays up.

A tool list with malformed entries (no name, a schema that is not an object...) keeps its
good tools: each bad entry is skipped with a warning naming it (``skipped_tools``), instead of
the whole list failing to validate (:mod:`.tool_listing` reads such a page).

A stdio server's stderr goes to a log file (``<data dir>/mcp/<server>.log``), never to the
notebook; its path is in every error about that server.

What does not belong here: mapping results to tool results, or approvals.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import IO, Any, cast

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, CallToolResult, Implementation, Tool

from pi_notebook._paths import data_dir
from pi_notebook.ai.abort import AbortSignal
from pi_notebook.errors import AbortError, ConfigurationError
from pi_notebook.mcp.config import McpServerConfig
from pi_notebook.mcp.errors import McpServerUnavailable, McpToolError
from pi_notebook.mcp.tool_listing import invalid_listing, lenient_page
from pi_notebook.secrets import scrub

__all__ = ["CLIENT_INFO", "McpConnection", "ProgressFn", "default_log_dir"]

log = logging.getLogger(__name__)

CLIENT_INFO = Implementation(name="pi_notebook", version="0.1.0")
ProgressFn = Callable[[float, float | None, str | None], None]
_MAX_PAGES = 50


def default_log_dir() -> Path:
    """Where stdio servers' stderr goes: ``<data dir>/mcp``."""
    path = data_dir() / "mcp"
    path.mkdir(parents=True, exist_ok=True)
    return path


async def _abandon(
    owner: asyncio.Task[None], stop: asyncio.Event, ready: asyncio.Future[Any]
) -> None:
    """Stop a server that did not start in time (or whose start failed): its task is
    cancelled and awaited, and the readiness it may still report is retrieved."""
    stop.set()
    owner.cancel()
    with contextlib.suppress(BaseException):
        await owner
    if not ready.done():
        ready.cancel()
    elif not ready.cancelled():
        ready.exception()  # retrieved


def _describe(exc: BaseException) -> str:
    if isinstance(exc, MCPError):
        return scrub(exc.message)
    if isinstance(exc, ExceptionGroup):
        inner: list[BaseException] = list(exc.exceptions)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        if inner:
            return _describe(inner[0])
    error = cast(BaseException, exc)  # an empty group is described as itself
    text = str(error).splitlines()[0] if str(error) else ""
    return scrub(f"{type(error).__name__}: {text}" if text else type(error).__name__)


class McpConnection:
    """A connection to one MCP server (see the module docstring for the failure rules).

    Args:
        config: the server.
        log_dir: where a stdio server's stderr is written (default :func:`default_log_dir`).
    """

    def __init__(self, config: McpServerConfig, *, log_dir: Path | None = None) -> None:
        self.config = config
        self.log_path = (log_dir or default_log_dir()) / f"{config.name}.log"
        self.starts = 0
        self.protocol_version: str | None = None
        self.skipped_tools: list[str] = []
        """Why each malformed entry of the last tool list was skipped."""
        self._client: Client | None = None
        self._owner: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._closing: set[asyncio.Future[None]] = set()
        self._lock = asyncio.Lock()
        self._closed = False

    @property
    def connected(self) -> bool:
        """True while a started server is believed alive."""
        return self._client is not None and self._owner is not None and not self._owner.done()

    # -- lifecycle ---------------------------------------------------------------
    async def _ensure(self) -> Client:
        async with self._lock:
            if self._closed:
                raise McpServerUnavailable(f"MCP server {self.config.name!r} was removed")
            if self._client is not None and self.connected:
                return self._client
            if self._client is not None:  # its task ended on its own: the server went away
                self._drop()
            # A replaced server may still be winding down (a hung one gets a few seconds to
            # exit before it is killed); the new one does not wait for it.
            self._client = await self._start()
            return self._client

    async def _start(self) -> Client:
        """Start the server in a task of its own and wait (within ``connect_timeout_s``) until
        its client is ready."""
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Client] = loop.create_future()
        stop = asyncio.Event()
        config = self.config

        async def own() -> None:
            try:
                async with AsyncExitStack() as stack:
                    transport = await self._transport(stack)
                    client = await stack.enter_async_context(
                        Client(transport, client_info=CLIENT_INFO)
                    )
                    if not ready.done():
                        ready.set_result(client)
                    await stop.wait()
            except asyncio.CancelledError:
                if not ready.done():
                    ready.cancel()
                raise
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                else:
                    log.warning("MCP server %r: connection ended: %s", config.name, _describe(exc))

        owner = asyncio.create_task(own(), name=f"mcp-server-{config.name}")
        try:
            client = await asyncio.wait_for(asyncio.shield(ready), config.connect_timeout_s)
        except BaseException as exc:
            await _abandon(owner, stop, ready)
            if isinstance(exc, asyncio.CancelledError | ConfigurationError):
                raise
            if isinstance(exc, TimeoutError):
                reason = f"it did not finish starting within {config.connect_timeout_s:g} s"
            else:
                reason = _describe(exc)
            raise McpServerUnavailable(
                f"MCP server {config.name!r} could not be started: {reason}.{self._log_hint()}"
            ) from exc
        self._owner, self._stop = owner, stop
        self.starts += 1
        self.protocol_version = client.protocol_version
        return client

    async def _transport(self, stack: AsyncExitStack) -> Any:
        """The server's transport, its resources on ``stack``: a stdio server's process with
        its stderr appended to :attr:`log_path`, or an HTTP client for a URL."""
        config = self.config
        if config.command is not None:
            log_file: IO[str] = stack.enter_context(self.log_path.open("a", encoding="utf-8"))
            log_file.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} start {config.target}\n")
            log_file.flush()
            params = StdioServerParameters(
                command=config.command,
                args=list(config.args),
                env=config.resolved_env() or None,
                cwd=config.cwd,
            )
            return stdio_client(params, errlog=log_file)
        assert config.url is not None
        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=config.resolved_headers(),
                timeout=httpx2.Timeout(30.0, read=300.0),
            )
        )
        return streamable_http_client(config.url, http_client=http)

    def _log_hint(self) -> str:
        return f" Its log: {self.log_path}" if self.config.command is not None else ""

    def _drop(self) -> None:
        """Forget the live client and stop its task in the background (``close`` waits)."""
        owner, stop = self._owner, self._stop
        self._client, self._owner, self._stop = None, None, None
        if owner is None:
            return
        if stop is not None:
            stop.set()

        async def finish() -> None:
            try:
                await asyncio.wait_for(asyncio.shield(owner), 10)
            except BaseException:  # a server that will not stop: cancel its task
                owner.cancel()
                with contextlib.suppress(BaseException):
                    await owner

        closing = asyncio.ensure_future(finish())
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        """Stop the server (if started) and wait until every process it started is gone;
        further calls fail."""
        self._closed = True
        async with self._lock:
            self._drop()
        if self._closing:
            await asyncio.wait(set(self._closing))

    # -- calls -------------------------------------------------------------------
    async def list_tools(self) -> list[Tool]:
        """Every tool the server lists (all pages). Raises McpServerUnavailable / McpToolError."""
        client = await self._ensure()
        tools: list[Tool] = []
        cursor: str | None = None
        self.skipped_tools = []
        try:
            for _ in range(_MAX_PAGES):
                first = cursor is None
                try:
                    page = await asyncio.wait_for(
                        client.list_tools(cursor=cursor), self.config.timeout_s
                    )
                except Exception as exc:
                    if not invalid_listing(exc):
                        raise
                    # A malformed entry: take the page entry by entry.
                    lenient = lenient_page(
                        client,
                        cursor,
                        first=first,
                        server=self.config.name,
                        skipped=self.skipped_tools,
                    )
                    page = await asyncio.wait_for(lenient, self.config.timeout_s)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
        except BaseException as exc:
            raise self._failure(exc, "listing its tools") from exc
        return tools

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        signal: AbortSignal | None = None,
        on_progress: ProgressFn | None = None,
    ) -> CallToolResult:
        """Call ``name`` on the server.

        Raises:
            AbortError: ``signal`` fired; the request was cancelled at the server.
            McpServerUnavailable: the server could not be started, stopped, or hung past the
                timeout; it starts again on the next call.
            McpToolError: the server refused the request (a protocol error).
        """
        client = await self._ensure()

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            if on_progress is not None:
                on_progress(progress, total, message)

        call = asyncio.ensure_future(client.call_tool(name, arguments, progress_callback=progress))
        aborted = asyncio.ensure_future(signal.wait()) if signal is not None else None
        waiting: set[asyncio.Future[Any]] = {call} if aborted is None else {call, aborted}
        try:
            done, _ = await asyncio.wait(
                waiting, timeout=self.config.timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
        except asyncio.CancelledError:
            call.cancel()
            await asyncio.wait([call])
            raise
        finally:
            if aborted is not None:
                aborted.cancel()
        if call in done:
            try:
                return call.result()
            except BaseException as exc:
                raise self._failure(exc, f"calling {name}") from exc
        call.cancel()  # the SDK sends notifications/cancelled to the server
        await asyncio.wait([call])
        if not call.cancelled():
            call.exception()  # retrieved; the abort or the timeout is what the caller gets
        if aborted is not None and aborted in done:
            raise AbortError("Operation aborted")
        self._drop()
        raise McpServerUnavailable(
            f"MCP server {self.config.name!r} did not answer {name} within "
            f"{self.config.timeout_s:g} s; it was stopped and starts again on the next call."
            + self._log_hint()
        )

    def _failure(self, exc: BaseException, doing: str) -> BaseException:
        """Map an exception of a request to what the caller gets, dropping a dead connection."""
        if isinstance(exc, asyncio.CancelledError | AbortError):
            return exc
        if isinstance(exc, TimeoutError):
            self._drop()
            return McpServerUnavailable(
                f"MCP server {self.config.name!r} did not answer within {self.config.timeout_s:g} s "
                f"while {doing}; it was stopped and starts again on the next call.{self._log_hint()}"
            )
        dead = not self.connected or (isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED)
        if dead or not isinstance(exc, MCPError | ValueError):
            self._drop()
            return McpServerUnavailable(
                f"MCP server {self.config.name!r} stopped while {doing} ({_describe(exc)}); "
                f"it starts again on the next call.{self._log_hint()}"
            )
        return McpToolError(f"MCP server {self.config.name!r} refused {doing}: {_describe(exc)}")
