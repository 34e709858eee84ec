"""ClickHouse through chDB (``chdb:///PATH``, embedded: the engine runs in the kernel).

The URL follows SQLite's: ``chdb:///data/ch`` is the directory ``data/ch`` (relative),
``chdb:////srv/ch`` an absolute one; the directory is created on first use; ``chdb://``
alone is an in-memory database. chDB holds one database per process: a second extension on
another path is refused until the first one is disposed (its session closed).

The policy path is the backend's own (:class:`~pi_notebook.sql.backend.DatabaseBackend`'s
``run``: classify, capability, audit first); what differs is how a statement runs:

* a read runs in a reused read-only session, opened with ``readonly=1``,
  ``max_execution_time`` (the statement timeout), ``max_memory_usage`` and
  ``max_result_rows`` (``break``) as its own settings: verified on chDB 26, no statement in
  it can write, change a setting (``SET``, ``SETTINGS``, nested or not), or call a table
  function that reaches a file, URL, server or program (they need a temporary table), and
  stacked statements are all read-only too. After the statement comes
  ``SETTINGS readonly = 1`` (the same value, so allowed): only statements that take a
  SETTINGS clause parse (``SYSTEM`` and ``USE``, which readonly alone lets run, do not);
* rows come as chDB's native DataFrame stream, block by block: kept to the row cap and the
  byte bound, the stream stops there. (ClickHouse's Arrow output gives ``DateTime`` as a
  bare ``UInt32``; the native DataFrame keeps timestamps as timestamps, and is faster here.)
* every statement carries a marker comment; Stop and the statement timeout cancel it with
  ``KILL QUERY`` from a second session on the same database (a chDB session's own query
  cannot be interrupted from another thread);
* an approved write runs without ``readonly`` (mutations synchronously:
  ``mutations_sync=2``). Stopped, it is not undone: ClickHouse has no transactions, so the
  blocks an INSERT had written and the parts a mutation had rewritten stay (the mutation's
  unfinished rest is killed), and the error says so. Nor can a write be tried and rolled
  back: the preview counts rows with the derived ``SELECT count()`` (and the bounds of an
  approval are checked with it before the write runs) or says plainly that they cannot be
  counted.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy.engine import URL

from pi_notebook.sql.backend.errors import ConnectFailed
from pi_notebook.sql.backend.fetch import Fetched, RunSettings
from pi_notebook.sql.backend.readonly import RunKind
from pi_notebook.sql.engines.base import EngineInfo
from pi_notebook.sql.engines.clickhouse_common import (
    READ_CLAUSE,
    ROW_STARTS,
    STREAMED,
    ClickHouseBackend,
    ClickHouseCatalog,
    clickhouse_plan,
    first_word,
    has_totals,
    mutated_table,
    quote,
    read_limits,
)
from pi_notebook.sql.engines.direct import Running, statement_body
from pi_notebook.sql.engines.rows import Whole, take

__all__ = [
    "CHDB_MEMORY_ENV",
    "CHDB_MEMORY_LIMIT",
    "ENGINE",
    "ChdbBackend",
    "chdb_path",
    "clickhouse_plan",
]

ENGINE = EngineInfo(
    engine="clickhouse",
    dialect="clickhouse",
    url_scheme="chdb:///PATH (chdb:// in memory)",
    schemes=("chdb",),
    read_only_backstop="a read-only session (readonly=1 set when it opens: no SET or SETTINGS "
    "can lift it; file/URL/remote/executable table functions refused)",
    bounds="a stream stopped at the cap + 1 and the byte bound; the session's "
    "max_execution_time, max_memory_usage and max_result_rows",
    cancel="KILL QUERY from a second session on the same database (and KILL MUTATION for a "
    "stopped ALTER ... UPDATE/DELETE); no rollback: what a write had done stays",
    write_preview="no transaction to roll back: rows counted with the derived SELECT count(), "
    "else not measured (said so)",
    estimate="EXPLAIN ESTIMATE (rows of MergeTree tables) x the tables' bytes per row",
    arrow=False,
    read_path="chDB's native DataFrame stream (its Arrow output turns DateTime into UInt32)",
    extra="clickhouse",
    modules=("chdb",),
)

CHDB_MEMORY_LIMIT = 1 << 30
"""``max_memory_usage`` of a read, in bytes (``PI_NOTEBOOK_CHDB_MEMORY_LIMIT`` overrides)."""
CHDB_MEMORY_ENV = "PI_NOTEBOOK_CHDB_MEMORY_LIMIT"


def chdb_path(url: URL) -> str:
    """The connection path of a ``chdb://`` URL (``:memory:`` without a path).

    Raises:
        ValueError: a path chDB would misread (options after ``?``).
    """
    database = url.database
    if not database or database == ":memory:":
        return ":memory:"
    if "?" in database or url.query:
        raise ValueError("chdb URL: options are not accepted, only a path")
    return str(Path(database).expanduser())


class _Database:
    """The chDB sessions of one backend, lazily opened on the worker thread (the first open
    starts the engine, ~0.4 s): a read-only one for reads, whose limits are set when it opens
    (``read_settings``, ``readonly=1`` among them, so no statement in it can change one), one
    for approved writes, and one for cancels (a session runs one statement at a time)."""

    def __init__(self, path: str, read_settings: dict[str, str]) -> None:
        self.path = path
        self.read_settings = read_settings
        self._lock = threading.Lock()
        self._session: Any = None
        self._reader: Any = None
        self._control: Any = None

    def session(self) -> Any:
        """The session approved writes run in."""
        with self._lock:
            if self._session is None:
                self._session = self._open()
                self._session.query("SET mutations_sync = 2")
            return self._session

    def reader(self) -> Any:
        """The read-only session every read runs in."""
        with self._lock:
            if self._reader is None:
                options = "&".join(f"{k}={v}" for k, v in self.read_settings.items())
                self._reader = self._open(options)
            return self._reader

    def kill(self, marker: str) -> None:
        """Cancel the statement carrying ``marker`` (thread-safe; the canceller repeats it)."""
        with self._lock:
            if self._control is None:
                self._control = self._open()
            control = self._control
        control.query(f"KILL QUERY WHERE startsWith(query, '{marker}') ASYNC")

    def kill_mutations(self, table: tuple[str, str]) -> None:
        """Stop the unfinished mutations of ``(database, table)`` (``database`` "" for the
        current one): the statement that waited for one is already killed."""
        with self._lock:
            control = self._control
        if control is None:
            return
        database, name = table
        where = f"database = {quote(database)}" if database else ("database = currentDatabase()")
        control.query(f"KILL MUTATION WHERE {where} AND table = {quote(name)} AND NOT is_done")

    def _open(self, options: str = "") -> Any:
        from chdb import session

        if self.path != ":memory:":
            Path(self.path).mkdir(parents=True, exist_ok=True)
        try:
            return session.Session(f"{self.path}?{options}" if options else self.path)
        except Exception as exc:
            if "already initialized with path" in str(exc):
                raise ConnectFailed(
                    RuntimeError(
                        "chDB holds one database per process, and another one is open here: "
                        "close its session (dispose its extension) first"
                    )
                ) from None
            raise ConnectFailed(exc) from exc

    def close(self) -> None:
        with self._lock:
            sessions = (self._reader, self._session, self._control)
            self._reader = self._session = self._control = None
        for session in sessions:
            if session is not None:
                try:
                    session.close()
                except Exception:  # closing a session that failed to open
                    pass


class ChdbBackend(ClickHouseBackend):
    """``query_database``'s backend for chDB (see the module docstring); the policy path
    (``run``: classify, capability, audit) is :class:`DatabaseBackend`'s, the statement path
    :class:`DirectBackend`'s."""

    backend = "chdb"

    def __init__(self, url: str | URL, **options: Any) -> None:
        super().__init__(url, **options)
        self.memory_limit = int(os.environ.get(CHDB_MEMORY_ENV, CHDB_MEMORY_LIMIT))
        self._database = _Database(
            chdb_path(self.url), read_limits(self.settings, self.memory_limit)
        )
        self.schema_source = ClickHouseCatalog(
            lambda sql: self._database.reader().query(sql, "DataFrame"), self.url
        )

    def dispose(self) -> None:
        """Close its sessions (another chDB database may then be opened in this process)."""
        self._execution.close()
        self._database.close()

    # -- statements ----------------------------------------------------------------------
    def _read_frame(self, sql: str, canceller: Any) -> pd.DataFrame:
        """A small derived read (a count, a sample, an estimate) in the read-only session,
        cancellable."""
        marker = _marker()
        session = self._database.reader()
        with Running(canceller, lambda: self._database.kill(marker)):
            return session.query(
                f"{marker}{statement_body(sql, 'clickhouse')}{READ_CLAUSE}", "DataFrame"
            )

    def _execute(
        self,
        kind: RunKind,
        sql: str,
        settings: RunSettings,
        canceller: Any,
        progress: Callable[[int], None] | None,
        counted: int | None = None,
    ) -> Fetched:
        session = self._database.reader() if kind == "read" else self._database.session()
        marker = _marker()
        text = f"{marker}{statement_body(sql, 'clickhouse')}" + (
            READ_CLAUSE if kind == "read" else ""
        )
        mutated = mutated_table(sql) if kind == "write" else None

        def cancel() -> None:
            self._database.kill(marker)
            if mutated is not None:
                self._database.kill_mutations(mutated)

        with Running(canceller, cancel):
            starts = first_word(sql)
            if starts in STREAMED and not has_totals(sql):
                stream = session.send_query(text, "DataFrame")
                return take(stream, settings, progress)
            if starts in ROW_STARTS:  # SHOW, DESCRIBE, EXPLAIN, WITH TOTALS: not streamable
                return take(Whole(session.query(text, "DataFrame")), settings, progress)
            # Not a query (a write, or a forced "read" in the tests): chDB streams queries only.
            result = session.query(text, "CSV")
        written = int(result.rows_written())
        return Fetched(columns=[], row_count=written, has_rows=False)


def _marker() -> str:
    return f"/* pi-{uuid.uuid4().hex} */ "
