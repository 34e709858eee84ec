"""Shared fixtures and helpers of the database tests (imported by the tests/db modules).

``db_url`` runs a test on all four engines: SQLite and DuckDB in temp files, PostgreSQL and
MariaDB in the session databases of ``tests/conftest.py``. Writes go to a scratch table with a
unique name, so tests sharing a server database never see each other's rows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from pi_notebook.sql.backend import create_backend_engine
from pi_notebook.sql.backend.cancel import Canceller
from pi_notebook.sql.backend.engine_process import default_memory_limit
from pi_notebook.sql.backend.engine_shares import release_process, shared_process
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


_MEMORY_KERNEL = textwrap.dedent("""
    import asyncio, json, resource, sys
    # The kernel of this probe may use 3 GiB at most: without the worker, an attack ends
    # here with the kernel's own MemoryError instead of taking the machine.
    resource.setrlimit(resource.RLIMIT_DATA, (3 << 30, 3 << 30))
    from pi_notebook.sql.engines import create_backend

    def peak():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        return 0

    async def main(url, limit, attacks):
        variables = {"kept": list(range(1000))}
        backend = create_backend(url, memory_limit_bytes=limit)
        out = {"errors": [], "first": None, "pids": []}
        try:
            first = await backend._run_as("read", "SELECT 41 + 1 AS answer")
            out["first"] = int(first.dataframe["answer"].iloc[0])
            before = peak()
            for sql in attacks:
                out["pids"].append(backend.worker_pid)
                try:
                    await backend._run_as("read", sql)
                    out["errors"].append(None)
                except Exception as exc:
                    out["errors"].append(f"{type(exc).__name__}: {exc}")
            out["grown"] = peak() - before
            after = await backend._run_as("read", "SELECT 6 * 7 AS answer")
            out["pids"].append(backend.worker_pid)
            out["after"] = int(after.dataframe["answer"].iloc[0])
            out["variables"] = variables["kept"][-1]
            out["chdb_in_kernel"] = "chdb" in sys.modules
        finally:
            backend.dispose()
        print(json.dumps(out))

    asyncio.run(main(sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])))
""")


def kernel_memory_probe(
    url: str, limit: int, attacks: Sequence[str], *, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Run ``attacks`` (reads, past the policy check) on ``url``'s backend under
    ``memory_limit_bytes=limit``, in a kernel of its own (the test runner's memory is not the
    kernel's) that may use 3 GiB at most; ``env`` is added to its environment.

    Returns what the kernel saw: ``first`` and ``after`` (a read before and after, 42 each
    when they ran), ``errors`` (each attack's ``"Type: message"``, or ``None`` where it
    ran), ``grown`` (bytes the kernel's peak resident memory grew across the attacks),
    ``variables`` (a kernel variable read after them: 999), ``pids`` (the worker process
    before each attack and after the last) and ``chdb_in_kernel``.
    """
    done = subprocess.run(
        [sys.executable, "-c", _MEMORY_KERNEL, url, str(limit), json.dumps(list(attacks))],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
            **(env or {}),
        },
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
