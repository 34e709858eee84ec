"""MCP server settings of the client extension: what to start or reach, and how far to trust it.

A server is configured by a mapping, as desktop MCP clients write it::

    {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/data"],
     "env": {"API_KEY": "${MY_API_KEY}"}}                      # stdio: a child process
    {"url": "https://example.com/mcp",
     "headers": {"Authorization": "Bearer ${EXAMPLE_TOKEN}"}}  # streamable HTTP

Secrets stay in the environment: ``${NAME}`` in ``env`` and ``headers`` values is replaced by
the environment variable ``NAME`` when the server is started, so a notebook or a config file
never holds the secret itself. Other keys: ``trusted`` (``true`` turns off approvals for the
server's tools: annotations are hints, not trust, so only a person can say so),
``timeout`` (seconds a call may take before the server counts as hung, default 60),
``cwd`` (working directory of a stdio server).

What does not belong here: connecting, or the tool registration itself.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pi_notebook.errors import ConfigurationError

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "McpServerConfig",
    "expand_env",
    "parse_server",
    "parse_servers",
]

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_CONNECT_TIMEOUT_S = 30.0
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_STDIO_TYPES = ("stdio",)
_HTTP_TYPES = ("http", "streamable-http", "streamableHttp", "streamable_http")
_KEYS = {"command", "args", "env", "cwd", "url", "headers", "trusted", "timeout", "type"}


@dataclass(frozen=True, kw_only=True)
class McpServerConfig:
    """One MCP server, validated. ``env`` and ``headers`` keep their ``${VAR}`` references;
    :meth:`resolved_env` and :meth:`resolved_headers` expand them when the server starts."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict[str, str])
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict[str, str])
    trusted: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if self.command is not None else "http"

    @property
    def target(self) -> str:
        """What the server is, in words safe to show (no secret: those are in ``env``)."""
        if self.command is not None:
            return " ".join([self.command, *self.args])
        from pi_notebook.secrets import safe_url

        return safe_url(self.url or "")

    def resolved_env(self) -> dict[str, str]:
        """``env`` with ``${VAR}`` expanded. Raises ConfigurationError for a missing variable."""
        return {k: expand_env(v, f"MCP server {self.name!r} env {k}") for k, v in self.env.items()}

    def resolved_headers(self) -> dict[str, str]:
        """``headers`` with ``${VAR}`` expanded. Raises ConfigurationError for a missing one."""
        return {
            k: expand_env(v, f"MCP server {self.name!r} header {k}")
            for k, v in self.headers.items()
        }

    def as_dict(self) -> dict[str, Any]:
        """The mapping this config was parsed from (references unexpanded), for saving."""
        out: dict[str, Any] = {}
        if self.command is not None:
            out["command"] = self.command
            if self.args:
                out["args"] = list(self.args)
            if self.env:
                out["env"] = dict(self.env)
            if self.cwd:
                out["cwd"] = self.cwd
        else:
            out["url"] = self.url
            if self.headers:
                out["headers"] = dict(self.headers)
        if self.trusted:
            out["trusted"] = True
        if self.timeout_s != DEFAULT_TIMEOUT_S:
            out["timeout"] = self.timeout_s
        return out


def expand_env(value: str, where: str) -> str:
    """Replace each ``${NAME}`` in ``value`` by the environment variable ``NAME``.

    Raises:
        ConfigurationError: a referenced variable is not set (the message names it, never a value).
    """

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        found = os.environ.get(name)
        if found is None:
            raise ConfigurationError(f"{where} refers to ${{{name}}}, which is not set; export it")
        return found

    return _VARIABLE.sub(replace, value)


def _strings(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{what} must be a mapping of strings")
    out: dict[str, str] = {}
    for key, item in value.items():  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(key, str) or not isinstance(item, str):
            raise ConfigurationError(f"{what} must map strings to strings")
        out[key] = item
    return out


def parse_server(name: str, spec: Mapping[str, Any]) -> McpServerConfig:
    """Validate one server's mapping.

    Raises:
        ConfigurationError: the name or a setting is unusable; the message says which.
    """
    if not isinstance(name, str) or not _NAME.match(name):  # pyright: ignore[reportUnnecessaryIsInstance] - run-time check of untyped settings
        raise ConfigurationError(
            f"MCP server name {name!r} must be 1-40 letters, digits, '_' or '-' "
            "(it becomes part of tool names: mcp__<server>__<tool>)"
        )
    if not isinstance(spec, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance] - run-time check of untyped settings
        raise ConfigurationError(
            f"MCP server {name!r}: expected a mapping, got {type(spec).__name__}"
        )
    unknown = set(spec) - _KEYS
    if unknown:
        raise ConfigurationError(f"MCP server {name!r}: unknown settings {sorted(unknown)}")
    command, url = spec.get("command"), spec.get("url")
    if (command is None) == (url is None):
        raise ConfigurationError(f"MCP server {name!r} needs exactly one of 'command' or 'url'")
    kind = spec.get("type", "stdio" if command is not None else "http")
    if kind not in (_STDIO_TYPES if command is not None else _HTTP_TYPES):
        raise ConfigurationError(
            f"MCP server {name!r}: type {kind!r} is not supported with "
            f"{'command' if command is not None else 'url'} (stdio and streamable HTTP are)"
        )
    timeout = spec.get("timeout", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ConfigurationError(
            f"MCP server {name!r}: 'timeout' must be a positive number of seconds"
        )
    trusted = spec.get("trusted", False)
    if not isinstance(trusted, bool):
        raise ConfigurationError(f"MCP server {name!r}: 'trusted' must be true or false")
    if command is not None:
        return _stdio_server(name, spec, command, trusted=trusted, timeout_s=float(timeout))
    return _http_server(name, spec, url, trusted=trusted, timeout_s=float(timeout))


def _stdio_server(
    name: str, spec: Mapping[str, Any], command: Any, *, trusted: bool, timeout_s: float
) -> McpServerConfig:
    """A server started as a process: ``command``, ``args``, ``cwd``, ``env``."""
    if not isinstance(command, str) or not command:
        raise ConfigurationError(f"MCP server {name!r}: 'command' must be a non-empty string")
    args = spec.get("args", [])
    if not isinstance(args, list | tuple) or not all(isinstance(a, str) for a in args):  # pyright: ignore[reportUnknownVariableType]
        raise ConfigurationError(f"MCP server {name!r}: 'args' must be a list of strings")
    cwd = spec.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ConfigurationError(f"MCP server {name!r}: 'cwd' must be a string")
    if "headers" in spec:
        raise ConfigurationError(f"MCP server {name!r}: 'headers' only apply to a 'url' server")
    return McpServerConfig(
        name=name,
        command=command,
        args=tuple(args),  # pyright: ignore[reportUnknownArgumentType]
        cwd=cwd,
        env=_strings(spec.get("env"), f"MCP server {name!r} 'env'"),
        trusted=trusted,
        timeout_s=timeout_s,
    )


def _http_server(
    name: str, spec: Mapping[str, Any], url: Any, *, trusted: bool, timeout_s: float
) -> McpServerConfig:
    """A server reached over streamable HTTP: ``url``, ``headers``."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"MCP server {name!r}: 'url' must be an http(s) URL")
    if "env" in spec or "args" in spec:
        raise ConfigurationError(
            f"MCP server {name!r}: 'env' and 'args' only apply to a 'command' server"
        )
    return McpServerConfig(
        name=name,
        url=url,
        headers=_strings(spec.get("headers"), f"MCP server {name!r} 'headers'"),
        trusted=trusted,
        timeout_s=timeout_s,
    )


def parse_servers(servers: Mapping[str, Any]) -> list[McpServerConfig]:
    """Validate every server of ``{name: mapping}`` (an ``{"mcpServers": {...}}`` wrapper, as
    desktop clients write their files, is accepted too).

    Raises:
        ConfigurationError: naming the first unusable server and setting.
    """
    if not isinstance(servers, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance] - run-time check of untyped settings
        raise ConfigurationError("MCP servers must be a mapping of name to settings")
    inner = servers.get("mcpServers")
    if isinstance(inner, Mapping) and len(servers) == 1:
        servers = inner  # pyright: ignore[reportUnknownVariableType]
    return [parse_server(name, spec) for name, spec in servers.items()]  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
