"""S30: an oversized tool argument is refused before it is parsed, and a long stream of small
chunks lets the event loop run while it arrives."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest
from agent_support import make_agent, make_tool, result_text

from pi_notebook.ai.events import ToolCallEndEvent
from pi_notebook.ai.messages import ToolCall
from pi_notebook.ai.stream import MAX_TOOL_ARGUMENTS, MAX_TOOL_ARGUMENTS_ENV, AssistantStream
from pi_notebook.testing import text, tool_call


class _Ticker:
    """Another task of the loop: counts its turns and the longest wait between two."""

    def __init__(self) -> None:
        self.ticks = 0
        self.max_gap = 0.0

    async def run(self, stop: asyncio.Event) -> None:
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.002)
            now = time.monotonic()
            self.ticks += 1
            self.max_gap = max(self.max_gap, now - last)
            last = now


async def test_s30_an_oversized_argument_is_a_tool_error_and_the_loop_keeps_running() -> None:
    ran: list[str] = []
    tool = make_tool()
    execute = tool.execute

    async def counting(*args: object) -> object:
        ran.append("echo")
        return await execute(*args)  # type: ignore[arg-type]

    tool.execute = counting  # type: ignore[assignment]
    huge = "x" * (3 * MAX_TOOL_ARGUMENTS)  # ~48k chunks of 64 characters, none awaited
    agent, _, recorder = make_agent(
        [[tool_call("echo", {"text": huge}, id="c1")], text("done")], [tool]
    )
    ticker, stop = _Ticker(), asyncio.Event()
    ticking = asyncio.create_task(ticker.run(stop))
    await asyncio.sleep(0)
    # The objects of the tests that ran before this one are set aside from the collector: a
    # full collection of the whole suite's heap (hundreds of ms late in a run) stalls every
    # task alike and says nothing of this loop; this test's own garbage is still collected.
    gc.freeze()
    try:
        started = time.monotonic()
        await agent.prompt("go")
        took = time.monotonic() - started
    finally:
        gc.unfreeze()
    stop.set()
    await ticking
    end = recorder.end("c1")
    assert end.is_error and ran == []
    message = result_text(agent, "c1")
    assert "too large" in message and f"{MAX_TOOL_ARGUMENTS:,}" in message
    assert MAX_TOOL_ARGUMENTS_ENV in message
    # The other task ran while the ~48k chunks arrived (a loose liveness bound: a stream
    # that never yields lets it run once, after the stream).
    assert ticker.ticks >= 5, (ticker.ticks, took, ticker.max_gap)
    # Nothing past the limit was kept for listeners either.
    deltas = [
        e.assistant_message_event
        for e in recorder.of("message_update")
        if e.assistant_message_event.type == "toolcall_delta"
    ]
    assert sum(len(d.delta) for d in deltas) <= MAX_TOOL_ARGUMENTS


def _ended(out: AssistantStream, index: int) -> ToolCall:
    event = out.tool_call_end(index)
    assert isinstance(event, ToolCallEndEvent)
    return event.tool_call


def test_s30_the_limit_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MAX_TOOL_ARGUMENTS_ENV, "100")
    out = AssistantStream(model="m", provider="p")
    index, _ = out.tool_call_start(id="c1", name="echo")
    out.tool_call_delta(index, '{"text": "' + "y" * 100 + '"}')
    end = _ended(out, index)
    assert end.arguments == {} and "limit of 100 " in (end.parse_error or "")
    small = AssistantStream(model="m", provider="p")
    index, _ = small.tool_call_start(id="c2", name="echo")
    small.tool_call_delta(index, '{"text": "ok"}')
    call = _ended(small, index)
    assert call.arguments == {"text": "ok"} and call.parse_error is None


def test_s30_a_bad_setting_keeps_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for bad in ("lots", "0", "-5"):
        monkeypatch.setenv(MAX_TOOL_ARGUMENTS_ENV, bad)
        out = AssistantStream(model="m", provider="p")
        index, _ = out.tool_call_start(id="c1", name="echo")
        out.tool_call_delta(index, '{"text": "' + "y" * 200 + '"}')
        assert _ended(out, index).parse_error is None
