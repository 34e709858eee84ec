"""The MCP package's exceptions (all under :class:`pi_notebook.errors.PiNotebookError`)::

    PiNotebookError
    └── McpError                     an MCP server or tool call failed (short text for the model)
        ├── McpServerUnavailable     the server could not be started, stopped, or hung
        └── McpToolError             the server answered, with an error (``isError``)

Configuration problems raise :class:`pi_notebook.errors.ConfigurationError`.
"""

from __future__ import annotations

from pi_notebook.errors import PiNotebookError

__all__ = ["McpError", "McpServerUnavailable", "McpToolError"]


class McpError(PiNotebookError):
    """An MCP server or call failed; the message is short, safe to show the model, and says
    what happens next."""


class McpServerUnavailable(McpError):
    """The server could not be started, stopped during a call, or did not answer in time.

    The connection is dropped; the next call starts the server again.
    """


class McpToolError(McpError):
    """The server answered the call with an error result or a protocol error."""
