"""Message defaults: every message gets containers of its own (the factories are the builtins
under typed names, not generic aliases, for speed)."""

from __future__ import annotations

from pi_notebook.agent.types import ToolResult
from pi_notebook.ai.messages import AssistantMessage, TextContent, ToolCall, ToolResultMessage


def test_default_containers_are_fresh_and_empty() -> None:
    first, second = AssistantMessage(), AssistantMessage()
    assert first.content == [] and type(first.content) is list
    first.content.append(TextContent(text="a"))
    assert second.content == []
    a, b = ToolCall(id="1", name="t"), ToolCall(id="2", name="t")
    assert a.arguments == {} and type(a.arguments) is dict
    a.arguments["x"] = 1
    assert b.arguments == {}
    r1, r2 = (
        ToolResultMessage(tool_call_id="1", tool_name="t"),
        ToolResultMessage(tool_call_id="2", tool_name="t"),
    )
    r1.content.append(TextContent(text="a"))
    assert r2.content == [] and type(r2.content) is list
    t1, t2 = ToolResult(), ToolResult()
    t1.content.append(TextContent(text="a"))
    assert t2.content == []
