"""D1 on real engines: sampled fixture ``write`` cases change something, ``read`` cases do not.

Each case gets a fresh connection and a fresh small schema; a snapshot (row counts and
checksums, the schema listing, the session settings and locks the sampled writes touch)
is taken before and after the statement. Reads must run without error and leave the
snapshot equal; writes must change it. Only writes whose effect shows in such a
snapshot are sampled (data, schema, session variables, settings, sequences, advisory
locks); effects that vanish with the statement (row locks, sleeps) are covered by the
fixture verdicts alone.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sql_fixture_cases import load_cases
from sqlalchemy.engine import make_url

from pi_notebook.sql import classify

FIXTURE = {(case.dialect, case.sql): case.expected for case in load_cases()}

ROWS = ", ".join(
    f"({i}, {i % 5 + 1}, {i * 1.5}, '{'new' if i % 2 else 'paid'}', TIMESTAMP '2024-01-{i % 28 + 1:02d} 10:00:00')"
    for i in range(1, 41)
)
CUSTOMERS = ", ".join(f"({i}, 'name{i}', 'user{i}@example.com')" for i in range(1, 6))

SAMPLES: dict[str, list[str]] = {
    "postgres": [
        "select * from orders where id = 42",
        "SELECT date_trunc('month', created_at) AS m, avg(amount) FROM orders GROUP BY m ORDER BY m",
        "SELECT c.name, count(o.id) AS n FROM customers c LEFT JOIN orders o ON o.customer_id = c.id GROUP BY c.name HAVING count(o.id) > 2 ORDER BY n DESC",
        "SELECT * FROM orders FETCH FIRST 5 ROWS ONLY",
        "SELECT current_setting('search_path')",
        "SELECT pg_catalog.lower('ABC'), pg_catalog.now()",
        "SELECT schemaname, tablename FROM pg_catalog.pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')",
        "TABLE orders",
        "SHOW search_path",
        "EXPLAIN DELETE FROM orders WHERE id = 1",
        "EXPLAIN ANALYZE SELECT count(*) FROM orders",
        "SELECT 1; -- trailing comment after semicolon",
        "DELETE FROM orders WHERE id = 1",
        "UPDATE orders SET status = 'paid' WHERE id = 3",
        "INSERT INTO orders (id, amount) VALUES (1, 10)",
        "CREATE TABLE x (id int)",
        "DROP TABLE orders",
        "TRUNCATE orders",
        "ALTER TABLE orders ADD COLUMN note text",
        "CREATE INDEX ON orders (created_at)",
        "SELECT * INTO new_orders FROM orders",
        "WITH d AS (DELETE FROM orders RETURNING *) SELECT count(*) FROM d",
        "SELECT set_config('search_path', 'evil', false)",
        "SELECT nextval('orders_id_seq')",
        "SELECT pg_advisory_lock(1)",
        "SET search_path = evil",
        "EXPLAIN ANALYZE DELETE FROM orders",
    ],
    "mysql": [
        "SELECT * FROM orders WHERE id = 42",
        "SELECT c.name, COUNT(o.id) AS n FROM customers c LEFT JOIN orders o ON o.customer_id = c.id GROUP BY c.name HAVING n > 2 ORDER BY n DESC LIMIT 10",
        "SELECT @@version, @@session.sql_mode, @@global.max_connections",
        "SHOW TABLES",
        "SHOW VARIABLES LIKE 'sql_mode'",
        "DESCRIBE orders",
        "EXPLAIN SELECT * FROM orders WHERE id = 1",
        "EXPLAIN DELETE FROM orders WHERE id = 1",
        "SELECT SQL_NO_CACHE id FROM orders",
        "DELETE FROM orders WHERE id = 1",
        "UPDATE orders SET status = 'paid' WHERE id = 3",
        "INSERT INTO orders (id, amount) VALUES (1, 10)",
        "CREATE TABLE x (id INT)",
        "DROP TABLE orders",
        "TRUNCATE TABLE orders",
        "ALTER TABLE orders ADD COLUMN note TEXT",
        "RENAME TABLE orders TO o2",
        "SELECT @a := 1",
        "SET @a = 1",
        "SET SESSION sql_mode = ''",
        "SELECT GET_LOCK('a', 10)",
    ],
    "sqlite": [
        "SELECT * FROM orders WHERE id = 42",
        "SELECT c.name, count(o.id) AS n FROM customers c LEFT JOIN orders o ON o.customer_id = c.id GROUP BY c.name HAVING count(o.id) > 2 ORDER BY n DESC",
        "SELECT strftime('%Y-%m', created_at), date(created_at), datetime('now'), julianday('now') - julianday(created_at) FROM orders",
        "SELECT name, sql FROM sqlite_master WHERE type = 'table'",
        "SELECT * FROM pragma_table_info('orders')",
        "SELECT total(amount), avg(amount), count(DISTINCT customer_id) FROM orders",
        "PRAGMA table_info(orders)",
        "PRAGMA user_version",
        "PRAGMA journal_mode",
        "PRAGMA integrity_check",
        "PRAGMA foreign_keys",
        "EXPLAIN QUERY PLAN SELECT * FROM orders WHERE id = 1",
        "EXPLAIN QUERY PLAN DELETE FROM orders",
        "DELETE FROM orders WHERE id = 1",
        "UPDATE orders SET status = 'paid'",
        "INSERT INTO orders (id) VALUES (1)",
        "CREATE TABLE x (id INTEGER)",
        "DROP TABLE orders",
        "ALTER TABLE orders ADD COLUMN note TEXT",
        "WITH x AS (SELECT 1) DELETE FROM orders",
        "PRAGMA user_version = 5",
        "PRAGMA foreign_keys = ON",
        "PRAGMA journal_mode = WAL",
    ],
    "duckdb": [
        "FROM orders",
        "SELECT * FROM orders WHERE id = 42",
        "SELECT * FROM duckdb_tables()",
        "SELECT current_setting('threads'), version(), current_database(), current_schema()",
        "SHOW TABLES",
        "DESCRIBE orders",
        "SUMMARIZE orders",
        "EXPLAIN SELECT * FROM orders",
        "EXPLAIN ANALYZE SELECT count(*) FROM orders",
        "PRAGMA table_info('orders')",
        "DELETE FROM orders WHERE id = 1",
        "UPDATE orders SET status = 'paid'",
        "CREATE TABLE x AS SELECT * FROM orders",
        "CREATE SEQUENCE s",
        "DROP TABLE orders",
        "ALTER TABLE orders ADD COLUMN note VARCHAR",
        "WITH d AS (DELETE FROM orders RETURNING *) SELECT * FROM d",
        "SET threads = 1",
        "ATTACH ':memory:' AS m",
    ],
}

Run = Callable[[str], list[tuple[Any, ...]]]

SNAPSHOTS: dict[str, list[str]] = {
    "postgres": [
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1",
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public' ORDER BY 1, 2",
        "SELECT indexname FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1",
        "SELECT count(*), md5(coalesce(string_agg(o::text, ',' ORDER BY o::text), '')) FROM public.orders o",
        "SELECT current_setting('search_path')",
        "SELECT last_value, is_called FROM public.orders_id_seq",
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()",
    ],
    "mysql": [
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = DATABASE() ORDER BY 1, 2",
        "SELECT COUNT(*), MD5(COALESCE(GROUP_CONCAT(CONCAT_WS('|', id, amount, status) ORDER BY id), '')) FROM orders",
        "SELECT @a, @@session.sql_mode, IS_USED_LOCK('a') IS NOT NULL",
    ],
    "sqlite": [
        "SELECT type, name, sql FROM sqlite_master ORDER BY name",
        "SELECT count(*), group_concat(id || '|' || ifnull(amount, '') || '|' || ifnull(status, ''), ',') FROM orders",
        "PRAGMA user_version",
        "PRAGMA foreign_keys",
        "PRAGMA journal_mode",
    ],
    "duckdb": [
        "SELECT database_name, schema_name, table_name, sql FROM duckdb_tables() ORDER BY ALL",
        "SELECT sequence_name FROM duckdb_sequences() ORDER BY 1",
        "SELECT count(*) FROM duckdb_databases()",
        "SELECT current_setting('threads')",
        "SELECT count(*), md5(coalesce(string_agg(id || '|' || status, ',' ORDER BY id), '')) FROM orders",
    ],
}


def _safe(run: Run, sql: str) -> list[tuple[Any, ...]] | str:
    try:
        return run(sql)
    except Exception as exc:
        return f"error: {type(exc).__name__}"


def _snapshot(dialect: str, run: Run) -> list[Any]:
    return [_safe(run, sql) for sql in SNAPSHOTS[dialect]]


def _check(dialect: str, sql: str, connect: Callable[[], Iterator[Run]]) -> None:
    expected = FIXTURE[dialect, sql]
    assert classify(sql, dialect).kind == expected
    for run in connect():
        before = _snapshot(dialect, run)
        if expected == "read":
            run(sql)
            assert _snapshot(dialect, run) == before, f"read changed state: {sql}"
        else:
            try:
                run(sql)
            except Exception as exc:
                pytest.fail(f"sampled write failed to run: {sql}: {exc}")
            assert _snapshot(dialect, run) != before, f"write changed nothing: {sql}"


def test_d1_engine_samples_come_from_the_fixture() -> None:
    for dialect, samples in SAMPLES.items():
        for sql in samples:
            assert (dialect, sql) in FIXTURE, (dialect, sql)
        kinds = {FIXTURE[dialect, sql] for sql in samples}
        assert kinds == {"read", "write"}, dialect


def test_d1_sqlite_reads_leave_state_and_writes_change_it(tmp_path: Path) -> None:
    def connect() -> Iterator[Run]:
        path = tmp_path / "db.sqlite"
        path.unlink(missing_ok=True)
        with closing(sqlite3.connect(path, isolation_level=None)) as conn:
            conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, email TEXT)")
            conn.execute(
                "CREATE TABLE orders (id INTEGER, customer_id INTEGER, amount REAL, status TEXT, created_at TEXT)"
            )
            conn.execute(f"INSERT INTO customers VALUES {CUSTOMERS}")
            conn.execute(f"INSERT INTO orders VALUES {ROWS.replace('TIMESTAMP ', '')}")
            yield lambda sql: conn.execute(sql).fetchall()

    for sql in SAMPLES["sqlite"]:
        _check("sqlite", sql, connect)


def test_d1_duckdb_reads_leave_state_and_writes_change_it(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")

    def connect() -> Iterator[Run]:
        path = tmp_path / "db.duckdb"
        path.unlink(missing_ok=True)
        conn = duckdb.connect(str(path), config={"threads": 2})
        try:
            conn.execute("CREATE TABLE customers (id INTEGER, name VARCHAR, email VARCHAR)")
            conn.execute(
                "CREATE TABLE orders (id INTEGER, customer_id INTEGER, amount DOUBLE, status VARCHAR, created_at TIMESTAMP)"
            )
            conn.execute(f"INSERT INTO customers VALUES {CUSTOMERS}")
            conn.execute(f"INSERT INTO orders VALUES {ROWS}")
            yield lambda sql: conn.execute(sql).fetchall()
        finally:
            conn.close()

    for sql in SAMPLES["duckdb"]:
        _check("duckdb", sql, connect)


@pytest.mark.postgres
def test_d1_postgres_reads_leave_state_and_writes_change_it(pg_url: str) -> None:
    psycopg = pytest.importorskip("psycopg")
    url = make_url(pg_url)
    conninfo = {
        "host": url.host or "127.0.0.1",
        "port": url.port or 5432,
        "user": url.username or "postgres",
        "password": url.password or "",
        "dbname": url.database or "",
    }

    def connect() -> Iterator[Run]:
        with psycopg.connect(**conninfo, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS public CASCADE")
            conn.execute("CREATE SCHEMA public")
            conn.execute(
                "CREATE TABLE public.customers (id int PRIMARY KEY, name text, email text)"
            )
            conn.execute(
                "CREATE TABLE public.orders (id serial, customer_id int, amount numeric, status text, created_at timestamp)"
            )
            conn.execute(f"INSERT INTO public.customers VALUES {CUSTOMERS}")
            conn.execute(f"INSERT INTO public.orders VALUES {ROWS}")

            def run(sql: str) -> list[tuple[Any, ...]]:
                cursor = conn.execute(sql)  # type: ignore[arg-type] - test statements are literals
                return list(cursor.fetchall()) if cursor.description else []

            yield run

    for sql in SAMPLES["postgres"]:
        _check("postgres", sql, connect)


@pytest.mark.mysql
def test_d1_mariadb_reads_leave_state_and_writes_change_it(mysql_url: str) -> None:
    pymysql = pytest.importorskip("pymysql")
    url = make_url(mysql_url)

    def connect() -> Iterator[Run]:
        conn = pymysql.connect(
            host=url.host or "127.0.0.1",
            port=url.port or 3306,
            user=url.username or "root",
            password=url.password or "",
            database=url.database,
            autocommit=True,
        )
        try:
            with conn.cursor() as cursor:
                cursor.execute("DROP TABLE IF EXISTS orders, customers, o2, x")
                cursor.execute("CREATE TABLE customers (id INT PRIMARY KEY, name TEXT, email TEXT)")
                cursor.execute(
                    "CREATE TABLE orders (id INT, customer_id INT, amount DECIMAL(10,2), status TEXT, created_at DATETIME)"
                )
                cursor.execute(f"INSERT INTO customers VALUES {CUSTOMERS}")
                cursor.execute(f"INSERT INTO orders VALUES {ROWS.replace('TIMESTAMP ', '')}")

            def run(sql: str) -> list[tuple[Any, ...]]:
                with conn.cursor() as cursor:
                    cursor.execute(sql)
                    return list(cursor.fetchall())

            yield run
        finally:
            conn.close()

    for sql in SAMPLES["mysql"]:
        _check("mysql", sql, connect)
