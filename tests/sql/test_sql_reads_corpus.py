"""D1, the 1 % target: ordinary reads are classified ``read``, and they are reads.

Every entry of ``tests/fixtures/sql/reads_corpus_{dialect}.sql`` must classify as
``read``; on the real engine (one connection per dialect) every entry must run against
the small corpus schema and leave the row counts unchanged.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from typing import Any

import pytest
from reads_corpus import COUNT_QUERY, COUNTS, load_corpus, schema
from sqlalchemy.engine import make_url

from pi_notebook.sql import classify

DIALECTS = ("postgres", "mysql", "sqlite", "duckdb")
CORPUS = {dialect: load_corpus(dialect) for dialect in DIALECTS}

Run = Callable[[str], list[Any]]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_d1_every_corpus_read_is_classified_read(dialect: str) -> None:
    entries = CORPUS[dialect]
    assert len(entries) >= 100
    verdicts = {sql: classify(sql, dialect) for sql in entries}
    refused = {sql: v.reasons for sql, v in verdicts.items() if v.kind != "read"}
    assert not refused, refused


def test_d1_corpus_size_and_separator() -> None:
    assert sum(map(len, CORPUS.values())) >= 400
    for entries in CORPUS.values():
        assert all(entry and "-- ;;" not in entry for entry in entries)
        assert len(set(entries)) == len(entries)


def _run_corpus(dialect: str, run: Run) -> None:
    for statement in schema(dialect):
        run(statement)
    assert tuple(run(COUNT_QUERY)[0]) == COUNTS
    failures: dict[str, str] = {}
    for sql in CORPUS[dialect]:
        try:
            run(sql)
        except Exception as exc:
            failures[sql] = str(exc).splitlines()[0][:200]
    assert not failures, failures
    assert tuple(run(COUNT_QUERY)[0]) == COUNTS, "a corpus read changed the data"


def test_d1_sqlite_corpus_runs_and_changes_nothing() -> None:
    with closing(sqlite3.connect(":memory:", isolation_level=None)) as conn:
        _run_corpus("sqlite", lambda sql: conn.execute(sql).fetchall())


def test_d1_duckdb_corpus_runs_and_changes_nothing() -> None:
    duckdb = pytest.importorskip("duckdb")
    conn = duckdb.connect(config={"threads": 2})
    try:
        _run_corpus("duckdb", lambda sql: conn.execute(sql).fetchall())
    finally:
        conn.close()


@pytest.mark.postgres
def test_d1_postgres_corpus_runs_and_changes_nothing(pg_url: str) -> None:
    psycopg = pytest.importorskip("psycopg")
    url = make_url(pg_url)
    with psycopg.connect(
        host=url.host or "127.0.0.1",
        port=url.port or 5432,
        user=url.username or "postgres",
        password=url.password or "",
        dbname=url.database or "",
        autocommit=True,
    ) as conn:
        conn.execute("DROP SCHEMA IF EXISTS reads_corpus CASCADE")
        conn.execute("CREATE SCHEMA reads_corpus")
        conn.execute("SET search_path = reads_corpus")

        def run(sql: str) -> list[Any]:
            cursor = conn.execute(sql)  # type: ignore[arg-type] - corpus statements are test data
            return list(cursor.fetchall()) if cursor.description else []

        try:
            _run_corpus("postgres", run)
        finally:
            conn.execute("DROP SCHEMA IF EXISTS reads_corpus CASCADE")


@pytest.mark.mysql
def test_d1_mariadb_corpus_runs_and_changes_nothing(mysql_url: str) -> None:
    pymysql = pytest.importorskip("pymysql")
    url = make_url(mysql_url)
    database = f"{url.database}_corpus"
    conn = pymysql.connect(
        host=url.host or "127.0.0.1",
        port=url.port or 3306,
        user=url.username or "root",
        password=url.password or "",
        autocommit=True,
    )

    def run(sql: str) -> list[Any]:
        with conn.cursor() as cursor:
            cursor.execute(sql)
            return list(cursor.fetchall())

    try:
        run(f"CREATE DATABASE `{database}`")
        run(f"USE `{database}`")
        _run_corpus("mysql", run)
    finally:
        run(f"DROP DATABASE IF EXISTS `{database}`")
        conn.close()
