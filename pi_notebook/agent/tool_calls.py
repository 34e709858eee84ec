"""Running one batch of tool calls: prepare, gate, execute, patch, report (S30, C27).

Each call ends as an outcome, never an exception: an unknown tool, bad arguments, a
blocking or raising before-hook, a raising ``execute`` or after-hook, or an abort all
become error results the model can read.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ..ai.abort import AbortSignal
from ..ai.messages import AssistantMessage, ToolCall, ToolResultMessage
from .common import (
    ABORTED_TEXT,
    EmitFn,
    LoopConfig,
    error_result,
    exception_text,
    is_own_cancellation,
    maybe_await,
    wanted,
)
from .events import (
    MessageEndEvent,
    MessageStartEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
)
from .types import (
    AfterToolCallContext,
    AfterToolCallHook,
    AgentContext,
    AgentTool,
    BeforeToolCallContext,
    ToolResult,
)
from .validation import ToolArgumentsError, prepare_and_validate

__all__ = ["ToolCallOutcome", "execute_batch", "fail_truncated"]


@dataclass(kw_only=True)
class ToolCallOutcome:
    tool_call: ToolCall
    result: ToolResult
    is_error: bool
    message: ToolResultMessage | None = None  # set once the result message is emitted


@dataclass(kw_only=True)
class _Prepared:
    tool_call: ToolCall
    tool: AgentTool[Any]
    args: BaseModel


async def fail_truncated(calls: list[ToolCall], emit: EmitFn) -> list[ToolCallOutcome]:
    """C26: the output hit the token limit, so every call's arguments may be cut off."""
    outcomes: list[ToolCallOutcome] = []
    for call in calls:
        await emit(
            ToolExecutionStartEvent(tool_call_id=call.id, tool_name=call.name, args=call.arguments)
        )
        outcome = ToolCallOutcome(
            tool_call=call,
            result=error_result(
                f'Tool call "{call.name}" was not executed: the response hit the output token '
                "limit, so its arguments may be truncated. Re-issue the tool call with "
                "complete arguments."
            ),
            is_error=True,
        )
        await _emit_end(outcome, emit)
        await _emit_result_message(outcome, emit)
        outcomes.append(outcome)
    return outcomes


async def execute_batch(
    context: AgentContext,
    message: AssistantMessage,
    calls: list[ToolCall],
    config: LoopConfig,
    signal: AbortSignal,
    emit: EmitFn,
) -> list[ToolCallOutcome]:
    by_name = {t.name: t for t in context.tools}
    sequential = config.tool_execution == "sequential" or any(
        (tool := by_name.get(c.name)) is not None and tool.execution_mode == "sequential"
        for c in calls
    )
    if sequential:
        return await _run_sequential(context, message, calls, config, signal, emit)
    return await _run_parallel(context, message, calls, config, signal, emit)


async def _run_sequential(
    context: AgentContext,
    message: AssistantMessage,
    calls: list[ToolCall],
    config: LoopConfig,
    signal: AbortSignal,
    emit: EmitFn,
) -> list[ToolCallOutcome]:
    outcomes: list[ToolCallOutcome] = []
    for call in calls:
        await _emit_start(call, config, emit)
        prepared = await _prepare(context, message, call, config, signal)
        if isinstance(prepared, ToolCallOutcome):
            outcome = prepared
        else:
            outcome = await _execute(context, message, prepared, config, signal, emit)
        await _emit_end(outcome, emit)
        await _emit_result_message(outcome, emit, config)
        outcomes.append(outcome)
        if signal.aborted:
            break
    return outcomes


async def _run_parallel(
    context: AgentContext,
    message: AssistantMessage,
    calls: list[ToolCall],
    config: LoopConfig,
    signal: AbortSignal,
    emit: EmitFn,
) -> list[ToolCallOutcome]:
    # Phase 1, in source order: start events and before-hooks (C27).
    entries: list[ToolCallOutcome | _Prepared] = []
    for call in calls:
        await _emit_start(call, config, emit)
        prepared = await _prepare(context, message, call, config, signal)
        if isinstance(prepared, ToolCallOutcome):
            await _emit_end(prepared, emit)
        entries.append(prepared)
        if signal.aborted:
            break

    # Phase 2: run concurrently; end events in completion order.
    async def finish(prepared: _Prepared) -> ToolCallOutcome:
        outcome = await _execute(context, message, prepared, config, signal, emit)
        await _emit_end(outcome, emit)
        return outcome

    runnable = [(i, entry) for i, entry in enumerate(entries) if isinstance(entry, _Prepared)]
    outcomes = list(entries)
    if len(runnable) == 1:  # the common case: one call needs no task of its own
        ((index, prepared),) = runnable
        outcomes[index] = await finish(prepared)
    elif runnable:
        done = await asyncio.gather(*(finish(prepared) for _, prepared in runnable))
        for (index, _), outcome in zip(runnable, done, strict=True):
            outcomes[index] = outcome
    # Result messages keep source order.
    for outcome in outcomes:
        assert isinstance(outcome, ToolCallOutcome)
        await _emit_result_message(outcome, emit, config)
    return [o for o in outcomes if isinstance(o, ToolCallOutcome)]


async def _prepare(
    context: AgentContext,
    message: AssistantMessage,
    call: ToolCall,
    config: LoopConfig,
    signal: AbortSignal,
) -> _Prepared | ToolCallOutcome:
    def fail(text: str, *, terminate: bool = False) -> ToolCallOutcome:
        result = error_result(text)
        result.terminate = terminate
        return ToolCallOutcome(tool_call=call, result=result, is_error=True)

    tool = next((t for t in context.tools if t.name == call.name), None)
    if tool is None:
        return fail(f"Tool {call.name} not found")
    if call.parse_error is not None:
        return fail(f'Tool "{call.name}" was not executed: {call.parse_error}')
    try:
        args = prepare_and_validate(tool, call.arguments)
    except ToolArgumentsError as exc:
        return fail(str(exc))
    if config.before_tool_call is not None:
        try:
            decision = await maybe_await(
                config.before_tool_call(
                    BeforeToolCallContext(
                        assistant_message=message, tool_call=call, args=args, context=context
                    ),
                    signal,
                )
            )
        except (Exception, asyncio.CancelledError) as exc:  # a raising gate blocks (fail closed)
            if is_own_cancellation(exc):
                raise
            return fail(exception_text(exc))
        if signal.aborted:
            return fail(ABORTED_TEXT)
        if decision is not None and decision.block:
            return fail(
                decision.reason or "Tool execution was blocked", terminate=decision.terminate
            )
    if signal.aborted:
        return fail(ABORTED_TEXT)
    return _Prepared(tool_call=call, tool=tool, args=args)


async def _execute(
    context: AgentContext,
    message: AssistantMessage,
    prepared: _Prepared,
    config: LoopConfig,
    signal: AbortSignal,
    emit: EmitFn,
) -> ToolCallOutcome:
    call = prepared.tool_call
    if signal.aborted:  # aborted while the batch was being prepared
        return ToolCallOutcome(tool_call=call, result=error_result(ABORTED_TEXT), is_error=True)
    updates = _Updates(call, config, emit)
    try:
        result = await prepared.tool.execute(call.id, prepared.args, signal, updates.send)
        is_error = False
    except (Exception, asyncio.CancelledError) as exc:
        if is_own_cancellation(exc):
            raise
        result, is_error = error_result(exception_text(exc)), True
    finally:
        updates.accepting = False
    if updates.last is not None:
        await updates.last  # S13: emitted updates arrive before the end event
    if not isinstance(result, ToolResult):  # pyright: ignore[reportUnnecessaryIsInstance]
        result, is_error = (
            error_result(f"Tool {call.name} returned {type(result).__name__}, not a ToolResult"),
            True,
        )

    hook = config.after_tool_call
    if hook is not None:
        result, is_error = await _after(hook, context, message, prepared, result, is_error, signal)
    return ToolCallOutcome(tool_call=call, result=result, is_error=is_error)


async def _after(
    hook: AfterToolCallHook,
    context: AgentContext,
    message: AssistantMessage,
    prepared: _Prepared,
    result: ToolResult,
    is_error: bool,
    signal: AbortSignal,
) -> tuple[ToolResult, bool]:
    """The result after the ``after_tool_call`` hook: patched where the hook says so; an
    error result with the hook's exception if it raised."""
    try:
        patch = await maybe_await(
            hook(
                AfterToolCallContext(
                    assistant_message=message,
                    tool_call=prepared.tool_call,
                    args=prepared.args,
                    result=result,
                    is_error=is_error,
                    context=context,
                ),
                signal,
            )
        )
    except (Exception, asyncio.CancelledError) as exc:
        if is_own_cancellation(exc):
            raise
        return error_result(exception_text(exc)), True
    if patch is None:
        return result, is_error
    patched = ToolResult(
        content=patch.content if patch.content is not None else result.content,
        details=patch.details if patch.details is not None else result.details,
        usage=patch.usage if patch.usage is not None else result.usage,
        terminate=patch.terminate if patch.terminate is not None else result.terminate,
        added_tool_names=result.added_tool_names,
    )
    return patched, is_error if patch.is_error is None else patch.is_error


class _Updates:
    """The ``on_update`` channel of one executing call (S13): each partial result becomes a
    ``tool_execution_update`` event, in the order sent, while ``execute`` runs; updates
    from a worker thread are handed to the loop; updates nobody listens to, or sent after
    ``execute`` returned, are dropped."""

    __slots__ = ("_loop", "accepting", "call", "config", "emit", "last")

    def __init__(self, call: ToolCall, config: LoopConfig, emit: EmitFn) -> None:
        self.call, self.config, self.emit = call, config, emit
        self.accepting = True
        self.last: asyncio.Future[None] | None = None
        self._loop = asyncio.get_running_loop()

    def send(self, partial: ToolResult) -> None:
        """The ``on_update`` callback ``execute`` gets (any thread)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._schedule(partial)
        else:  # a worker thread reporting progress
            self._loop.call_soon_threadsafe(self._schedule, partial)

    def _schedule(self, partial: ToolResult) -> None:
        if self.accepting and wanted(self.config, "tool_execution_update"):
            self.last = asyncio.ensure_future(self._deliver(self.last, partial))

    async def _deliver(self, previous: asyncio.Future[None] | None, partial: ToolResult) -> None:
        if previous is not None:
            await previous  # keep updates in the order they were sent
        call = self.call
        await self.emit(
            ToolExecutionUpdateEvent(
                tool_call_id=call.id,
                tool_name=call.name,
                args=call.arguments,
                partial_result=partial,
            )
        )


async def _emit_start(call: ToolCall, config: LoopConfig, emit: EmitFn) -> None:
    if wanted(config, "tool_execution_start"):
        await emit(
            ToolExecutionStartEvent(tool_call_id=call.id, tool_name=call.name, args=call.arguments)
        )


async def _emit_end(outcome: ToolCallOutcome, emit: EmitFn) -> None:
    await emit(
        ToolExecutionEndEvent(
            tool_call_id=outcome.tool_call.id,
            tool_name=outcome.tool_call.name,
            result=outcome.result,
            is_error=outcome.is_error,
        )
    )


def _result_message(outcome: ToolCallOutcome) -> ToolResultMessage:
    result = outcome.result
    return ToolResultMessage(
        tool_call_id=outcome.tool_call.id,
        tool_name=outcome.tool_call.name,
        content=list(result.content or []),
        details=result.details,
        is_error=outcome.is_error,
        usage=result.usage,
        added_tool_names=list(result.added_tool_names) if result.added_tool_names else None,
    )


async def _emit_result_message(
    outcome: ToolCallOutcome, emit: EmitFn, config: LoopConfig | None = None
) -> None:
    message = outcome.message = _result_message(outcome)
    if config is None or wanted(config, "message_start"):
        await emit(MessageStartEvent(message=message))
    await emit(MessageEndEvent(message=message))
