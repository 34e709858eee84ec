"""Values no Python type holds come through instead of failing the read (issue 15.10)."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa

from pi_notebook.sql.backend import DatabaseBackend


@pytest.mark.postgres
async def test_postgres_infinite_bc_and_far_future_dates_come_through(pg_url: str) -> None:
    backend = DatabaseBackend(pg_url)
    try:
        out = await backend.run("r", (
            "SELECT d, ts, tz FROM (VALUES "
            "('infinity'::date, '-infinity'::timestamp, 'infinity'::timestamptz), "
            "('0044-03-15 BC', '0044-03-15 12:00 BC', '10000-01-01 00:00+00'), "
            "('2024-02-29', '2024-02-29 10:30', '2024-02-29 10:30+00')) AS v(d, ts, tz)"
        ))  # fmt: skip
    finally:
        backend.dispose()
    frame = out.dataframe
    assert frame["d"].tolist() == ["infinity", "0044-03-15 BC", dt.date(2024, 2, 29)]
    assert frame["ts"].tolist()[:2] == ["-infinity", "0044-03-15 12:00:00 BC"]
    assert frame["ts"].tolist()[2] == dt.datetime(2024, 2, 29, 10, 30)
    assert frame["tz"].tolist()[0] == "infinity" and str(frame["tz"].tolist()[1]).startswith(
        "10000-01-01"
    )
    assert "infinity" in out.preview and "2024-02-29" in out.preview


@pytest.mark.mysql
async def test_mariadb_zero_dates_come_through_as_text(mysql_url: str) -> None:
    engine = sa.create_engine(mysql_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("SET SESSION sql_mode = ''")  # allow zero dates for the setup
        conn.exec_driver_sql("CREATE TABLE zero_dates (d DATE, ts DATETIME)")
        conn.exec_driver_sql("INSERT INTO zero_dates VALUES ('0000-00-00', '0000-00-00 00:00:00'),"
                             " ('2020-00-15', '2020-01-01 00:00:00')")  # fmt: skip
    backend = DatabaseBackend(mysql_url)
    try:
        out = await backend.run("r", "SELECT d, ts FROM zero_dates")
    finally:
        backend.dispose()
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE zero_dates")
        engine.dispose()
    assert out.dataframe["d"].tolist() == ["0000-00-00", "2020-00-15"]
    assert out.dataframe["ts"].tolist() == ["0000-00-00 00:00:00", dt.datetime(2020, 1, 1)]
