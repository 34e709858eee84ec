"""A read keeps at most ``max_result_bytes`` of values besides the row cap, on every engine and
on the Arrow paths, and says so (the row cap alone let ten thousand rows of documents through).

Every read here is 200 rows of an integer and a 10,000-character text (about 10 KB a row)
under a bound of 100,000 bytes: nine rows fit, the tenth would pass it (unless it says
otherwise).

What the process holds while reading is bounded too: PostgreSQL's row path fetches a first
batch of at most 128 rows and sizes later ``FETCH``es by the bytes per row seen; DuckDB's row
path streams its result 512 rows at a time and stops the query at the bound.
"""

from __future__ import annotations

import datetime as dt
import decimal
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pi_notebook.sql.backend import DatabaseBackend, QueryError
from pi_notebook.sql.backend import fetch as fetch_module
from pi_notebook.sql.backend.arrow import arrow_available
from pi_notebook.sql.backend.sizes import (
    DEFAULT_MAX_RESULT_BYTES,
    arrow_rows_within,
    chunk_bytes,
    rows_within,
    value_bytes,
)

BOUND = 100_000
WIDE = 10_000
FIT = 9  # rows of (int, 10,000 characters) within BOUND


def _sql(backend: str, width: int = WIDE) -> str:
    """200 rows of ``i`` and ``pad``, a text of ``width`` x's (an even width)."""
    rows = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 200) "
    return {
        # (printf's width from an argument is refused by the classifier: hex of a zeroblob)
        "sqlite": f"{rows}SELECT i, replace(hex(zeroblob({width // 2})), '0', 'x') AS pad FROM r",
        "duckdb": f"SELECT i, repeat('x', {width}) AS pad FROM range(1, 201) AS t(i)",
        "postgresql": f"SELECT i, repeat('x', {width}) AS pad FROM generate_series(1, 200) AS i",
        "mysql": f"{rows}SELECT i, REPEAT('x', {width}) AS pad FROM r",
    }[backend]


def test_sizes_estimate_values_and_cut_at_the_last_row_that_fits() -> None:
    assert value_bytes("é" * 10) == 10 and value_bytes(b"abc") == 3
    assert value_bytes(None) == value_bytes(7) == value_bytes(1.5) == 8
    assert value_bytes(dt.date(2026, 1, 1)) == value_bytes(decimal.Decimal("1.5")) == 8
    assert value_bytes({"a": [1, 2]}) == len(str({"a": [1, 2]}))
    chunk = [(1, "x" * 100, None, b"12"), (2, "", None, None), (3, None, {"k": 1}, b"")]
    assert chunk_bytes(chunk) == sum(value_bytes(v) for row in chunk for v in row)
    assert chunk_bytes([]) == 0
    assert rows_within(chunk, 10_000) == 3
    assert rows_within(chunk, 8 + 100 + 8 + 2) == 1  # the first row exactly
    assert rows_within(chunk, 8 + 100 + 8 + 1) == 0
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"i": list(range(50)), "pad": ["x" * 1000] * 50})
    per_row = table.slice(0, 1).nbytes
    assert arrow_rows_within(table, 10 * per_row) == 10
    assert arrow_rows_within(table, 10 * per_row - 1) == 9
    assert arrow_rows_within(table, 10**9) == 50
    assert DEFAULT_MAX_RESULT_BYTES == 64 << 20


async def _read(url: str, sql: str, **options: Any) -> Any:
    backend = DatabaseBackend(url, max_result_bytes=BOUND, **options)
    try:
        return await backend.run("size", sql)
    finally:
        backend.dispose()


def _assert_stopped_at_the_bound(out: Any, *, arrow: bool = False) -> None:
    frame = out.dataframe
    assert out.size_capped and out.truncated and not out.row_count_exact
    assert out.details()["size_capped"] is True
    assert out.row_count > len(frame)
    if arrow:  # Arrow counts its offsets too: a few rows fewer may fit
        assert 1 <= len(frame) <= FIT
    else:
        assert len(frame) == FIT
    assert frame["pad"].str.len().sum() <= BOUND
    assert "size limit" in out.preview and f"keeps the first {len(frame):,}" in out.preview


async def _engine_case(url: str, backend: str) -> None:
    _assert_stopped_at_the_bound(await _read(url, _sql(backend), arrow=False))
    narrow = await _read(url, _sql(backend, 10), arrow=False)
    assert not narrow.size_capped and narrow.row_count == 200 and len(narrow.dataframe) == 200


async def test_sqlite_read_stops_at_the_size_bound(tmp_path: Path) -> None:
    await _engine_case(f"sqlite:///{tmp_path / 'db.sqlite'}", "sqlite")


async def test_sqlite_count_goes_on_past_the_size_bound(tmp_path: Path) -> None:
    """``count_rows``: the count is exact, the rows kept still stop at the bound."""
    backend = DatabaseBackend(f"sqlite:///{tmp_path / 'db.sqlite'}", max_result_bytes=BOUND)
    try:
        out = await backend.run("size", _sql("sqlite"), count_rows=True)
    finally:
        backend.dispose()
    assert out.size_capped and out.row_count_exact and out.row_count == 200
    assert len(out.dataframe) == FIT and "200 rows" in out.preview


async def test_duckdb_read_stops_at_the_size_bound(tmp_path: Path) -> None:
    pytest.importorskip("duckdb_engine")
    await _engine_case(f"duckdb:///{tmp_path / 'db.duckdb'}", "duckdb")


@pytest.mark.postgres
async def test_postgres_read_stops_at_the_size_bound(pg_url: str) -> None:
    await _engine_case(pg_url, "postgresql")


@pytest.mark.mysql
async def test_mariadb_read_stops_at_the_size_bound(mysql_url: str) -> None:
    await _engine_case(mysql_url, "mysql")
    # The read stopped early: the connection is clean for the next call.
    out = await _read(mysql_url, "SELECT 1 AS one")
    assert out.dataframe["one"].tolist() == [1]


@pytest.mark.skipif(not arrow_available("sqlite"), reason="no pyarrow/ADBC SQLite")
async def test_sqlite_arrow_read_stops_at_the_size_bound(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    import sqlite3

    sqlite3.connect(tmp_path / "db.sqlite").close()  # the reader process needs a file
    _assert_stopped_at_the_bound(await _read(url, _sql("sqlite"), arrow=True), arrow=True)
    # The reader process was stopped mid-stream; the next read gets a fresh one.
    again = await _read(url, "SELECT 1 AS one", arrow=True)
    assert again.dataframe["one"].tolist() == [1]


async def test_duckdb_arrow_read_stops_at_the_size_bound(tmp_path: Path) -> None:
    pytest.importorskip("duckdb_engine")
    pytest.importorskip("pyarrow")
    url = f"duckdb:///{tmp_path / 'db.duckdb'}"
    _assert_stopped_at_the_bound(await _read(url, _sql("duckdb"), arrow=True), arrow=True)


@pytest.mark.postgres
async def test_postgres_arrow_read_stops_at_the_size_bound(pg_url: str) -> None:
    if not arrow_available("postgresql"):
        pytest.skip("no pyarrow/ADBC PostgreSQL driver")
    _assert_stopped_at_the_bound(await _read(pg_url, _sql("postgresql"), arrow=True), arrow=True)


# -- what is held while reading ------------------------------------------------------------


@dataclass
class _Wire:
    """What psycopg cursors sent (one text per round trip) and each batch of rows fetched."""

    sent: list[str] = field(default_factory=list[str])
    batches: list[int] = field(default_factory=list[int])
    batch_bytes: list[int] = field(default_factory=list[int])

    def fetches(self) -> list[str]:
        return [text for text in self.sent if "FETCH FORWARD" in text]

    def mark(self) -> tuple[int, int, int]:
        return len(self.sent), len(self.batches), len(self.batch_bytes)

    def back_to(self, mark: tuple[int, int, int]) -> None:
        del self.sent[mark[0] :], self.batches[mark[1] :], self.batch_bytes[mark[2] :]


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> _Wire:
    seen = _Wire()
    execute, fetchall = psycopg.Cursor.execute, psycopg.Cursor.fetchall

    def spy_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        seen.sent.append(str(query))
        return execute(self, query, *args, **kwargs)

    def spy_fetchall(self: Any) -> Any:
        rows = fetchall(self)
        seen.batches.append(len(rows))
        seen.batch_bytes.append(chunk_bytes(rows))
        return rows

    monkeypatch.setattr(psycopg.Cursor, "execute", spy_execute)
    monkeypatch.setattr(psycopg.Cursor, "fetchall", spy_fetchall)
    return seen


def _idle(backend: DatabaseBackend) -> bool:
    """Whether the PostgreSQL connection kept between runs has no transaction open."""
    raw = backend._slot._raw  # pyright: ignore[reportPrivateUsage]
    assert raw is not None
    return raw.driver_connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


async def _pg_run(
    url: str, sql: str, wire: _Wire, bound: int | None = BOUND, **options: Any
) -> Any:
    """``sql`` through a PostgreSQL backend with the size bound (Arrow off); ``wire`` holds
    this read's traffic only (not the connection's setup). The read must leave the
    connection idle and usable."""
    backend = DatabaseBackend(url, max_result_bytes=bound, arrow=False)
    try:
        await backend.run("warm", "SELECT 1")
        wire.back_to((0, 0, 0))
        out = await backend.run("size", sql, **options)
        assert _idle(backend)  # the read's transaction is over
        mark = wire.mark()
        assert (await backend.run("after", "SELECT 2 AS two")).dataframe["two"].tolist() == [2]
        wire.back_to(mark)
        return out
    finally:
        backend.dispose()


def _pg_wide(rows: int, width: int = WIDE) -> str:
    return f"SELECT i, repeat('x', {width}) AS pad FROM generate_series(1, {rows}) AS i"


def _fetch_rows(wire: _Wire) -> list[int]:
    """The row count each ``FETCH`` asked for."""
    return [int(text.rsplit("FETCH FORWARD ", 1)[1].split()[0]) for text in wire.fetches()]


@pytest.mark.postgres
async def test_postgres_first_fetch_of_wide_rows_is_128_rows_not_the_row_cap(
    pg_url: str, wire: _Wire
) -> None:
    """2,000 rows of 10 KB under the 100,000-byte bound: the first ``FETCH`` used to ask for
    the row cap plus one (all 20 MB here, in libpq and then in Python, and computed whole by
    the server first; with 10,000 rows of 1 MB, 10 GB) before the bound cut it. Now it asks
    for 128 rows, and a read that passed the bound in them fetches nothing more."""
    tracemalloc.start()
    try:
        out = await _pg_run(pg_url, _pg_wide(2_000), wire)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    _assert_stopped_at_the_bound(out)
    assert _fetch_rows(wire) == [128] and wire.batches == [128] and out.row_count == 128
    assert peak < 8 << 20, f"{peak / 2**20:.1f} MiB held while reading"


@pytest.mark.postgres
async def test_postgres_later_fetches_of_wide_rows_bring_about_4_mib(
    pg_url: str, wire: _Wire
) -> None:
    """Rows of 100 KB under a 20 MB bound: 128 rows first (12.8 MB), then ``FETCH``es of
    4 MiB of such rows (41), until the rows kept pass the bound (199 fit)."""
    out = await _pg_run(pg_url, _pg_wide(1_000, 100_000), wire, 20_000_000)
    assert out.size_capped and len(out.dataframe) == 199 and out.row_count == 210
    assert _fetch_rows(wire) == [128, 41, 41] and wire.batches == [128, 41, 41]
    assert max(wire.batch_bytes[1:]) <= 4 << 20


@pytest.mark.postgres
async def test_postgres_counted_read_fetches_batches_sized_by_the_bytes_per_row_seen(
    pg_url: str, wire: _Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counting every row goes past the bound, so every batch is fetched: after the first
    (128 rows), each ``FETCH`` asks for about ``_PG_BATCH_BYTES`` of rows as wide as those
    seen (here 100,000 bytes: nine rows of 10 KB), never the 10,001 rows it used to."""
    monkeypatch.setattr(fetch_module, "_PG_BATCH_BYTES", 100_000, raising=False)
    out = await _pg_run(pg_url, _sql("postgresql"), wire, count_rows=True)
    assert out.row_count == 200 and out.row_count_exact and out.size_capped
    assert len(out.dataframe) == FIT
    assert wire.batches[0] == 128 and sum(wire.batches) == 200
    assert set(_fetch_rows(wire)[1:]) == {9}  # the last one finds the end
    assert max(wire.batch_bytes[1:]) <= 100_000


@pytest.mark.postgres
async def test_postgres_narrow_capped_read_takes_the_rest_in_one_fetch_that_rolls_back(
    pg_url: str, wire: _Wire
) -> None:
    """Narrow rows (the common read): the batches grow fourfold each (they are small) until
    the last takes what the row cap allows and ends the transaction in the same message."""
    out = await _pg_run(pg_url, "SELECT g FROM generate_series(1, 20000) AS g", wire)
    assert len(out.dataframe) == 10_000 and out.truncated and not out.size_capped
    assert out.dataframe["g"].iloc[-1] == 10_000 and out.row_count == 10_001
    assert wire.batches == [128, 512, 2_048, 7_313]
    first, *middle, last, reset = wire.sent
    assert reset == "DISCARD ALL"  # the session reset after the call
    assert first.startswith("BEGIN READ ONLY; SET LOCAL statement_timeout")
    assert first.endswith("FETCH FORWARD 128 FROM pi_read")
    assert middle == ["FETCH FORWARD 512 FROM pi_read", "FETCH FORWARD 2048 FROM pi_read"]
    assert last == "FETCH FORWARD 7313 FROM pi_read; ROLLBACK"


@pytest.mark.postgres
async def test_postgres_rows_that_widen_as_the_read_goes_on_come_in_growing_batches(
    pg_url: str, wire: _Wire
) -> None:
    """Rows ordered by width (10 bytes to 40 KB) under a 20 MB bound: the first 128 rows are
    narrow, and a second ``FETCH`` sized by them alone took every row left (some 75 MB at
    once). Batches now grow at most fourfold, so each meets the rows' growth in steps."""
    sql = "SELECT i, repeat('x', i * 10) AS pad FROM generate_series(1, 4000) AS i ORDER BY i"
    out = await _pg_run(pg_url, sql, wire, 20_000_000)
    assert out.size_capped and 1_900 < len(out.dataframe) < 2_100
    assert wire.batches[:2] == [128, 512]
    assert all(b <= 4 * a for a, b in zip(wire.batches, wire.batches[1:], strict=False))
    assert max(wire.batch_bytes) <= 16 << 20, wire.batch_bytes


@pytest.mark.postgres
async def test_postgres_error_in_a_later_fetch_is_the_reads_error(pg_url: str) -> None:
    """A statement that fails at its 5,000th row, in the second ``FETCH``: the read fails with
    the server's error and the connection is clean for the next read."""
    backend = DatabaseBackend(pg_url, max_result_bytes=BOUND, arrow=False)
    try:
        with pytest.raises(QueryError, match="division by zero"):
            await backend.run("r", "SELECT 1 / (5000 - g) AS q FROM generate_series(1, 20000) g")
        assert _idle(backend)
        again = await backend.run("r", "SELECT g FROM generate_series(1, 300) g")
        assert again.dataframe["g"].tolist() == list(range(1, 301))
    finally:
        backend.dispose()


@pytest.mark.postgres
async def test_postgres_read_without_a_size_bound_keeps_its_one_round_trip(
    pg_url: str, wire: _Wire
) -> None:
    """``max_result_bytes=None`` (rows only): the first ``FETCH`` takes the row cap plus one,
    ``ROLLBACK`` included, as before the size bound."""
    out = await _pg_run(pg_url, "SELECT g FROM generate_series(1, 20000) AS g", wire, None)
    assert len(out.dataframe) == 10_000 and wire.sent[1:] == ["DISCARD ALL"]
    assert wire.sent[0].endswith("FETCH FORWARD 10001 FROM pi_read; ROLLBACK")


def _duckdb_sql(rows: int) -> str:
    return f"SELECT i, repeat('x', {WIDE}) AS pad FROM range(1, {rows + 1}) AS t(i)"


async def test_duckdb_read_streams_in_chunks_and_stops_at_the_size_bound(tmp_path: Path) -> None:
    """5,000 rows of 10 KB (50 MB) under the 100,000-byte bound: the row path used to fetch the
    capped result whole (50 MB of Python strings, more in DuckDB, all 5,000 rows seen); now it
    reads one chunk of 512 rows, keeps the nine that fit and stops the query there."""
    pytest.importorskip("duckdb_engine")
    url = f"duckdb:///{tmp_path / 'db.duckdb'}"
    await _read(url, "SELECT 1", arrow=False)  # imports and caches, outside the measure
    tracemalloc.start()
    try:
        out = await _read(url, _duckdb_sql(5_000), arrow=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    _assert_stopped_at_the_bound(out)
    assert out.row_count == 512  # the rows seen: one chunk
    assert peak < 20 << 20, f"{peak / 2**20:.1f} MiB held while reading"


async def test_duckdb_streamed_read_names_an_infinite_date_met_in_a_later_chunk(
    tmp_path: Path,
) -> None:
    """An infinite date in the third chunk: the chunks already read are dropped and the read
    runs again, once, with the flags, so every row comes from the same run."""
    pytest.importorskip("duckdb_engine")
    sql = (
        "SELECT i, CASE WHEN i = 1500 THEN 'infinity'::date ELSE DATE '2024-01-01' END AS d, "
        "CASE WHEN i = 1 THEN ['-infinity'::date] ELSE [] END AS l "
        "FROM range(3000) AS t(i) ORDER BY i"
    )
    out = await _read(f"duckdb:///{tmp_path / 'db.duckdb'}", sql, arrow=False)
    frame = out.dataframe
    assert len(frame) == 3_000 and not out.truncated and not out.size_capped
    assert frame["d"].iloc[1500] == "infinity" and frame["d"].iloc[1499] == dt.date(2024, 1, 1)
    assert frame["l"].iloc[1] == "[-infinity]" and frame["l"].iloc[0] == "[]"


async def test_duckdb_arrow_read_streams_batches_and_stops_at_the_size_bound(
    tmp_path: Path,
) -> None:
    """300,000 narrow rows under a row cap of a million: the Arrow read used to take the
    capped table whole (all 300,000 rows seen) before cutting it to the bound; now it reads
    record batches and stops the query after the first one passes the bound."""
    pytest.importorskip("duckdb_engine")
    pytest.importorskip("pyarrow")
    url = f"duckdb:///{tmp_path / 'db.duckdb'}"
    sql = "SELECT i, 'row ' || i AS label FROM range(300000) AS t(i)"
    out = await _read(url, sql, arrow=True, row_cap=1_000_000)
    assert out.size_capped and out.truncated and not out.row_count_exact
    assert 0 < len(out.dataframe) < out.row_count <= 65_536  # one batch seen, not 300,000
    assert out.dataframe["i"].tolist() == list(range(len(out.dataframe)))
    whole = await _read(url, sql.replace("300000", "3000"), arrow=True, row_cap=1_000_000)
    assert not whole.size_capped and whole.row_count_exact and len(whole.dataframe) == 3_000
