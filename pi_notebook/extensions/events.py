"""Extension-only events and what their handlers may return.

Handlers of every other event (``tool_execution_*``, ``turn_*``, ``agent_*``,
``message_*``) receive the agent core's event objects unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from ..ai.messages import TextContent

__all__ = [
    "EXTENSION_EVENT_TYPES",
    "ExtensionErrorEvent",
    "SessionShutdownEvent",
    "SessionStartEvent",
    "ToolCallEvent",
    "ToolCallEventResult",
    "ToolResultEvent",
    "ToolResultEventResult",
]

EXTENSION_EVENT_TYPES = frozenset(
    {
        "session_start",
        "session_shutdown",
        "agent_start",
        "agent_end",
        "turn_start",
        "turn_end",
        "message_start",
        "message_update",
        "message_end",
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_end",
        "tool_call",
        "tool_result",
    }
)


@dataclass(kw_only=True)
class ToolCallEvent:
    """Before ``execute``. ``input`` is the validated parameters object that ``execute``
    will receive: changing it in place changes what runs, with no re-validation (S8,
    C16). Rebinding ``event.input`` is seen by later handlers only."""

    tool_call_id: str
    tool_name: str
    input: BaseModel
    type: Literal["tool_call"] = "tool_call"


@dataclass(kw_only=True)
class ToolCallEventResult:
    """Return ``block=True`` to stop the call; ``reason`` becomes its error text."""

    block: bool = False
    reason: str | None = None
    terminate: bool = False


@dataclass(kw_only=True)
class ToolResultEvent:
    """After ``execute`` ran (success or raise). Fields hold the latest patched values."""

    tool_call_id: str
    tool_name: str
    input: BaseModel
    content: list[TextContent]
    details: Any
    is_error: bool
    type: Literal["tool_result"] = "tool_result"


@dataclass(kw_only=True)
class ToolResultEventResult:
    """A patch: fields left ``None`` keep their current value. No ``terminate``."""

    content: list[TextContent] | None = None
    details: Any = None
    is_error: bool | None = None


@dataclass(kw_only=True)
class SessionStartEvent:
    model: str
    active_tools: list[str] = field(default_factory=list[str])
    type: Literal["session_start"] = "session_start"


@dataclass(kw_only=True)
class SessionShutdownEvent:
    type: Literal["session_shutdown"] = "session_shutdown"


@dataclass(kw_only=True)
class ExtensionErrorEvent:
    """What the error listener receives (C32)."""

    extension_path: str
    event: str
    error: str
    type: Literal["extension_error"] = "extension_error"
