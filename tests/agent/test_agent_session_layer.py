"""Agent-core behaviours seen through a session, where they involve extensions:
abort from a ``tool_call`` handler (C29), subscribers after extension handlers (C30),
``ctx`` as the fifth ``execute`` argument (S10)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agent_support import trace
from pydantic import BaseModel

from pi_notebook import (
    AgentSession,
    ExtensionAPI,
    TextContent,
    ToolDefinition,
    ToolResult,
    create_agent_session,
    define_tool,
)
from pi_notebook.testing import ScriptedModel, text, tool_call


class EchoParams(BaseModel):
    text: str


def echo_tool(log: list[str] | None = None) -> ToolDefinition[EchoParams]:
    async def echo(
        call_id: str, params: EchoParams, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        if log is not None:
            log.append(f"execute {call_id}")
        on_update(ToolResult(content=[TextContent(text="working")], details={"phase": 1}))
        return ToolResult(content=[TextContent(text=params.text)], details={"n": 1})

    return define_tool(
        ToolDefinition(
            name="echo", label="Echo", description="Echo text.", parameters=EchoParams, execute=echo
        )
    )


@pytest.fixture
async def sessions() -> AsyncIterator[list[AgentSession]]:
    made: list[AgentSession] = []
    yield made
    for session in made:
        await session.close()


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_c29_abort_in_a_tool_call_handler_stops_the_batch_and_the_run(
    mode: Any, sessions: list[AgentSession]
) -> None:
    log: list[str] = []

    def extension(pi: ExtensionAPI) -> None:
        pi.register_tool(echo_tool(log))

        def gate(event: Any, ctx: Any) -> None:
            log.append(f"tool_call {event.tool_call_id}")
            if event.tool_call_id == "c1":
                ctx.abort()

        pi.on("tool_call", gate)
        pi.on("tool_result", lambda event, ctx: log.append(f"tool_result {event.tool_call_id}"))

    model = ScriptedModel(
        [
            [
                tool_call("echo", {"text": "a"}, id="c1"),
                tool_call("echo", {"text": "b"}, id="c2"),
                tool_call("echo", {"text": "c"}, id="c3"),
            ]
        ]
    )
    session = create_agent_session(
        model=model, extensions=[extension], audit=False, tool_execution=mode
    )
    sessions.append(session)
    events: list[Any] = []
    session.subscribe(events.append)

    await session.prompt("go")

    assert trace(events, updates=False) == [
        "agent_start",
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        "message_end:assistant",
        "tool_execution_start:c1",
        "tool_execution_end:c1",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "turn_end",
        "agent_end",
    ]
    (end,) = [e for e in events if e.type == "tool_execution_end"]
    assert (end.is_error, end.result.content[0].text) == (True, "Operation aborted")
    assert log == ["tool_call c1"]  # no execute, no later gate, no tool_result handler
    assert len(model.calls) == 1  # no further model request
    model.assert_complete()


async def test_c29_abort_at_a_later_call_also_stops_the_earlier_prepared_ones(
    sessions: list[AgentSession],
) -> None:
    log: list[str] = []

    def extension(pi: ExtensionAPI) -> None:
        pi.register_tool(echo_tool(log))

        def gate(event: Any, ctx: Any) -> None:
            if event.tool_call_id == "c2":
                ctx.abort()

        pi.on("tool_call", gate)
        pi.on("tool_result", lambda event, ctx: log.append(f"tool_result {event.tool_call_id}"))

    model = ScriptedModel(
        [
            [
                tool_call("echo", {"text": "a"}, id="c1"),
                tool_call("echo", {"text": "b"}, id="c2"),
                tool_call("echo", {"text": "c"}, id="c3"),
            ]
        ]
    )
    session = create_agent_session(model=model, extensions=[extension], audit=False)
    sessions.append(session)
    events: list[Any] = []
    session.subscribe(events.append)

    await session.prompt("go")

    tool_events = [t for t in trace(events) if t.startswith("tool_execution")]
    assert tool_events == [
        "tool_execution_start:c1",
        "tool_execution_start:c2",
        "tool_execution_end:c2",
        "tool_execution_end:c1",
    ]
    assert all(
        e.result.content[0].text == "Operation aborted"
        for e in events
        if e.type == "tool_execution_end"
    )
    assert log == []
    assert len(model.calls) == 1


async def test_c30_session_subscribers_get_an_event_after_every_extension_handler(
    sessions: list[AgentSession],
) -> None:
    log: list[tuple[str, str, int]] = []

    def make_extension(name: str) -> Any:
        def extension(pi: ExtensionAPI) -> None:
            if name == "first":
                pi.register_tool(echo_tool())
            for kind in (
                "agent_start",
                "agent_end",
                "turn_start",
                "turn_end",
                "message_start",
                "message_update",
                "message_end",
                "tool_execution_start",
                "tool_execution_update",
                "tool_execution_end",
            ):

                async def handler(event: Any, ctx: Any) -> None:
                    log.append((f"{name} begins", event.type, id(event)))
                    await asyncio.sleep(0)  # a handler that yields must still be waited for
                    log.append((f"{name} ends", event.type, id(event)))

                pi.on(kind, handler)

        return extension

    session = create_agent_session(
        model=ScriptedModel([tool_call("echo", {"text": "hi"}, id="c1"), text("done")]),
        extensions=[make_extension("first"), make_extension("second")],
        audit=False,
    )
    sessions.append(session)
    seen: list[Any] = []

    def subscriber(event: Any) -> None:
        seen.append(event)
        log.append(("subscriber", event.type, id(event)))

    session.subscribe(subscriber)

    await session.prompt("go")

    assert trace(seen, updates=False) == [
        "agent_start",
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        "message_end:assistant",
        "tool_execution_start:c1",
        "tool_execution_update:c1",
        "tool_execution_end:c1",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "turn_end",
        "turn_start",
        "message_start:assistant",
        "message_end:assistant",
        "turn_end",
        "agent_end",
    ]
    for index, (who, _, event_id) in enumerate(log):
        if who == "subscriber":
            before = {w for w, _, e in log[:index] if e == event_id}
            assert before == {"first begins", "first ends", "second begins", "second ends"}, log[
                index
            ]


async def test_s10_session_tool_gets_ctx_as_fifth_argument_with_the_run_signal(
    sessions: list[AgentSession], tmp_path: Any
) -> None:
    seen: list[Any] = []

    async def execute(
        call_id: str, params: EchoParams, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        seen.append((call_id, params.text, signal, ctx.signal, ctx.cwd, ctx.has_ui, ctx.is_idle()))
        return ToolResult(content=[TextContent(text="ok")])

    def extension(pi: ExtensionAPI) -> None:
        pi.register_tool(
            ToolDefinition(
                name="probe", label="Probe", description="d", parameters=EchoParams, execute=execute
            )
        )

    session = create_agent_session(
        model=ScriptedModel([tool_call("probe", {"text": "x"}, id="c1"), text("ok")]),
        extensions=[extension],
        audit=False,
        cwd=str(tmp_path),
    )
    sessions.append(session)

    await session.prompt("go")

    ((call_id, value, signal, ctx_signal, cwd, has_ui, idle),) = seen
    assert (call_id, value, cwd, has_ui, idle) == ("c1", "x", str(tmp_path), False, False)
    assert signal is ctx_signal and signal is not None
