"""The notebook side of the MCP client: ``%pi_mcp`` and the ``PiNotebook.mcp_servers`` setting.

The servers a notebook session uses are a mapping ``{name: settings}`` (see
:mod:`pi_notebook.mcp.config`). They start from ``pi_notebook_mcp.json`` in the Jupyter config
directory (``jupyter --config-dir``; the desktop format ``{"mcpServers": {...}}``), and
``%config PiNotebook.mcp_servers = {...}`` adds to or overrides them by name. ``%pi_mcp add`` and
``%pi_mcp remove`` change the kernel's setting (not the file); the session is rebuilt with them.

What does not belong here: IPython magics classes and the session rebuild (the notebook
package calls :func:`run_mcp_magic` with them).
"""

from __future__ import annotations

import argparse
import json
import shlex
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd  # pyright: ignore[reportMissingTypeStubs]

from pi_notebook.errors import ConfigurationError
from pi_notebook.mcp.config import parse_server, parse_servers
from pi_notebook.mcp.extension import McpExtension

__all__ = [
    "CONFIG_FILE",
    "MCP_SOURCE",
    "config_file",
    "file_servers",
    "initial_servers",
    "notebook_extension",
    "parse_add",
    "run_mcp_magic",
    "servers_frame",
]

MCP_SOURCE = "<mcp>"
"""The extension path of the notebook's MCP extension (each tool's origin names its server)."""

CONFIG_FILE = "pi_notebook_mcp.json"
USAGE = (
    "%pi_mcp add NAME [--trusted] [--timeout S] [--env KEY=VALUE]... -- COMMAND ARGS...  |  "
    "%pi_mcp add NAME --url URL [--header NAME=VALUE]...  |  %pi_mcp list  |  %pi_mcp remove NAME"
)


def config_file() -> Path:
    """``pi_notebook_mcp.json`` in the Jupyter config directory."""
    from jupyter_core.paths import jupyter_config_dir

    return Path(jupyter_config_dir()) / CONFIG_FILE


def file_servers(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """The servers in the config file (``{}`` when there is none).

    Raises:
        ConfigurationError: the file is not JSON or a server in it is unusable; the message
            names the file.
    """
    path = path or config_file()
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        configs = parse_servers(data)
    except (ValueError, ConfigurationError) as exc:
        raise ConfigurationError(f"{path}: {exc}") from exc
    return {c.name: c.as_dict() for c in configs}


def initial_servers(setting: Mapping[str, Any], path: Path | None = None) -> dict[str, Any]:
    """The file's servers, then the setting's (a name in both takes the setting's)."""
    return {**file_servers(path), **dict(setting)}


_file_read: weakref.WeakSet[Any] = weakref.WeakSet()


def notebook_extension(config: Any) -> McpExtension | None:
    """The MCP extension for the notebook settings' ``mcp_servers``, or ``None`` without servers.

    The first call for a settings object merges in the config file's servers (a name already
    in the setting keeps the setting's); a file that cannot be used is reported in one line and
    left out.

    Raises:
        ConfigurationError: a configured server is unusable (the message names it).
    """
    if config not in _file_read:
        _file_read.add(config)
        try:
            merged = initial_servers(config.mcp_servers)
        except ConfigurationError as exc:
            print(f"pi_notebook: MCP servers not read: {exc}")
        else:
            if merged != dict(config.mcp_servers):
                config.mcp_servers = merged
    if not config.mcp_servers:
        return None
    return McpExtension(dict(config.mcp_servers), extension_path=MCP_SOURCE)


def _pairs(values: list[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        key, sep, item = value.partition("=")
        if not sep or not key:
            raise ConfigurationError(f"{what} {value!r}: write KEY=VALUE")
        out[key] = item
    return out


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would exit the kernel
        raise ConfigurationError(f"{message}. Usage: {USAGE}")


def parse_add(line: str) -> tuple[str, dict[str, Any]]:
    """``NAME [options] -- COMMAND ARGS...`` (or ``NAME --url URL``) as a name and settings.

    Raises:
        ConfigurationError: the line or the resulting settings are unusable.
    """
    words = shlex.split(line)
    command: list[str] = []
    if "--" in words:
        at = words.index("--")
        words, command = words[:at], words[at + 1 :]
    parser = _Parser(prog="%pi_mcp add", add_help=False)
    parser.add_argument("name")
    parser.add_argument("--url")
    parser.add_argument("--trusted", action="store_true")
    parser.add_argument("--timeout", type=float)
    parser.add_argument("--env", action="append", default=[])
    parser.add_argument("--header", action="append", default=[])
    args = parser.parse_args(words)
    if bool(command) == bool(args.url):
        raise ConfigurationError(f"give either '-- COMMAND ARGS...' or '--url URL'. Usage: {USAGE}")
    spec: dict[str, Any] = {}
    if command:
        spec["command"], spec["args"] = command[0], command[1:]
        if args.env:
            spec["env"] = _pairs(args.env, "--env")
    else:
        spec["url"] = args.url
        if args.header:
            spec["headers"] = _pairs(args.header, "--header")
    if args.trusted:
        spec["trusted"] = True
    if args.timeout is not None:
        spec["timeout"] = args.timeout
    config = parse_server(args.name, spec)  # validate now, with the same messages as a file
    return config.name, config.as_dict()


def servers_frame(servers: Mapping[str, Any], extension: McpExtension | None) -> pd.DataFrame:
    """One row per configured server: transport, target, trust, status, tools."""
    rows: list[dict[str, Any]] = []
    configs = {c.name: c for c in parse_servers(servers)} if servers else {}
    for name, config in configs.items():
        tools = sorted(
            t.name for t in (extension.tools.values() if extension else ()) if t.server == name
        )
        if extension is not None and name in extension.failures:
            status = "failed: " + extension.failures[name]
        elif extension is not None and name in extension.connections:
            status = "running" if extension.connections[name].connected else "stopped"
        else:
            status = "not started"
        rows.append(
            {
                "name": name,
                "transport": config.transport,
                "target": config.target,
                "trusted": config.trusted,
                "status": status,
                "tools": ", ".join(tools),
            }
        )
    columns = ["name", "transport", "target", "trusted", "status", "tools"]
    return pd.DataFrame(rows, columns=columns)


def run_mcp_magic(
    line: str,
    servers: dict[str, Any],
    *,
    apply: Callable[[dict[str, Any]], None],
    extension: Callable[[], McpExtension | None],
) -> pd.DataFrame | str:
    """Do what ``%pi_mcp LINE`` asks.

    Args:
        line: the magic's argument line.
        servers: the current setting (not changed in place).
        apply: rebuilds the session with new settings.
        extension: the running session's MCP extension, if any (after ``apply``).

    Returns:
        ``list``: the servers frame; ``add`` / ``remove``: one line saying what happened.

    Raises:
        ConfigurationError: bad input; the message says what to type.
    """
    verb, _, rest = line.strip().partition(" ")
    if verb in ("", "list"):
        return servers_frame(servers, extension())
    if verb == "add":
        name, spec = parse_add(rest)
        apply({**servers, name: spec})
        ext = extension()
        if ext is not None and name in ext.failures:
            return f"Added MCP server {name!r}, but it did not start: {ext.failures[name]}"
        tools = sorted(t.name for t in (ext.tools.values() if ext else ()) if t.server == name)
        if not tools:
            return (
                f"Added MCP server {name!r}; it starts with the next run "
                "(%pi_mcp list shows its tools then)."
            )
        return f"Added MCP server {name!r}: tools {', '.join(tools)}."
    if verb == "remove":
        name = rest.strip()
        if name not in servers:
            known = ", ".join(sorted(servers)) or "none"
            raise ConfigurationError(f"no MCP server named {name!r} (configured: {known})")
        apply({k: v for k, v in servers.items() if k != name})
        return f"Removed MCP server {name!r} and its tools."
    raise ConfigurationError(f"unknown action {verb!r}. Usage: {USAGE}")
