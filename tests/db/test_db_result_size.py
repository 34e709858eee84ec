"""A read keeps at most ``max_result_bytes`` of values besides the row cap, on every engine and
on the Arrow paths, and says so (the row cap alone let ten thousand rows of documents through).

Every read here is 200 rows of an integer and a 10,000-character text (about 10 KB a row)
under a bound of 100,000 bytes: nine rows fit, the tenth would pass it.
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pytest

from pi_notebook.sql.backend import DatabaseBackend
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
