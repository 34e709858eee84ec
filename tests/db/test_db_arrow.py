"""The Arrow path (issue 16): same DataFrames as the DBAPI path, same walls (read-only
transaction, statement timeout, abort), and the DBAPI path for what Arrow would change."""

from __future__ import annotations

import asyncio
import time

import pandas as pd
import pytest
from dbtest_support import Scratch

from pi_notebook.ai.abort import AbortController
from pi_notebook.sql.backend import DatabaseBackend, QueryAborted, QueryError
from pi_notebook.sql.backend.arrow import arrow_available

ROWS = 3_000
CAP = 1_000

needs_adbc = pytest.mark.skipif(not arrow_available("postgresql"), reason="no pyarrow/ADBC")

PG_TABLE = f"""CREATE TABLE typed AS SELECT g AS id, 'name ' || g AS name,
    CASE WHEN mod(g, 7) = 0 THEN NULL ELSE g * 1.25 END::numeric(12, 2) AS amount,
    g / 3.0::float8 AS ratio, DATE '2024-01-01' + mod(g, 300) AS day,
    TIMESTAMPTZ '2024-01-01 00:00+00' + g * INTERVAL '1 minute' AS at,
    mod(g, 2) = 0 AS even FROM generate_series(1, {ROWS}) g"""


async def _both(url: str, sql: str, **options: object) -> tuple[object, object]:
    outs = []
    for arrow in (True, False):
        backend = DatabaseBackend(url, row_cap=CAP, arrow=arrow, **options)  # type: ignore[arg-type]
        try:
            outs.append(await backend.run("r", sql))
        finally:
            backend.dispose()
    return outs[0], outs[1]


@needs_adbc
@pytest.mark.postgres
async def test_postgres_arrow_read_gives_the_dbapi_frame(pg_url: str) -> None:
    scratch = Scratch("postgres", pg_url)
    scratch.execute("DROP TABLE IF EXISTS typed")
    scratch.execute(PG_TABLE)
    try:
        arrow, dbapi = await _both(pg_url, "SELECT * FROM typed ORDER BY id")
        pd.testing.assert_frame_equal(arrow.dataframe, dbapi.dataframe)  # type: ignore[attr-defined]
        assert len(arrow.dataframe) == CAP and arrow.row_count == CAP + 1  # type: ignore[attr-defined]
        assert not arrow.row_count_exact and arrow.preview == dbapi.preview  # type: ignore[attr-defined]
        counted = DatabaseBackend(pg_url, row_cap=CAP, arrow=True)
        try:
            out = await counted.run("r", "SELECT * FROM typed", count_rows=True)
            assert counted._adbc is not None and counted._adbc._idle  # pyright: ignore[reportPrivateUsage]  # ADBC served it
        finally:
            counted.dispose()
        assert out.row_count == ROWS and out.row_count_exact and len(out.dataframe) == CAP
    finally:
        scratch.execute("DROP TABLE typed")
        scratch.dispose()


@needs_adbc
@pytest.mark.postgres
async def test_postgres_arrow_read_runs_read_only_under_the_statement_timeout(pg_url: str) -> None:
    backend = DatabaseBackend(pg_url, arrow=True, statement_timeout_s=0.7)
    scratch = Scratch("postgres", pg_url)
    table = scratch.table()
    try:
        out = await backend.run("r", "SELECT current_setting('transaction_read_only') AS ro, "
                                     "current_setting('statement_timeout') AS t")  # fmt: skip
        assert out.dataframe.to_dict("records") == [{"ro": "on", "t": "700ms"}]
        writing = f"WITH w AS (INSERT INTO {table} (a) VALUES (1) RETURNING a) SELECT * FROM w"
        with pytest.raises(QueryError, match="read-only transaction"):  # forced past the classifier
            await backend._run_as("read", writing)  # pyright: ignore[reportPrivateUsage]
        assert scratch.count(table) == 0
        started = time.perf_counter()
        with pytest.raises(QueryError, match="statement timeout"):
            await backend._run_as("read", "SELECT count(*) FROM generate_series(1, 100000000000)")  # pyright: ignore[reportPrivateUsage]
        assert time.perf_counter() - started < 20  # the series alone would run for hours
        controller = AbortController()
        asyncio.get_running_loop().call_later(0.2, controller.abort)
        with pytest.raises(QueryAborted):
            await backend._run_as("read", "SELECT count(*) FROM generate_series(1, 100000000000)",  # pyright: ignore[reportPrivateUsage]
                                  signal=controller.signal)  # fmt: skip
        assert (await backend.run("after", "SELECT 1 AS one")).dataframe["one"].tolist() == [1]
    finally:
        backend.dispose()
        scratch.dispose()


@needs_adbc
@pytest.mark.postgres
async def test_postgres_values_arrow_would_change_take_the_dbapi_path(pg_url: str) -> None:
    sql = ("SELECT d, j FROM (VALUES ('infinity'::date, '{\"a\": 1}'::jsonb), "
           "('2024-01-01', '[1]')) AS v(d, j)")  # fmt: skip
    arrow, dbapi = await _both(pg_url, sql)
    pd.testing.assert_frame_equal(arrow.dataframe, dbapi.dataframe)  # type: ignore[attr-defined]
    assert arrow.dataframe["d"].tolist()[0] == "infinity"  # type: ignore[attr-defined]
    assert arrow.dataframe["j"].tolist()[0] == {"a": 1}  # type: ignore[attr-defined]
    sql = "SELECT '-infinity'::timestamptz AS t UNION ALL SELECT now()"
    timestamps, _ = await _both(pg_url, sql)
    assert timestamps.dataframe["t"].tolist()[0] == "-infinity"  # type: ignore[attr-defined]


async def test_duckdb_arrow_read_gives_the_row_frame(tmp_path: object) -> None:
    url = f"duckdb:///{tmp_path}/a.duckdb"
    scratch = Scratch("duckdb", url)
    scratch.execute(f"CREATE TABLE typed AS SELECT range AS id, 'name ' || range AS name, "
                    f"(range * 1.25)::DECIMAL(12, 2) AS amount, DATE '2024-01-01' + (range % 300)::INTEGER AS day, "
                    f"range % 2 = 0 AS even FROM range({ROWS})")  # fmt: skip
    scratch.dispose()
    assert arrow_available("duckdb")
    arrow, rows = await _both(url, "SELECT * FROM typed ORDER BY id DESC")
    pd.testing.assert_frame_equal(arrow.dataframe, rows.dataframe)  # type: ignore[attr-defined]
    assert arrow.row_count == CAP + 1 and arrow.dataframe["id"].iloc[0] == ROWS - 1  # type: ignore[attr-defined]
    inf, inf_rows = await _both(url, "SELECT 'infinity'::DATE AS d")
    pd.testing.assert_frame_equal(inf.dataframe, inf_rows.dataframe)  # type: ignore[attr-defined]


@needs_adbc
@pytest.mark.postgres
async def test_postgres_arrow_read_keeps_a_trailing_comment_inside_the_copy(pg_url: str) -> None:
    """The driver wraps the text as COPY (<text>) TO STDOUT: a trailing "--" comment must not
    swallow the wrapper's suffix (the text is handed over ending in a newline)."""
    backend = DatabaseBackend(pg_url, arrow=True)
    try:
        out = await backend.run("r", "SELECT 1 AS one -- the last line is a comment")
        assert out.dataframe["one"].tolist() == [1]
        assert backend._adbc is not None and backend._adbc._idle  # pyright: ignore[reportPrivateUsage]
    finally:
        backend.dispose()


async def test_duckdb_arrow_read_is_cancelled_by_abort(tmp_path: object) -> None:
    from dbtest_support import LONG_READ

    backend = DatabaseBackend(f"duckdb:///{tmp_path}/c.duckdb", arrow=True)
    try:
        controller = AbortController()
        asyncio.get_running_loop().call_later(0.3, controller.abort)
        started = time.perf_counter()
        with pytest.raises(QueryAborted):
            await backend._run_as("read", LONG_READ["duckdb"], signal=controller.signal)  # pyright: ignore[reportPrivateUsage]
        assert time.perf_counter() - started < 10  # the recursive read never ends by itself
        assert (await backend.run("after", "SELECT 1 AS one")).dataframe["one"].tolist() == [1]
    finally:
        backend.dispose()


async def test_duckdb_arrow_read_reports_the_statements_own_error() -> None:
    """A statement that fails in DuckDB aborts its transaction: the Arrow path reports that
    failure, not the row fallback's "transaction is aborted", and the next read works."""
    backend = DatabaseBackend("duckdb:///:memory:", arrow=True)
    try:
        with pytest.raises(QueryError, match="boom") as info:
            await backend.run("e1", "SELECT error('boom') FROM range(5)")
        assert "aborted" not in str(info.value)
        out = await backend.run("e2", "SELECT 42 AS x")
    finally:
        backend.dispose()
    assert out.dataframe["x"].tolist() == [42]
