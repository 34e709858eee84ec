"""Values no Python type holds come through instead of failing the read."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa

from pi_notebook.sql.backend import DatabaseBackend


@pytest.mark.postgres
async def test_postgres_infinite_bc_and_far_future_dates_come_through(pg_url: str) -> None:
    backend = DatabaseBackend(pg_url)
    try:
        out = await backend.run(
            "r",
            (
                "SELECT d, ts, tz FROM (VALUES "
                "('infinity'::date, '-infinity'::timestamp, 'infinity'::timestamptz), "
                "('0044-03-15 BC', '0044-03-15 12:00 BC', '10000-01-01 00:00+00'), "
                "('2024-02-29', '2024-02-29 10:30', '2024-02-29 10:30+00')) AS v(d, ts, tz)"
            ),
        )
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
        conn.exec_driver_sql(
            "INSERT INTO zero_dates VALUES ('0000-00-00', '0000-00-00 00:00:00'),"
            " ('2020-00-15', '2020-01-01 00:00:00')"
        )
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


@pytest.mark.postgres
async def test_postgres_24h_time_and_timetz_come_through(pg_url: str) -> None:
    backend = DatabaseBackend(pg_url)
    try:
        out = await backend.run(
            "r",
            (
                "SELECT t, tz FROM (VALUES ('24:00:00'::time, '24:00:00+02'::timetz), "
                "('12:30', '12:30+01')) AS v(t, tz)"
            ),
        )
        arrays = await backend.run("r2", "SELECT ARRAY['24:00'::time, '01:00'] AS a")
    finally:
        backend.dispose()
    frame = out.dataframe
    assert frame["t"].tolist() == ["24:00:00", dt.time(12, 30)]
    assert frame["tz"].tolist()[0] == "24:00:00+02"
    assert frame["tz"].tolist()[1] == dt.time(12, 30, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert arrays.dataframe["a"].tolist() == [["24:00:00", dt.time(1, 0)]]


@pytest.mark.postgres
async def test_postgres_24h_time_comes_through_on_the_arrow_path(pg_url: str) -> None:
    backend = DatabaseBackend(pg_url, row_cap=200_000)  # large caps read through ADBC
    try:
        out = await backend.run("r", "SELECT '24:00:00'::time AS t, '12:30'::time AS u")
    finally:
        backend.dispose()
    assert out.dataframe.to_dict("records") == [{"t": "24:00:00", "u": dt.time(12, 30)}]


def test_duckdb_rows_name_infinite_dates_instead_of_9999() -> None:
    duckdb = pytest.importorskip("duckdb")
    from pi_notebook.sql.backend.frames import duckdb_rows

    conn = duckdb.connect()
    try:
        relation = conn.sql(
            "SELECT * FROM (VALUES "
            "('infinity'::date, '-infinity'::timestamp, ['infinity'::date], '9999-12-31'::date), "
            "('2020-01-01', '0001-01-01 00:00', [], '0001-01-01')) AS v(d, ts, l, real)"
        )
        rows = duckdb_rows(relation.limit(10))
    finally:
        conn.close()
    assert rows[0] == ("infinity", "-infinity", "[infinity]", dt.date(9999, 12, 31))
    assert rows[1] == (dt.date(2020, 1, 1), dt.datetime(1, 1, 1), "[]", dt.date(1, 1, 1))


async def test_duckdb_backend_shows_infinite_dates_not_9999() -> None:
    backend = DatabaseBackend("duckdb:///:memory:")
    try:
        out = await backend.run("r", "SELECT 'infinity'::date AS d, '-infinity'::timestamp AS ts")
    finally:
        backend.dispose()
    assert out.dataframe.to_dict("records") == [{"d": "infinity", "ts": "-infinity"}]
