"""pi_notebook: a governed LLM agent for Jupyter.

``%load_ext pi_notebook`` starts an agent session in the kernel. Tools come from
extensions: modules whose factory receives an :class:`ExtensionAPI` and registers tools
and event handlers. See the README and ``notebooks/`` for the tour.
"""

from __future__ import annotations

from typing import Any

from .agent.types import ToolResult
from .agent.views import CallView
from .ai.abort import AbortController, AbortError, AbortSignal
from .ai.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .errors import PiNotebookError, SessionClosedError
from .extensions import (
    ExtensionAPI,
    ExtensionContext,
    RegisteredTool,
    SourceInfo,
    ToolCallEvent,
    ToolCallEventResult,
    ToolDefinition,
    ToolInfo,
    ToolResultEvent,
    ToolResultEventResult,
    define_tool,
)
from .session import AgentSession, create_agent_session

__version__ = "0.1.0"

__all__ = [
    # Abort
    "AbortController",
    "AbortError",
    "AbortSignal",
    # Sessions
    "AgentSession",
    # Messages
    "AssistantMessage",
    # How a tool shows its calls
    "CallView",
    # Extensions and tools
    "ExtensionAPI",
    "ExtensionContext",
    "ImageContent",
    # Errors
    "PiNotebookError",
    "RegisteredTool",
    "SessionClosedError",
    "SourceInfo",
    "TextContent",
    "ToolCall",
    "ToolCallEvent",
    "ToolCallEventResult",
    "ToolDefinition",
    "ToolInfo",
    "ToolResult",
    "ToolResultEvent",
    "ToolResultEventResult",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
    "__version__",
    "create_agent_session",
    "define_tool",
    # IPython
    "load_ipython_extension",
    "unload_ipython_extension",
]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext pi_notebook``: start a session in this kernel."""
    from .notebook import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext pi_notebook``: close the session and remove the magics."""
    from .notebook import unload_ipython_extension as unload

    unload(ipython)
