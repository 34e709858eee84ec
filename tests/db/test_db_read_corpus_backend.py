"""D1 + D5: the classifier's reads are the backend's reads, on all four engines.

Every entry of ``tests/fixtures/sql/reads_corpus_{dialect}.sql`` runs through the real
``DatabaseBackend.run`` (classifier, read-only transaction, SQLite's authorizer) against the
corpus schema, one backend per engine reused across statements. A read the classifier calls
pure but the engine's read mode refuses ("not authorized", a read-only violation) fails
here, so the classifier and the authorizer cannot drift apart. SQLite's pragma table is
run whole as well: every pragma the policy lists as a read runs in read mode.
"""

from __future__ import annotations

import sqlite3
import sys
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
import sqlalchemy as sa

from pi_notebook.sample_db import create_sample_database
from pi_notebook.sql import classify
from pi_notebook.sql.backend import DatabaseBackend, create_backend_engine
from pi_notebook.sql.pragmas import PRAGMAS

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "sql"))
from reads_corpus import COUNT_QUERY, COUNTS, load_corpus, schema

CORPUS_SCHEMA = "reads_corpus_backend"


def _load_schema(url: str, dialect: str) -> None:
    engine = create_backend_engine(url)
    try:
        with engine.begin() as conn:
            for statement in schema(dialect):
                conn.exec_driver_sql(statement)
    finally:
        engine.dispose()


def _admin(url: str, *statements: str) -> None:
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            for statement in statements:
                conn.exec_driver_sql(statement)
    finally:
        engine.dispose()


@pytest.fixture
def corpus_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database holding the corpus schema, for the engine ``request.param`` names."""
    dialect = request.param
    if dialect == "sqlite":
        url = f"sqlite:///{tmp_path / 'corpus.sqlite'}"
    elif dialect == "duckdb":
        url = f"duckdb:///{tmp_path / 'corpus.duckdb'}"
    elif dialect == "postgres":
        base = sa.make_url(str(request.getfixturevalue("pg_url")))
        name = f"{CORPUS_SCHEMA}_{uuid.uuid4().hex[:6]}"
        admin = base.render_as_string(hide_password=False)
        _admin(admin, f"CREATE SCHEMA {name}")
        request.addfinalizer(lambda: _admin(admin, f"DROP SCHEMA IF EXISTS {name} CASCADE"))
        url = base.update_query_dict({"options": f"-csearch_path={name}"})
        url = url.render_as_string(hide_password=False)
    else:
        base = sa.make_url(str(request.getfixturevalue("mysql_url")))
        name = f"{base.database}_rcb"
        admin = base.render_as_string(hide_password=False)
        _admin(admin, f"DROP DATABASE IF EXISTS `{name}`", f"CREATE DATABASE `{name}`")
        request.addfinalizer(lambda: _admin(admin, f"DROP DATABASE IF EXISTS `{name}`"))
        url = base.set(database=name).render_as_string(hide_password=False)
    _load_schema(url, dialect)
    yield url


@pytest.mark.parametrize(
    "corpus_url",
    [
        "sqlite",
        "duckdb",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("mysql", marks=pytest.mark.mysql),
    ],
    indirect=True,
)
async def test_d5_every_corpus_read_runs_through_the_backend(
    corpus_url: str, request: pytest.FixtureRequest
) -> None:
    dialect = request.node.callspec.params["corpus_url"]
    entries = load_corpus(dialect)
    # DuckDB's corpus holds reads only its memory rules ask for: run them as under the cap.
    backend = DatabaseBackend(corpus_url, row_cap=50, memory_capped=dialect == "duckdb")
    try:
        assert backend.dialect == dialect
        failures: dict[str, str] = {}
        for number, sql in enumerate(entries):
            try:
                outcome = await backend.run(f"corpus-{number}", sql)
            except Exception as exc:
                failures[sql] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
            else:
                assert outcome.statement_kind == "read", sql
        assert not failures, f"{len(failures)} of {len(entries)} reads refused: {failures}"
        counts = await backend.run("counts", COUNT_QUERY)
        assert tuple(counts.dataframe.iloc[0]) == COUNTS, "a corpus read changed the data"
    finally:
        backend.dispose()


def _pragma_statements(existing_tables: set[str]) -> list[str]:
    statements: list[str] = []
    for name, use in sorted(PRAGMAS["sqlite"].items()):
        statements.append(f"PRAGMA {name}")
        if use == "report":
            statements.append(f"PRAGMA {name}(orders)")
        if f"pragma_{name}" in existing_tables:
            statements.append(f"SELECT * FROM pragma_{name}")
    return statements


async def test_d5_every_sqlite_pragma_read_runs_on_the_sample_database(tmp_path: Path) -> None:
    """The pragma table is one policy: what the classifier reads, the authorizer allows."""
    url = f"sqlite:///{tmp_path / 'sample.sqlite'}"
    create_sample_database(url)
    with closing(sqlite3.connect(tmp_path / "sample.sqlite")) as conn:
        names = [row[0] for row in conn.execute("PRAGMA pragma_list")]
        tables = set()
        for name in names:
            try:
                conn.execute(f"SELECT * FROM pragma_{name} LIMIT 0")
            except sqlite3.Error:
                continue
            tables.add(f"pragma_{name}")
    statements = _pragma_statements(tables)
    backend = DatabaseBackend(url)
    try:
        refused: dict[str, str] = {}
        for number, sql in enumerate(statements):
            assert classify(sql, "sqlite").kind == "read", sql
            try:
                await backend.run(f"pragma-{number}", sql)
            except Exception as exc:
                refused[sql] = str(exc)[:120]
        assert not refused, refused
        integrity = await backend.run("integrity", "PRAGMA integrity_check")
        assert integrity.dataframe.iloc[0, 0] == "ok"
    finally:
        backend.dispose()
    assert len(statements) > 60
