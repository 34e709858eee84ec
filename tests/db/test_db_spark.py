"""Spark SQL through Spark Connect, on the backend (one local server per test run, see
``conftest.py``): Arrow reads kept to the row cap and the byte bound, Stop and the statement
timeout interrupt the job, job progress, the derived-count preview and the approval's
bounds, the ``EXPLAIN COST`` estimate, a server that cannot be reached, and side-effect
statements that change nothing when run as the tool runs them."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest

from pi_notebook.ai.abort import AbortController
from pi_notebook.sql.backend import JobProgress, QueryAborted, QueryError, QueryRefused
from pi_notebook.sql.backend.errors import QueryTimeout
from pi_notebook.sql.backend.worker import Bounds
from pi_notebook.sql.engines import SparkBackend, create_backend, engine_for_url, estimate_read

pytestmark = pytest.mark.spark

LONG_READ = "SELECT count(*) AS n FROM range(0, 100000000000, 1, 100000)"
"""100,000 short tasks: a cancelled job stops at the next task (a task itself may not look
at the cancel), so the server is free again at once."""
CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "sql" / "spark"


def _backend(url: str, **options: Any) -> SparkBackend:
    backend = create_backend(url, **options)
    assert isinstance(backend, SparkBackend)
    return backend


async def _scalar(backend: SparkBackend, sql: str) -> Any:
    return (await backend._run_as("read", sql)).dataframe.iloc[0, 0]


def _corpus(name: str) -> list[str]:
    entries, current = [], []
    for line in [*(CORPUS / name).read_text(encoding="utf-8").splitlines(), "-- ;;"]:
        if line.strip() != "-- ;;":
            if not line.startswith("-- "):
                current.append(line)
            continue
        if "\n".join(current).strip():
            entries.append("\n".join(current).strip())
        current = []
    return entries


async def test_a_read_keeps_types_and_stops_at_the_row_cap(spark_url: str) -> None:
    backend = _backend(spark_url, row_cap=10)
    try:
        outcome = await backend.run("r1", "SELECT * FROM events ORDER BY id DESC")
        frame = outcome.dataframe
        assert len(frame) == 10 and list(frame["id"]) == list(range(99, 89, -1))
        assert outcome.truncated and not outcome.row_count_exact and outcome.row_count == 11
        assert str(frame["id"].dtype) == "int64" and frame["kind"].iloc[0] == "view"
        assert str(frame["ts"].iloc[-1]) == "2024-01-01 01:30:00+00:00"
        assert outcome.preview.startswith("More than 10 rows, 4 column(s)")
        counted = await backend.run("r2", "SELECT id FROM events", count_rows=True)
        assert counted.row_count == 100 and counted.row_count_exact and len(counted.dataframe) == 10
    finally:
        backend.dispose()


async def test_statements_that_return_rows_read_like_queries_and_a_bad_one_is_one_line(
    spark_url: str,
) -> None:
    """SHOW and DESCRIBE run inside the plan that reads them, under the same row cap; an
    unknown table fails the read with the server's error, on one line."""
    backend = _backend(spark_url, row_cap=2)
    try:
        shown = await backend.run("s1", "SHOW TABLES")
        assert "events" in set(shown.dataframe["tableName"])
        described = await backend.run("s2", "DESCRIBE TABLE events")
        assert list(described.dataframe["col_name"]) == ["id", "user_id"]
        assert described.truncated and described.row_count == 3
        with pytest.raises(QueryError) as missing:
            await backend.run("s3", "SELECT * FROM nowhere")
        assert "TABLE_OR_VIEW_NOT_FOUND" in str(missing.value) and "\n" not in str(missing.value)
    finally:
        backend.dispose()


async def test_a_read_stops_at_the_size_bound(spark_url: str) -> None:
    backend = _backend(spark_url, max_result_bytes=4_000)
    try:
        outcome = await backend.run("r1", "SELECT id, repeat('x', 100) AS note FROM range(1000)")
        assert outcome.size_capped and 0 < len(outcome.dataframe) < 1000
        assert "size limit" in outcome.preview
    finally:
        backend.dispose()


async def test_side_effect_statements_change_nothing_when_run_as_the_tool_runs_them(
    spark_url: str, tmp_path: Path
) -> None:
    """Every corpus statement with effects is refused without an approval (Spark has no
    read-only mode: the classifier is the wall), and the catalogue, the session's settings
    and its cache are as they were."""
    backend = _backend(spark_url)
    out = tmp_path / "out"
    statements = [s.replace("'/tmp/out'", f"'{out}'") for s in _corpus("side_effects.sql")]
    statements += [
        "CREATE TABLE pwn AS SELECT * FROM events",
        "SET spark.sql.ansi.enabled = false",
        "CACHE TABLE events",
        "CREATE TEMPORARY VIEW tv AS SELECT 1 AS x",
        "INSERT INTO events SELECT * FROM events",
        "DROP TABLE events",
        f"INSERT OVERWRITE DIRECTORY '{out}' USING parquet SELECT * FROM events",
    ]
    try:
        for index, sql in enumerate(statements):
            with pytest.raises(QueryRefused):
                await backend.run(f"c{index}", sql)
        spark = backend._cluster.session()
        assert spark.conf.get("spark.sql.ansi.enabled") == "true"
        assert not spark.catalog.isCached("events")
        assert {"pwn", "tv"}.isdisjoint(t.name for t in spark.catalog.listTables())
        assert await _scalar(backend, "SELECT count(*) FROM events") == 100
        assert not out.exists()
    finally:
        backend.dispose()


async def test_spark_has_no_read_only_backstop_behind_the_classifier(spark_url: str) -> None:
    """What the engine table says: forced past the classifier (the internal path), a write
    dressed as a read runs; only the classifier stops it on the tool's path."""
    backend = _backend(spark_url)
    try:
        await backend._run_as("read", "CREATE TABLE made_by_a_read AS SELECT 1 AS x")
        assert await _scalar(backend, "SELECT count(*) FROM made_by_a_read") == 1
        await backend._run_as("write", "DROP TABLE made_by_a_read")
        assert "no read-only mode" in engine_for_url(spark_url).read_only_backstop
    finally:
        backend.dispose()


async def test_stop_interrupts_the_job_after_its_progress_shows(spark_url: str) -> None:
    backend = _backend(spark_url, statement_timeout_s=600)
    controller = AbortController()
    seen: list[int] = []
    running = asyncio.Event()

    def on_progress(n: int) -> None:
        seen.append(n)
        running.set()

    try:
        query = asyncio.create_task(
            backend.run("long", LONG_READ, signal=controller.signal, on_progress=on_progress)
        )
        await asyncio.wait_for(running.wait(), 120)
        controller.abort()
        with pytest.raises(QueryAborted, match="aborted"):
            await asyncio.wait_for(query, 120)  # a guard against a hang, not a timing
        assert isinstance(seen[0], JobProgress) and seen[0].tasks > 0
        assert seen[0].text().startswith("Running: ") and "tasks done" in seen[0].text()
        assert await _scalar(backend, "SELECT count(*) FROM events") == 100  # still usable
    finally:
        backend.dispose()


async def test_stop_interrupts_an_approved_write_and_says_what_stays(spark_url: str) -> None:
    backend = _backend(spark_url, statement_timeout_s=600)
    controller = AbortController()
    running = asyncio.Event()
    try:
        await backend._run_as("write", "CREATE TABLE stopped_w (id BIGINT) USING parquet")
        write = asyncio.create_task(
            backend._run_as(
                "write",
                "INSERT INTO stopped_w SELECT id FROM range(0, 100000000000, 1, 100000)",
                signal=controller.signal,
                on_progress=lambda _n: running.set(),
            )
        )
        await asyncio.wait_for(running.wait(), 120)
        controller.abort()
        with pytest.raises(QueryAborted) as stopped:
            await asyncio.wait_for(write, 120)  # a guard against a hang, not a timing
        assert "Spark has no transactions" in str(stopped.value)
        assert "nothing was written" not in str(stopped.value)
    finally:
        await backend._run_as("write", "DROP TABLE IF EXISTS stopped_w")
        backend.dispose()


async def test_the_statement_timeout_interrupts_a_long_read(spark_url: str) -> None:
    backend = _backend(spark_url, statement_timeout_s=3)
    try:
        with pytest.raises(QueryTimeout, match="statement timeout"):
            await asyncio.wait_for(backend.run("long", LONG_READ), 120)
    finally:
        backend.dispose()


async def test_the_preview_counts_with_a_derived_read_and_bounds_hold(spark_url: str) -> None:
    backend = _backend(spark_url)
    sql = "INSERT INTO bounded SELECT * FROM events WHERE kind = 'buy'"
    try:
        await backend._run_as(
            "write", "CREATE TABLE bounded USING parquet AS SELECT * FROM events WHERE 1 = 0"
        )
        preview = await backend.preview("p1", sql)
        assert preview.affected_rows == 25 and preview.method is not None
        with pytest.raises(QueryRefused, match="needs no preview"):
            await backend.preview("p2", "SELECT 1")
        from pi_notebook.sql.backend.worker import DriftError

        with pytest.raises(DriftError):
            await backend._run_as("write", sql, bounds=Bounds(expected_rows=3))
        assert await _scalar(backend, "SELECT count(*) FROM bounded") == 0
        done = await backend._run_as("write", sql, bounds=Bounds(expected_rows=25))
        assert "25 row(s) affected" in done.preview
        assert await _scalar(backend, "SELECT count(*) FROM bounded") == 25
    finally:
        await backend._run_as("write", "DROP TABLE IF EXISTS bounded")
        backend.dispose()


async def test_explain_cost_estimates_what_a_read_scans(spark_url: str) -> None:
    backend = _backend(spark_url)
    try:
        big = await estimate_read(backend, "SELECT count(*) FROM range(100000000)")
        assert big.rows == 100_000_000 and big.bytes is not None and big.bytes > 700_000_000
        small = await estimate_read(backend, "SELECT * FROM events WHERE id < 5")
        assert small.bytes is not None and 0 < small.bytes < 1_000_000
        assert "EXPLAIN COST" in small.source
        shown = await estimate_read(backend, "SHOW TABLES")
        assert shown.bytes is None and "no estimate" in shown.source
    finally:
        backend.dispose()


async def test_a_server_that_cannot_be_reached_is_a_short_error_without_the_token() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    backend = _backend(f"sc://127.0.0.1:{port}/;token=s3cr3t-t0ken", statement_timeout_s=60)
    try:
        with pytest.raises(QueryError) as failed:
            await backend.run("r1", "SELECT 1")
        message = str(failed.value)
        assert message.startswith(f"Could not connect to sc://127.0.0.1:{port}")
        assert "UNAVAILABLE" in message and "s3cr3t" not in message
        assert len(message.splitlines()) == 1
    finally:
        backend.dispose()


async def test_a_server_that_does_not_answer_is_a_timeout_and_nothing_runs() -> None:
    """A cluster slow to start (here: a port that accepts and never answers) holds the call
    no longer than the statement timeout, and says so."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        backend = _backend(f"sc://127.0.0.1:{port}", statement_timeout_s=2)
        try:
            with pytest.raises(QueryTimeout) as failed:
                await asyncio.wait_for(backend.run("w1", "SELECT 1"), 60)
            assert str(failed.value) == (
                f"Could not connect to sc://127.0.0.1:{port}: no answer "
                "within the statement timeout (2 s)."
            )
        finally:
            backend.dispose()


def test_spark_urls_are_checked() -> None:
    for bad in ("sc://user@host:15002", "sc://"):
        with pytest.raises(ValueError, match="sc://HOST:15002"):
            create_backend(bad)
    backend = _backend("sc://spark.example:15002/;token=abcdefgh;use_ssl=true")
    assert str(backend.url) == "sc://spark.example:15002" and backend.dialect == "spark"
    backend.dispose()


def test_explain_cost_without_statistics_gives_no_byte_count() -> None:
    """A scan whose size Spark does not know (its 8 EiB default) leaves the bytes unknown;
    rows only when every scan has a count."""
    from pi_notebook.sql.engines.spark_cost import cost_estimate

    text = (
        "== Optimized Logical Plan ==\n"
        "Join Inner, Statistics(sizeInBytes=8.0 EiB)\n"
        ":- Relation default.a[id#1L] jdbc, Statistics(sizeInBytes=8.0 EiB)\n"
        "+- Range (0, 10, step=1), Statistics(sizeInBytes=80.0 B, rowCount=10)\n"
        "\n== Physical Plan ==\n"
    )
    unknown = cost_estimate(text)
    assert unknown.bytes is None and unknown.rows is None and "unknown" in unknown.source
    known = cost_estimate(text.replace("8.0 EiB)\n+-", "1.5 KiB, rowCount=1.00E+2)\n+-"))
    assert known.bytes == 1536 + 80 and known.rows == 110
    assert cost_estimate("no plan").bytes is None
