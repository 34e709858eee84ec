"""Shared fixtures and helpers of the database tests (imported by the tests/db modules).

``db_url`` runs a test on all four engines: SQLite and DuckDB in temp files, PostgreSQL and
MariaDB in the session databases of ``tests/conftest.py``. Writes go to a scratch table with a
unique name, so tests sharing a server database never see each other's rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from pi_notebook.sql.backend import create_backend_engine
from pi_notebook.sql.backend.cancel import Canceller
from pi_notebook.sql.backend.engine_process import (
    default_memory_limit,
    release_process,
    shared_process,
)
from pi_notebook.sql.backend.worker_engine import WorkerEngine

ENGINES = ["sqlite", "duckdb", "postgres", "mysql"]
SECRET = "s3cr3t-Pa55w0rd"

# A statement on each engine that runs until it is cancelled (well past any test timeout).
LONG_READ = {
    "sqlite": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
    "duckdb": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000000000) "
    "SELECT count(*) FROM c",
    "postgres": "SELECT pg_sleep(30)",
    "mysql": "SELECT SLEEP(30)",
}


def long_insert(engine: str, table: str) -> str:
    """An INSERT that writes rows while it runs for a long time (to abort half way)."""
    if engine == "postgres":
        return f"INSERT INTO {table} (a) SELECT g FROM generate_series(1, 5) g, pg_sleep(30) s"
    if engine == "mysql":
        return f"INSERT INTO {table} (a) SELECT SLEEP(30)"
    cap = "WHERE x < 100000000000" if engine == "duckdb" else ""
    return (
        f"INSERT INTO {table} (a) WITH RECURSIVE c(x) AS "
        f"(SELECT 1 UNION ALL SELECT x + 1 FROM c {cap}) SELECT x FROM c"
    )


def in_transaction(engine: sa.Engine, sql: str, whole_row: bool = False) -> Any:
    """Run ``sql`` in a transaction of its own; its first value (``whole_row``: its first
    row, as a tuple), if it returns rows."""
    with engine.begin() as conn:
        result = conn.exec_driver_sql(sql)
        if not result.returns_rows:
            return None
        return tuple(result.one()) if whole_row else result.scalar()


def checked_out(engine: sa.Engine) -> int:
    """Connections of ``engine``'s pool in use (run where the engine lives: offloaded)."""
    return engine.pool.checkedout()  # pyright: ignore[reportAttributeAccessIssue]


class Scratch:
    """A database URL plus helpers that bypass the backend (setup and checks only).

    DuckDB lets one process at a time open a file, and the backend's DuckDB runs in the
    kernel's worker process for that file: on DuckDB the helpers run there too.
    """

    def __init__(self, engine: str, url: str) -> None:
        self.engine = engine
        self.url = url
        self._sa = create_backend_engine(url)  # same DuckDB config as the backend's engine
        self._process = None
        if engine == "duckdb":
            self._process = shared_process(
                sa.make_url(url),
                connect_timeout_s=10,
                memory_limit_bytes=default_memory_limit(),
                statement_timeout_s=30,
            )

    def _run(self, sql: str, whole_row: bool = False) -> Any:
        if self._process is not None:
            return self._process.offload(
                in_transaction,
                WorkerEngine(sa.make_url(self.url)),
                sql,
                whole_row,
                canceller=Canceller(),
            )
        return in_transaction(self._sa, sql, whole_row)

    def row(self, sql: str) -> tuple[Any, ...]:
        """The one row ``sql`` returns."""
        return self._run(sql, whole_row=True)

    def execute(self, sql: str) -> None:
        self._run(sql)

    def scalar(self, sql: str) -> Any:
        return self._run(sql)

    def table(self) -> str:
        """Create an empty scratch table ``(a INTEGER NOT NULL)`` and return its name."""
        name = f"t_{uuid.uuid4().hex[:10]}"
        self.execute(f"CREATE TABLE {name} (a INTEGER NOT NULL)")
        return name

    def count(self, table: str) -> int:
        return int(self.scalar(f"SELECT count(*) FROM {table}"))

    def dispose(self) -> None:
        self._sa.dispose()
        if self._process is not None:
            release_process(self._process)


def _url_for(engine: str, request: pytest.FixtureRequest, tmp: Path) -> str:
    if engine == "sqlite":
        return f"sqlite:///{tmp / 'db.sqlite'}"
    if engine == "duckdb":
        return f"duckdb:///{tmp / 'db.duckdb'}"
    return str(request.getfixturevalue("pg_url" if engine == "postgres" else "mysql_url"))


@pytest.fixture(params=ENGINES)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Scratch]:
    """One test per engine; yields a :class:`Scratch` on that engine's database."""
    scratch = Scratch(request.param, _url_for(request.param, request, tmp_path))
    try:
        yield scratch
    finally:
        scratch.dispose()


class FakeAudit:
    """Records what the backend and the gate write (an in-memory AuditSink)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def record(
        self,
        kind: str,
        payload: Any = None,
        *,
        tool_call_id: str | None = None,
        tool_name: str | None = None,
        policy_version: str | None = None,
        durable: bool = False,
    ) -> None:
        self.records.append(
            {
                "kind": kind,
                "payload": dict(payload or {}),
                "durable": durable,
                "tool_call_id": tool_call_id,
                "tool_name": tool_name,
                "policy_version": policy_version,
            }
        )

    def kinds(self) -> list[str]:
        return [r["kind"] for r in self.records]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["kind"] == kind]


def engine_url_with_password(url: str, password: str = SECRET) -> str:
    return sa.make_url(url).set(password=password).render_as_string(hide_password=False)
