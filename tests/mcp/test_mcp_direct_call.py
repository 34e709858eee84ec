"""``AgentSession.call_tool``: a governed tool call without a model."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pi_notebook import (
    AgentSession,
    ExtensionAPI,
    SessionClosedError,
    TextContent,
    ToolDefinition,
    ToolResult,
    create_agent_session,
)
from pi_notebook.database import database_extension
from tests.mcp.mcp_support import Relay, ScriptedUI


class EchoParams(BaseModel):
    text: str
    times: int = 1


def tooling(log: list[str], waiting: asyncio.Event) -> Any:
    """An extension with a tool and both kinds of handlers, logging what runs."""

    async def echo(
        call_id: str, params: EchoParams, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        log.append(f"execute {params.text} x{params.times} signal={ctx.signal is signal}")
        on_update(ToolResult(content=[TextContent(text="working")]))
        if params.text == "wait":
            waiting.set()
            await signal.wait()
            log.append("saw abort")
            raise RuntimeError("stopped")
        return ToolResult(content=[TextContent(text=params.text * params.times)], details={"n": 1})

    def register(pi: ExtensionAPI) -> None:
        pi.register_tool(
            ToolDefinition(
                name="echo",
                label="Echo",
                description="Echo text.",
                parameters=EchoParams,
                execute=echo,
            )
        )

        def gate(event: Any, ctx: Any) -> dict[str, Any] | None:
            log.append(f"tool_call {event.input.text}")
            if event.input.text == "blocked":
                return {"block": True, "reason": "not this one"}
            event.input.times = 2  # S8: a handler may change the validated input
            return None

        def patch(event: Any, ctx: Any) -> dict[str, Any]:
            log.append("tool_result")
            return {"content": [*event.content, TextContent(text="patched")]}

        pi.on("tool_call", gate)
        pi.on("tool_result", patch)

    return register


@pytest.fixture
async def session() -> Any:
    log: list[str] = []
    waiting = asyncio.Event()
    s = create_agent_session(
        model=Relay(), extensions=[tooling(log, waiting)], audit="sqlite://", builtin_tools=False
    )
    s.log = log  # type: ignore[attr-defined]
    s.waiting = waiting  # type: ignore[attr-defined]
    yield s
    await s.close()


async def test_direct_call_runs_the_whole_pipeline_and_returns_the_final_result(
    session: AgentSession,
) -> None:
    events: list[str] = []
    session.subscribe(lambda e: events.append(e.type))
    result = await session.call_tool("echo", {"text": "hi"}, tool_call_id="d1")
    assert result.role == "toolResult" and result.tool_call_id == "d1" and not result.is_error
    assert [p.text for p in result.content] == ["hihi", "patched"]
    assert result.details == {"n": 1}
    assert session.log == ["tool_call hi", "execute hi x2 signal=True", "tool_result"]  # type: ignore[attr-defined]
    assert events == [
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_end",
        "message_start",
        "message_end",
    ]
    assert session.messages == []  # the model's conversation is untouched
    frame = session.audit.to_dataframe()  # type: ignore[union-attr]
    kinds = list(frame[frame["tool_call_id"] == "d1"]["kind"])
    assert (
        kinds[0] == "tool_execution_start"
        and "tool_call" in kinds
        and kinds[-1] == "tool_execution_end"
    )
    session.audit.flush()  # type: ignore[union-attr]
    assert session.audit.verify().ok  # type: ignore[union-attr]


async def test_invalid_arguments_end_as_an_error_before_any_handler(session: AgentSession) -> None:
    result = await session.call_tool("echo", {"times": "x"})
    assert result.is_error
    assert result.content[0].text.startswith('Validation failed for tool "echo":')
    assert session.log == []  # type: ignore[attr-defined]


async def test_a_blocking_handler_stops_the_call(session: AgentSession) -> None:
    result = await session.call_tool("echo", {"text": "blocked"})
    assert result.is_error and result.content[0].text == "not this one"
    assert session.log == ["tool_call blocked"]  # type: ignore[attr-defined]


async def test_only_active_tools_can_be_called(session: AgentSession) -> None:
    session.set_active_tools_by_name([])
    result = await session.call_tool("echo", {"text": "hi"})
    assert result.is_error and result.content[0].text == "Tool echo not found"
    assert (await session.call_tool("nope", {})).content[0].text == "Tool nope not found"


async def test_the_signal_aborts_the_call_and_ctx_sees_it(session: AgentSession) -> None:
    from pi_notebook import AbortController

    controller = AbortController()
    call = asyncio.ensure_future(
        session.call_tool("echo", {"text": "wait"}, signal=controller.signal)
    )
    await asyncio.wait_for(session.waiting.wait(), 5)  # type: ignore[attr-defined]
    controller.abort()
    result = await asyncio.wait_for(call, 5)
    assert result.is_error and "saw abort" in session.log  # type: ignore[attr-defined]


async def test_cancelling_the_caller_aborts_the_tool_and_waits_for_it(
    session: AgentSession,
) -> None:
    call = asyncio.ensure_future(session.call_tool("echo", {"text": "wait"}))
    await asyncio.wait_for(session.waiting.wait(), 5)  # type: ignore[attr-defined]
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert session.log[-2:] == ["saw abort", "tool_result"]  # type: ignore[attr-defined]


async def test_a_closed_session_refuses_direct_calls(session: AgentSession) -> None:
    await session.close()
    with pytest.raises(SessionClosedError):
        await session.call_tool("echo", {"text": "hi"})


@pytest.mark.parametrize(
    ("ui", "expect_rows", "reason"),
    [
        (ScriptedUI([True]), 3, None),
        (ScriptedUI([False]), 2, "Rejected by user."),
        (None, 2, "requires interactive approval"),
    ],
    ids=["approved", "rejected", "no-ui"],
)
async def test_database_writes_are_governed_in_direct_calls(
    tmp_path: Path, ui: ScriptedUI | None, expect_rows: int, reason: str | None
) -> None:
    path = tmp_path / "shop.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (a INTEGER)")
        conn.execute("INSERT INTO t VALUES (1), (2)")
    ext = database_extension(f"sqlite:///{path}")
    s = create_agent_session(model=Relay(), extensions=[ext], ui=ui, audit="sqlite://")
    try:
        read = await s.call_tool("query_database", {"sql": "SELECT count(*) AS n FROM t"})
        assert not read.is_error and int(read.details["dataframe"]["n"][0]) == 2
        write = await s.call_tool("query_database", {"sql": "INSERT INTO t VALUES (3)"})
        assert write.is_error is (reason is not None)
        if reason is not None:
            assert reason in write.content[0].text
    finally:
        await s.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == expect_rows
