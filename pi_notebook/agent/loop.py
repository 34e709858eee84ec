"""The agent loop: ask the model, run the tool calls it made, repeat.

A port of Pi's ``agent-loop.ts``. Every failure of a tool call becomes an error tool
result the model can read, never an exception out of the loop: an unknown tool, bad
arguments, a blocking or raising before-hook, a raising ``execute`` or after-hook, or
an abort (S30). A model failure ends the run with an assistant message whose stop
reason is ``error`` (C33).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from ..ai.abort import AbortError, AbortSignal
from ..ai.events import DoneEvent, ErrorEvent, StartEvent
from ..ai.messages import AssistantMessage, Message, TextContent, ToolCall, ToolResultMessage
from ..ai.model import Context, Model, ToolSchema
from .events import (
    AgentEndEvent,
    AgentEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from .types import (
    AfterToolCallContext,
    AfterToolCallHook,
    AgentContext,
    AgentTool,
    BeforeToolCallContext,
    BeforeToolCallHook,
    ExecutionMode,
    ToolResult,
)
from .validation import ToolArgumentsError, prepare_and_validate

__all__ = ["EmitFn", "LoopConfig", "run_agent_loop"]

T = TypeVar("T")
EmitFn = Callable[[AgentEvent], Awaitable[None]]

ABORTED_TEXT = "Operation aborted"

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class LoopConfig:
    """How the loop runs. ``get_turn_state`` is read before every model request, so a
    change of tools or system prompt made during a run reaches the next request (C10)."""

    model: Model
    get_turn_state: Callable[[], tuple[str, Sequence[AgentTool[Any]]]]
    before_tool_call: BeforeToolCallHook | None = None
    after_tool_call: AfterToolCallHook | None = None
    tool_execution: ExecutionMode = "parallel"


async def maybe_await(value: Awaitable[T] | T) -> T:
    """Accept sync and async callbacks alike."""
    # ``None`` first: most callbacks return it, and isawaitable's ABC check is slow.
    if value is not None and inspect.isawaitable(value):
        return await value
    return value


def error_result(text: str) -> ToolResult:
    return ToolResult(content=[TextContent(text=text)], details={})


def _is_own_cancellation(exc: BaseException) -> bool:
    """True when ``exc`` cancels the running task itself, so it must propagate.

    A ``CancelledError`` that a tool, hook or provider lets out of work *it* cancelled
    (the asyncio way to honour an abort signal) is a failure like any other: it becomes
    an error result or message, never a crash of the run.
    """
    if not isinstance(exc, asyncio.CancelledError):
        return False
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


async def _close_stream(stream: Any) -> None:
    """Close a provider stream the loop stopped reading, so its cleanup runs now."""
    aclose = getattr(stream, "aclose", None)
    if aclose is None:
        return
    try:
        await aclose()
    except Exception:
        log.exception("closing the model stream failed")


def _exception_text(exc: BaseException) -> str:
    if isinstance(exc, AbortError | asyncio.CancelledError):
        return str(exc) or ABORTED_TEXT
    return str(exc) or type(exc).__name__


@dataclass(kw_only=True)
class _Outcome:
    tool_call: ToolCall
    result: ToolResult
    is_error: bool
    message: ToolResultMessage | None = None  # set once the result message is emitted


@dataclass(kw_only=True)
class _Prepared:
    tool_call: ToolCall
    tool: AgentTool[Any]
    args: BaseModel


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
        if not first_turn:
            await emit(TurnStartEvent())
        first_turn = False

        system_prompt, tools = config.get_turn_state()
        context = AgentContext(system_prompt=system_prompt, messages=messages, tools=list(tools))
        message = await _stream_assistant(context, config.model, signal, emit)
        messages.append(message)
        if message.stop_reason in ("error", "aborted"):
            await emit(TurnEndEvent(message=message, tool_results=[]))
            break

        calls = message.tool_calls
        results: list[ToolResultMessage] = []
        terminate = False
        if calls:
            if message.stop_reason == "length":
                outcomes = await _fail_truncated(calls, emit)
            else:
                outcomes = await _execute_batch(context, message, calls, config, signal, emit)
            terminate = bool(outcomes) and all(o.result.terminate for o in outcomes)
            results = [o.message for o in outcomes if o.message is not None]
            messages.extend(results)
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


async def _stream_assistant(
    context: AgentContext, model: Model, signal: AbortSignal, emit: EmitFn
) -> AssistantMessage:
    if signal.aborted:
        message = _failed_message(model, "aborted", ABORTED_TEXT)
        await emit(MessageStartEvent(message=message))
        await emit(MessageEndEvent(message=message))
        return message
    try:
        schemas = [
            ToolSchema(name=t.name, description=t.description, parameters=t.json_schema())
            for t in context.tools
        ]
    except Exception as exc:  # a tool whose schema cannot be built must not crash the run
        message = _failed_message(
            model, "error", f"Could not build the tool schemas: {_exception_text(exc)}"
        )
        await emit(MessageStartEvent(message=message))
        await emit(MessageEndEvent(message=message))
        return message
    request = Context(system_prompt=context.system_prompt, messages=context.messages, tools=schemas)
    started = False
    final: AssistantMessage | None = None
    stream = model.stream(request, signal=signal)
    try:
        async for event in stream:
            if isinstance(event, StartEvent):
                started = True
                await emit(MessageStartEvent(message=event.partial))
            elif isinstance(event, DoneEvent):
                final = event.message
                break
            elif isinstance(event, ErrorEvent):
                final = event.error
                break
            elif started:
                await emit(MessageUpdateEvent(message=event.partial, assistant_message_event=event))
    except (Exception, asyncio.CancelledError) as exc:  # C33: a message, not a crash
        if _is_own_cancellation(exc):
            raise
        final = _failed_message(
            model,
            "aborted" if signal.aborted else "error",
            f"Model request failed: {_exception_text(exc)}",
        )
    finally:
        await _close_stream(stream)
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


async def _fail_truncated(calls: list[ToolCall], emit: EmitFn) -> list[_Outcome]:
    """C26: the output hit the token limit, so every call's arguments may be cut off."""
    outcomes: list[_Outcome] = []
    for call in calls:
        await emit(ToolExecutionStartEvent(tool_call_id=call.id, tool_name=call.name, args=call.arguments))
        outcome = _Outcome(
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


async def _execute_batch(
    context: AgentContext,
    message: AssistantMessage,
    calls: list[ToolCall],
    config: LoopConfig,
    signal: AbortSignal,
    emit: EmitFn,
) -> list[_Outcome]:
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
) -> list[_Outcome]:
    outcomes: list[_Outcome] = []
    for call in calls:
        await emit(ToolExecutionStartEvent(tool_call_id=call.id, tool_name=call.name, args=call.arguments))
        prepared = await _prepare(context, message, call, config, signal)
        if isinstance(prepared, _Outcome):
            outcome = prepared
        else:
            outcome = await _execute(context, message, prepared, config, signal, emit)
        await _emit_end(outcome, emit)
        await _emit_result_message(outcome, emit)
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
) -> list[_Outcome]:
    # Phase 1, in source order: start events and before-hooks (C27).
    entries: list[_Outcome | _Prepared] = []
    for call in calls:
        await emit(ToolExecutionStartEvent(tool_call_id=call.id, tool_name=call.name, args=call.arguments))
        prepared = await _prepare(context, message, call, config, signal)
        if isinstance(prepared, _Outcome):
            await _emit_end(prepared, emit)
        entries.append(prepared)
        if signal.aborted:
            break

    # Phase 2: run concurrently; end events in completion order.
    async def finish(prepared: _Prepared) -> _Outcome:
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
        assert isinstance(outcome, _Outcome)
        await _emit_result_message(outcome, emit)
    return [o for o in outcomes if isinstance(o, _Outcome)]


async def _prepare(
    context: AgentContext,
    message: AssistantMessage,
    call: ToolCall,
    config: LoopConfig,
    signal: AbortSignal,
) -> _Prepared | _Outcome:
    def fail(text: str, *, terminate: bool = False) -> _Outcome:
        result = error_result(text)
        result.terminate = terminate
        return _Outcome(tool_call=call, result=result, is_error=True)

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
            if _is_own_cancellation(exc):
                raise
            return fail(_exception_text(exc))
        if signal.aborted:
            return fail(ABORTED_TEXT)
        if decision is not None and decision.block:
            return fail(decision.reason or "Tool execution was blocked", terminate=decision.terminate)
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
) -> _Outcome:
    call = prepared.tool_call
    if signal.aborted:  # aborted while the batch was being prepared
        return _Outcome(tool_call=call, result=error_result(ABORTED_TEXT), is_error=True)
    accepting = True
    last_update: asyncio.Future[None] | None = None
    loop = asyncio.get_running_loop()

    async def deliver(previous: asyncio.Future[None] | None, partial: ToolResult) -> None:
        if previous is not None:
            await previous  # keep updates in the order they were sent
        await emit(
            ToolExecutionUpdateEvent(
                tool_call_id=call.id, tool_name=call.name, args=call.arguments, partial_result=partial
            )
        )

    def schedule(partial: ToolResult) -> None:
        nonlocal last_update
        if accepting:  # S13: updates after execute returned are dropped
            last_update = asyncio.ensure_future(deliver(last_update, partial))

    def on_update(partial: ToolResult) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            schedule(partial)
        else:  # a worker thread reporting progress
            loop.call_soon_threadsafe(schedule, partial)

    try:
        result = await prepared.tool.execute(call.id, prepared.args, signal, on_update)
        is_error = False
    except (Exception, asyncio.CancelledError) as exc:
        if _is_own_cancellation(exc):
            raise
        result, is_error = error_result(_exception_text(exc)), True
    finally:
        accepting = False
    if last_update is not None:
        await last_update  # S13: emitted updates arrive before the end event
    if not isinstance(result, ToolResult):  # pyright: ignore[reportUnnecessaryIsInstance]
        result, is_error = error_result(f"Tool {call.name} returned {type(result).__name__}, not a ToolResult"), True

    if config.after_tool_call is not None:
        try:
            patch = await maybe_await(
                config.after_tool_call(
                    AfterToolCallContext(
                        assistant_message=message,
                        tool_call=call,
                        args=prepared.args,
                        result=result,
                        is_error=is_error,
                        context=context,
                    ),
                    signal,
                )
            )
        except (Exception, asyncio.CancelledError) as exc:
            if _is_own_cancellation(exc):
                raise
            return _Outcome(tool_call=call, result=error_result(_exception_text(exc)), is_error=True)
        if patch is not None:
            result = ToolResult(
                content=patch.content if patch.content is not None else result.content,
                details=patch.details if patch.details is not None else result.details,
                usage=patch.usage if patch.usage is not None else result.usage,
                terminate=patch.terminate if patch.terminate is not None else result.terminate,
                added_tool_names=result.added_tool_names,
            )
            if patch.is_error is not None:
                is_error = patch.is_error
    return _Outcome(tool_call=call, result=result, is_error=is_error)


async def _emit_end(outcome: _Outcome, emit: EmitFn) -> None:
    await emit(
        ToolExecutionEndEvent(
            tool_call_id=outcome.tool_call.id,
            tool_name=outcome.tool_call.name,
            result=outcome.result,
            is_error=outcome.is_error,
        )
    )


def _result_message(outcome: _Outcome) -> ToolResultMessage:
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


async def _emit_result_message(outcome: _Outcome, emit: EmitFn) -> None:
    message = outcome.message = _result_message(outcome)
    await emit(MessageStartEvent(message=message))
    await emit(MessageEndEvent(message=message))
