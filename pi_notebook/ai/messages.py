"""Conversation messages: what a model sees and what it answers.

Three roles, as in Pi: ``user``, ``assistant`` (text and tool-call parts, a stop reason,
token usage) and ``toolResult`` (the outcome of one tool call). Content parts are
``TextContent``, ``ImageContent`` (tool results only, as in Pi) and ``ToolCall``; code that
reads content also accepts plain dicts of the same shape (see :func:`part_text`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, cast

__all__ = [
    "AssistantContent",
    "AssistantMessage",
    "ContentPart",
    "ImageContent",
    "Message",
    "ResultContent",
    "StopReason",
    "TextContent",
    "ToolCall",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
    "content_text",
    "now_ms",
    "part_text",
    "to_result_parts",
    "to_text_parts",
]

StopReason: TypeAlias = Literal["stop", "length", "toolUse", "error", "aborted"]


def now_ms() -> int:
    return int(time.time() * 1000)


# Typed names of the builtins for ``default_factory`` (a generic alias such as
# ``list[ToolCall]`` is typed too, but calling it costs eight times what ``list()`` does, and
# every message makes one).
_new_list = cast("Callable[[], list[Any]]", list)
_new_dict = cast("Callable[[], dict[str, Any]]", dict)


@dataclass(kw_only=True)
class TextContent:
    """A text part of a message or a tool result."""

    text: str
    type: Literal["text"] = "text"


@dataclass(kw_only=True)
class ImageContent:
    """An image in a tool result: ``data`` is base64, ``mime_type`` e.g. ``image/png``.

    Providers send it to the model as an image (Anthropic inside the ``tool_result`` block,
    OpenAI chat in a user message after the tool messages); text readers skip it.
    """

    data: str
    mime_type: str
    type: Literal["image"] = "image"

    @property
    def size(self) -> int:
        """The decoded size in bytes (estimated from the base64 length)."""
        data = self.data.rstrip("=")
        return len(data) * 3 // 4


@dataclass(kw_only=True)
class ToolCall:
    """A tool call as the model produced it.

    ``arguments`` is exactly what the model sent, parsed from JSON; it is normally a
    dict but may be anything. When the provider's JSON could not be parsed,
    ``arguments`` is ``{}`` and ``parse_error`` says why; the call then ends as an
    error result the model can read, and nothing runs.
    """

    id: str
    name: str
    arguments: Any = field(default_factory=_new_dict)
    parse_error: str | None = None
    type: Literal["toolCall"] = "toolCall"


ContentPart: TypeAlias = TextContent
ResultContent: TypeAlias = TextContent | ImageContent
AssistantContent: TypeAlias = TextContent | ToolCall


@dataclass(kw_only=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )


@dataclass(kw_only=True)
class UserMessage:
    """The user's prompt, or a message an extension injected for a prompt.

    ``custom_type`` is ``None`` for what the user typed; a ``before_agent_start`` handler's
    injected message carries a name for its kind (e.g. ``"notebook_context"``), so a UI can
    tell the two apart. Providers send both as user messages.
    """

    content: str | list[TextContent]
    custom_type: str | None = None
    timestamp: int = field(default_factory=now_ms)
    role: Literal["user"] = "user"


@dataclass(kw_only=True)
class AssistantMessage:
    content: list[AssistantContent] = field(default_factory=_new_list)
    stop_reason: StopReason = "stop"
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    provider: str = ""
    error_message: str | None = None
    timestamp: int = field(default_factory=now_ms)
    role: Literal["assistant"] = "assistant"

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.content if isinstance(p, TextContent))

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [p for p in self.content if isinstance(p, ToolCall)]


@dataclass(kw_only=True)
class ToolResultMessage:
    tool_call_id: str
    tool_name: str
    content: list[ResultContent] = field(default_factory=_new_list)
    details: Any = None
    is_error: bool = False
    usage: Usage | None = None
    added_tool_names: list[str] | None = None
    timestamp: int = field(default_factory=now_ms)
    role: Literal["toolResult"] = "toolResult"


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage


def part_text(part: Any) -> str:
    """The text of a content part, a ``TextContent`` or a dict ``{"type": "text", ...}``."""
    if isinstance(part, TextContent):
        return part.text
    if isinstance(part, dict) and part.get("type") == "text":  # pyright: ignore[reportUnknownMemberType]
        return str(part.get("text", ""))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    return ""


def content_text(content: Any) -> str:
    """All text in a message's or result's content, joined by newlines."""
    if isinstance(content, str):
        return content
    if not content:
        return ""
    return "\n".join(t for t in (part_text(p) for p in content) if t)


def to_text_parts(content: Any) -> list[TextContent]:
    """Normalise content (a string, or parts as objects or plain dicts) to TextContent parts."""
    if content is None:
        return []
    if isinstance(content, str):
        return [TextContent(text=content)]
    parts: list[TextContent] = []
    for part in content:
        if isinstance(part, TextContent):
            parts.append(part)
        else:
            parts.append(TextContent(text=part_text(part)))
    return parts


def _image_part(part: Any) -> ImageContent | None:
    if isinstance(part, ImageContent):
        return part
    if isinstance(part, dict) and part.get("type") == "image":  # pyright: ignore[reportUnknownMemberType]
        data = part.get("data")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        mime = part.get("mime_type") or part.get("mimeType")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if isinstance(data, str) and isinstance(mime, str):
            return ImageContent(data=data, mime_type=mime)
    return None


def to_result_parts(content: Any) -> list[ResultContent]:
    """Like :func:`to_text_parts`, but images (``ImageContent`` or ``{"type": "image",
    "data", "mime_type"}``) stay images: the content of a tool result."""
    if content is None or isinstance(content, str):
        return list(to_text_parts(content))
    parts: list[ResultContent] = []
    for part in content:
        image = _image_part(part)
        parts.append(image if image is not None else to_text_parts([part])[0])
    return parts
