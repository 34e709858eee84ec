"""A capped read holds about the cap, not the whole result.

The whole table is ~50 MB (100,000 rows of 500 bytes); a capped read keeps 1,000 rows. The
process's peak resident memory during the read is measured (``VmHWM``, reset first), so
memory the driver's C library holds (libpq's client-side result) counts too.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pi_notebook.sql.backend import DatabaseBackend

ROWS = 100_000
TABLE_MB = ROWS * 500 / 2**20  # ~48 MB


def _kb(field: str) -> int:
    status = Path("/proc/self/status").read_text()
    return int(re.search(rf"{field}:\s+(\d+)", status).group(1))  # type: ignore[union-attr]


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


async def _peak_mb_of_capped_read(url: str, table: str) -> float:
    backend = DatabaseBackend(url, row_cap=1_000)
    try:
        await backend.run("warm", f"SELECT * FROM {table} LIMIT 5")  # pool, imports, worker
        if not _reset_peak():
            pytest.skip("no /proc/self/clear_refs to reset the peak")
        before = _kb("VmRSS")
        out = await backend.run("r", f"SELECT * FROM {table}")
        peak = _kb("VmHWM")
    finally:
        backend.dispose()
    assert len(out.dataframe) == 1_000 and out.row_count == 1_001 and not out.row_count_exact
    return (peak - before) / 1024


@pytest.mark.postgres
async def test_capped_postgres_read_streams(pg_url: str) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE wide_rows AS SELECT g AS id, repeat('x', 500) AS pad "
            f"FROM generate_series(1, {ROWS}) g"
        )
    engine.dispose()
    assert await _peak_mb_of_capped_read(pg_url, "wide_rows") < TABLE_MB / 3


@pytest.mark.mysql
async def test_capped_mariadb_read_streams(mysql_url: str) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(mysql_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE wide_rows (id INTEGER, pad VARCHAR(600))")
        conn.exec_driver_sql(
            f"INSERT INTO wide_rows SELECT seq, REPEAT('x', 500) FROM seq_1_to_{ROWS}"
        )
    engine.dispose()
    try:
        assert await _peak_mb_of_capped_read(mysql_url, "wide_rows") < TABLE_MB / 3
        # An explicit LIMIT above the cap overrides sql_select_limit: the unbuffered cursor
        # still stops at the cap, and the connection is clean for the next call.
        backend = DatabaseBackend(mysql_url, row_cap=1_000)
        try:
            out = await backend.run("r1", f"SELECT * FROM wide_rows LIMIT {ROWS}")
            assert len(out.dataframe) == 1_000 and out.row_count == 1_001
            again = await backend.run("r2", "SELECT count(*) AS n FROM wide_rows")
            assert again.dataframe["n"].tolist() == [ROWS]
        finally:
            backend.dispose()
    finally:
        engine = sa.create_engine(mysql_url)
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE wide_rows")
        engine.dispose()
