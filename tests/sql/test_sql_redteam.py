"""D1 red team: attacks that are more than a fixture line, checked on the engines.

Each finding of a red-team review is shown twice: the classifier's verdict, and on the
real engine that the statement really has the effect (a user function runs, a host
file is read, session state changes), so the verdict is not a guess.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from pi_notebook.sql import classify

# Line ends, spaces and look-alikes: what matters is that we and the engine agree on
# where comments, strings and statements end.
LEXICAL_CASES = [
    # PostgreSQL and DuckDB end a -- comment at \r too: the DELETE is a second statement.
    ("postgres", "SELECT 1 -- x\r; DELETE FROM t", "reject"),
    ("duckdb", "SELECT 1 -- x\r; DELETE FROM t", "reject"),
    # SQLite and MariaDB do not (verified): the rest of the line is comment for both.
    ("sqlite", "SELECT 1 -- x\r; DELETE FROM t", "read"),
    ("mysql", "SELECT 1 # x\r; DELETE FROM t", "read"),
    # Other separators never end a comment in PostgreSQL (verified).
    ("postgres", "SELECT 1 -- x\u2028; DELETE FROM t", "read"),
    ("postgres", "SELECT 1 -- x\x0b; DELETE FROM t", "read"),
    ("postgres", "SELECT 1 -- x\x0c; DELETE FROM t", "read"),
    # Look-alikes of ; and spaces are not separators for us either.
    ("postgres", "SELECT 1\uff1b DELETE FROM t", "reject"),
    ("postgres", "SELECT 1\u200b; DELETE FROM t", "reject"),
    ("mysql", "SELECT 1\u00a0; DELETE FROM t", "reject"),
    ("postgres", "SELECT 1\x00", "reject"),
    ("postgres", "SELECT 1 /* a */ /* b /* c */ */", "reject"),
    ("sqlite", "SELECT 1 /* unterminated; DELETE FROM t", "reject"),
    # Dollar quotes, E'' and U&'' strings: the ; stays inside the string.
    ("postgres", "SELECT $_$;DELETE FROM t;$_$", "read"),
    ("postgres", "SELECT $a$ $A$; DELETE FROM t; $A$ $a$", "read"),
    ("postgres", "SELECT U&'\\0027; DELETE FROM t; --'", "read"),
    ("postgres", "SELECT E'\\\\'; DELETE FROM t; --'", "reject"),
    ("duckdb", "SELECT e'x\\'; DELETE FROM t; --'", "read"),
    ("duckdb", "SELECT E'x\\''; DELETE FROM t; --'", "reject"),
    # MySQL quoting and comment forms.
    ("mysql", "SELECT 1 --\t; DELETE FROM t", "read"),
    ("mysql", "SELECT 1 --\n; DELETE FROM t", "reject"),
    ("mysql", "SELECT 1 /*! , SLEEP(1) */", "reject"),
    ("mysql", "SELECT 1 /*M!100000 , SLEEP(1) */", "reject"),
    ("mysql", "SELECT 'a\\'; DELETE FROM t; -- '", "reject"),  # NO_BACKSLASH_ESCAPES: two
    ("mysql", "SELECT `a``; DELETE FROM t; -- ` FROM t", "read"),
]


@pytest.mark.parametrize(("dialect", "sql", "expected"), LEXICAL_CASES)
def test_d1_lexical_tricks_agree_with_the_engine(dialect: str, sql: str, expected: str) -> None:
    verdict = classify(sql, dialect)
    assert verdict.kind == expected, verdict.reasons


def test_d1_duckdb_ends_comments_at_carriage_return() -> None:
    duckdb = pytest.importorskip("duckdb")
    conn = duckdb.connect()
    try:
        conn.execute("CREATE TABLE t (a INT); INSERT INTO t VALUES (1), (2)")
        conn.execute("SELECT 1 -- x\r; DELETE FROM t")
        assert conn.execute("SELECT count(*) FROM t").fetchall() == [(0,)]
    finally:
        conn.close()


def test_d1_sqlite_comment_runs_to_newline_only() -> None:
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.execute("CREATE TABLE t (a)")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.executescript("SELECT 1 -- x\r; DELETE FROM t")
        assert conn.execute("SELECT count(*) FROM t").fetchall() == [(1,)]


def test_d1_duckdb_dotted_name_reads_a_host_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    duckdb = pytest.importorskip("duckdb")
    (tmp_path / "secret.csv").write_text("token\nhunter2\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    conn = duckdb.connect()
    try:
        for sql in ("SELECT * FROM secret.csv", "SHOW secret.csv", "DESCRIBE secret.csv"):
            assert classify(sql, "duckdb").kind == "write", sql
            assert conn.execute(sql).fetchall(), sql
        assert conn.execute("FROM secret.csv").fetchall() == [("hunter2",)]
    finally:
        conn.close()


def test_d1_sqlite_pragma_tables_with_effects_are_not_reads() -> None:
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.execute("CREATE TABLE t (a)")
        # The eponymous table exists and runs PRAGMA optimize (which may ANALYZE).
        conn.execute("SELECT * FROM pragma_optimize").fetchall()
        assert classify("SELECT * FROM pragma_optimize", "sqlite").kind == "write"
        assert conn.execute("SELECT * FROM pragma_user_version").fetchall() == [(0,)]
        assert classify("SELECT * FROM pragma_user_version", "sqlite").kind == "read"


def test_d1_sqlite_blob_size_is_bounded() -> None:
    assert classify("SELECT randomblob(1000000000)", "sqlite").kind == "write"
    assert classify("SELECT randomblob(n) FROM t", "sqlite").kind == "write"
    assert classify("SELECT hex(randomblob(16))", "sqlite").kind == "read"


def _pg(pg_url: str) -> Any:
    psycopg = pytest.importorskip("psycopg")
    url = make_url(pg_url)
    return psycopg.connect(
        host=url.host or "127.0.0.1",
        port=url.port or 5432,
        user=url.username or "postgres",
        password=url.password or "",
        dbname=url.database or "",
        autocommit=True,
    )


@pytest.mark.postgres
def test_d1_postgres_qualified_table_function_runs_user_code(pg_url: str) -> None:
    with _pg(pg_url) as conn:
        conn.execute("DROP SCHEMA IF EXISTS redteam CASCADE")
        conn.execute("CREATE SCHEMA redteam")
        try:
            conn.execute("CREATE TABLE redteam.log (n int)")
            conn.execute(
                "CREATE FUNCTION redteam.generate_series(a int, b int) RETURNS SETOF int "
                "LANGUAGE sql AS $$ INSERT INTO redteam.log VALUES (a) RETURNING b $$"
            )
            for sql in (
                "SELECT * FROM redteam.generate_series(1, 3)",
                "SELECT * FROM ROWS FROM (redteam.generate_series(1, 3))",
            ):
                assert classify(sql, "postgres").kind == "write", sql
                conn.execute(sql)
            assert conn.execute("SELECT count(*) FROM redteam.log").fetchall() == [(2,)]
            # The catalog views backed by configuration files really read them.
            assert conn.execute("SELECT count(*) FROM pg_file_settings").fetchone()[0] > 0
        finally:
            conn.execute("DROP SCHEMA IF EXISTS redteam CASCADE")


@pytest.mark.mysql
def test_d1_mariadb_last_insert_id_with_argument_sets_session_state(mysql_url: str) -> None:
    pymysql = pytest.importorskip("pymysql")
    url = make_url(mysql_url)
    conn = pymysql.connect(
        host=url.host or "127.0.0.1",
        port=url.port or 3306,
        user=url.username or "root",
        password=url.password or "",
        autocommit=True,
    )
    try:
        with conn.cursor() as cursor:
            assert classify("SELECT LAST_INSERT_ID(4242)", "mysql").kind == "write"
            cursor.execute("SELECT LAST_INSERT_ID(4242)")
            assert classify("SELECT LAST_INSERT_ID()", "mysql").kind == "read"
            cursor.execute("SELECT LAST_INSERT_ID()")
            assert cursor.fetchall() == ((4242,),)
            # MariaDB's comments end at \n only, never at \r (so "# x\r; ..." is all comment).
            cursor.execute("SELECT 1 # x\r; SELECT 2")
            assert cursor.fetchall() == ((1,),)
    finally:
        conn.close()
