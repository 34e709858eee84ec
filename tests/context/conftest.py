"""Fixtures of the context tests: an echo tool, the shop on each engine."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from ctx_support import build_shop
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


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
