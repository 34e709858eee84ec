"""A ClickHouse server through clickhouse-connect, against a scripted HTTP interface
(``clickhouse_http``; no ClickHouse server can run here): what the backend sends for a read,
a write, a preview, an estimate, a Stop and a timeout, and what it makes of the answers."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("clickhouse_connect")

from clickhouse_http import FakeClickHouse, Request
from loopback_http import free_port, read_then_write

from pi_notebook.ai.abort import AbortController
from pi_notebook.approvals.protocol import Decision
from pi_notebook.database.schema import inspect_schema
from pi_notebook.sql.backend import QueryAborted, QueryError, QueryRefused, query_args_hash
from pi_notebook.sql.backend.errors import QueryTimeout
from pi_notebook.sql.engines import (
    ClickHouseServerBackend,
    MissingExtra,
    create_backend,
    engine_for_url,
    estimate_read,
    schema_source,
)

READ_SETTINGS = {
    "readonly": "1",
    "max_execution_time": "20",
    "result_overflow_mode": "break",
    "max_memory_usage": str(1 << 30),
    "cancel_http_readonly_queries_on_client_close": "1",
}


@pytest.fixture
def server() -> Iterator[FakeClickHouse]:
    fake = FakeClickHouse().start()
    try:
        yield fake
    finally:
        fake.stop()


def url(port: int) -> str:
    return f"clickhousedb://ana:s3cret@127.0.0.1:{port}/shop"


@pytest.fixture
async def backend(server: FakeClickHouse) -> AsyncIterator[ClickHouseServerBackend]:
    made = create_backend(url(server.port), row_cap=100, statement_timeout_s=20)
    assert isinstance(made, ClickHouseServerBackend)
    try:
        yield made
    finally:
        made.dispose()


def only(requests: list[Request]) -> Request:
    assert len(requests) == 1, requests
    return requests[0]


async def test_a_read_is_sent_with_readonly_and_its_limits_and_comes_back_as_arrow(
    server: FakeClickHouse, backend: ClickHouseServerBackend
) -> None:
    outcome = await backend.run("r1", "SELECT ts, n, kind FROM events; -- the two kinds")
    frame = outcome.dataframe
    assert list(frame["kind"]) == ["view", "café"] and list(frame["n"]) == [1, 2]
    assert str(frame["ts"].iloc[0]) == "2024-01-01 00:00:00"  # a DateTime, not Arrow's UInt32
    assert outcome.row_count_exact
    sent = only(server.sent("FROM events"))
    assert sent.params.items() >= READ_SETTINGS.items()
    assert sent.params["max_result_rows"] == "101"  # the row cap + 1: the server stops there
    assert sent.params["query_id"].startswith("pi-") and "session_id" not in sent.params
    assert sent.sql == "SELECT ts, n, kind FROM events\nSETTINGS readonly = 1\n FORMAT Native"
    assert not any("s3cret" in str(r) for r in server.requests)  # sent as a header only


async def test_a_read_stops_at_the_row_cap_and_kills_the_rest(
    server: FakeClickHouse, backend: ClickHouseServerBackend
) -> None:
    outcome = await backend.run("r1", "SELECT number FROM numbers_stream")
    assert len(outcome.dataframe) == 100 and outcome.truncated
    assert outcome.row_count == 101 and not outcome.row_count_exact
    assert await asyncio.to_thread(server.stream_done.wait, 20)
    assert server.streamed_rows == 1000  # one block: max_result_rows=101 ended the result
    query_id = only(server.sent("numbers_stream")).params["query_id"]
    assert server.sent(f"KILL QUERY WHERE query_id = '{query_id}'")
    counted = await backend.run("r2", "SELECT number FROM numbers_stream", count_rows=True)
    assert counted.row_count == 1_000_000 and not counted.row_count_exact  # the count limit
    assert server.sent("numbers_stream")[-1].params["max_result_rows"] == "1000000"


async def test_stop_sends_kill_query_for_the_id_the_tool_set(
    server: FakeClickHouse, backend: ClickHouseServerBackend
) -> None:
    controller = AbortController()
    running = asyncio.create_task(
        backend.run("r1", "SELECT * FROM slow_table", signal=controller.signal)
    )
    assert await asyncio.to_thread(server.held.wait, 20)
    controller.abort()
    with pytest.raises(QueryAborted):
        await running
    query_id = only(server.sent("slow_table")).params["query_id"]
    assert server.sent(f"KILL QUERY WHERE query_id = '{query_id}'")


async def test_stop_of_an_approved_mutation_kills_it_and_says_what_stays(
    server: FakeClickHouse, backend: ClickHouseServerBackend
) -> None:
    sql = "ALTER TABLE slow_table DELETE WHERE kind = 'view'"
    backend.capabilities.grant("w1", query_args_hash(sql, "clickhouse"), 60)
    controller = AbortController()
    running = asyncio.create_task(backend.run("w1", sql, signal=controller.signal))
    assert await asyncio.to_thread(server.held.wait, 20)
    controller.abort()
    with pytest.raises(QueryAborted, match="ClickHouse has no transactions") as stopped:
        await running
    assert "nothing was written" not in str(stopped.value)
    query_id = only(server.sent("ALTER TABLE slow_table")).params["query_id"]
    assert server.sent(f"KILL QUERY WHERE query_id = '{query_id}'")
    assert server.sent("KILL MUTATION WHERE database = currentDatabase() AND table = 'slow_table'")


async def test_the_statement_timeout_kills_the_query(server: FakeClickHouse) -> None:
    backend = create_backend(url(server.port), statement_timeout_s=1)
    try:
        with pytest.raises(QueryTimeout, match="statement timeout"):
            await backend.run("r1", "SELECT * FROM slow_table")
    finally:
        backend.dispose()
    query_id = only(server.sent("slow_table")).params["query_id"]
    assert only(server.sent("slow_table")).params["max_execution_time"] == "1"
    assert server.sent(f"KILL QUERY WHERE query_id = '{query_id}'")


async def test_readonly_is_sent_with_a_write_that_slipped_past_the_classifier(
    server: FakeClickHouse, backend: ClickHouseServerBackend
) -> None:
    with pytest.raises(QueryError, match="readonly mode"):
        await backend._run_as("read", "INSERT INTO events VALUES (1)")
    assert only(server.sent("INSERT")).params["readonly"] == "1"


async def test_a_write_is_sent_only_after_approval_and_without_readonly(
    server: FakeClickHouse, backend: ClickHouseServerBackend
) -> None:
    sql = "INSERT INTO events SELECT * FROM staging"
    with pytest.raises(QueryRefused):
        await backend.run("w1", sql)
    assert not server.sent("INSERT")
    backend.capabilities.grant("w2", query_args_hash(sql, "clickhouse"), 60)
    outcome = await backend.run("w2", sql)
    assert outcome.row_count == 3 and outcome.statement_kind == "write"
    sent = only(server.sent("INSERT"))
    assert "readonly" not in sent.params and sent.params["mutations_sync"] == "2"
    assert sent.params["query_id"].startswith("pi-") and sent.sql == sql


async def test_preview_counts_with_a_read_only_derived_count_and_bounds_refuse_a_drift(
    server: FakeClickHouse, backend: ClickHouseServerBackend
) -> None:
    sql = "ALTER TABLE events DELETE WHERE kind = 'view'"
    preview = await backend.preview("w1", sql)
    assert preview.affected_rows == 3 and preview.sample is not None
    count = only(server.sent("SELECT count() FROM events WHERE kind = 'view'"))
    assert count.params.items() >= READ_SETTINGS.items()
    backend.capabilities.grant("w1", query_args_hash(sql, "clickhouse"), 60, expected_rows=5)
    with pytest.raises(QueryRefused, match="would change 3 rows, the approval was for 5"):
        await backend.run("w1", sql)
    assert not server.sent("ALTER")


async def test_a_refused_connection_is_one_short_line_without_the_password() -> None:
    port = free_port()
    backend = create_backend(url(port), statement_timeout_s=20)
    try:
        with pytest.raises(QueryError) as failed:
            await backend.run("r1", "SELECT 1")
    finally:
        backend.dispose()
    message = str(failed.value)
    assert message.startswith(f"Could not connect to clickhousedb://ana:***@127.0.0.1:{port}/shop")
    assert "connection refused" in message and "s3cret" not in message and "\n" not in message


async def test_estimate_reads_explain_estimate_read_only(
    server: FakeClickHouse, backend: ClickHouseServerBackend
) -> None:
    estimate = await estimate_read(backend, "SELECT * FROM events WHERE kind = 'buy'")
    assert (estimate.rows, estimate.bytes) == (8192, 8192 * 16)
    assert "EXPLAIN ESTIMATE" in estimate.source
    explain = only(server.sent("EXPLAIN ESTIMATE SELECT * FROM events"))
    assert explain.params["readonly"] == "1"


async def test_the_schema_is_read_from_the_servers_catalog(
    backend: ClickHouseServerBackend,
) -> None:
    schema = await asyncio.to_thread(inspect_schema, schema_source(backend), "clickhouse")
    (table,) = schema.tables
    assert table.name == "events" and table.comment == "clicks" and table.primary_key == ("ts",)
    assert [(c.name, c.nullable) for c in table.columns] == [("ts", False), ("kind", True)]


def test_clickhousedb_urls_dispatch_and_unknown_options_are_refused(monkeypatch: Any) -> None:
    info = engine_for_url("clickhousedb://ana@db.internal:8123/shop")
    assert info.connects and info.dialect == "clickhouse" and "Native format" in info.read_path
    assert "never against a live server" in info.read_only_backstop
    with pytest.raises(ValueError, match="unknown option"):
        create_backend("clickhousedb://ana@db.internal:8123/shop?compress=0")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "clickhouse_connect" else real(name, *a),
    )
    with pytest.raises(MissingExtra, match=r'pip install "pi-notebook\[clickhouse\]"'):
        create_backend("clickhousedb://ana@db.internal:8123/shop")


@pytest.mark.parametrize("decision", ["rejected", "approved"])
async def test_through_a_session_a_read_runs_and_a_write_reaches_the_server_only_if_approved(
    server: FakeClickHouse, tmp_path: Path, decision: Decision
) -> None:
    write = "ALTER TABLE events DELETE WHERE kind = 'view'"
    read, written, request = await read_then_write(
        url(server.port), "SELECT kind FROM events", write, decision, tmp_path / "audit.sqlite"
    )
    assert not read.is_error and list(read.details["dataframe"]["kind"]) == ["view", "café"]
    assert request.preview is not None and request.preview.affected_rows == 3
    assert written.is_error == (decision == "rejected")
    assert len(server.sent("ALTER TABLE")) == (decision == "approved")


async def test_the_memory_limit_of_a_read_can_be_set_in_the_environment(
    server: FakeClickHouse, monkeypatch: Any
) -> None:
    monkeypatch.setenv("PI_NOTEBOOK_CLICKHOUSE_MEMORY_LIMIT", str(256 << 20))
    backend = create_backend(url(server.port))
    try:
        await backend.run("r1", "SELECT kind FROM events")
    finally:
        backend.dispose()
    assert only(server.sent("FROM events")).params["max_memory_usage"] == str(256 << 20)
