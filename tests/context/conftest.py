"""Helpers for the context tests (issue 13): a small echo tool."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from pydantic import BaseModel

from pi_notebook import TextContent, ToolDefinition, ToolResult, define_tool


class EchoParams(BaseModel):
    text: str = "hi"


def echo_tool(name: str = "echo") -> ToolDefinition[Any]:
    """A tool answering ``<name>:<text>`` with ``details={"tool": name}``."""

    async def execute(
        tool_call_id: str, params: Any, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        return ToolResult(
            content=[TextContent(text=f"{name}:{params.text}")], details={"tool": name}
        )

    return define_tool(
        ToolDefinition(
            name=name,
            label=name,
            description=f"The {name} tool.",
            parameters=EchoParams,
            execute=execute,
        )
    )


@pytest.fixture
def make_tool() -> Callable[..., ToolDefinition[Any]]:
    return echo_tool


# -- a small shop with personal data, on each engine ------------------------------------------
CUSTOMERS = [
    (1, "Ada Lovelace", "ada.lovelace@example.org", "+44 20 7946 0001", "London"),
    (2, "Grace Hopper", "grace.hopper@example.net", "+1 212 555 0142", "New York"),
    (3, "Alan Turing", "alan.turing@example.com", "+44 161 496 0753", "Manchester"),
]
EMAILS = [c[2] for c in CUSTOMERS]
PHONES = [c[3] for c in CUSTOMERS]
NAMES = [c[1] for c in CUSTOMERS]

_COMMENTS = {
    "postgres": [
        "COMMENT ON TABLE customers IS 'People who buy'",
        "COMMENT ON COLUMN customers.email IS 'contact address'",
    ],
    "duckdb": [
        "COMMENT ON TABLE customers IS 'People who buy'",
        "COMMENT ON COLUMN customers.email IS 'contact address'",
    ],
    "mysql": [
        "ALTER TABLE customers COMMENT = 'People who buy'",
        "ALTER TABLE customers MODIFY email VARCHAR(100) NOT NULL COMMENT 'contact address'",
    ],
}


def build_shop(url: str, engine: str) -> None:
    """customers (with email and phone), orders referencing them, and a view over both."""
    from pi_notebook.sql.backend import create_backend_engine

    sa_engine = create_backend_engine(url)
    try:
        with sa_engine.begin() as conn:
            for ddl in (
                "CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, name VARCHAR(100) NOT NULL, "
                "email VARCHAR(100) NOT NULL, phone VARCHAR(40), city VARCHAR(40))",
                "CREATE TABLE orders (order_id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL "
                "REFERENCES customers (customer_id), total NUMERIC(10, 2), status VARCHAR(20))",
                "CREATE VIEW customer_contacts AS SELECT name, email FROM customers",
                *_COMMENTS.get(engine, []),
            ):
                conn.exec_driver_sql(ddl)
            for row in CUSTOMERS:
                conn.exec_driver_sql(
                    "INSERT INTO customers VALUES ({}, '{}', '{}', '{}', '{}')".format(*row)
                )
            for order_id, customer_id, total, status in [
                (10, 1, 120.5, "delivered"), (11, 1, 30.0, "shipped"), (12, 2, 99.9, "delivered"),
            ]:  # fmt: skip
                conn.exec_driver_sql(
                    f"INSERT INTO orders VALUES ({order_id}, {customer_id}, {total}, '{status}')"
                )
    finally:
        sa_engine.dispose()


def _fresh_server_database(base_url: str, quote: str, force: str) -> Iterator[str]:
    base = sa.make_url(base_url)
    name = f"pi_ctx_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {quote}{name}{quote}")
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {quote}{name}{quote}{force}")
        admin.dispose()


@pytest.fixture(scope="module", params=["sqlite", "duckdb", "postgres"])
def shop(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """(engine, url) of the shop on SQLite, DuckDB and PostgreSQL (one database per module)."""
    engine = request.param
    if engine == "postgres":
        base = request.getfixturevalue("pg_url")  # skips (or fails) when the server is absent
        gen = _fresh_server_database(base, '"', " WITH (FORCE)")
        url = next(gen)
        try:
            build_shop(url, engine)
            yield engine, url
        finally:
            gen.close()
        return
    folder = tmp_path_factory.mktemp(f"shop_{engine}")
    url = (
        f"sqlite:///{folder / 'shop.sqlite'}"
        if engine == "sqlite"
        else f"duckdb:///{folder / 'shop.duckdb'}"
    )
    build_shop(url, engine)
    yield engine, url


@pytest.fixture(scope="module")
def mysql_shop(mysql_url: str) -> Iterator[str]:
    gen = _fresh_server_database(mysql_url, "`", "")
    url = next(gen)
    try:
        build_shop(url, "mysql")
        yield url
    finally:
        gen.close()
