"""Cancellation that surfaces as ``asyncio.CancelledError`` inside a tool, a hook or a
provider: an error result or message, never a crash (S30, S33, C33). Cancelling the run's
own task still cancels it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agent_support import make_agent, make_tool, result, result_text

from pi_notebook.agent.agent import Agent
from pi_notebook.agent.types import BeforeToolCallContext, ToolResult, ToolUpdateCallback
from pi_notebook.ai.abort import AbortSignal
from pi_notebook.ai.events import AssistantMessageEvent
from pi_notebook.ai.messages import AssistantMessage
from pi_notebook.ai.model import Context
from pi_notebook.ai.stream import AssistantStream
from pi_notebook.testing import text, tool_call


async def _forwards_by_cancelling(
    call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
) -> ToolResult:
    """Honours the signal the asyncio way: cancel the inner work and let it propagate."""
    work = asyncio.ensure_future(asyncio.sleep(10, result("never")))
    remove = signal.add_listener(work.cancel)
    try:
        return await work
    finally:
        remove()


async def test_s33_tool_honouring_the_signal_by_task_cancellation_gives_an_error_result() -> None:
    agent, model, rec = make_agent(
        [[tool_call("slow", {"text": "a"}, id="c1"), tool_call("echo", {"text": "b"}, id="c2")]],
        [make_tool("slow", _forwards_by_cancelling), make_tool("echo")],
    )
    c2_done = asyncio.Event()
    agent.subscribe(lambda e: c2_done.set() if e.type == "tool_execution_end" else None)
    run = asyncio.ensure_future(agent.prompt("go"))
    await asyncio.wait_for(c2_done.wait(), 1)  # c2 finished, c1 is waiting
    agent.abort()

    await asyncio.wait_for(run, 1)  # does not raise CancelledError

    assert (rec.end("c1").is_error, result_text(agent, "c1")) == (True, "Operation aborted")
    assert (rec.end("c2").is_error, result_text(agent, "c2")) == (False, "b")
    assert rec.trace()[-2:] == ["turn_end", "agent_end"]
    assert len(model.calls) == 1


async def test_s30_sequential_tool_cancelled_inside_gives_an_error_result() -> None:
    agent, _, rec = make_agent(
        [tool_call("slow", {"text": "a"}, id="c1")],
        [make_tool("slow", _forwards_by_cancelling)],
        tool_execution="sequential",
    )
    started = asyncio.Event()
    agent.subscribe(lambda e: started.set() if e.type == "tool_execution_start" else None)
    run = asyncio.ensure_future(agent.prompt("go"))
    await asyncio.wait_for(started.wait(), 1)
    await asyncio.sleep(0.001)  # let execute reach its await
    agent.abort()

    await asyncio.wait_for(run, 1)

    assert (rec.end("c1").is_error, result_text(agent, "c1")) == (True, "Operation aborted")


async def test_s30_before_hook_cancelled_inside_blocks_the_call() -> None:
    async def gate(ctx: BeforeToolCallContext, signal: AbortSignal) -> None:
        # e.g. an approval prompt whose waiting task was cancelled
        raise asyncio.CancelledError()

    agent, model, rec = make_agent(
        [tool_call("echo", {"text": "a"}, id="c1"), text("ok")],
        [make_tool("echo")],
        before_tool_call=gate,
    )

    await asyncio.wait_for(agent.prompt("go"), 1)

    assert (rec.end("c1").is_error, result_text(agent, "c1")) == (True, "Operation aborted")
    model.assert_complete()


class _CancelledProvider:
    id = "cancelled"
    provider = "test"

    async def stream(
        self, context: Context, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        out = AssistantStream(model=self.id, provider=self.provider)
        yield out.start()
        raise asyncio.CancelledError()  # its HTTP task was cancelled under it


async def test_c33_provider_raising_cancelled_error_ends_with_an_error_message() -> None:
    agent = Agent(model=_CancelledProvider())
    events: list[Any] = []
    agent.subscribe(events.append)

    await asyncio.wait_for(agent.prompt("go"), 1)

    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert (last.stop_reason, last.error_message) == (
        "error",
        "Model request failed: Operation aborted",
    )
    assert events[-1].type == "agent_end"


class _ClosingProvider:
    """Records whether its stream was closed by the time the run is over."""

    id = "closing"
    provider = "test"

    def __init__(self) -> None:
        self.closed = 0

    async def stream(
        self, context: Context, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        out = AssistantStream(model=self.id, provider=self.provider)
        try:
            yield out.start()
            yield out.text_start()
            yield out.text_delta("hello")
            yield out.text_end()
            yield out.done()
            yield out.done()  # a provider that keeps going after done is not read further
        finally:
            self.closed += 1  # e.g. closing its HTTP client


async def test_c33_the_loop_closes_a_provider_stream_it_stops_reading() -> None:
    model = _ClosingProvider()
    agent = Agent(model=model)

    await agent.prompt("go")

    assert model.closed == 1
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage) and last.text == "hello"


async def test_cancelling_the_run_task_itself_still_cancels_the_run() -> None:
    started = asyncio.Event()

    async def wait(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        started.set()
        await asyncio.sleep(10)
        return result("never")

    for mode in ("parallel", "sequential"):
        started.clear()
        agent, _, _ = make_agent(
            [tool_call("wait", {"text": "a"}, id="c1")],
            [make_tool("wait", wait)],
            tool_execution=mode,
        )
        run = asyncio.ensure_future(agent.prompt("go"))
        await asyncio.wait_for(started.wait(), 1)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        assert agent.state.is_running is False, mode
