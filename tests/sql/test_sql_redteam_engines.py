"""The red team's classes, each claim about an engine checked on that engine.

The fixture files hold the verdicts; here every class is shown to be real: the quoted
EXPLAIN option executes, DuckDB's memory limit caps aggregates but not a value one call
builds, the catalogs hold the passwords, UUID_SHORT() advances a counter, stacked
statements run one after the other, and statements that share no canonical form really
differ on the engine. Values stay small (tens of MB at most).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from pi_notebook.sql import canonicalize, classify
from pi_notebook.sql.canonical import MYSQL_RESERVED

duckdb = pytest.importorskip("duckdb")
NBSP = "\u00a0"


@pytest.fixture
def pg(pg_url: str) -> Iterator[Any]:
    psycopg = pytest.importorskip("psycopg")
    url = make_url(pg_url)
    conn = psycopg.connect(
        host=url.host or "127.0.0.1",
        port=url.port or 5432,
        user=url.username or "postgres",
        password=url.password or "",
        dbname=url.database or "",
        autocommit=True,
    )
    try:
        yield conn
    finally:
        conn.close()


@pytest.fixture
def maria(mysql_url: str) -> Iterator[Any]:
    pymysql = pytest.importorskip("pymysql")
    url = make_url(mysql_url)
    conn = pymysql.connect(
        host=url.host or "127.0.0.1",
        port=url.port or 3306,
        user=url.username or "root",
        password=url.password or "",
        database=url.database,
        autocommit=True,
    )
    try:
        yield conn
    finally:
        conn.close()


def _maria(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cursor:
        cursor.execute(sql)
        return list(cursor.fetchall())


def _name() -> str:
    return f"rt_{uuid.uuid4().hex[:8]}"


# -- EXPLAIN with a quoted option executes ---------------------------------------------


@pytest.mark.postgres
def test_d1_postgres_runs_explain_with_a_quoted_analyze(pg: Any) -> None:
    table = _name()
    for sql in (
        f'EXPLAIN ("analyze") SELECT 1 AS a INTO {table}',
        f'EXPLAIN (U&"\\0061nalyze") SELECT 1 AS a INTO {table}',
    ):
        assert classify(sql, "postgres").kind == "write", sql
        with pg.transaction(force_rollback=True):
            pg.execute(sql)
            assert pg.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is not None


def test_d1_duckdb_runs_explain_with_a_quoted_or_false_analyze() -> None:
    conn = duckdb.connect()
    try:
        for sql in ('EXPLAIN ("analyze") DELETE FROM t', "EXPLAIN (analyze false) DELETE FROM t"):
            conn.execute("CREATE OR REPLACE TABLE t AS SELECT 1 AS a")
            assert classify(sql, "duckdb").kind == "write", sql
            conn.execute(sql).fetchall()
            assert conn.execute("SELECT count(*) FROM t").fetchall() == [(0,)], sql
    finally:
        conn.close()


# -- DuckDB allocates some values outside its memory limit --------------------------------


def test_d1_duckdb_memory_limit_caps_aggregates_but_not_built_values() -> None:
    conn = duckdb.connect(config={"memory_limit": "24MB", "threads": 1})
    built = [
        "SELECT length(repeat('x', 64000000))",
        "SELECT length(lpad('x', 64000000, 'y'))",
        "SELECT length(printf('%64000000d', 1))",
        "SELECT len(range(8000000))",
        "SELECT length(replace(repeat('x', 64000), 'x', repeat('y', 1000)))",
    ]
    try:
        for sql in built:  # each builds 64 MB at once under a 24 MB limit: no cap holds
            assert conn.execute(sql).fetchone()[0] >= 8_000_000, sql
            assert classify(sql, "duckdb").kind == "write", sql
        # An aggregate's state is held by the buffer manager: the limit stops it.
        aggregate = "SELECT length(string_agg(repeat('x', 640), '')) FROM range(100000)"
        with pytest.raises(duckdb.OutOfMemoryException):
            conn.execute(aggregate).fetchall()
        assert classify(aggregate, "duckdb").kind == "read"
    finally:
        conn.close()


# -- Catalogs that hold secrets, and a counter -------------------------------------------


@pytest.mark.postgres
def test_d1_pg_subscription_holds_the_connection_password(pg: Any) -> None:
    name = _name()
    pg.execute(
        f"CREATE SUBSCRIPTION {name} CONNECTION 'host=127.0.0.1 dbname=nowhere "
        f"user=rep password=hunter2' PUBLICATION p WITH (connect = false)"
    )
    try:
        sql = f"SELECT subconninfo FROM pg_subscription WHERE subname = '{name}'"
        assert "hunter2" in pg.execute(sql).fetchone()[0]
        assert classify(sql, "postgres").kind == "write"
    finally:
        pg.execute(f"ALTER SUBSCRIPTION {name} SET (slot_name = NONE)")
        pg.execute(f"DROP SUBSCRIPTION {name}")


@pytest.mark.mysql
def test_d1_mariadb_servers_and_grants_hold_passwords_and_uuid_short_counts(maria: Any) -> None:
    server, user = _name(), _name()
    _maria(
        maria,
        f"CREATE SERVER {server} FOREIGN DATA WRAPPER mysql OPTIONS "
        "(USER 'u', PASSWORD 'hunter2', HOST '127.0.0.1')",
    )
    _maria(maria, f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw-{user}'")
    try:
        sql = f"SELECT Password FROM mysql.servers WHERE Server_name = '{server}'"
        assert _maria(maria, sql) == [("hunter2",)]
        assert classify(sql, "mysql").kind == "write"
        grants = f"SHOW GRANTS FOR {user}"
        assert "IDENTIFIED BY PASSWORD '*" in _maria(maria, grants)[0][0]
        assert classify(grants, "mysql").kind == "write"
    finally:
        _maria(maria, f"DROP SERVER {server}")
        _maria(maria, f"DROP USER '{user}'@'%'")
    first, second = (_maria(maria, "SELECT UUID_SHORT()")[0][0] for _ in range(2))
    assert second > first  # a server-wide counter moved
    assert classify("SELECT UUID_SHORT()", "mysql").kind == "write"


# -- Stacked statements run one after the other ------------------------------------------


@pytest.mark.postgres
def test_d1_postgres_runs_both_halves_of_a_create_with_keyword_columns(pg: Any) -> None:
    log, data = _name(), _name()
    pg.execute(f"CREATE TABLE {data} (a int)")
    pg.execute(f"INSERT INTO {data} VALUES (1)")
    sql = f"CREATE TABLE {log} (event text, function text); DELETE FROM {data}"
    try:
        assert classify(sql, "postgres").kind == "reject"
        pg.execute(sql)  # psycopg sends both: the DELETE runs too
        assert pg.execute(f"SELECT count(*) FROM {data}").fetchone()[0] == 0
    finally:
        pg.execute(f"DROP TABLE IF EXISTS {log}, {data}")


def test_d1_duckdb_runs_both_halves_of_a_create_with_keyword_columns() -> None:
    conn = duckdb.connect()
    try:
        conn.execute("CREATE TABLE data AS SELECT 1 AS a")
        sql = "CREATE TABLE log (event VARCHAR, procedure VARCHAR); DELETE FROM data"
        assert classify(sql, "duckdb").kind == "reject"
        conn.execute(sql)
        assert conn.execute("SELECT count(*) FROM data").fetchall() == [(0,)]
    finally:
        conn.close()


# -- Statements that differ on the engine never share a canonical form --------------------


def _distinct(left: str, right: str, dialect: str) -> None:
    assert canonicalize(left, dialect) != canonicalize(right, dialect), (left, right)


def test_d2_duckdb_and_sqlite_read_a_no_break_space_as_part_of_a_name() -> None:
    import sqlite3

    sql = f"SELECT 1 AS x{NBSP}"
    with sqlite3.connect(":memory:") as conn:
        assert conn.execute(sql).description[0][0] == f"x{NBSP}"
    assert duckdb.connect().execute(sql).description[0][0] == f"x{NBSP}"
    for dialect in ("sqlite", "duckdb", "postgres", "mysql"):
        _distinct(f"DELETE FROM t{NBSP}", "DELETE FROM t", dialect)
        assert classify(f"DELETE FROM t{NBSP}", dialect).kind == "reject"
        assert classify(sql, dialect).kind == "reject"


@pytest.mark.postgres
def test_d2_postgres_reads_names_numbers_and_strings_by_their_spacing(pg: Any) -> None:
    assert pg.execute(f"SELECT 1 AS x{NBSP}").description[0].name == f"x{NBSP}"
    spaced = pg.execute("SELECT 0 o17")
    assert spaced.fetchone() == (0,) and spaced.description[0].name == "o17"
    with pg.transaction(force_rollback=True):  # PostgreSQL 15: an error; 16: the value 15
        try:
            assert pg.execute("SELECT 0o17").fetchone() == (15,)
        except Exception as exc:
            assert "trailing junk" in str(exc)
    _distinct("SELECT 0o17", "SELECT 0 o17", "postgres")
    _distinct("SELECT 1_000", "SELECT 1 _000", "postgres")
    assert pg.execute("SELECT 'a'\n'b'").fetchone() == ("ab",)
    with pg.transaction(force_rollback=True), pytest.raises(Exception, match="syntax"):
        pg.execute("SELECT 'a' 'b'")
    _distinct("SELECT 'a'\n'b'", "SELECT 'a' 'b'", "postgres")


def test_d2_duckdb_reads_digit_separators() -> None:
    conn = duckdb.connect()
    try:
        assert conn.execute("SELECT 1_000").fetchone() == (1000,)
        assert conn.execute("SELECT 1 _000").fetchone() == (1,)
        _distinct("SELECT 1_000", "SELECT 1 _000", "duckdb")
    finally:
        conn.close()


@pytest.mark.mysql
def test_d1_mariadb_reads_a_dash_dash_before_a_no_break_space_as_minus_minus(maria: Any) -> None:
    pymysql = pytest.importorskip("pymysql")
    with pytest.raises(pymysql.err.OperationalError, match="Unknown column"):
        _maria(maria, f"SELECT 1 --{NBSP}x")  # sqlglot drops a comment; MariaDB reads a name
    assert _maria(maria, "SELECT 1 --\tx") == [(1,)]
    assert classify(f"SELECT 1 --{NBSP}, SLEEP(1)", "mysql").kind == "reject"


@pytest.mark.mysql
def test_d2_mariadb_tables_named_like_keywords_keep_their_case(maria: Any) -> None:
    assert _maria(maria, "SELECT @@lower_case_table_names") == [(0,)]
    try:
        for name in ("json", "JSON", "Date", "date"):
            _maria(maria, f"CREATE TABLE {name} (a INT)")
        _maria(maria, "INSERT INTO JSON VALUES (1)")
        assert _maria(maria, "SELECT count(*) FROM json") == [(0,)]
        _distinct("DELETE FROM json", "DELETE FROM JSON", "mysql")
        _distinct("DROP TABLE Date", "DROP TABLE date", "mysql")
    finally:
        _maria(maria, "DROP TABLE IF EXISTS json, JSON, Date, date")


@pytest.mark.mysql
def test_d2_every_word_mysql_folds_is_reserved_on_mariadb(maria: Any) -> None:
    pymysql = pytest.importorskip("pymysql")
    accepted = []
    for word in sorted(MYSQL_RESERVED):
        try:
            _maria(maria, f"CREATE TABLE {word} (a INT)")
        except pymysql.err.ProgrammingError:
            continue
        accepted.append(word)
        _maria(maria, f"DROP TABLE `{word}`")
    assert not accepted, f"not reserved, so a possible table name: {accepted}"


# -- DuckDB: a CTE named like a file is the CTE -------------------------------------------


def test_d1_duckdb_quoted_cte_name_with_a_dot_is_the_cte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.csv").write_text("secret\nhunter2\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    conn = duckdb.connect()
    try:
        cte = 'WITH "a.csv" AS (SELECT 42 AS x) SELECT * FROM "a.csv"'
        assert conn.execute(cte).fetchall() == [(42,)]
        assert classify(cte, "duckdb").kind == "read"
        own = 'WITH "a.csv" AS (SELECT * FROM "a.csv") SELECT * FROM "a.csv"'
        assert conn.execute(own).fetchall() == [("hunter2",)]  # not recursive: the file
        assert classify(own, "duckdb").kind == "write"
        assert conn.execute("SELECT add(1, 2)").fetchall() == [(3,)]
        assert classify("SELECT add(1, 2)", "duckdb").kind == "read"
    finally:
        conn.close()


@pytest.mark.postgres
def test_postgres_runs_three_statements_around_begin_atomic_aliases(pg: Any) -> None:
    v1, v2, data = _name(), _name(), _name()
    pg.execute(f"CREATE TABLE {data} (a int)")
    pg.execute(f"INSERT INTO {data} VALUES (1)")
    sql = (
        f"CREATE VIEW {v1} AS SELECT begin atomic FROM (SELECT 1 AS begin) s; "
        f"DELETE FROM {data}; CREATE VIEW {v2} AS SELECT 1 AS end"
    )
    function = (
        f"CREATE FUNCTION {v2}() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1 AS end; "
        "SELECT CASE WHEN true THEN 2 END; END"
    )
    try:
        assert classify(sql, "postgres").kind == "reject"
        pg.execute(sql)
        assert pg.execute(f"SELECT count(*) FROM {data}").fetchone()[0] == 0
        pg.execute(f"DROP VIEW {v2}")
        assert classify(function, "postgres").kind == "write"
        pg.execute(function)  # one statement: the semicolons are the body's
        assert pg.execute(f"SELECT {v2}()").fetchone()[0] == 2
    finally:
        pg.execute(f"DROP VIEW IF EXISTS {v1}, {v2}")
        pg.execute(f"DROP FUNCTION IF EXISTS {v2}()")
        pg.execute(f"DROP TABLE IF EXISTS {data}")


@pytest.mark.mysql
def test_mariadb_runs_three_statements_around_begin_end_names(mysql_url: str) -> None:
    pymysql = pytest.importorskip("pymysql")
    from pymysql.constants import CLIENT

    url = make_url(mysql_url)
    conn = pymysql.connect(
        host=url.host or "127.0.0.1",
        port=url.port or 3306,
        user=url.username or "root",
        password=url.password or "",
        database=url.database,
        autocommit=True,
        client_flag=CLIENT.MULTI_STATEMENTS,
    )
    x, y, data = _name(), _name(), _name()
    sql = (
        f"CREATE TABLE {x} (a int, begin SET('a','b')); DELETE FROM {data}; "
        f"CREATE TABLE {y} (end int)"
    )
    try:
        _maria(conn, f"CREATE TABLE {data} (a int)")
        _maria(conn, f"INSERT INTO {data} VALUES (1)")
        assert classify(sql, "mysql").kind == "reject"
        with conn.cursor() as cursor:
            cursor.execute(sql)
            while cursor.nextset():
                pass
        assert _maria(conn, f"SELECT count(*) FROM {data}") == [(0,)]
    finally:
        _maria(conn, f"DROP TABLE IF EXISTS {x}, {y}, {data}")
        conn.close()


@pytest.mark.mysql
def test_mariadb_reads_a_reserved_word_after_a_dot_as_a_case_sensitive_name(
    maria: Any,
) -> None:
    database = _maria(maria, "SELECT DATABASE()")[0][0]
    try:
        _maria(maria, f"CREATE TABLE {database}.Select (a int)")
        _maria(maria, f"CREATE TABLE {database}.SELECT (a int)")  # another table
        _maria(maria, f"INSERT INTO {database}.Select VALUES (1)")
        assert _maria(maria, f"SELECT count(*) FROM {database}.SELECT") == [(0,)]
    finally:
        _maria(maria, f"DROP TABLE IF EXISTS {database}.Select, {database}.SELECT")
    _distinct(f"DELETE FROM {database}.Select", f"DELETE FROM {database}.SELECT", "mysql")


def test_sqlite_and_duckdb_keep_the_case_of_a_new_name() -> None:
    import sqlite3

    with sqlite3.connect(":memory:") as conn:
        conn.execute("CREATE TABLE Foo (Total int)")
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("Foo",)]
        assert conn.execute("SELECT * FROM foo").description[0][0] == "Total"
    conn2 = duckdb.connect()
    conn2.execute("CREATE TABLE Foo (Total int)")
    assert conn2.execute("SELECT table_name FROM information_schema.tables").fetchall() == [
        ("Foo",)
    ]
    assert conn2.execute("SELECT * FROM foo").description[0][0] == "Total"
    conn2.close()
    for dialect in ("sqlite", "duckdb"):
        _distinct("CREATE TABLE Foo (Total int)", "CREATE TABLE foo (total int)", dialect)


@pytest.mark.mysql
def test_mariadb_default_of_a_column_advances_uuid_short(maria: Any) -> None:
    table = _name()
    try:
        _maria(maria, f"CREATE TABLE {table} (id int, u bigint unsigned DEFAULT (UUID_SHORT()))")
        _maria(maria, f"INSERT INTO {table} (id, u) VALUES (1, 0)")
        before = _maria(maria, "SELECT UUID_SHORT()")[0][0]
        _maria(maria, f"SELECT DEFAULT(u) FROM {table}")
        after = _maria(maria, "SELECT UUID_SHORT()")[0][0]
        assert after > before + 1  # the SELECT took a value from the server-wide counter
        assert classify(f"SELECT DEFAULT(u) FROM {table}", "mysql").kind == "write"
    finally:
        _maria(maria, f"DROP TABLE IF EXISTS {table}")


@pytest.mark.mysql
def test_mariadb_calls_a_stored_count_when_a_space_precedes_the_parenthesis(
    maria: Any,
) -> None:
    table = _name()
    try:
        _maria(maria, "DROP FUNCTION IF EXISTS `count`")
        _maria(maria, f"CREATE TABLE {table} (x int)")
        _maria(maria, f"INSERT INTO {table} VALUES (1)")
        _maria(maria, "CREATE FUNCTION `count`(x int) RETURNS int RETURN 42")
        spaced, joined = f"SELECT count (x) FROM {table}", f"SELECT count(x) FROM {table}"
        assert _maria(maria, spaced) == [(42,)]
        assert _maria(maria, joined) == [(1,)]
        assert classify(spaced, "mysql").kind == "write"
        _distinct(spaced, joined, "mysql")
    finally:
        _maria(maria, "DROP FUNCTION IF EXISTS `count`")
        _maria(maria, f"DROP TABLE IF EXISTS {table}")
