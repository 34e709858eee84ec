"""Events the agent emits while it runs (Pi's AgentEvent), in snake_case.

Order for one successful tool call: agent_start, turn_start, message_start/end
(user), message_start, message_update..., message_end (assistant),
tool_execution_start, tool_execution_update..., tool_execution_end,
message_start/end (toolResult), turn_end, then the next turn or agent_end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ..ai.events import AssistantMessageEvent
from ..ai.messages import AssistantMessage, Message, ToolResultMessage
from .types import ToolResult

__all__ = [
    "AgentEndEvent",
    "AgentEvent",
    "AgentStartEvent",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "ToolExecutionEndEvent",
    "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent",
    "TurnEndEvent",
    "TurnStartEvent",
]


@dataclass(kw_only=True)
class AgentStartEvent:
    type: Literal["agent_start"] = "agent_start"


@dataclass(kw_only=True)
class AgentEndEvent:
    messages: list[Message] = field(default_factory=list)
    type: Literal["agent_end"] = "agent_end"


@dataclass(kw_only=True)
class TurnStartEvent:
    type: Literal["turn_start"] = "turn_start"


@dataclass(kw_only=True)
class TurnEndEvent:
    message: AssistantMessage
    tool_results: list[ToolResultMessage] = field(default_factory=list)
    type: Literal["turn_end"] = "turn_end"


@dataclass(kw_only=True)
class MessageStartEvent:
    message: Message
    type: Literal["message_start"] = "message_start"


@dataclass(kw_only=True)
class MessageUpdateEvent:
    message: AssistantMessage
    assistant_message_event: AssistantMessageEvent
    type: Literal["message_update"] = "message_update"


@dataclass(kw_only=True)
class MessageEndEvent:
    message: Message
    type: Literal["message_end"] = "message_end"


@dataclass(kw_only=True)
class ToolExecutionStartEvent:
    """``args`` are the raw arguments exactly as the model sent them (C13)."""

    tool_call_id: str
    tool_name: str
    args: Any
    type: Literal["tool_execution_start"] = "tool_execution_start"


@dataclass(kw_only=True)
class ToolExecutionUpdateEvent:
    tool_call_id: str
    tool_name: str
    args: Any
    partial_result: ToolResult
    type: Literal["tool_execution_update"] = "tool_execution_update"


@dataclass(kw_only=True)
class ToolExecutionEndEvent:
    """``result`` and ``is_error`` are final: after every hook and patch (C24)."""

    tool_call_id: str
    tool_name: str
    result: ToolResult
    is_error: bool
    type: Literal["tool_execution_end"] = "tool_execution_end"


AgentEvent: TypeAlias = (
    AgentStartEvent
    | AgentEndEvent
    | TurnStartEvent
    | TurnEndEvent
    | MessageStartEvent
    | MessageUpdateEvent
    | MessageEndEvent
    | ToolExecutionStartEvent
    | ToolExecutionUpdateEvent
    | ToolExecutionEndEvent
)
