"""The agent loop: ask the model, run the tool calls it made, repeat.

A port of Pi's agent loop. The tool calls of each answer run as one batch in
:mod:`.tool_calls`, where every failure becomes an error result the model can read (S30).
A model failure ends the run with an assistant message whose stop reason is ``error``
(C33), never an exception out of ``prompt()``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

from ..ai.abort import AbortSignal
from ..ai.events import AssistantMessageEvent, DoneEvent, ErrorEvent, StartEvent
from ..ai.messages import AssistantMessage, Message, ToolResultMessage
from ..ai.model import Context, Model
from ..ai.payload import accepts_before_request, blocked_text, check_request, context_payload
from .common import (
    ABORTED_TEXT,
    EmitFn,
    LoopConfig,
    exception_text,
    is_own_cancellation,
    maybe_await,
    wanted,
)
from .events import (
    AgentEndEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from .tool_calls import execute_batch, fail_truncated
from .types import AgentContext

__all__ = ["EmitFn", "LoopConfig", "maybe_await", "run_agent_loop"]

log = logging.getLogger(__name__)

_YIELD_EVERY_S = 0.01
"""Longest the loop reads a model stream without letting other tasks run."""


async def _close_stream(stream: Any) -> None:
    """Close a provider stream the loop stopped reading, so its cleanup runs now."""
    aclose = getattr(stream, "aclose", None)
    if aclose is None:
        return
    try:
        await aclose()
    except Exception:
        log.exception("closing the model stream failed")


async def run_agent_loop(
    prompts: Sequence[Message],
    messages: list[Message],
    config: LoopConfig,
    signal: AbortSignal,
    emit: EmitFn,
) -> None:
    """Run one agent run. ``messages`` is the history; new messages are appended to it."""
    await emit(AgentStartEvent())
    await emit(TurnStartEvent())
    for prompt in prompts:
        messages.append(prompt)
        await emit(MessageStartEvent(message=prompt))
        await emit(MessageEndEvent(message=prompt))

    first_turn = True
    while True:
        if not first_turn and wanted(config, "turn_start"):
            await emit(TurnStartEvent())
        first_turn = False

        system_prompt, tools = config.get_turn_state()
        context = AgentContext(system_prompt=system_prompt, messages=messages, tools=list(tools))
        message = await _stream_assistant(context, config, signal, emit)
        messages.append(message)
        if message.stop_reason in ("error", "aborted"):
            await emit(TurnEndEvent(message=message, tool_results=[]))
            break

        calls = message.tool_calls
        results: list[ToolResultMessage] = []
        terminate = False
        if calls:
            if message.stop_reason == "length":
                outcomes = await fail_truncated(calls, emit)
            else:
                outcomes = await execute_batch(context, message, calls, config, signal, emit)
            terminate = bool(outcomes) and all(o.result.terminate for o in outcomes)
            results = [o.message for o in outcomes if o.message is not None]
            messages.extend(results)
        if wanted(config, "turn_end"):
            await emit(TurnEndEvent(message=message, tool_results=results))
        if not calls or terminate or signal.aborted:
            break
    await emit(AgentEndEvent(messages=list(messages)))


def _failed_message(
    model: Model, stop_reason: Literal["aborted", "error"], text: str
) -> AssistantMessage:
    return AssistantMessage(
        stop_reason=stop_reason, model=model.id, provider=model.provider, error_message=text
    )


async def _emit_failed(message: AssistantMessage, emit: EmitFn) -> AssistantMessage:
    await emit(MessageStartEvent(message=message))
    await emit(MessageEndEvent(message=message))
    return message


async def _request_messages(
    messages: list[Message], config: LoopConfig, signal: AbortSignal
) -> list[Message]:
    """The messages of one request: the history, or what ``transform_context`` made of it."""
    if config.transform_context is None:
        return messages
    transformed = await config.transform_context(messages, signal)
    if not isinstance(transformed, list):
        raise TypeError(f"transform_context returned {type(transformed).__name__}, not a list")
    return transformed


async def _stream_assistant(
    context: AgentContext, config: LoopConfig, signal: AbortSignal, emit: EmitFn
) -> AssistantMessage:
    """Ask the model once: its answer as message events, and the final message (C33: a
    failure is a message whose stop reason is ``error`` or ``aborted``, never a raise)."""
    model = config.model
    if signal.aborted:
        return await _emit_failed(_failed_message(model, "aborted", ABORTED_TEXT), emit)
    opened = await _open_stream(context, config, signal)
    if isinstance(opened, str):
        return await _emit_failed(_failed_message(model, "error", opened), emit)
    started, final = await _read_stream(opened, config, signal, emit)
    if final is None:
        final = _failed_message(
            model,
            "aborted" if signal.aborted else "error",
            "The model stream ended without a final message.",
        )
    if not started:
        await emit(MessageStartEvent(message=final))
    await emit(MessageEndEvent(message=final))
    return final


async def _open_stream(
    context: AgentContext, config: LoopConfig, signal: AbortSignal
) -> AsyncIterator[AssistantMessageEvent] | str:
    """The model's stream for this request, or why the request could not be made (the text
    of the failed message): a tool schema that cannot be built, a raising
    ``transform_context``, or a ``before_request`` hook that blocks the neutral payload."""
    model = config.model
    try:
        schemas = [t.tool_schema() for t in context.tools]
    except Exception as exc:  # a tool whose schema cannot be built must not crash the run
        return f"Could not build the tool schemas: {exception_text(exc)}"
    try:
        messages = (
            context.messages
            if config.transform_context is None
            else await _request_messages(context.messages, config, signal)
        )
    except Exception as exc:
        return f"Could not prepare the model request: {exception_text(exc)}"
    request = Context(system_prompt=context.system_prompt, messages=messages, tools=schemas)
    hook = config.before_request
    if hook is not None and not accepts_before_request(model):
        # The model cannot show its own payload: check the neutral form of the request here.
        reason = await check_request(hook, context_payload(model, request))
        if reason is not None:
            return blocked_text(reason)
        hook = None
    if hook is None:
        return model.stream(request, signal=signal)
    # The model calls the hook with its own payload, right before sending.
    return model.stream(request, signal=signal, before_request=hook)  # pyright: ignore[reportCallIssue]


async def _read_stream(
    stream: AsyncIterator[AssistantMessageEvent],
    config: LoopConfig,
    signal: AbortSignal,
    emit: EmitFn,
) -> tuple[bool, AssistantMessage | None]:
    """Read the model's stream into message events; returns whether it started and its final
    message (``None`` if it ended without one). A raising stream ends as a failed message."""
    started = False
    final: AssistantMessage | None = None
    clock = asyncio.get_running_loop().time
    turn_at = clock() + _YIELD_EVERY_S
    try:
        async for event in stream:
            if clock() >= turn_at:
                # A stream whose chunks are all at hand (buffered, or a model that never
                # awaits) would hold the event loop until its last chunk: give the other
                # tasks (the kernel's UI, a timer, another session) their turn.
                await asyncio.sleep(0)
                turn_at = clock() + _YIELD_EVERY_S
            if isinstance(event, StartEvent):
                started = True
                if wanted(config, "message_start"):
                    await emit(MessageStartEvent(message=event.partial))
            elif isinstance(event, DoneEvent):
                final = event.message
                break
            elif isinstance(event, ErrorEvent):
                final = event.error
                break
            elif started and wanted(config, "message_update"):
                await emit(MessageUpdateEvent(message=event.partial, assistant_message_event=event))
    except (Exception, asyncio.CancelledError) as exc:  # C33: a message, not a crash
        if is_own_cancellation(exc):
            raise
        final = _failed_message(
            config.model,
            "aborted" if signal.aborted else "error",
            f"Model request failed: {exception_text(exc)}",
        )
    finally:
        await _close_stream(stream)
    return started, final
