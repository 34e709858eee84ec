"""Every reader of the one reader protocol gives the DataFrame the plain DB-API path gives.

The same rows (integers, decimals, floats, text with Unicode, blobs, dates, timestamps,
booleans, NULLs in each, and a column of NULLs only) are read by each reader, its table made
a DataFrame by ``to_frame``, and by the engine's DB-API cursor through the backend's
``FrameBuilder`` (what a read gives with Arrow off), whole and under a row cap: values,
dtypes, NULLs and the rows seen agree. The audit's reader is held to the audit's own plain
path over the same records.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import sqlalchemy as sa

from pi_notebook.readers import ArrowReader, Query, ReadLimits, arrow_available, to_frame
from pi_notebook.sql.backend.frames import FrameBuilder

ROWS = 3_000  # past the DB-API path's switch to Arrow chunks (2,048 rows)
CAPS = [None, 1_000]
SQL = "SELECT * FROM typed ORDER BY id"


def _value(i: int) -> dict[str, Any]:
    """Row ``i`` of the table, as Python values (``None`` is NULL)."""
    return {
        "id": i,
        "amount": None if i % 7 == 0 else f"{i * 1.25:.2f}",
        "ratio": None if i % 11 == 0 else i / 3,
        "name": None if i % 5 == 0 else f"name {i} ü ☃",
        "data": None if i % 13 == 0 else bytes([i % 256, 0, 255]),
        "day": None if i % 17 == 0 else dt.date(2024, 1, 1) + dt.timedelta(days=i % 300),
        "stamp": None if i % 19 == 0 else dt.datetime(2024, 1, 1) + dt.timedelta(minutes=i),
        "flag": None if i % 23 == 0 else i % 2 == 0,
        "nulls": None,
    }


def _rows() -> list[dict[str, Any]]:
    return [_value(i) for i in range(1, ROWS + 1)]


@dataclass
class Source:
    """A table on one engine: its reader, and its DB-API cursor."""

    reader: ArrowReader
    cursor: Callable[[], Any]


@contextmanager
def _sqlite(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Source]:
    from pi_notebook.readers.sqlite import SqliteReader

    path = tmp_path / "typed.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE typed (id INTEGER, amount REAL, ratio REAL, name TEXT, data BLOB, "
        "day TEXT, stamp TEXT, flag INTEGER, nulls TEXT)"
    )
    conn.executemany(
        "INSERT INTO typed VALUES (:id, :amount, :ratio, :name, :data, :day, :stamp, :flag, :nulls)",
        [
            {
                **r,
                "amount": None if r["amount"] is None else float(r["amount"]),
                "day": None if r["day"] is None else r["day"].isoformat(),
                "stamp": None if r["stamp"] is None else r["stamp"].isoformat(sep=" "),
                "flag": None if r["flag"] is None else int(r["flag"]),
            }
            for r in _rows()
        ],
    )
    conn.commit()
    reader = SqliteReader(str(path), 1 << 30)
    try:
        yield Source(reader, conn.cursor)
    finally:
        reader.close()
        conn.close()


_PG_TABLE = (
    "CREATE TABLE typed (id integer, amount numeric(12, 2), ratio float8, name text, "
    "data bytea, day date, stamp timestamptz, flag boolean, nulls text)"
)


@contextmanager
def _postgres_table(url: str) -> Iterator[Any]:
    import psycopg

    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE IF EXISTS typed"))
        conn.execute(sa.text(_PG_TABLE))
        conn.execute(
            sa.text(
                "INSERT INTO typed VALUES (:id, CAST(:amount AS numeric), :ratio, :name, "
                ":data, :day, :stamp, :flag, :nulls)"
            ),
            [
                {**r, "stamp": None if r["stamp"] is None else r["stamp"].replace(tzinfo=dt.UTC)}
                for r in _rows()
            ],
        )
    engine.dispose()
    dsn = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    raw = psycopg.connect(dsn, autocommit=True)
    try:
        yield raw
    finally:
        raw.execute("DROP TABLE typed")
        raw.close()


def _pg_url(request: pytest.FixtureRequest) -> str:
    if not arrow_available("postgresql"):
        pytest.skip("no pyarrow/ADBC PostgreSQL")
    return request.getfixturevalue("pg_url")


@contextmanager
def _postgres(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Source]:
    from pi_notebook.readers.postgres import PostgresReader

    url = _pg_url(request)
    with _postgres_table(url) as raw:
        yield Source(PostgresReader(sa.make_url(url)), raw.cursor)


@contextmanager
def _postgres_walled(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Source]:
    from pi_notebook.sql.backend.arrow import AdbcPostgres

    url = _pg_url(request)
    with _postgres_table(url) as raw:
        reader = AdbcPostgres(sa.make_url(url), 5)
        try:
            yield Source(reader, raw.cursor)
        finally:
            reader.close()


@contextmanager
def _duckdb(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Source]:
    import duckdb

    from pi_notebook.readers.duckdb import DuckdbReader

    conn = duckdb.connect(str(tmp_path / "typed.duckdb"))
    conn.execute(
        "CREATE TABLE typed (id INTEGER, amount DECIMAL(12, 2), ratio DOUBLE, name VARCHAR, "
        "data BLOB, day DATE, stamp TIMESTAMP, flag BOOLEAN, nulls VARCHAR)"
    )
    import pyarrow as pa

    schema = pa.schema(
        [
            ("id", pa.int32()),
            ("amount", pa.string()),
            ("ratio", pa.float64()),
            ("name", pa.string()),
            ("data", pa.binary()),
            ("day", pa.date32()),
            ("stamp", pa.timestamp("us")),
            ("flag", pa.bool_()),
            ("nulls", pa.string()),
        ]
    )
    conn.register("src", pa.Table.from_pylist(_rows(), schema=schema))
    conn.execute(
        "INSERT INTO typed SELECT * REPLACE (CAST(amount AS DECIMAL(12, 2)) AS amount) FROM src"
    )
    conn.unregister("src")
    try:
        yield Source(DuckdbReader(conn), conn.cursor)
    finally:
        conn.close()


SOURCES: dict[str, Callable[[Path, pytest.FixtureRequest], AbstractContextManager[Source]]] = {
    "sqlite-child": _sqlite,
    "postgres-adbc": _postgres,
    "postgres-adbc-walled": _postgres_walled,
    "duckdb": _duckdb,
}
MARKS = {
    "postgres-adbc": [pytest.mark.postgres],
    "postgres-adbc-walled": [pytest.mark.postgres],
}


def _dbapi_frame(cursor: Any, cap: int | None) -> pd.DataFrame:
    """What the DB-API path gives: the cursor's rows, kept to the cap, built by the
    backend's ``FrameBuilder`` chunk by chunk."""
    cursor.execute(SQL)
    builder = FrameBuilder([str(d[0]) for d in cursor.description])
    kept = 0
    while chunk := cursor.fetchmany(512):
        if cap is not None:
            chunk = chunk[: cap - kept]
        builder.add(chunk)
        kept += len(chunk)
    cursor.close()
    return builder.build()


def _same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert list(got.dtypes) == list(want.dtypes)
    assert list(got.columns) == list(want.columns)


@pytest.mark.parametrize("cap", CAPS, ids=["whole", "capped"])
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=MARKS.get(n, [])) for n in SOURCES], ids=list(SOURCES)
)
def test_a_reader_gives_the_frame_the_dbapi_path_gives(
    name: str, cap: int | None, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    backend = {"sqlite-child": "sqlite", "duckdb": "duckdb"}.get(name, "postgresql")
    if not arrow_available(backend):
        pytest.skip(f"no pyarrow/ADBC for {backend}")
    with SOURCES[name](tmp_path, request) as source:
        read = source.reader.read_arrow(Query(SQL), ReadLimits(row_cap=cap))
        want = _dbapi_frame(source.cursor(), cap)
    assert read is not None  # the reader served it
    got = to_frame(read.table)
    assert got is not None
    _same(got, want)
    assert len(got) == (ROWS if cap is None else cap)
    assert (read.seen, read.exact) == ((ROWS, True) if cap is None else (cap + 1, False))
    assert bool(got["nulls"].isna().all()) and bool(got["name"].isna().any())


# -- the audit's reader ----------------------------------------------------------------------


@contextmanager
def _scratch_database(pg_url: str) -> Iterator[str]:
    """A new, empty PostgreSQL database beside ``pg_url``'s, dropped afterwards (the audit's
    tables have fixed names)."""
    base = sa.make_url(pg_url)
    name = f"pi_nb_readers_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _audit_records(url: str) -> None:
    from pi_notebook.audit import AuditLog

    with AuditLog(url, session_id="a1") as log:
        for i in range(40):
            log.record(
                "tool_execution_start" if i % 2 else "note",
                {"i": i, "text": f"ü {i}", "nested": {"n": [i, None]}},
                tool_call_id=f"c{i}" if i % 3 else None,
                tool_name="q" if i % 3 else None,
            )


def _audit_frames(url: str, reader: type[Any], **filters: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The frame of ``read_records`` through ``reader``, and through the plain path (the
    reader declines: the protocol's ``None``)."""
    from pi_notebook.audit.frames import read_records

    served: list[bool] = []
    real = reader.read_arrow
    engine = sa.create_engine(url)
    try:
        with pytest.MonkeyPatch.context() as patch:

            def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
                read = real(self, *args, **kwargs)
                served.append(read is not None)
                return read

            patch.setattr(reader, "read_arrow", spy)
            arrow = read_records(engine, **filters)
            assert served == [True]  # the reader served it
            patch.setattr(reader, "read_arrow", lambda *args, **kwargs: None)
            plain = read_records(engine, **filters)
    finally:
        engine.dispose()
    return arrow, plain


def _same_records(arrow: pd.DataFrame, plain: pd.DataFrame) -> None:
    """Values and NULLs alike; the dtypes the audit promises (ids and seq ``int64``,
    timestamps ``datetime64[us, UTC]``) on both; text as text (the Arrow path may give
    pandas' ``str`` where the plain path keeps objects)."""
    assert list(arrow.columns) == list(plain.columns)
    for name in ("id", "seq"):
        assert arrow[name].dtype == plain[name].dtype == "int64"
    assert str(arrow["timestamp"].dtype) == str(plain["timestamp"].dtype) == "datetime64[us, UTC]"
    as_records = [
        f.astype(object).where(f.notna(), None).to_dict("records") for f in (arrow, plain)
    ]
    assert as_records[0] == as_records[1]


@pytest.mark.parametrize("decode", [True, False], ids=["decoded", "text"])
@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_the_audit_reader_gives_the_frame_its_plain_path_gives(
    store: str,
    decode: bool,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pi_notebook.audit import frames

    if store == "sqlite":
        from pi_notebook.readers.sqlite import SqliteReader as reader

        if not arrow_available("sqlite"):
            pytest.skip("no pyarrow/ADBC SQLite")
        monkeypatch.setattr(frames, "SQLITE_ARROW_MIN_RECORDS", 0)
        url = f"sqlite:///{tmp_path / 'audit.sqlite'}"
        _audit_records(url)
        both = [
            _audit_frames(url, reader, decode=decode),
            _audit_frames(url, reader, decode=decode, kind="note"),
        ]
    else:
        from pi_notebook.readers.postgres import PostgresReader as reader

        with _scratch_database(_pg_url(request)) as url:
            _audit_records(url)
            both = [
                _audit_frames(url, reader, decode=decode),
                _audit_frames(url, reader, decode=decode, kind="note"),
            ]
    assert [len(a) for a, _ in both] == [40, 20]
    for arrow, plain in both:
        _same_records(arrow, plain)
    whole = both[0][0]
    assert whole["tool_call_id"].isna().tolist().count(True) == 14
    assert bool(whole["payload"].notna().all())
