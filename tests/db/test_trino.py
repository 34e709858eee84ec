"""Trino through the ``trino`` client, against a scripted ``/v1/statement`` server
(``trino_http``; no Trino can run here): what the backend sends for a read, a write, a
preview, an estimate, a Stop and a timeout, and what it makes of the answers."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trino")

from loopback_http import free_port, read_then_write
from trino_http import PAGES, FakeTrino

from pi_notebook.ai.abort import AbortController
from pi_notebook.approvals.protocol import Decision
from pi_notebook.database.schema import inspect_schema
from pi_notebook.sql.backend import QueryAborted, QueryError, QueryRefused, query_args_hash
from pi_notebook.sql.backend.errors import QueryTimeout
from pi_notebook.sql.engines import (
    MissingExtra,
    TrinoBackend,
    create_backend,
    engine_for_url,
    estimate_read,
    schema_source,
)
from pi_notebook.sql.engines.trino import io_estimate


@pytest.fixture
def server() -> Iterator[FakeTrino]:
    fake = FakeTrino().start()
    try:
        yield fake
    finally:
        fake.stop()


def url(port: int) -> str:
    return f"trino://analyst@127.0.0.1:{port}/hive/sales"


@pytest.fixture
async def backend(server: FakeTrino) -> AsyncIterator[TrinoBackend]:
    made = create_backend(url(server.port), row_cap=100, statement_timeout_s=20)
    assert isinstance(made, TrinoBackend)
    try:
        yield made
    finally:
        made.dispose()


async def test_a_read_carries_the_time_limit_and_the_urls_catalog_and_schema(
    server: FakeTrino, backend: TrinoBackend
) -> None:
    outcome = await backend.run("r1", "SELECT n, kind FROM events; -- the two kinds")
    assert list(outcome.dataframe.columns) == ["n", "kind"]
    assert list(outcome.dataframe["kind"]) == ["view", "café"] and outcome.row_count_exact
    (sent,) = server.sent("FROM events")
    assert (
        sent.sql == "SELECT n, kind FROM events"
    )  # no trailing ";" or comment: Trino refuses them
    assert sent.headers["X-Trino-Session"] == "query_max_execution_time=20s"
    assert (
        sent.headers["X-Trino-User"],
        sent.headers["X-Trino-Catalog"],
        sent.headers["X-Trino-Schema"],
    ) == ("analyst", "hive", "sales")


async def test_a_read_stops_paging_at_the_row_cap_and_cancels_the_rest(
    server: FakeTrino, backend: TrinoBackend
) -> None:
    outcome = await backend.run("r1", "SELECT number FROM numbers_stream")
    assert len(outcome.dataframe) == 100 and outcome.truncated
    assert outcome.row_count == 101 and not outcome.row_count_exact
    (sent,) = server.sent("numbers_stream")
    assert sent.pages < PAGES and sent.deleted  # the rest was never fetched, and cancelled


async def test_stop_deletes_the_querys_next_uri(server: FakeTrino, backend: TrinoBackend) -> None:
    controller = AbortController()
    running = asyncio.create_task(
        backend.run("r1", "SELECT * FROM slow_table", signal=controller.signal)
    )
    assert await asyncio.to_thread(server.held.wait, 20)
    controller.abort()
    with pytest.raises(QueryAborted):
        await running
    (sent,) = server.sent("slow_table")
    assert sent.deleted


async def test_stop_of_an_approved_write_cancels_it_and_says_what_stays(
    server: FakeTrino, backend: TrinoBackend
) -> None:
    sql = "INSERT INTO slow_table SELECT * FROM staging"
    backend.capabilities.grant("w1", query_args_hash(sql, "trino"), 60)
    controller = AbortController()
    running = asyncio.create_task(backend.run("w1", sql, signal=controller.signal))
    assert await asyncio.to_thread(server.held.wait, 20)
    controller.abort()
    with pytest.raises(QueryAborted, match="without a transaction") as stopped:
        await running
    assert "nothing was written" not in str(stopped.value)
    (sent,) = server.sent("INSERT INTO slow_table")
    assert sent.deleted


async def test_the_statement_timeout_cancels_the_query(server: FakeTrino) -> None:
    backend = create_backend(url(server.port), statement_timeout_s=1)
    try:
        with pytest.raises(QueryTimeout, match="statement timeout"):
            await backend.run("r1", "SELECT * FROM slow_table")
    finally:
        backend.dispose()
    (sent,) = server.sent("slow_table")
    assert sent.deleted and sent.headers["X-Trino-Session"] == "query_max_execution_time=1s"


async def test_a_write_is_sent_only_after_approval_and_reports_its_count(
    server: FakeTrino, backend: TrinoBackend
) -> None:
    sql = "INSERT INTO events SELECT * FROM staging"
    with pytest.raises(QueryRefused):
        await backend.run("w1", sql)
    assert not server.sent("INSERT")
    backend.capabilities.grant("w2", query_args_hash(sql, "trino"), 60)
    outcome = await backend.run("w2", sql)
    assert outcome.row_count == 3 and outcome.statement_kind == "write"
    assert len(server.sent("INSERT")) == 1


async def test_preview_counts_with_the_derived_count_and_bounds_refuse_a_drift(
    server: FakeTrino, backend: TrinoBackend
) -> None:
    sql = "DELETE FROM events WHERE kind = 'view'"
    preview = await backend.preview("w1", sql)
    assert preview.affected_rows == 3
    assert server.sent("SELECT COUNT(*) FROM events WHERE kind = 'view'")
    assert not server.sent("DELETE FROM")
    backend.capabilities.grant("w1", query_args_hash(sql, "trino"), 60, expected_rows=5)
    with pytest.raises(QueryRefused, match="would change 3 rows, the approval was for 5"):
        await backend.run("w1", sql)
    assert not server.sent("DELETE FROM")


async def test_a_refused_connection_is_one_short_line() -> None:
    port = free_port()
    backend = create_backend(url(port), statement_timeout_s=20)
    try:
        with pytest.raises(QueryError) as failed:
            await backend.run("r1", "SELECT 1")
    finally:
        backend.dispose()
    message = str(failed.value)
    assert message.startswith(f"Could not connect to trino://analyst@127.0.0.1:{port}/hive/sales")
    assert "connection refused" in message and "\n" not in message


async def test_estimate_reads_the_io_plans_input_tables(
    server: FakeTrino, backend: TrinoBackend
) -> None:
    estimate = await estimate_read(backend, "SELECT * FROM events WHERE kind = 'buy'")
    assert (estimate.rows, estimate.bytes) == (8192, 131072)
    assert server.sent("EXPLAIN (TYPE IO, FORMAT JSON) SELECT * FROM events")
    unknown = io_estimate({"estimate": {"outputRowCount": float("nan"), "outputSizeInBytes": 9}})
    assert (unknown.rows, unknown.bytes) == (None, 9) and "the plan's" in unknown.source
    assert (await estimate_read(backend, "SHOW TABLES")).rows is None  # not planned


async def test_the_schema_is_read_from_the_catalogs_information_schema(
    backend: TrinoBackend,
) -> None:
    schema = await asyncio.to_thread(inspect_schema, schema_source(backend), "trino")
    assert [(t.name, t.kind) for t in schema.tables] == [("events", "table"), ("recent", "view")]
    assert [(c.name, c.nullable) for c in schema.tables[0].columns] == [
        ("ts", False),
        ("kind", True),
    ]


def test_trino_urls_connect_and_say_where_the_wall_is(monkeypatch: Any) -> None:
    info = engine_for_url("trino://analyst@db.internal:8080/hive/sales")
    assert info.connects and info.cancel is not None and "nextUri" in info.cancel
    assert "cannot set or verify" in info.read_only_backstop
    assert "the classifier is the only wall" in info.read_only_backstop
    assert "never against a live server" in info.read_only_backstop
    with pytest.raises(ValueError, match="CATALOG/SCHEMA"):
        create_backend("trino://analyst@db.internal:8080/hive")
    with pytest.raises(ValueError, match=r"only over HTTPS: add \?secure=true") as plain:
        create_backend("trino://analyst:s3cret@db.internal:8080/hive/sales")
    assert "s3cret" not in str(plain.value)
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "trino" else real(name, *a)
    )
    with pytest.raises(MissingExtra, match=r'pip install "pi-notebook\[trino\]"'):
        create_backend("trino://analyst@db.internal:8080/hive/sales")


@pytest.mark.parametrize("decision", ["rejected", "approved"])
async def test_through_a_session_a_read_runs_and_a_write_reaches_the_server_only_if_approved(
    server: FakeTrino, tmp_path: Path, decision: Decision
) -> None:
    write = "DELETE FROM events WHERE kind = 'view'"
    read, written, request = await read_then_write(
        url(server.port), "SELECT kind FROM events", write, decision, tmp_path / "audit.sqlite"
    )
    assert not read.is_error and list(read.details["dataframe"]["kind"]) == ["view", "café"]
    assert request.preview is not None and request.preview.affected_rows == 3
    assert written.is_error == (decision == "rejected")
    assert len(server.sent("DELETE FROM")) == (decision == "approved")
