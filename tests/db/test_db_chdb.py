"""ClickHouse through chDB on the engine seam: the backend's bounds, backstop, cancel and
write preview (D5, D6), and the URL's dispatch (a missing extra named in one line).

chDB runs in a worker process per database (chDB itself holds one database per process),
so two databases on different paths are open at once.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

pytest.importorskip("chdb")

from pi_notebook.ai.abort import AbortController
from pi_notebook.database.schema import inspect_schema
from pi_notebook.sql.backend import (
    QueryAborted,
    QueryError,
    QueryRefused,
    QueryTimeout,
    query_args_hash,
)
from pi_notebook.sql.backend.worker import Bounds
from pi_notebook.sql.engines import (
    ChdbBackend,
    MissingExtra,
    create_backend,
    engine_for_url,
    schema_source,
)
from pi_notebook.sql.engines.chdb import chdb_path, clickhouse_plan

LONG_READ = "SELECT count() FROM numbers(10000000) AS a, numbers(10000000) AS b"
SCHEMA = (
    "CREATE TABLE events (ts DateTime, user_id UInt64, kind String, amount Float64) "
    "ENGINE = MergeTree ORDER BY ts",
    "INSERT INTO events SELECT toDateTime('2024-01-01 00:00:00') + number, number % 7, "
    "if(number % 2 = 0, 'view', 'buy'), number / 10 FROM numbers(1000)",
)


@pytest.fixture
async def chdb_backend() -> AsyncIterator[ChdbBackend]:
    backend = create_backend("chdb://", row_cap=100, statement_timeout_s=20)
    assert isinstance(backend, ChdbBackend)
    try:
        for sql in SCHEMA:
            await backend._run_as("write", sql)
        yield backend
    finally:
        backend.dispose()


async def count(backend: ChdbBackend, sql: str = "SELECT count() AS n FROM events") -> int:
    return int((await backend._run_as("read", sql)).dataframe.iloc[0, 0])


async def test_d5_a_read_keeps_types_and_stops_at_the_row_cap(chdb_backend: ChdbBackend) -> None:
    outcome = await chdb_backend.run("r1", "SELECT * FROM events ORDER BY ts")
    frame = outcome.dataframe
    assert len(frame) == 100 and outcome.truncated and not outcome.row_count_exact
    assert str(frame["ts"].dtype).startswith("datetime64")  # not ClickHouse's Arrow UInt32
    assert str(frame["ts"].iloc[0]) == "2024-01-01 00:00:00"
    assert outcome.statement_kind == "read" and outcome.dialect == "clickhouse"
    assert "More than 100 rows" in outcome.preview and "2024-01-01" in outcome.preview
    exact = await chdb_backend.run("r2", "SELECT kind, count() AS n FROM events GROUP BY kind")
    assert exact.row_count == 2 and exact.row_count_exact and not exact.truncated
    counted = await chdb_backend.run("r3", "SELECT * FROM events", count_rows=True)
    assert counted.row_count == 1000 and counted.row_count_exact and len(counted.dataframe) == 100


async def test_d5_a_read_stops_at_the_size_bound() -> None:
    backend = create_backend("chdb://", row_cap=10_000, max_result_bytes=200_000)
    try:
        outcome = await backend.run("r", "SELECT repeat('x', 1000) AS s FROM numbers(5000)")
    finally:
        backend.dispose()
    assert outcome.size_capped and 0 < len(outcome.dataframe) < 5000
    assert "size limit" in outcome.preview


async def test_d5_readonly_stops_what_slipped_past_the_classifier(
    chdb_backend: ChdbBackend, tmp_path: Path
) -> None:
    """Forced through as reads (the classifier refuses each one), nothing changes."""
    target = tmp_path / "written.csv"
    forced = [
        "INSERT INTO events SELECT * FROM events",
        "ALTER TABLE events DELETE WHERE 1",
        "ALTER TABLE events UPDATE amount = 0 WHERE 1",
        "CREATE TABLE pwn (a UInt8) ENGINE = Memory",
        "DROP TABLE events",
        "SELECT count() FROM events SETTINGS readonly = 0",
        "SELECT * FROM (SELECT * FROM file('/etc/hostname', 'LineAsString') SETTINGS readonly = 0)",
        "SELECT * FROM file('/etc/hostname', 'LineAsString')",
        "SELECT * FROM url('http://127.0.0.1:9/', 'CSV', 'a String')",
        "SELECT * FROM executable('id', 'TSV', 'a String')",
        f"INSERT INTO FUNCTION file('{target}', 'CSV', 'a UInt8') SELECT 1",
        "OPTIMIZE TABLE events FINAL",
        "DROP TABLE events; SELECT 1",  # chDB runs stacked statements outside a stream
        "CREATE TABLE pwn (a UInt8) ENGINE = Memory; SELECT 1",
        "SET readonly = 0",
        "USE system",
        "SYSTEM STOP MERGES",
    ]
    for sql in forced:
        with pytest.raises(QueryError):
            await chdb_backend._run_as("read", sql)
    assert await count(chdb_backend) == 1000 and not target.exists()
    tables = await chdb_backend._run_as("read", "SHOW TABLES")
    assert list(tables.dataframe.iloc[:, 0]) == ["events"]


async def test_s11_d6_abort_cancels_a_long_read(chdb_backend: ChdbBackend) -> None:
    controller = AbortController()
    asyncio.get_running_loop().call_later(0.5, controller.abort)
    started = time.monotonic()
    with pytest.raises(QueryAborted):
        await chdb_backend.run("long", LONG_READ, signal=controller.signal)
    assert time.monotonic() - started < 5
    assert await count(chdb_backend) == 1000  # the session is usable afterwards


async def test_d6_the_statement_timeout_stops_a_long_read() -> None:
    """The timeout counts the statement's own time, not its worker's start."""
    backend = create_backend("chdb://", statement_timeout_s=1)
    try:
        await backend.run("first", "SELECT 1")  # the worker starts (its library loads)
        started = time.monotonic()
        with pytest.raises(QueryTimeout):
            await backend.run("long", LONG_READ)
        assert time.monotonic() - started < 5
    finally:
        backend.dispose()


async def test_d6_abort_of_an_approved_long_write_leaves_nothing_written(
    chdb_backend: ChdbBackend,
) -> None:
    await chdb_backend._run_as(
        "write", "CREATE TABLE sink (n UInt64) ENGINE = MergeTree ORDER BY n"
    )
    controller = AbortController()
    asyncio.get_running_loop().call_later(0.5, controller.abort)
    with pytest.raises(QueryAborted):
        await chdb_backend._run_as(
            "write", f"INSERT INTO sink SELECT count() FROM ({LONG_READ})", signal=controller.signal
        )
    assert await count(chdb_backend, "SELECT count() FROM sink") == 0


async def test_d6_abort_of_a_mutation_kills_it_and_says_what_stays(
    chdb_backend: ChdbBackend,
) -> None:
    """ClickHouse rewrites a mutation's parts in the background: Stop kills the mutation too,
    and the message does not claim that nothing was written."""
    await chdb_backend._run_as(
        "write", "CREATE TABLE m (id UInt64, v UInt64) ENGINE = MergeTree ORDER BY id"
    )
    await chdb_backend._run_as("write", "INSERT INTO m SELECT number, 0 FROM numbers(5000000)")
    controller = AbortController()
    # A mutation of several seconds (a hundred strings built per row), stopped after one: it is
    # running by then even on a busy machine, and far from done.
    asyncio.get_running_loop().call_later(1.0, controller.abort)
    slow = (
        "ALTER TABLE m UPDATE v = cityHash64(arrayStringConcat(arrayMap("
        "i -> toString(id + i), range(100)))) WHERE 1"
    )
    with pytest.raises(QueryAborted, match="ClickHouse has no transactions") as stopped:
        await chdb_backend._run_as("write", slow, signal=controller.signal)
    assert "nothing was written" not in str(stopped.value)
    await asyncio.sleep(1.0)
    running = "SELECT count() FROM system.mutations WHERE table = 'm' AND NOT is_done"
    assert await count(chdb_backend, running) == 0


async def test_d5_preview_counts_with_a_derived_read_or_says_it_cannot(
    chdb_backend: ChdbBackend,
) -> None:
    insert = await chdb_backend.preview("p1", "INSERT INTO events SELECT * FROM events LIMIT 7")
    assert insert.affected_rows == 7 and "SELECT count" in (insert.method or "")
    delete = await chdb_backend.preview("p2", "ALTER TABLE events DELETE WHERE kind = 'buy'")
    assert delete.affected_rows == 500 and delete.sample is not None and len(delete.sample) == 5
    update = await chdb_backend.preview(
        "p3", "ALTER TABLE events UPDATE amount = 0 WHERE user_id = 3"
    )
    assert update.affected_rows == len([n for n in range(1000) if n % 7 == 3])
    ddl = await chdb_backend.preview("p4", "ALTER TABLE events ADD COLUMN note String")
    assert ddl.affected_rows is None and "no transaction" in (ddl.note or "")
    assert await count(chdb_backend) == 1000  # a preview never runs the write
    with pytest.raises(QueryRefused):
        await chdb_backend.preview("p5", "SELECT 1")


async def test_d4_an_approval_bounded_by_rows_refuses_a_drifted_write(
    chdb_backend: ChdbBackend,
) -> None:
    sql = "ALTER TABLE events DELETE WHERE kind = 'buy'"
    chdb_backend.capabilities.grant("w1", query_args_hash(sql, "clickhouse"), 60, expected_rows=3)
    with pytest.raises(QueryRefused, match="would change 500 rows"):
        await chdb_backend.run("w1", sql)
    assert await count(chdb_backend) == 1000
    plan = clickhouse_plan(sql)
    assert plan.count_sql == "SELECT count() FROM events WHERE kind = 'buy'"
    outcome = await chdb_backend._run_as("write", sql, bounds=Bounds(expected_rows=500))
    assert outcome.statement_kind == "write" and await count(chdb_backend) == 500


async def test_a_chdb_path_is_a_directory_created_on_first_use(tmp_path: Path) -> None:
    where = tmp_path / "warehouse" / "ch"
    url = f"chdb:///{where}"
    backend = create_backend(url)
    try:
        assert chdb_path(backend.url) == str(where) and not where.exists()
        await backend._run_as("write", "CREATE TABLE t (a UInt8) ENGINE = MergeTree ORDER BY a")
        await backend._run_as("write", "INSERT INTO t VALUES (1), (2)")
        assert where.is_dir()
        schema = inspect_schema(schema_source(backend), "clickhouse")
        assert [t.name for t in schema.tables] == ["t"] and schema.tables[0].columns[
            0
        ].type == "UInt8"
        assert backend.worker_pid not in (None, os.getpid())  # chDB runs in its worker
        elsewhere = tmp_path / "other" / "ch"
        other = create_backend(f"chdb:///{elsewhere}")  # a second database at the same time
        try:
            await other._run_as("write", "CREATE TABLE u (b String) ENGINE = Memory")  # type: ignore[attr-defined]
            await other._run_as("write", "INSERT INTO u VALUES ('x')")  # type: ignore[attr-defined]
            assert await count(other, "SELECT count() FROM u") == 1  # type: ignore[arg-type]
            assert await count(backend, "SELECT count() FROM t") == 2  # type: ignore[arg-type]
            assert other.worker_pid not in (None, backend.worker_pid)
            with pytest.raises(QueryError, match=r"UNKNOWN_TABLE|does not exist"):
                await backend.run("x", "SELECT * FROM u")  # each database is its own
        finally:
            other.dispose()
    finally:
        backend.dispose()
    again = create_backend(url)  # the data stays in the directory
    try:
        assert await count(again, "SELECT count() FROM t") == 2  # type: ignore[arg-type]
    finally:
        again.dispose()


def test_a_chdb_url_without_its_extra_is_refused_naming_the_extra(monkeypatch: Any) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "chdb" else real(name, *a)
    )
    with pytest.raises(MissingExtra) as refused:
        create_backend("chdb:///data/ch")
    assert str(refused.value) == (
        "clickhouse needs the 'clickhouse' extra: pip install \"pi-notebook[clickhouse]\""
    )
    assert "\n" not in str(refused.value)


def test_urls_dispatch_to_their_engine() -> None:
    assert engine_for_url("chdb://").engine == "clickhouse"
    assert engine_for_url("mariadb+pymysql://u@h/db").engine == "mysql"
    assert engine_for_url("postgresql+psycopg://u@h/db").dialect == "postgres"
    with pytest.raises(ValueError, match="Unsupported database 'oracle'"):
        engine_for_url("oracle://u@h/db")
    with pytest.raises(ValueError, match="only a path"):
        chdb_path(make_url("chdb:///x?a=1"))


async def test_d5_a_subquery_settings_clause_cannot_lift_the_session_limits(
    chdb_backend: ChdbBackend,
) -> None:
    outcome = await chdb_backend._run_as(
        "read",
        "SELECT * FROM (SELECT getSetting('readonly') AS ro, getSetting('max_memory_usage') "
        "AS mem SETTINGS readonly = 0, max_memory_usage = 0)",
    )
    assert outcome.dataframe.to_dict("records") == [{"ro": 1, "mem": chdb_backend.memory_limit}]


@pytest.mark.parametrize("url", ["chdb://", "duckdb://"])
async def test_a_large_result_crosses_from_the_worker_whole_and_writable(url: str) -> None:
    """A result's large buffers cross out of band; the DataFrame is the engine's, and the
    kernel's own to change."""
    rows = 300_000
    backend = create_backend(url, row_cap=rows, max_result_bytes=None)
    sql = (
        f"SELECT number AS n, toString(number) AS s FROM numbers({rows})"
        if url.startswith("chdb")
        else f"SELECT range AS n, CAST(range AS VARCHAR) AS s FROM range({rows})"
    )
    try:
        frame = (await backend.run("big", sql)).dataframe
        assert len(frame) == rows and frame["n"].iloc[-1] == rows - 1
        assert frame["s"].iloc[12345] == "12345"
        frame.loc[0, "n"] = 7  # writable: the arrays own their memory
        assert frame["n"].iloc[0] == 7
    finally:
        backend.dispose()


async def test_a_read_kept_whole_counts_and_caps_as_a_stream_does() -> None:
    """No byte bound and a row cap at the count limit: one query, not a stream, with the
    same row count, truncation and exactness."""
    backend = create_backend("chdb://", row_cap=1000, count_limit=10, max_result_bytes=None)
    try:
        capped = await backend.run("a", "SELECT number FROM numbers(5000)")
        assert len(capped.dataframe) == 1000 and capped.row_count == 1001
        assert capped.truncated and not capped.row_count_exact
        whole = await backend.run("b", "SELECT number FROM numbers(999)")
        assert len(whole.dataframe) == 999 and whole.row_count_exact and not whole.truncated
    finally:
        backend.dispose()


async def test_a_one_row_select_is_bounded_as_a_stream_is() -> None:
    """A SELECT of no table (one row, run as one query) keeps its values, types and the
    byte bound; one that makes rows without a table (arrayJoin, UNION) still
    stops at the row cap and says there are more."""
    backend = create_backend("chdb://", row_cap=3, max_result_bytes=2000)
    try:
        one = await backend.run("a", "SELECT 1 AS n, 2.5 AS f, nan AS x, 'v' AS s, now() AS t")
        frame = one.dataframe
        assert len(frame) == 1 and one.row_count == 1 and one.row_count_exact
        assert not one.truncated and not one.size_capped
        assert frame["n"].iloc[0] == 1 and frame["f"].iloc[0] == 2.5 and frame["s"].iloc[0] == "v"
        assert str(frame["t"].dtype).startswith("datetime64")
        numbers = await backend.run("b", "SELECT 7 AS a, 1.5 AS b")
        assert numbers.row_count == 1 and "7" in numbers.preview and "1.5" in numbers.preview
        wide = await backend.run("c", "SELECT repeat('x', 100000) AS s")
        assert wide.size_capped and len(wide.dataframe) == 0 and "size limit" in wide.preview
        for sql in (
            "SELECT arrayJoin([1, 2, 3, 4, 5]) AS n",
            "SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4",
        ):
            many = await backend.run("d", sql)
            assert len(many.dataframe) == 3 and many.truncated and not many.row_count_exact, sql
        exact = await backend.run("e", "SELECT arrayJoin([1, 2, 3]) AS n")
        assert len(exact.dataframe) == 3 and exact.row_count_exact and not exact.truncated
    finally:
        backend.dispose()


@pytest.mark.parametrize("scheme", ["chdb", "duckdb"])
async def test_the_worker_of_a_shared_database_stops_when_its_last_backend_is_disposed(
    tmp_path: Path, scheme: str
) -> None:
    """Two backends on one chDB directory or DuckDB file share one worker process; disposing
    both stops it at once, without waiting for a garbage collection to find the first (a
    rebuilt session on the same database would otherwise leave a worker behind)."""
    target = tmp_path / ("ch" if scheme == "chdb" else "db.duckdb")
    url = f"{scheme}:///{target}"
    gc_was_on = gc.isenabled()
    gc.disable()
    first, second = create_backend(url), create_backend(url)
    try:
        await first.run("a", "SELECT 1")
        await second.run("b", "SELECT 2")
        pid = first.worker_pid
        assert pid is not None and second.worker_pid == pid
        first.dispose()
        assert second.worker_pid == pid and (await second.run("c", "SELECT 3")).row_count == 1
        second.dispose()
        assert not _alive(pid)
        again = await second.run("d", "SELECT 4")  # a disposed backend used again restarts
        assert again.row_count == 1 and second.worker_pid not in (None, pid)
        second.dispose()
    finally:
        if gc_was_on:
            gc.enable()
        first.dispose()
        second.dispose()


def _alive(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        if Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z"):
            return False  # a zombie: ended, not yet reaped
        time.sleep(0.05)
    return True
