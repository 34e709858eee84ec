"""Schema context: ``describe_database``, the schema summary in the system prompt,
the semantic file, and the cache invalidated by an approved DDL statement."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pi_notebook import create_agent_session
from pi_notebook.ai.messages import content_text
from pi_notebook.database import database_extension
from pi_notebook.database.describe import schema_summary
from pi_notebook.database.schema import SchemaInfo, inspect_schema
from pi_notebook.database.semantic import load_semantic, sample_semantic_path
from pi_notebook.errors import ConfigurationError
from pi_notebook.sample_db import sample_database_url
from pi_notebook.sql.backend import create_backend_engine
from pi_notebook.testing import ScriptedModel, text, tool_call

SEMANTIC = {
    "description": "A tiny test shop.",
    "tables": {
        "customers": {
            "description": "Buyers, one row each.",
            "columns": {"city": "Delivery city."},
        },
        "orders": {"columns": {"status": "delivered or shipped."}},
    },
    "glossary": {"revenue": "Sum of orders.total."},
    "examples": [
        {
            "question": "Revenue per city",
            "sql": "SELECT c.city, SUM(o.total) FROM orders o JOIN customers c USING (customer_id) GROUP BY c.city",
        },
        {
            "question": "Count statuses",
            "sql": "SELECT status, COUNT(*) FROM orders GROUP BY status",
        },
    ],
}


class Approve:
    async def confirm(
        self, title: str, message: str, *, signal: Any = None, timeout: Any = None
    ) -> bool:
        return True


def result_texts(session: Any) -> list[str]:
    return [content_text(m.content) for m in session.messages if m.role == "toolResult"]


async def run(
    url: str, *steps: Any, ui: Any = None, **options: Any
) -> tuple[Any, ScriptedModel, Any]:
    model = ScriptedModel([*steps, text("done")])
    ext = database_extension(url=url, **options)
    session = create_agent_session(
        model=model, extensions=[ext], audit=False, ui=ui, builtin_tools=False
    )
    await session.prompt("Tell me about the data")
    await session.close()
    return session, model, ext


def inspect(url: str, dialect: str) -> SchemaInfo:
    engine = create_backend_engine(url)
    try:
        return inspect_schema(engine, dialect)
    finally:
        engine.dispose()


# -- describe_database ------------------------------------------------------------------------
async def test_describe_database_lists_tables_columns_types_keys_and_comments(shop) -> None:
    engine, url = shop
    session, _, _ = await run(url, tool_call("describe_database", {}, id="d1"))
    [result] = [m for m in session.messages if m.role == "toolResult"]
    assert not result.is_error
    body = content_text(result.content)
    assert (
        "customers (table)" in body
        and "orders (table)" in body
        and "customer_contacts (view)" in body
    )
    assert "customer_id INTEGER PRIMARY KEY" in body
    assert "- customer_id INTEGER NOT NULL -> customers(customer_id)" in body  # orders.customer_id
    assert re.search(r"- name VARCHAR(\(100\))? NOT NULL", body)
    if engine == "sqlite":
        assert "contact address" not in body  # SQLite keeps no comments
    else:
        assert "customers (table): People who buy" in body
        assert "email VARCHAR" in body and ": contact address" in body
    # No data: describing never shows a row.
    assert "ada.lovelace" not in body and "Lovelace" not in body
    frame = result.details["dataframe"]
    assert {"table", "column", "type", "primary_key", "references", "comment"} <= set(frame.columns)
    assert (
        frame[(frame["table"] == "orders") & (frame["column"] == "customer_id")][
            "references"
        ].item()
        == "customers(customer_id)"
    )


async def test_describe_database_comments_on_mysql(mysql_shop: str) -> None:
    session, _, _ = await run(mysql_shop, tool_call("describe_database", {"tables": ["customers"]}))
    [body] = result_texts(session)
    assert "customers (table): People who buy" in body and ": contact address" in body


async def test_describe_database_filters_by_table_and_names_unknown_ones(shop) -> None:
    _, url = shop
    session, _, _ = await run(url, tool_call("describe_database", {"tables": ["ORDERS", "nope"]}))
    [body] = result_texts(session)
    assert "orders (table)" in body and "customers (table)" not in body
    assert "Unknown tables: nope. Known: customer_contacts, customers, orders." in body


async def test_describe_database_needs_no_approval_even_without_a_ui(tmp_path: Path) -> None:
    session, _, _ = await run(
        sample_database_url(), tool_call("describe_database", {"tables": ["orders"]})
    )
    [result] = [m for m in session.messages if m.role == "toolResult"]
    assert not result.is_error and "orders (table)" in content_text(result.content)


# -- the summary in the system prompt -------------------------------------------------------
async def test_schema_summary_is_in_the_system_prompt_with_a_pointer(shop) -> None:
    _, url = shop
    _, model, _ = await run(url)
    prompt = model.calls[0].system_prompt
    assert "Database (" in prompt and "2 tables, 1 views" in prompt
    assert "- customers(customer_id PK, name, email, phone, city)" in prompt
    assert "- orders(order_id PK, customer_id -> customers, total, status)" in prompt
    assert "Call describe_database for column types" in prompt


def test_schema_summary_keeps_to_its_budget_keys_first(tmp_path: Path) -> None:
    schema = inspect(sample_database_url(), "sqlite")
    full = schema_summary(schema, budget=5_000)
    assert "customers(customer_id PK, name, email, city, country, signup_date)" in full
    assert len(full) <= 400
    keys = schema_summary(schema, budget=390)
    assert len(keys) <= 390 and "name" not in keys
    assert "- orders(order_id PK, customer_id -> customers, +2 more)" in keys
    assert "- order_items(order_id PK, line_no PK, product_id -> products, +2 more)" in keys
    names = schema_summary(schema, budget=300)
    assert len(names) <= 300 and "Tables: customers, order_items, orders, products" in names
    tiny = schema_summary(schema, budget=150)
    assert "4 tables; their names do not fit here." in tiny and "describe_database" in tiny


async def test_schema_summary_budget_zero_leaves_the_prompt_alone(tmp_path: Path) -> None:
    _, model, _ = await run(sample_database_url(), schema_budget_chars=0)
    assert "Database (" not in model.calls[0].system_prompt


# -- the semantic file ----------------------------------------------------------------------
async def test_semantic_file_is_merged_into_the_summary_and_describe(shop, tmp_path: Path) -> None:
    _, url = shop
    import yaml

    path = tmp_path / "semantic.yaml"
    path.write_text(yaml.safe_dump(SEMANTIC))
    session, model, _ = await run(
        url, tool_call("describe_database", {"tables": ["orders"]}), semantic=str(path)
    )
    prompt = model.calls[0].system_prompt
    assert "A tiny test shop." in prompt and "customers(customer_id PK" in prompt
    assert "Buyers, one row each." in prompt and "Glossary: revenue: Sum of orders.total." in prompt
    [body] = result_texts(session)
    assert re.search(r"- status VARCHAR(\(20\))?: delivered or shipped\.", body)
    assert "3 tables and views: A tiny test shop.\n" in body
    # Only the examples that use the described tables.
    assert "Count statuses" in body and "Revenue per city" in body
    assert "Glossary" not in body  # the glossary comes with a description of the whole database


def test_semantic_file_errors_name_the_file_and_the_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        textwrap.dedent("""
        tables:
          customers:
            descripton: typo
    """)
    )
    with pytest.raises(
        ConfigurationError, match=r"semantic file .*bad.yaml.*tables.customers.descripton"
    ):
        database_extension(url="sqlite://", semantic=str(bad))
    with pytest.raises(ConfigurationError, match="Cannot read"):
        database_extension(url="sqlite://", semantic=str(tmp_path / "missing.yaml"))


def test_semantic_warnings_name_what_the_database_lacks(shop) -> None:
    engine, url = shop
    layer = load_semantic({"tables": {"customers": {"columns": {"emial": "x"}}, "ghosts": {}}})
    warnings = layer.warnings(inspect(url, engine))
    assert warnings == [
        "semantic file: no column customers.emial in the database",
        "semantic file: no table 'ghosts' in the database",
    ]


def test_sample_semantic_file_matches_the_sample_database() -> None:
    layer = load_semantic(sample_semantic_path())
    schema = inspect(sample_database_url(), "sqlite")
    assert layer.warnings(schema) == []
    assert {"customers", "products", "orders", "order_items"} <= set(layer.tables)
    assert layer.glossary and layer.examples
    from pi_notebook.sql import classify

    assert all(classify(e.sql, "sqlite").kind == "read" for e in layer.examples)


# -- cache and invalidation -------------------------------------------------------------------
async def test_schema_is_cached_and_read_again_after_an_approved_ddl(tmp_path: Path) -> None:
    import shutil

    url = f"sqlite:///{tmp_path / 'copy.sqlite'}"
    shutil.copy(sample_database_url().removeprefix("sqlite:///"), tmp_path / "copy.sqlite")
    steps = [
        tool_call("describe_database", {"tables": ["notes"]}, id="before"),
        tool_call(
            "query_database",
            {
                "sql": "INSERT INTO customers (customer_id, name, email, city, country, signup_date) VALUES (999, 'X', 'x@x', 'c', 'DE', '2024-01-01')"
            },
            id="dml",
        ),
        tool_call(
            "query_database",
            {"sql": "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"},
            id="ddl",
        ),
        tool_call("describe_database", {"tables": ["notes"]}, id="after"),
    ]
    session, _, ext = await run(url, *steps, ui=Approve())
    before, dml, ddl, after = result_texts(session)
    assert "Unknown tables: notes" in before
    assert "row(s) affected" in dml and "row(s) affected" in ddl
    assert "notes (table)" in after and "body TEXT" in after
    # Read for the first prompt's summary, kept through the INSERT, read again after the DDL.
    assert ext.schema.reads == 2


async def test_an_unreachable_database_is_reported_and_the_prompt_goes_on(closed_port: int) -> None:
    url = f"postgresql+psycopg://nobody:pa55word@127.0.0.1:{closed_port}/none?connect_timeout=2"
    model = ScriptedModel([text("still here")])
    session = create_agent_session(
        model=model, extensions=[database_extension(url=url)], audit=False, builtin_tools=False
    )
    await session.prompt("hello")
    await session.close()
    assert model.calls and "Database (" not in model.calls[0].system_prompt
    assert session.messages[-1].text == "still here"
    [error] = session.extension_errors()
    assert error["event"] == "before_agent_start"
    assert error["error"].startswith("The database schema could not be read.")
    assert "pa55word" not in error["error"]
