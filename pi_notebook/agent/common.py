"""What the loop and the tool-call runner share: configuration, callbacks, error texts."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..ai.abort import AbortError, AbortSignal
from ..ai.messages import Message, TextContent
from ..ai.model import Model, RequestHook
from .events import AgentEvent
from .types import AfterToolCallHook, AgentTool, BeforeToolCallHook, ExecutionMode, ToolResult

__all__ = [
    "ABORTED_TEXT",
    "EmitFn",
    "LoopConfig",
    "TransformContext",
    "error_result",
    "exception_text",
    "is_own_cancellation",
    "maybe_await",
    "wanted",
]

T = TypeVar("T")
EmitFn = Callable[[AgentEvent], Awaitable[None]]

ABORTED_TEXT = "Operation aborted"

TransformContext = Callable[[list[Message], AbortSignal], Awaitable[list[Message]]]
"""``await transform(messages, signal)`` before each model request: the messages to send for
that request only (the history is not changed). If it raises, the request is not made and
the run ends with an error message."""


@dataclass(kw_only=True)
class LoopConfig:
    """How the loop runs. ``get_turn_state`` is read before every model request, so a
    change of tools or system prompt made during a run reaches the next request (C10).

    Host hooks around each model request (the core knows nothing of who fills them):
    ``transform_context`` rewrites the messages of that request; ``before_request`` sees
    the exact payload about to be sent and may block it (see
    :data:`~pi_notebook.ai.model.RequestHook`).
    """

    model: Model
    get_turn_state: Callable[[], tuple[str, Sequence[AgentTool[Any]]]]
    before_tool_call: BeforeToolCallHook | None = None
    after_tool_call: AfterToolCallHook | None = None
    tool_execution: ExecutionMode = "parallel"
    transform_context: TransformContext | None = None
    before_request: RequestHook | None = None
    wants: Callable[[str], bool] | None = None
    """``wants(event_type)``: whether anyone listens to that event type now (``None``: all
    are wanted). An event nobody wants is neither built nor emitted."""


def wanted(config: LoopConfig, event_type: str) -> bool:
    """Whether an event of ``event_type`` has a listener (asked right before emitting it)."""
    wants = config.wants
    return wants is None or wants(event_type)


async def maybe_await(value: Awaitable[T] | T) -> T:
    """Accept sync and async callbacks alike."""
    # ``None`` first: most callbacks return it, and isawaitable's ABC check is slow.
    if value is not None and inspect.isawaitable(value):
        return await value
    return value


def error_result(text: str) -> ToolResult:
    return ToolResult(content=[TextContent(text=text)], details={})


def is_own_cancellation(exc: BaseException) -> bool:
    """True when ``exc`` cancels the running task itself, so it must propagate.

    A ``CancelledError`` that a tool, hook or provider lets out of work *it* cancelled
    (the asyncio way to honour an abort signal) is a failure like any other: it becomes
    an error result or message, never a crash of the run.
    """
    if not isinstance(exc, asyncio.CancelledError):
        return False
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


def exception_text(exc: BaseException) -> str:
    if isinstance(exc, AbortError | asyncio.CancelledError):
        return str(exc) or ABORTED_TEXT
    return str(exc) or type(exc).__name__
