"""Make a conversation safe to replay to a provider API.

Both chat APIs reject a history in which an assistant tool call has no matching tool
result, or a result points at no call. A failed or aborted assistant turn may hold
half-streamed tool calls, so (as Pi does) it is left out together with any result that
refers to it, and a call that never got a result is given an explicit error result.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..messages import (
    AssistantMessage,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = ["replayable"]

MISSING_RESULT = "No result was recorded for this tool call."


def replayable(messages: Sequence[Message]) -> list[Message]:
    """The messages to send: failed turns dropped, every tool call paired with a result."""
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
    return out
