"""D5: SQLite's authorizer (the second wall) reads the classifier's own policy tables.

A raw connection with the guard installed, in the mode a read runs in: what the classifier
calls a read is authorised, and what has an effect is denied even when it slips past the
classifier (``PRAGMA`` actions, functions that must never run, secret tables).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest

from pi_notebook.sql import classify
from pi_notebook.sql.backend.readonly import _SqliteGuard, install_sqlite_guard  # pyright: ignore[reportPrivateUsage]


@pytest.fixture
def reading() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (a, meta)")
    conn.execute("""INSERT INTO t VALUES (1, '{"k": 2}')""")
    info: dict[Any, Any] = {}
    install_sqlite_guard(conn, info)
    guard = info["pi_notebook_sqlite_guard"]
    assert isinstance(guard, _SqliteGuard)
    guard.mode = "read"
    try:
        yield conn
    finally:
        conn.close()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT j.key, j.value FROM t, json_each(t.meta) AS j",
        "SELECT * FROM json_tree('[1, [2]]')",
        "SELECT * FROM pragma_table_info('t')",
        "SELECT * FROM pragma_table_list",
        "PRAGMA foreign_keys",
        "PRAGMA integrity_check",
        "PRAGMA main.quick_check",
        "PRAGMA journal_mode",
    ],
)
def test_d5_guard_allows_what_the_classifier_reads(reading: sqlite3.Connection, sql: str) -> None:
    assert classify(sql, "sqlite").kind == "read"
    reading.execute(sql).fetchall()
    reading.execute(sql).fetchall()  # a second use of the virtual table, too


@pytest.mark.parametrize(
    "sql",
    [
        "PRAGMA optimize",
        "PRAGMA wal_checkpoint",
        "PRAGMA shrink_memory",
        "PRAGMA incremental_vacuum",
        "PRAGMA writable_schema = ON",
        "PRAGMA user_version = 5",
        "PRAGMA cache_size(10)",
        "SELECT * FROM pragma_optimize",
        "SELECT load_extension('x')",
        "SELECT fts3_tokenizer('simple')",
        "UPDATE t SET a = 2",
    ],
)
def test_d5_guard_denies_effects_that_slip_past_the_classifier(
    reading: sqlite3.Connection, sql: str
) -> None:
    assert classify(sql, "sqlite").kind in ("write", "reject")
    with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
        reading.execute(sql).fetchall()


def test_d5_schema_table_bookkeeping_is_no_door_to_the_schema(reading: sqlite3.Connection) -> None:
    with pytest.raises(sqlite3.DatabaseError, match="may not be modified"):
        reading.execute("UPDATE sqlite_master SET sql = 'x' WHERE name = 't'")
    assert reading.execute("SELECT count(*) FROM sqlite_master").fetchone() == (1,)


def test_d5_guard_denies_secret_tables_and_never_functions_in_read_mode() -> None:
    guard = _SqliteGuard()
    guard.mode = "read"
    assert guard(sqlite3.SQLITE_READ, "sqlite_dbpage", "data", "main", None) == sqlite3.SQLITE_DENY
    assert guard(sqlite3.SQLITE_READ, "t", "a", "main", None) == sqlite3.SQLITE_OK
    for mode in ("read", "base"):
        guard.mode = mode  # type: ignore[assignment]
        for name in ("load_extension", "fts3_tokenizer", "writefile"):
            assert guard(sqlite3.SQLITE_FUNCTION, None, name, None, None) == sqlite3.SQLITE_DENY
    guard.mode = "base"
    assert guard(sqlite3.SQLITE_UPDATE, "t", "a", "main", None) == sqlite3.SQLITE_OK
