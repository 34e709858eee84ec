"""Make a conversation safe to replay to a provider API.

Both chat APIs reject a history in which an assistant tool call has no matching tool
result, or a result points at no call. A failed or aborted assistant turn may hold
half-streamed tool calls, so (as Pi does) it is left out together with any result that
refers to it, and a call that never got a result is given an explicit error result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..messages import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = ["TOOL_IMAGE_OMITTED", "replayable", "without_images"]

MISSING_RESULT = "No result was recorded for this tool call."
TOOL_IMAGE_OMITTED = "(tool image omitted: model does not support images)"
"""What a model without image input reads in place of each image of a tool result (Pi's
words)."""


def replayable(messages: Sequence[Message], *, images: bool = True) -> list[Message]:
    """The messages to send: failed turns dropped, every tool call paired with a result;
    for a model that takes no images (``images=False``), see :func:`without_images`."""
    out: list[Message] = []
    pending: dict[str, ToolCall] = {}
    dropped: set[str] = set()

    def close_pending() -> None:
        for call in pending.values():
            out.append(
                ToolResultMessage(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    content=[TextContent(text=MISSING_RESULT)],
                    is_error=True,
                )
            )
        pending.clear()

    for message in messages:
        if isinstance(message, AssistantMessage):
            close_pending()
            if message.stop_reason in ("error", "aborted"):
                dropped.update(call.id for call in message.tool_calls)
                continue
            out.append(message)
            pending = {call.id: call for call in message.tool_calls}
        elif isinstance(message, ToolResultMessage):
            if message.tool_call_id in dropped:
                continue
            pending.pop(message.tool_call_id, None)
            out.append(message)
        elif isinstance(message, UserMessage):  # pyright: ignore[reportUnnecessaryIsInstance] - unknown roles are dropped
            close_pending()
            out.append(message)
    close_pending()
    return out if images else without_images(out)


def without_images(messages: Sequence[Message]) -> list[Message]:
    """The messages for a model that takes no images (as Pi does for a model whose input is
    text only): each image in a tool result becomes :data:`TOOL_IMAGE_OMITTED`, so the
    model knows one was there and the API is never sent what it would refuse. The
    history itself is not changed."""
    out: list[Message] = []
    for message in messages:
        if isinstance(message, ToolResultMessage) and any(
            isinstance(part, ImageContent) for part in message.content
        ):
            content = [
                TextContent(text=TOOL_IMAGE_OMITTED) if isinstance(part, ImageContent) else part
                for part in message.content
            ]
            message = dataclasses.replace(message, content=content)
        out.append(message)
    return out
