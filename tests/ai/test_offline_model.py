"""The offline demo model: SQL in the prompt becomes a query_database call."""

from __future__ import annotations

from pydantic import BaseModel, Field

from pi_notebook import TextContent, ToolDefinition, ToolResult, create_agent_session, define_tool
from pi_notebook.ai.offline import OfflineModel, extract_sql


class SqlParams(BaseModel):
    sql: str = Field(min_length=1)


def fake_database(seen: list[str]):
    async def execute(tool_call_id, params: SqlParams, signal, on_update, ctx) -> ToolResult:
        seen.append(params.sql)
        return ToolResult(content=[TextContent(text="3 rows: a, b, c")], details={"rows": 3})

    tool = define_tool(
        ToolDefinition(
            name="query_database",
            label="Query",
            description="Run SQL.",
            parameters=SqlParams,
            execute=execute,
        )
    )
    return lambda pi: pi.register_tool(tool)


def test_extract_sql_from_fence_and_from_keyword_line() -> None:
    assert extract_sql("Please run\n```sql\nSELECT 1\n```\nthanks") == "SELECT 1"
    assert (
        extract_sql("top customers:\nselect name\nfrom customers\n\nand more")
        == "select name\nfrom customers"
    )
    assert extract_sql("how many orders are there?") is None


async def test_offline_runs_sql_and_summarises_the_result() -> None:
    seen: list[str] = []
    session = create_agent_session(
        model=OfflineModel(), extensions=[fake_database(seen)], audit=False
    )
    await session.prompt("SELECT name FROM customers LIMIT 3")
    assert seen == ["SELECT name FROM customers LIMIT 3"]
    roles = [m.role for m in session.messages]
    assert roles == ["user", "assistant", "toolResult", "assistant"]
    final = session.messages[-1]
    assert final.role == "assistant" and "3 rows: a, b, c" in final.text  # type: ignore[union-attr]
    await session.close()


async def test_offline_help_text_names_active_tools_and_says_it_is_not_an_llm() -> None:
    session = create_agent_session(
        model=OfflineModel(), extensions=[fake_database([])], audit=False
    )
    await session.prompt("hello, who are you?")
    answer = session.messages[-1]
    assert answer.role == "assistant"
    assert "not an LLM" in answer.text  # type: ignore[union-attr]
    for name in session.active_tool_names:
        assert name in answer.text  # type: ignore[union-attr]
    await session.close()


async def test_offline_does_not_call_an_inactive_tool() -> None:
    session = create_agent_session(
        model=OfflineModel(), extensions=[fake_database([])], audit=False
    )
    session.set_active_tools_by_name(["read"])
    await session.prompt("SELECT 1")
    assert [m.role for m in session.messages] == ["user", "assistant"]
    assert "not active" in session.messages[-1].text  # type: ignore[union-attr]
    await session.close()
