"""``AgentSession.call_tool``: one governed tool call without a model.

The call goes through the very pipeline a model's call goes through (``agent/tool_calls.py``):
``tool_execution_start`` → ``prepare_arguments`` → validation → the session's before-hook
(every ``tool_call`` handler: audit, approval gates) → ``execute`` → the after-hook (every
``tool_result`` handler) → ``tool_execution_end`` and the tool-result message events. Only
the tools the session offers now (its active set, within allow/exclude) can be called; any
other name ends as ``Tool <name> not found``, exactly as for a model.

What differs from a model's call: there is no assistant turn (a synthetic assistant message
carries the call, with provider ``"direct"``), and the result is returned instead of being
appended to ``session.messages``, so the model's conversation is untouched.

What does not belong here: deciding whether a call needs approval (the gates do) or how the
caller reaches a person (the session's UI does).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine, Mapping
from contextvars import ContextVar
from typing import Any, Protocol

from ..agent.agent import Agent
from ..agent.common import EmitFn, LoopConfig
from ..agent.tool_calls import ToolCallOutcome, execute_batch
from ..agent.types import AgentContext
from ..ai.abort import AbortController, AbortSignal
from ..ai.messages import AssistantMessage, ToolCall, ToolResultMessage
from ..ai.model import Model
from ..errors import SessionClosedError

__all__ = ["DIRECT_PROVIDER", "DirectSession", "call_tool", "direct_call_signal"]

DIRECT_PROVIDER = "direct"
"""The ``provider`` of the synthetic assistant message that carries a direct call."""

_signal: ContextVar[AbortSignal | None] = ContextVar("pi_notebook_direct_signal", default=None)


class DirectSession(Protocol):
    """What a direct call needs of its session (``AgentSession`` is one)."""

    @property
    def closed(self) -> bool: ...

    @property
    def agent(self) -> Agent: ...

    @property
    def model(self) -> Model: ...

    @property
    def model_name(self) -> str: ...

    async def start(self) -> None: ...


def direct_call_signal() -> AbortSignal | None:
    """The abort signal of the direct call running in this task, if any.

    The session's ``signal`` (and so every ``ctx.signal``) reads it first, so gates and tools
    of a direct call see that call's signal rather than an idle agent's ``None``.
    """
    return _signal.get()


async def call_tool(
    session: DirectSession,
    name: str,
    args: Mapping[str, Any] | Any,
    *,
    tool_call_id: str | None,
    signal: AbortSignal | None,
    emit: EmitFn,
) -> ToolResultMessage:
    """Run one governed call of ``name`` with ``args`` and return its final result message.

    Never raises for a failing call (unknown tool, bad arguments, a blocking gate, a raising
    ``execute``): the returned message then has ``is_error=True`` and says why. ``signal``
    aborts the call as ``session.abort()`` aborts a prompt's calls; cancelling the awaiting
    task aborts it the same way, waits until the tool has wound down (so a database write
    is rolled back, not abandoned), then re-raises ``CancelledError``.

    Raises:
        SessionClosedError: the session is closed.
    """
    if session.closed:
        raise SessionClosedError("This session is closed; create a new one to call tools.")
    await session.start()
    call = ToolCall(
        id=tool_call_id or f"direct_{uuid.uuid4().hex}",
        name=name,
        arguments=dict(args) if isinstance(args, Mapping) else args,
    )
    message = AssistantMessage(
        content=[call], stop_reason="toolUse", model=session.model_name, provider=DIRECT_PROVIDER
    )
    context, config = _batch_of(session)
    controller = AbortController()
    unlink = signal.add_listener(lambda: controller.abort(signal.reason)) if signal else None
    token = _signal.set(controller.signal)
    try:
        outcomes = await _run_shielded(
            execute_batch(context, message, [call], config, controller.signal, emit), controller
        )
    finally:
        _signal.reset(token)
        if unlink is not None:
            unlink()
    (outcome,) = outcomes
    if outcome.message is not None:
        return outcome.message
    return ToolResultMessage(  # execute_batch always emits the message; this keeps the type total
        tool_call_id=call.id,
        tool_name=call.name,
        content=list(outcome.result.content or []),
        details=outcome.result.details,
        is_error=outcome.is_error,
    )


def _batch_of(session: DirectSession) -> tuple[AgentContext, LoopConfig]:
    """The context and loop settings of a one-call batch: the session's agent as it is now
    (its system prompt, tools and hooks), with the call run on its own."""
    agent = session.agent

    def turn_state() -> tuple[str, list[Any]]:
        return agent.state.system_prompt, list(agent.state.tools)

    system_prompt, tools = turn_state()
    context = AgentContext(
        system_prompt=system_prompt, messages=list(agent.state.messages), tools=tools
    )
    config = LoopConfig(
        model=session.model,
        get_turn_state=turn_state,
        before_tool_call=agent.before_tool_call,
        after_tool_call=agent.after_tool_call,
        tool_execution="sequential",
    )
    return context, config


async def _run_shielded(
    batch: Coroutine[Any, Any, list[ToolCallOutcome]], controller: AbortController
) -> list[ToolCallOutcome]:
    """Run ``batch`` in a task of its own (it copies this context, so it sees the direct
    signal), shielded so that cancelling the caller aborts the tool instead of tearing it
    apart mid-write: the abort reaches the tool, the task winds down, then the cancellation
    goes on to the caller."""
    task = asyncio.ensure_future(batch)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        controller.abort("the caller cancelled the call")
        await asyncio.wait([task])
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation is what the caller gets
        raise
