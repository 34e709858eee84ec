"""The streaming protocol a model emits while it answers (Pi's AssistantMessageEvent).

Every event carries ``partial``, the assistant message as built so far. A stream ends
with exactly one ``DoneEvent`` or ``ErrorEvent`` carrying the final message; a model
never raises for a failure it can describe, it ends with an ``ErrorEvent``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from .messages import AssistantMessage, TextContent, ToolCall

__all__ = [
    "AssistantMessageEvent",
    "DoneEvent",
    "ErrorEvent",
    "RetryEvent",
    "StartEvent",
    "TextDeltaEvent",
    "TextEndEvent",
    "TextStartEvent",
    "ToolCallDeltaEvent",
    "ToolCallEndEvent",
    "ToolCallStartEvent",
]


@dataclass(kw_only=True)
class StartEvent:
    partial: AssistantMessage
    type: Literal["start"] = "start"


@dataclass(kw_only=True)
class TextStartEvent:
    content_index: int
    partial: AssistantMessage
    type: Literal["text_start"] = "text_start"


@dataclass(kw_only=True)
class TextDeltaEvent:
    content_index: int
    delta: str
    partial: AssistantMessage
    type: Literal["text_delta"] = "text_delta"


@dataclass(kw_only=True)
class TextEndEvent:
    content_index: int
    content: TextContent
    partial: AssistantMessage
    type: Literal["text_end"] = "text_end"


@dataclass(kw_only=True)
class ToolCallStartEvent:
    content_index: int
    partial: AssistantMessage
    type: Literal["toolcall_start"] = "toolcall_start"


@dataclass(kw_only=True)
class ToolCallDeltaEvent:
    """A chunk of a tool call's JSON arguments, as the provider streamed it."""

    content_index: int
    delta: str
    partial: AssistantMessage
    type: Literal["toolcall_delta"] = "toolcall_delta"


@dataclass(kw_only=True)
class ToolCallEndEvent:
    content_index: int
    tool_call: ToolCall
    partial: AssistantMessage
    type: Literal["toolcall_end"] = "toolcall_end"


@dataclass(kw_only=True)
class RetryEvent:
    """The provider hit a transient failure (rate limit, 5xx, dropped connection) and
    will try again after ``delay_s``. Emitted after ``start``, so it shows in the UI."""

    attempt: int
    max_attempts: int
    delay_s: float
    error: str
    partial: AssistantMessage
    type: Literal["retry"] = "retry"


@dataclass(kw_only=True)
class DoneEvent:
    reason: Literal["stop", "length", "toolUse"]
    message: AssistantMessage
    type: Literal["done"] = "done"


@dataclass(kw_only=True)
class ErrorEvent:
    reason: Literal["error", "aborted"]
    error: AssistantMessage
    type: Literal["error"] = "error"


AssistantMessageEvent: TypeAlias = (
    StartEvent
    | TextStartEvent
    | TextDeltaEvent
    | TextEndEvent
    | ToolCallStartEvent
    | ToolCallDeltaEvent
    | ToolCallEndEvent
    | RetryEvent
    | DoneEvent
    | ErrorEvent
)
