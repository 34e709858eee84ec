"""``mcp_extension(servers)``: MCP servers' tools as ordinary governed tools.

When the session starts, the (async) factory starts or reaches every configured server, lists
its tools and registers each as ``mcp__<server>__<tool>`` through ``pi.register_tool``, with
the server's JSON Schema as parameters and ``mcp:<server>`` as the origin in its source info.
So ``%pi_tools``, the active set, allow/exclude lists and every ``tool_call`` / ``tool_result``
handler (audit, approval, redaction) apply to them unchanged.

Annotations are hints, not trust: unless the server is configured ``trusted``, a tool the
server does not mark read-only, or marks destructive, has ``requires_approval`` (bound to the
hash of its final arguments by the host's approval gate).

A server that cannot be started is skipped with a warning (``ext.failures`` says why); the
other servers' tools still register. A tool that cannot be used (a malformed entry of the
server's list, a schema we cannot use) is skipped the same way (``ext.skipped``); the
server's other tools still register. Calls follow :class:`~.connection.McpConnection`'s rules:
an abort cancels the request at the server; a server that dies or hangs gives the model a
clear error and is started again on the next call.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.types import Tool

from pi_notebook.agent.types import ToolResult
from pi_notebook.ai.messages import TextContent
from pi_notebook.errors import ConfigurationError
from pi_notebook.extensions import ExtensionAPI, ToolDefinition
from pi_notebook.mcp.config import McpServerConfig, parse_servers
from pi_notebook.mcp.connection import McpConnection
from pi_notebook.mcp.errors import McpError
from pi_notebook.mcp.results import to_tool_result
from pi_notebook.mcp.schema import McpParameters, parameters_model

__all__ = ["McpExtension", "McpTool", "approval_reason", "mcp_extension", "tool_name_for"]

log = logging.getLogger(__name__)

_MAX_NAME = 64  # the tightest provider limit on tool names (OpenAI)
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name_for(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, with characters providers refuse replaced by ``_`` and names
    longer than 64 characters shortened with a hash of the original."""
    name = f"mcp__{server}__{_UNSAFE.sub('_', tool)}"
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
    return f"{name[: _MAX_NAME - 9]}_{digest}"


def approval_reason(config: McpServerConfig, tool: Tool) -> str | None:
    """Why calls of ``tool`` need approval, or ``None`` (read-only and not destructive, or a
    trusted server). Missing annotations count as "may write"."""
    if config.trusted:
        return None
    hints = tool.annotations
    read_only = hints is not None and hints.read_only_hint is True
    destructive = hints is not None and hints.destructive_hint is True
    if destructive:
        return f"MCP server {config.name!r} marks {tool.name} as destructive"
    if not read_only:
        return f"MCP server {config.name!r} does not mark {tool.name} as read-only"
    return None


@dataclass(frozen=True, kw_only=True)
class McpTool:
    """A registered MCP tool: our name, the server's name for it, and where it lives."""

    name: str
    server: str
    remote_name: str
    requires_approval: bool


class McpExtension:
    """The MCP client extension's factory (load it like any extension), plus its state.

    Attributes:
        servers: the validated server configs, in order.
        connections: one :class:`McpConnection` per started server.
        tools: registered tool name to :class:`McpTool`.
        failures: server name to why it could not be used.
        skipped: server name to why each of its tools that did not register was skipped (a
            malformed entry of its list, a schema we cannot use, a clashing name).
    """

    def __init__(
        self,
        servers: Mapping[str, Any] | Sequence[McpServerConfig],
        *,
        log_dir: Path | None = None,
        extension_path: str | None = None,
    ) -> None:
        self.servers = (
            list(servers) if isinstance(servers, Sequence) else parse_servers(servers)  # pyright: ignore[reportUnknownArgumentType]
        )
        names = [s.name for s in self.servers]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"MCP server names must be unique, got {names}")
        self.extension_path = extension_path or f"<mcp:{','.join(names)}>"
        self.log_dir = log_dir
        self.connections: dict[str, McpConnection] = {}
        self.tools: dict[str, McpTool] = {}
        self.failures: dict[str, str] = {}
        self.skipped: dict[str, list[str]] = {}

    async def __call__(self, pi: ExtensionAPI) -> None:
        connections = [McpConnection(s, log_dir=self.log_dir) for s in self.servers]
        listed = await asyncio.gather(
            *(c.list_tools() for c in connections), return_exceptions=True
        )
        for connection, tools in zip(connections, listed, strict=True):
            name = connection.config.name
            if isinstance(tools, BaseException):
                if not isinstance(tools, McpError | ConfigurationError):
                    raise tools
                self.failures[name] = str(tools)
                log.warning("MCP server %r skipped: %s", name, tools)
                await connection.close()
                continue
            self.connections[name] = connection
            if connection.skipped_tools:
                self.skipped[name] = list(connection.skipped_tools)
            for tool in tools:
                self._register(pi, connection, tool)
        pi.on("session_shutdown", self._shutdown)

    def _register(self, pi: ExtensionAPI, connection: McpConnection, tool: Tool) -> None:
        config = connection.config
        name = tool_name_for(config.name, tool.name)
        if name in self.tools:
            self._skip(config.name, f"tool {tool.name!r} clashes with {name!r}; skipped")
            return
        try:
            parameters = parameters_model(name, tool.input_schema)
        except ConfigurationError as exc:
            self._skip(config.name, f"tool {tool.name!r} skipped: {exc}")
            return
        reason = approval_reason(config, tool)
        hints = tool.annotations
        label = tool.title or (hints.title if hints is not None else None) or tool.name
        description = tool.description or f"{tool.name} (MCP server {config.name})"
        definition: ToolDefinition[McpParameters] = ToolDefinition(
            name=name,
            label=label,
            description=description,
            parameters=parameters,
            execute=_executor(connection, tool.name),
            requires_approval=False if reason is None else (lambda _params: reason),
        )
        pi.register_tool(definition, origin=f"mcp:{config.name}")
        self.tools[name] = McpTool(
            name=name,
            server=config.name,
            remote_name=tool.name,
            requires_approval=reason is not None,
        )

    def _skip(self, server: str, why: str) -> None:
        self.skipped.setdefault(server, []).append(why)
        log.warning("MCP server %r: %s", server, why)

    async def _shutdown(self, _event: Any, _ctx: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop every server this extension started."""
        connections, self.connections = list(self.connections.values()), {}
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)


def _executor(connection: McpConnection, remote_name: str) -> Any:
    server = connection.config.name

    async def execute(
        tool_call_id: str, params: McpParameters, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        def progress(value: float, total: float | None, message: str | None) -> None:
            shown = message or (f"{value:g}/{total:g}" if total else f"{value:g}")
            on_update(
                ToolResult(
                    content=[TextContent(text=shown)],
                    details={"progress": value, "total": total, "message": message},
                )
            )

        result = await connection.call_tool(
            remote_name, params.model_dump(mode="json"), signal=signal, on_progress=progress
        )
        return to_tool_result(result, server=server, tool=remote_name)

    return execute


def mcp_extension(servers: Mapping[str, Any], *, log_dir: Path | None = None) -> McpExtension:
    """An extension factory for the MCP ``servers`` (``{name: {"command": ..., "args": [...],
    "env": {...}}}`` for stdio, ``{name: {"url": ..., "headers": {...}}}`` for streamable HTTP;
    see :mod:`pi_notebook.mcp.config`).

    Raises:
        ConfigurationError: a server's settings are unusable (checked now, before any start).
    """
    return McpExtension(servers, log_dir=log_dir)
