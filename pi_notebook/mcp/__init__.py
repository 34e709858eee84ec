"""MCP both ways: any MCP server's tools as governed tools, and the governed database tool
for any MCP client.

* :func:`mcp_extension` (client): ``create_agent_session(..., extensions=[mcp_extension(
  {"files": {"command": "npx", "args": [...]}})])`` registers each server tool as
  ``mcp__<server>__<tool>``; approvals, audit and redaction apply as to any tool.
* ``python -m pi_notebook.mcp serve --database-url URL`` (server): ``query_database`` and
  ``describe_database`` for desktop clients, Jupyter AI or any MCP client; writes are approved
  through MCP elicitation, bound to the statement's hash, and audited.

Needs the ``mcp`` extra (``pip install "pi-notebook[mcp]"``).
"""

from __future__ import annotations

try:
    import mcp as _mcp  # noqa: F401  # pyright: ignore[reportUnusedImport] - fails early without the extra
except ImportError as exc:  # pragma: no cover - the extra is installed in development
    raise ImportError('pi_notebook.mcp needs the MCP SDK: pip install "pi-notebook[mcp]"') from exc

from pi_notebook.mcp.config import McpServerConfig, parse_servers
from pi_notebook.mcp.connection import McpConnection
from pi_notebook.mcp.errors import McpError, McpServerUnavailable, McpToolError
from pi_notebook.mcp.extension import McpExtension, McpTool, mcp_extension, tool_name_for

__all__ = [
    # Client extension
    "McpConnection",
    # Errors
    "McpError",
    "McpExtension",
    "McpServerConfig",
    "McpServerUnavailable",
    "McpTool",
    "McpToolError",
    "mcp_extension",
    "parse_servers",
    "tool_name_for",
]
