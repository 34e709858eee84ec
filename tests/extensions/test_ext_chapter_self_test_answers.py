"""The chapter's self-test (§23), questions 1, 2, 3, 5, 6, 7 and 9, answered by the running system."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from pi_notebook import (
    ExtensionAPI,
    TextContent,
    ToolResult,
    create_agent_session,
    define_tool,
)
from pi_notebook.testing import ScriptedModel, text, tool_call

REDACT = Path(__file__).resolve().parents[2] / "extensions" / "redact.py"


def test_selftest_q1_define_tool_vs_register_tool(make_tool: Any) -> None:
    """Q1: define_tool only carries the parameter type; register_tool registers."""
    defined = make_tool("query")
    assert define_tool(defined) is defined
    only_defined = create_agent_session(model=ScriptedModel([]), audit=False)
    assert "query" not in only_defined.tool_registry

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(defined)

    registered = create_agent_session(model=ScriptedModel([]), extensions=[ext], audit=False)
    assert registered.tool_registry["query"].definition is defined
    assert "query" in registered.active_tool_names


async def test_selftest_q2_validated_before_tool_call_and_still_mutable(make_tool: Any) -> None:
    """Q2: arguments are validated after prepare and before tool_call; handlers may still change
    them, and execute receives the change without a second validation."""

    class Params(BaseModel):
        sql: str = Field(min_length=1)
        limit: int = Field(le=100)

    steps: list[str] = []
    received: list[Any] = []

    def prepare(raw: Any) -> Any:
        steps.append("prepare")
        return raw

    async def execute(
        tool_call_id: str, params: Params, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        steps.append("execute")
        received.append(params)
        return ToolResult(content=[TextContent(text="ok")])

    tool = make_tool("query", parameters=Params, execute=execute)
    tool.prepare_arguments = prepare

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(tool)

        def handler(event: Any, ctx: Any) -> None:
            steps.append(f"tool_call sees {type(event.input).__name__} limit={event.input.limit!r}")
            event.input.limit = 10_000  # beyond le=100: not validated again

        pi.on("tool_call", handler)

    model = ScriptedModel(
        [
            [
                tool_call("query", {"sql": "", "limit": 5}),
                tool_call("query", {"sql": "SELECT 1", "limit": "5"}),
            ],
            text("done"),
        ]
    )
    session = create_agent_session(
        model=model, extensions=[ext], audit=False, tool_execution="sequential"
    )
    await session.prompt("go")
    invalid, valid = [m for m in session.messages if m.role == "toolResult"]
    assert invalid.is_error and invalid.content[0].text.startswith(
        'Validation failed for tool "query":'
    )
    assert valid.is_error is False
    assert steps == ["prepare", "prepare", "tool_call sees Params limit=5", "execute"]
    assert received[0].limit == 10_000


def test_selftest_q3_registered_tool_keeps_source_info(
    make_tool: Any, write_extension: Any
) -> None:
    """Q3: source info tells where a tool came from, so clashes, precedence and the
    tool list can name the extension responsible."""
    body = """
        from pydantic import BaseModel
        from pi_notebook import ToolDefinition, ToolResult

        class P(BaseModel):
            pass

        async def run(tool_call_id, params, signal, on_update, ctx):
            return ToolResult()

        def register(pi):
            pi.register_tool(ToolDefinition(name="query", label="Q", description="d", parameters=P, execute=run))
        """
    first, second = write_extension(body, name="team_db"), write_extension(body, name="my_db")
    session = create_agent_session(model=ScriptedModel([]), extensions=[first, second], audit=False)
    assert session.tool_registry["query"].source_info.path == str(first.resolve())
    assert [d.message for d in session.diagnostics] == [
        f'Tool "query" conflicts with {first.resolve()}'
    ]
    assert session.diagnostics[0].extension_path == str(second.resolve())
    sources = {t.name: t.source_info.path for t in session.get_all_tools()}
    assert sources["read"] == "<builtin:read>"


def test_selftest_q5_set_active_tools_ignores_unknown_names(make_tool: Any) -> None:
    """Q5: unknown names are silently ignored; the rest replaces the active set."""
    apis: list[ExtensionAPI] = []

    def ext(pi: ExtensionAPI) -> None:
        apis.append(pi)
        pi.register_tool(make_tool("query", snippet="run SQL"))

    session = create_agent_session(model=ScriptedModel([]), extensions=[ext], audit=False)
    apis[0].set_active_tools(["query", "does_not_exist", "ls"])
    assert apis[0].get_active_tools() == ["query", "ls"]
    assert "does_not_exist" not in session.system_prompt
    assert session.diagnostics == [] and session.extension_errors() == []


async def test_selftest_q6_sdk_custom_beats_extension_beats_builtin(make_tool: Any) -> None:
    """Q6: SDK custom > extension > built-in; between extensions the first wins."""

    def first(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("read", description="first extension"))
        pi.register_tool(make_tool("ls", description="first extension"))

    def second(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("ls", description="second extension"))

    session = create_agent_session(
        model=ScriptedModel([]),
        extensions=[first, second],
        custom_tools=[make_tool("read", description="sdk")],
        audit=False,
    )
    described = {t.name: t.description for t in session.get_all_tools()}
    assert described["read"] == "sdk"
    assert described["ls"] == "first extension"
    assert session.tool_registry["inspect_variable"].source_info.kind == "builtin"


async def test_selftest_q7_event_wrapping_vs_same_name_replacement(
    make_tool: Any, tmp_path: Path
) -> None:
    """Q7: event wrapping runs around the original execute without a reference to it;
    a same-name tool replaces the original, which then never runs."""
    (tmp_path / "f.txt").write_text("token: abcdef123456\n", encoding="utf-8")

    # Event wrapping: the built-in read runs, the redact handler patches its result.
    wrapped_model = ScriptedModel([tool_call("read", {"path": "f.txt"}), text("done")])
    wrapped = create_agent_session(
        model=wrapped_model, extensions=[REDACT], cwd=str(tmp_path), audit=False
    )
    await wrapped.prompt("go")
    assert wrapped.messages[2].content[0].text == "token: ***"
    assert wrapped.messages[2].details["total_lines"] == 1  # the built-in's own details

    # Same-name replacement: only the new definition runs.
    ran: list[Any] = []

    def replace(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("read", log=ran))

    replaced_model = ScriptedModel([tool_call("read", {"text": "f.txt"}), text("done")])
    replaced = create_agent_session(
        model=replaced_model, extensions=[replace], cwd=str(tmp_path), audit=False
    )
    await replaced.prompt("go")
    assert replaced.messages[2].details == {"tool": "read"}
    assert "token" not in replaced.messages[2].content[0].text
    assert len(ran) == 1


async def test_selftest_q9_details_error_is_not_is_error(make_tool: Any) -> None:
    """Q9: a successful return with details={"error": ...} is not an error; raising is,
    and a result handler may set is_error explicitly."""

    async def soft(
        tool_call_id: str, params: Any, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        return ToolResult(content=[TextContent(text="no rows")], details={"error": "table empty"})

    async def hard(
        tool_call_id: str, params: Any, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        raise RuntimeError("table missing")

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("soft", execute=soft))
        pi.register_tool(make_tool("hard", execute=hard))
        pi.register_tool(make_tool("flagged", execute=soft))
        pi.on("tool_result", lambda e, c: {"is_error": True} if e.tool_name == "flagged" else None)

    model = ScriptedModel(
        [[tool_call("soft", {}), tool_call("hard", {}), tool_call("flagged", {})], text("done")]
    )
    session = create_agent_session(model=model, extensions=[ext], audit=False)
    await session.prompt("go")
    results = {m.tool_name: m for m in session.messages if m.role == "toolResult"}
    assert (results["soft"].is_error, results["soft"].details) == (False, {"error": "table empty"})
    assert (results["hard"].is_error, results["hard"].content[0].text) == (True, "table missing")
    assert results["flagged"].is_error is True
