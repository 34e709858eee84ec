# ruff: noqa: F811 - the engine fixture ``db`` is imported from dbtest_support
"""Driver errors that echo a row's values (a duplicate key, a failing row, a value that would
not convert) reach the model and the audit with those values cut, on every engine: the value
may be a password the statement wrote, or a protected value a read reached."""

from __future__ import annotations

import json

import pytest
from dbtest_support import FakeAudit, Scratch, db  # noqa: F401 - db is a fixture

from pi_notebook.approvals import CapabilityStore
from pi_notebook.sql.backend import DatabaseBackend, QueryError, query_args_hash

SECRET = "Zq9x-s3cret"


async def test_a_duplicate_key_error_names_the_key_not_the_value(db: Scratch) -> None:
    table = db.table()
    db.execute(f"DROP TABLE {table}")
    db.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, token VARCHAR(40) UNIQUE)")
    db.execute(f"INSERT INTO {table} (id, token) VALUES (1, '{SECRET}')")
    audit = FakeAudit()
    backend = DatabaseBackend(db.url, approvals=CapabilityStore(), audit=audit)
    sql = f"INSERT INTO {table} (id, token) VALUES (2, '{SECRET}')"
    try:
        backend.capabilities.grant("w1", query_args_hash(sql, backend.dialect), 60)
        with pytest.raises(QueryError) as raised:
            await backend.run("w1", sql)
    finally:
        backend.dispose()
    message = str(raised.value)
    assert SECRET not in message
    assert any(word in message.lower() for word in ("duplicate", "unique", "constraint")), message
    errors = [r for r in audit.records if SECRET in json.dumps(r["payload"]).replace(sql, "")]
    assert errors == []  # the statement itself is the audit's to redact; no error echoes it
    assert db.count(table) == 1


async def test_a_value_that_would_not_convert_is_not_echoed(db: Scratch) -> None:
    """A read that casts a stored value: the error must not become a channel for the value."""
    if db.engine not in ("postgres", "duckdb"):
        pytest.skip("SQLite and MySQL convert what they can and raise nothing")
    table = db.table()
    db.execute(f"DROP TABLE {table}")
    db.execute(f"CREATE TABLE {table} (token VARCHAR(40))")
    db.execute(f"INSERT INTO {table} (token) VALUES ('{SECRET}')")
    sql = f"SELECT CAST(token AS INTEGER) AS n FROM {table}"
    backend = DatabaseBackend(db.url, approvals=CapabilityStore(), audit=FakeAudit())
    try:
        with pytest.raises(QueryError) as raised:
            await backend.run("r1", sql)
    finally:
        backend.dispose()
    assert SECRET not in str(raised.value) and "…" in str(raised.value), str(raised.value)


async def test_postgres_failing_row_is_not_echoed(db: Scratch) -> None:
    if db.engine != "postgres":
        pytest.skip("PostgreSQL's CHECK and NOT NULL errors list the failing row")
    table = db.table()
    db.execute(f"DROP TABLE {table}")
    db.execute(f"CREATE TABLE {table} (id INTEGER, token TEXT CHECK (length(token) < 5))")
    backend = DatabaseBackend(db.url, approvals=CapabilityStore(), audit=FakeAudit())
    sql = f"INSERT INTO {table} (id, token) VALUES (1, '{SECRET}')"
    try:
        backend.capabilities.grant("w1", query_args_hash(sql, backend.dialect), 60)
        with pytest.raises(QueryError) as raised:
            await backend.run("w1", sql)
    finally:
        backend.dispose()
    assert SECRET not in str(raised.value) and "check constraint" in str(raised.value)
