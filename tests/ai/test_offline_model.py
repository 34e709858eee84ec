"""The offline demo model: SQL in the prompt becomes a query_database call."""

from __future__ import annotations

import json

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


ENGLISH = [
    "Show me the 5 most expensive products.",
    "Delete nothing",
    "Update me on sales",
    "Drop the customers table",
    "Set the city to Oslo",
    "Analyze sales",
    "Create a chart of revenue per month",
    "Begin",
]


def test_english_is_never_taken_for_sql() -> None:
    for sentence in ENGLISH:
        assert extract_sql(sentence, "sqlite") is None, sentence
    # Statement keywords of other engines are requests on SQLite, not SQL to send.
    assert extract_sql("show tables", "sqlite") is None
    assert extract_sql("show tables", "mysql") == "show tables"


async def test_english_gets_help_and_no_approval_prompt(tmp_path) -> None:
    """The first thing a user without a key sees: a sentence gets a short reply saying what
    the offline model can do, never a 'Database write' prompt."""
    from pi_notebook.database import database_extension

    class NoPrompts:
        async def confirm(self, title, message, *, signal=None, timeout=None) -> bool:
            raise AssertionError(f"asked {title!r} for {message!r}")

    db = tmp_path / "shop.db"
    import sqlite3

    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE products (name TEXT, price REAL)")
    for sentence in ENGLISH:
        session = create_agent_session(
            model=OfflineModel(),
            ui=NoPrompts(),
            audit=False,
            extensions=[database_extension(url=f"sqlite:///{db}")],
        )
        await session.prompt(sentence)
        assert [m.role for m in session.messages] == ["user", "assistant"], sentence
        reply = session.messages[-1].text  # type: ignore[union-attr]
        assert "list the tables" in reply and "describe a table" in reply
        assert "count rows" in reply and "run the SQL you paste" in reply
        await session.close()


async def test_understood_requests_run_as_reads(tmp_path) -> None:
    import sqlite3

    from pi_notebook.database import database_extension

    db = tmp_path / "shop.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER, status TEXT)")
        conn.executemany("INSERT INTO orders VALUES (?, ?)", [(1, "new"), (2, "new"), (3, "paid")])
    cases = {
        "List the tables.": ["orders"],
        "describe orders": ["id", "status"],
        "How many orders are there?": [3],
        "How many orders per status?": ["new", "paid"],
    }
    for prompt, expected in cases.items():
        session = create_agent_session(
            model=OfflineModel(),
            audit=False,
            extensions=[database_extension(url=f"sqlite:///{db}")],
        )
        await session.prompt(prompt)
        result = next(m for m in session.messages if m.role == "toolResult")
        assert not result.is_error, (prompt, result.content)  # type: ignore[union-attr]
        frame = result.details["dataframe"]  # type: ignore[union-attr]
        values = set(frame.columns) | set(frame.iloc[:, 0])
        assert set(expected) <= values, (prompt, frame)
        assert result.details["statement_kind"] == "read"  # type: ignore[union-attr]
        await session.close()


SUMMARY = """You are pi_notebook.

Database (sqlite): 3 tables, 0 views.
- customers(customer_id PK, name, city)
- orders(order_id PK, customer_id -> customers, status)
- products(product_id PK, name, price)
Call describe_database for column types, comments, examples and anything not listed here."""

# English that parses as SQL: only the schema tells it apart.
ENGLISH_THAT_PARSES = {
    "delete from orders where it is cancelled": "column `it`",
    "Update products set price = cheaper": "column `cheaper`",
    "select 5 products from the shop": "table `the`",
    "select name from my customers": "table `my`",
    "delete from orders where status is cancelled": "column `cancelled`",
}


def test_schema_view_reads_every_level_of_the_summary() -> None:
    from pi_notebook.ai.offline import schema_view

    view = schema_view(SUMMARY)
    assert view is not None and view.complete
    assert view.tables["orders"] == {"order_id", "customer_id", "status"}
    keys_only = schema_view(
        "Database (duckdb): 2 tables, 1 views.\n- a(id PK, +3 more)\n- b (view)(x)\n- c(id PK)"
    )
    assert keys_only is not None and keys_only.complete
    assert keys_only.tables == {"a": None, "b": {"x"}, "c": {"id"}}
    names = schema_view("Database (sqlite): 9 tables, 0 views.\nTables: a, b, and 7 more")
    assert names is not None and not names.complete and names.tables == {"a": None, "b": None}
    assert schema_view("You are pi_notebook.") is None


def test_english_that_parses_is_not_sql_when_it_names_what_the_database_lacks() -> None:
    from pi_notebook.ai.offline import schema_view, unknown_name

    view = schema_view(SUMMARY)
    for sentence, name in ENGLISH_THAT_PARSES.items():
        assert extract_sql(sentence, "sqlite", view) is None, sentence
        assert unknown_name(sentence, "sqlite", view) == name, sentence
    # Real statements still run: columns of the tables, aliases, CTEs, quoted names.
    for sql in [
        "SELECT status, COUNT(*) AS n FROM orders GROUP BY status ORDER BY n DESC",
        "UPDATE customers SET city = 'Oslo' WHERE customer_id = 1",
        "select o.status from orders o join customers c on c.customer_id = o.customer_id",
        "with t(k) as (select 1) select k from t",
        'SELECT name FROM sqlite_master WHERE name = "orders"',
        "INSERT INTO products (product_id, name, price) VALUES (9, 'x', 1.5)",
        "SELECT 1",
    ]:
        assert extract_sql(sql, "sqlite", view) == sql, sql
    # A write names a table the summary does not list: not taken (put it in a fence).
    assert extract_sql("DELETE FROM invoices WHERE id = 1", "sqlite", view) is None
    assert extract_sql("```sql\nDELETE FROM invoices WHERE id = 1\n```", "sqlite", view) == (
        "DELETE FROM invoices WHERE id = 1"
    )
    # With no summary at all: bare reads run, bare writes need the fence.
    assert extract_sql("SELECT name FROM customers", "sqlite") == "SELECT name FROM customers"
    assert extract_sql("UPDATE customers SET city = 'X'", "sqlite") is None
    assert extract_sql("select 5 products from the shop", "sqlite") is None


async def test_english_that_parses_gets_help_not_a_call_or_prompt() -> None:
    """Through the model's stream: English that parses gets the help reply saying why, and
    no tool call (so no approval prompt can follow)."""
    from pi_notebook.ai.messages import UserMessage
    from pi_notebook.ai.model import Context, ToolSchema

    tool = ToolSchema(
        name="query_database",
        parameters={},
        description="Run one SQL statement (sqlite dialect) on the database.",
    )
    for sentence, name in [*ENGLISH_THAT_PARSES.items(), ("count the weather", "table `weather`")]:
        context = Context(
            system_prompt=SUMMARY, tools=[tool], messages=[UserMessage(content=sentence)]
        )
        events = [e async for e in OfflineModel().stream(context)]
        assert not any(e.type.startswith("toolcall") for e in events), sentence
        text = "".join(getattr(e, "delta", "") for e in events if e.type == "text_delta")
        assert f"names {name} that this database does not have" in text, sentence
        assert "```sql block" in text and "list the tables" in text


def test_summary_of_an_edited_statement_reports_its_result_not_the_note() -> None:
    from pi_notebook.ai.messages import ToolResultMessage
    from pi_notebook.ai.offline import EDIT_NOTE, _summary  # pyright: ignore[reportPrivateUsage]

    note = f"{EDIT_NOTE} before approving it (it was approved as edited). The statement that ran:\nUPDATE t SET a = 2"
    edited = ToolResultMessage(
        tool_call_id="c",
        tool_name="query_database",
        content=[
            TextContent(text=note),
            TextContent(text="Statement executed; 1 row(s) affected."),
        ],
    )
    assert _summary(edited) == (
        "`query_database` finished (as you edited it): Statement executed; 1 row(s) affected."
    )
    plain = ToolResultMessage(
        tool_call_id="d", tool_name="query_database", content=[TextContent(text="3 row(s).")]
    )
    assert _summary(plain) == "`query_database` finished: 3 row(s)."


async def test_offline_calls_the_sql_tool_it_is_offered_whatever_its_name() -> None:
    """It knows no tool by name: the offered tool that says SQL and takes a string gets the
    statement, in that string argument."""
    from pi_notebook.ai.messages import UserMessage
    from pi_notebook.ai.model import Context, ToolSchema

    class RunParams(BaseModel):
        limit: int = 10
        statement: str

    reader = ToolSchema(
        name="read",
        description="Read a file.",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    )
    runner = ToolSchema(
        name="run_sql",
        description="Run SQL (duckdb dialect).",
        parameters=RunParams.model_json_schema(),
    )
    context = Context(
        system_prompt="",
        tools=[reader, runner],
        messages=[UserMessage(content="```sql\nSELECT 1\n```")],
    )
    events = [e async for e in OfflineModel().stream(context)]
    [start] = [e for e in events if e.type == "toolcall_start"]
    deltas = "".join(getattr(e, "delta", "") for e in events if e.type == "toolcall_delta")
    assert start.partial.content[-1].name == "run_sql"  # type: ignore[union-attr]
    assert json.loads(deltas) == {"statement": "SELECT 1"}
    text = "".join(getattr(e, "delta", "") for e in events if e.type == "text_delta")
    assert text == "Running this SQL with `run_sql`."
