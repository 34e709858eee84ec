"""The public surface, name by name, as outside checks use it: the package face, ``pi_notebook.sql``
and ``pi_notebook.testing``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

import pi_notebook
from pi_notebook import (
    AgentSession,
    ExtensionAPI,
    TextContent,
    ToolDefinition,
    ToolResult,
    create_agent_session,
    define_tool,
)
from pi_notebook.sql import canonicalize, classify
from pi_notebook.testing import ScriptedModel, text, tool_call


class EchoParams(BaseModel):
    text: str


async def echo(
    tool_call_id: str, params: EchoParams, signal: Any, on_update: Any, ctx: Any
) -> ToolResult:
    on_update(ToolResult(content=[TextContent(text="working")], details={"phase": 1}))
    return ToolResult(content=[TextContent(text=params.text)], details={"n": 1})


echo_tool = define_tool(
    ToolDefinition(
        name="echo", label="Echo", description="Echo text.", parameters=EchoParams, execute=echo
    )
)


class RecordingUI:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def confirm(
        self, title: str, message: str, *, signal: Any = None, timeout: float | None = None
    ) -> bool:
        self.asked.append(title)
        return True


async def test_the_documented_extension_runs_with_a_gate_and_a_ui() -> None:
    seen: list[tuple[str, Any, bool]] = []

    async def gate(event: Any, ctx: Any) -> dict[str, Any] | None:
        seen.append((event.type, event.input.text, ctx.has_ui))
        if event.input.text == "forbidden":
            return {"block": True, "reason": "not that"}
        assert await ctx.ui.confirm("Echo", event.input.text, signal=ctx.signal, timeout=5)
        return None

    def my_extension(pi: ExtensionAPI) -> None:
        pi.register_tool(echo_tool)
        pi.on("tool_call", gate)

    ui = RecordingUI()
    model = ScriptedModel(
        [
            [
                tool_call("echo", {"text": "hi"}, id="a"),
                tool_call("echo", {"text": "forbidden"}, id="b"),
            ],
            text("ok"),
        ]
    )
    session = create_agent_session(model=model, extensions=[my_extension], ui=ui, audit=False)
    assert isinstance(session, AgentSession)
    events: list[Any] = []
    unsubscribe = session.subscribe(events.append)
    await session.prompt("go")
    unsubscribe()
    model.assert_complete()

    assert seen == [("tool_call", "hi", True), ("tool_call", "forbidden", True)]
    assert ui.asked == ["Echo"]
    results = [m for m in session.messages if m.role == "toolResult"]
    assert [(m.tool_call_id, m.tool_name, m.is_error) for m in results] == [
        ("a", "echo", False),
        ("b", "echo", True),
    ]
    first, second = results[0].content[0], results[1].content[0]
    assert first.type == "text" and first.text == "hi" and results[0].details == {"n": 1}
    assert second.type == "text" and second.text == "not that"
    updates = [e for e in events if e.type == "tool_execution_update"]
    assert [(e.tool_call_id, e.partial_result.details) for e in updates] == [("a", {"phase": 1})]
    assert "echo" in session.active_tool_names
    assert isinstance(session.system_prompt, str)
    await session.close()


def test_sql_names_and_the_public_all() -> None:
    verdict = classify("SELECT 1", "sqlite")
    assert verdict.kind == "read" and isinstance(verdict.reasons, tuple)
    assert classify("DELETE FROM t", "postgres").kind == "write"
    assert classify("SELECT 1; DROP TABLE t", "mysql").kind == "reject"
    assert canonicalize("select  1 -- c", "duckdb") == canonicalize("SELECT 1", "duckdb")
    for name in (
        "define_tool",
        "ToolDefinition",
        "ToolResult",
        "TextContent",
        "ExtensionAPI",
        "create_agent_session",
        "AgentSession",
        "load_ipython_extension",
    ):
        assert name in pi_notebook.__all__
