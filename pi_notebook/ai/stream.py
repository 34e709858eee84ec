"""Build a streamed assistant message part by part and emit protocol events for it.

Every provider (scripted, offline, OpenAI, Anthropic) turns its own wire format into
calls on an :class:`AssistantStream`, so the event protocol lives in one place.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import orjson

from .events import (
    AssistantMessageEvent,
    DoneEvent,
    ErrorEvent,
    StartEvent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from .messages import AssistantMessage, StopReason, TextContent, ToolCall, Usage

__all__ = [
    "MAX_TOOL_ARGUMENTS",
    "MAX_TOOL_ARGUMENTS_ENV",
    "AssistantStream",
    "max_tool_arguments",
    "parse_tool_arguments",
]

MAX_TOOL_ARGUMENTS = 1 << 20
"""Most characters of one tool call's JSON arguments (1 MiB of ASCII text). A call past it
is refused before its arguments are parsed: it ends as a tool error that names the limit,
and the text past the limit is not kept. ``PI_NOTEBOOK_MAX_TOOL_ARGUMENTS`` sets another."""
MAX_TOOL_ARGUMENTS_ENV = "PI_NOTEBOOK_MAX_TOOL_ARGUMENTS"


def max_tool_arguments() -> int:
    """The limit in force: ``PI_NOTEBOOK_MAX_TOOL_ARGUMENTS`` (a positive integer of
    characters) or :data:`MAX_TOOL_ARGUMENTS` (also when the variable is not such a number)."""
    raw = os.environ.get(MAX_TOOL_ARGUMENTS_ENV)
    if raw:
        try:
            value = int(raw.strip().replace("_", ""))
        except ValueError:
            return MAX_TOOL_ARGUMENTS
        if value > 0:
            return value
    return MAX_TOOL_ARGUMENTS


_LONG_NUMBER = re.compile(r"[0-9]{19}")
"""Nineteen digits in a row: perhaps an integer past 64 bits, which orjson would read as a
float (losing digits) where the json module keeps it exact. Such texts go to the json module."""


def parse_tool_arguments(raw: str) -> tuple[Any, str | None]:
    """Parse a tool call's JSON arguments: ``(arguments, None)`` or ``({}, error)``."""
    if _LONG_NUMBER.search(raw) is None:
        try:  # orjson parses a call's arguments several times faster than the json module
            return orjson.loads(raw), None
        except orjson.JSONDecodeError:
            pass  # empty text, NaN, a lone surrogate...: the json module decides, as before
    if raw.strip() == "":
        return {}, None
    try:
        return json.loads(raw), None
    except ValueError as exc:
        return {}, f"Invalid JSON in tool arguments: {exc}"


class AssistantStream:
    """Accumulates one assistant message and returns the event for each step.

    ``max_arguments`` bounds each tool call's arguments text (default:
    :func:`max_tool_arguments`); past it, the call's deltas are dropped (their events carry
    an empty delta) and the call ends unparsed with a ``parse_error`` naming the limit.
    """

    def __init__(self, *, model: str, provider: str, max_arguments: int | None = None) -> None:
        self.message = AssistantMessage(model=model, provider=provider)
        self._open_text: int | None = None
        self._tool_json: dict[int, list[str]] = {}
        self._tool_size: dict[int, int] = {}
        self._max_arguments = max_arguments if max_arguments is not None else max_tool_arguments()

    def _snapshot(self) -> AssistantMessage:
        # Listeners may keep partials; give each event its own shallow copy. Built
        # directly: copy.copy's generic path costs several times more, once per chunk.
        snap = object.__new__(AssistantMessage)
        snap.__dict__.update(self.message.__dict__)
        snap.content = list(self.message.content)
        return snap

    def start(self) -> AssistantMessageEvent:
        return StartEvent(partial=self._snapshot())

    # -- text ---------------------------------------------------------------
    def text_start(self) -> AssistantMessageEvent:
        self.message.content.append(TextContent(text=""))
        self._open_text = len(self.message.content) - 1
        return TextStartEvent(content_index=self._open_text, partial=self._snapshot())

    def text_delta(self, delta: str) -> AssistantMessageEvent:
        assert self._open_text is not None, "text_delta before text_start"
        part = self.message.content[self._open_text]
        assert isinstance(part, TextContent)
        self.message.content[self._open_text] = TextContent(text=part.text + delta)
        return TextDeltaEvent(content_index=self._open_text, delta=delta, partial=self._snapshot())

    def text_end(self) -> AssistantMessageEvent:
        assert self._open_text is not None, "text_end before text_start"
        index, self._open_text = self._open_text, None
        part = self.message.content[index]
        assert isinstance(part, TextContent)
        return TextEndEvent(content_index=index, content=part, partial=self._snapshot())

    @property
    def text_open(self) -> bool:
        return self._open_text is not None

    # -- tool calls ---------------------------------------------------------
    def tool_call_start(self, *, id: str, name: str) -> tuple[int, AssistantMessageEvent]:
        self.message.content.append(ToolCall(id=id, name=name, arguments={}))
        index = len(self.message.content) - 1
        self._tool_json[index] = []
        self._tool_size[index] = 0
        return index, ToolCallStartEvent(content_index=index, partial=self._snapshot())

    def tool_call_delta(self, index: int, delta: str) -> AssistantMessageEvent:
        size = self._tool_size.get(index, 0) + len(delta)
        self._tool_size[index] = size
        if size <= self._max_arguments:
            self._tool_json[index].append(delta)
        else:  # past the limit: keep nothing more, and hand listeners nothing to keep
            self._tool_json[index] = []
            delta = ""
        return ToolCallDeltaEvent(content_index=index, delta=delta, partial=self._snapshot())

    def tool_call_set(self, index: int, *, id: str | None = None, name: str | None = None) -> None:
        """Fill in an id or name that arrived after the call started."""
        call = self.message.content[index]
        assert isinstance(call, ToolCall)
        if id:
            call.id = id
        if name:
            call.name = name

    def tool_call_end(self, index: int) -> AssistantMessageEvent:
        call = self.message.content[index]
        assert isinstance(call, ToolCall)
        parts = self._tool_json.pop(index, [])
        size = self._tool_size.pop(index, 0)
        if size > self._max_arguments:
            arguments: Any = {}
            error: str | None = (
                f"Tool arguments too large: {size:,} characters, past the limit of "
                f"{self._max_arguments:,} ({MAX_TOOL_ARGUMENTS_ENV}); they were not read."
            )
        else:
            arguments, error = parse_tool_arguments("".join(parts))
        finished = ToolCall(id=call.id, name=call.name, arguments=arguments, parse_error=error)
        self.message.content[index] = finished
        return ToolCallEndEvent(content_index=index, tool_call=finished, partial=self._snapshot())

    @property
    def open_tool_calls(self) -> list[int]:
        return sorted(self._tool_json)

    # -- end ----------------------------------------------------------------
    def close_open_parts(self) -> list[AssistantMessageEvent]:
        events: list[AssistantMessageEvent] = []
        if self._open_text is not None:
            events.append(self.text_end())
        for index in self.open_tool_calls:
            events.append(self.tool_call_end(index))
        return events

    def set_usage(self, usage: Usage) -> None:
        self.message.usage = usage

    def done(self, reason: StopReason | None = None) -> AssistantMessageEvent:
        if reason is None:
            reason = "toolUse" if self.message.tool_calls else "stop"
        assert reason in ("stop", "length", "toolUse")
        self.message.stop_reason = reason
        return DoneEvent(reason=reason, message=self.message)

    def error(self, message: str, *, aborted: bool = False) -> AssistantMessageEvent:
        self.message.stop_reason = "aborted" if aborted else "error"
        self.message.error_message = message
        return ErrorEvent(reason="aborted" if aborted else "error", error=self.message)
