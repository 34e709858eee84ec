"""The Arrow path: same DataFrames as the DBAPI path, same walls (read-only
transaction, statement timeout, abort), and the DBAPI path for what Arrow would change."""

from __future__ import annotations

import asyncio
import time
from typing import Any

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
        out = await backend.run(
            "r",
            "SELECT current_setting('transaction_read_only') AS ro, "
            "current_setting('statement_timeout') AS t",
        )
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
            await backend._run_as(
                "read",
                "SELECT count(*) FROM generate_series(1, 100000000000)",  # pyright: ignore[reportPrivateUsage]
                signal=controller.signal,
            )
        assert (await backend.run("after", "SELECT 1 AS one")).dataframe["one"].tolist() == [1]
    finally:
        backend.dispose()
        scratch.dispose()


@needs_adbc
@pytest.mark.postgres
async def test_postgres_values_arrow_would_change_take_the_dbapi_path(pg_url: str) -> None:
    sql = (
        "SELECT d, j FROM (VALUES ('infinity'::date, '{\"a\": 1}'::jsonb), "
        "('2024-01-01', '[1]')) AS v(d, j)"
    )
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
    scratch.execute(
        f"CREATE TABLE typed AS SELECT range AS id, 'name ' || range AS name, "
        f"(range * 1.25)::DECIMAL(12, 2) AS amount, DATE '2024-01-01' + (range % 300)::INTEGER AS day, "
        f"range % 2 = 0 AS even FROM range({ROWS})"
    )
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


class _Reader:
    """Record batches made one at a time, as a driver streams them (none kept here)."""

    def __init__(self, batches: int, rows: int) -> None:
        import pyarrow as pa

        self.schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
        self._batches, self._rows = batches, rows

    def __iter__(self) -> Any:
        import pyarrow as pa

        for b in range(self._batches):
            ids = pa.array(range(b * self._rows, (b + 1) * self._rows), pa.int64())
            yield pa.record_batch(
                [ids, pa.array([f"row {i:08d}" * 8 for i in ids.to_pylist()])], schema=self.schema
            )

    def close(self) -> None:
        pass


class _Cursor:
    def __init__(self, reader: _Reader) -> None:
        self._reader = reader

    def adbc_cancel(self) -> None:
        pass

    def execute(self, sql: str) -> None:
        pass

    def fetch_record_batch(self) -> _Reader:
        return self._reader


@needs_adbc
@pytest.mark.parametrize("count_rows", [False, True])
def test_an_arrow_read_keeps_only_the_capped_rows_even_when_counting(
    count_rows: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counting every row (``count_rows``) reads the whole result but keeps only the first
    ``row_cap`` rows' batches: what the read holds does not grow with the result."""
    import pyarrow as pa

    from pi_notebook.sql.backend.arrow import AdbcPostgres, fetched_from_table, to_frame
    from pi_notebook.sql.backend.cancel import Canceller
    from pi_notebook.sql.backend.fetch import RunSettings
    from pi_notebook.sql.backend.fetched import read_limits

    settings = RunSettings(
        row_cap=250,
        count_limit=1_000_000,
        statement_timeout_s=30,
        progress_every=10_000,
        count_rows=count_rows,
        arrow=True,
    )
    before = pa.total_allocated_bytes()
    stream = AdbcPostgres._stream  # pyright: ignore[reportPrivateUsage]
    read = stream(
        None,  # type: ignore[arg-type]
        _Cursor(_Reader(batches=40, rows=100)),
        "SELECT",
        read_limits(settings, None),
        Canceller(),
    )
    held = [pa.total_allocated_bytes() - before]  # Arrow memory alive once the read is over
    frame = to_frame(read.table)
    assert frame is not None
    fetched = fetched_from_table(read.table, frame, read.seen, read.exact, size_capped=read.sized)
    assert fetched.frame is not None
    assert len(fetched.frame) == 250 and fetched.frame["id"].tolist() == list(range(250))
    assert fetched.row_count == (4_000 if count_rows else 251)
    assert fetched.row_count_exact == count_rows
    one_batch = 100 * (8 + 4 + 8 * 12)  # ids, offsets and text of a 100-row batch
    assert held and held[0] < 5 * one_batch  # three batches (the third sliced), not forty


def _cells(out: Any) -> tuple[str, str]:
    """The model's preview and the card's table of ``out``."""
    from pi_notebook.notebook.format import frame_html

    return out.preview, frame_html(out.dataframe)


@pytest.mark.parametrize("engine", ["postgres", "duckdb"])
async def test_d7_arrow_read_writes_decimals_exactly_as_the_dbapi_path(
    engine: str, request: pytest.FixtureRequest, tmp_path: object
) -> None:
    """A numeric is a float in the DataFrame on both paths; the preview and the card still
    write the server's digits and scale (``70,131.10``, ``0.0000001``)."""
    if engine == "postgres":
        if not arrow_available("postgresql"):
            pytest.skip("no pyarrow/ADBC")
        url = str(request.getfixturevalue("pg_url"))
        sql = (
            "SELECT 70131.10::numeric(12, 2) AS price, 0.0000001::numeric AS tiny, "
            "1234567.89::numeric AS amount, 0.125::float8 AS share"
        )
    else:
        url = f"duckdb:///{tmp_path}/d.duckdb"
        sql = (
            "SELECT 70131.10::DECIMAL(12, 2) AS price, 0.0000001::DECIMAL(18, 7) AS tiny, "
            "1234567.89::DECIMAL(18, 2) AS amount, 0.125::DOUBLE AS share"
        )
    arrow, dbapi = await _both(url, sql)
    assert str(arrow.dataframe["price"].dtype) == "float64"  # type: ignore[attr-defined]
    preview, card = _cells(arrow)
    assert (preview, card) == _cells(dbapi)
    assert preview.splitlines()[2] == "70,131.10 | 0.0000001 | 1,234,567.89 | 0.125"
    for shown in ("70,131.10", "0.0000001", "1,234,567.89", "0.125"):
        assert f">{shown}</td>" in card
