"""Per-engine transaction setup: the engine's read-only mode for reads, a plain transaction
for approved writes.

This is the second wall. The classifier decides first; these modes stop what slips past it
where the engine can (see ``ENGINES.md`` for what each mode does and does not stop).
"""

from __future__ import annotations

import sqlite3
from typing import Any, Literal

__all__ = ["RunKind", "begin", "finish", "install_sqlite_guard"]

RunKind = Literal["read", "write"]

_GUARD_KEY = "pi_notebook_sqlite_guard"
_QUERY_ONLY_KEY = "pi_notebook_sqlite_query_only"

# Pragmas that only report. Everything else (including argument-less pragmas that act, such
# as ``optimize`` or ``wal_checkpoint``) is denied while a read runs.
_READ_PRAGMAS = frozenset(
    {
        "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
        "foreign_key_list", "database_list", "collation_list", "function_list",
        "pragma_list", "module_list", "compile_options", "user_version", "schema_version",
        "application_id", "encoding", "page_size", "page_count", "freelist_count",
    }
)  # fmt: skip
# Read pragmas that become writes when given a value (``PRAGMA user_version = 5``).
_VALUE_PRAGMAS = frozenset(
    {"user_version", "schema_version", "application_id", "page_size", "encoding"}
)
_READ_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE})
_NEVER_FUNCTIONS = frozenset({"load_extension"})


class _SqliteGuard:
    """The authorizer of one SQLite connection; ``mode`` says what may be prepared now.

    - ``base``: anything except ATTACH/DETACH, pragma writes and ``load_extension``.
    - ``read``: only pure reads (SELECT, table reads, functions, recursive CTEs, info pragmas).
    - ``control``: everything; only while the backend itself issues its own setup statements.
    """

    def __init__(self) -> None:
        self.mode: Literal["base", "read", "control"] = "base"

    def __call__(self, action: int, arg1: str | None, arg2: str | None, *_: Any) -> int:
        if self.mode == "control":
            return sqlite3.SQLITE_OK
        if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_FUNCTION:
            return (
                sqlite3.SQLITE_DENY
                if (arg2 or "").lower() in _NEVER_FUNCTIONS
                else sqlite3.SQLITE_OK
            )
        if action == sqlite3.SQLITE_PRAGMA:
            name = (arg1 or "").lower()
            if name in _READ_PRAGMAS and (arg2 is None or name not in _VALUE_PRAGMAS):
                return sqlite3.SQLITE_OK
            return sqlite3.SQLITE_DENY
        if self.mode == "read":
            return sqlite3.SQLITE_OK if action in _READ_ACTIONS else sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK


def install_sqlite_guard(dbapi_connection: sqlite3.Connection, info: dict[Any, Any]) -> None:
    """Install the authorizer on a new SQLite connection (``info``: the pool record's info)."""
    guard = _SqliteGuard()
    dbapi_connection.set_authorizer(guard)
    info[_GUARD_KEY] = guard


def _sqlite_guard(raw: Any) -> _SqliteGuard:
    guard = raw.info.get(_GUARD_KEY)
    if not isinstance(guard, _SqliteGuard):  # fail closed: never run without the authorizer
        raise RuntimeError("SQLite connection has no authorizer installed")
    return guard


def _exec(raw: Any, backend: str, sql: str) -> None:
    if backend == "duckdb":
        raw.driver_connection.execute(sql)
        return
    cur = raw.cursor()
    try:
        cur.execute(sql)
    finally:
        cur.close()


def begin(
    raw: Any,
    backend: str,
    kind: RunKind,
    *,
    timeout_s: float,
    mariadb: bool,
    select_limit: int | None = None,
) -> None:
    """Open the transaction ``kind`` needs on the pooled DBAPI connection ``raw``.

    ``select_limit`` (MySQL/MariaDB reads): the server returns at most that many rows of a
    SELECT; every other run resets it, since the setting lives on the pooled session.
    """
    if backend == "postgresql":
        timeout = f"SET LOCAL statement_timeout = {int(timeout_s * 1000)}"
        if raw.driver_connection.autocommit:
            # The backend's engine runs psycopg in autocommit and opens the transaction
            # itself: one round trip for BEGIN and its settings.
            mode = "BEGIN READ ONLY" if kind == "read" else "BEGIN"
            _exec(raw, backend, f"{mode}; {timeout}")
        else:
            # psycopg opens the transaction itself; SET TRANSACTION as its first statement
            # makes it exactly ``BEGIN READ ONLY``.
            if kind == "read":
                _exec(raw, backend, "SET TRANSACTION READ ONLY")
            _exec(raw, backend, timeout)
    elif backend == "mysql":
        limit = str(int(select_limit)) if select_limit is not None and kind == "read" else "DEFAULT"
        if mariadb:
            timeout = f"max_statement_time = {float(timeout_s)}"
        else:
            timeout = f"max_execution_time = {int(timeout_s * 1000)}"
        _exec(raw, backend, f"SET SESSION {timeout}, sql_select_limit = {limit}")
        _exec(
            raw, backend, "START TRANSACTION READ ONLY" if kind == "read" else "START TRANSACTION"
        )
    elif backend == "duckdb":
        _exec(
            raw, backend, "BEGIN TRANSACTION READ ONLY" if kind == "read" else "BEGIN TRANSACTION"
        )
    elif backend == "sqlite":
        # query_only stays ON between reads (a connection is switched only when a write
        # comes), which saves two statements per read; the authorizer's mode is set per run.
        guard = _sqlite_guard(raw)
        guard.mode = "control"
        try:
            read = kind == "read"
            if raw.info.get(_QUERY_ONLY_KEY, False) != read:
                raw.info[_QUERY_ONLY_KEY] = None  # unknown until the pragma ran
                _exec(raw, backend, f"PRAGMA query_only = {'ON' if read else 'OFF'}")
                raw.info[_QUERY_ONLY_KEY] = read
            if not read:
                _exec(raw, backend, "BEGIN")
        finally:
            guard.mode = "read" if kind == "read" else "base"
    else:  # pragma: no cover - supported_backend() filters these out
        raise ValueError(f"no read-only mode for {backend}")


def finish(raw: Any, backend: str, kind: RunKind, *, commit: bool) -> None:
    """End the transaction: commit an approved write that succeeded, roll back anything else."""
    do_commit = commit and kind == "write"
    if backend == "duckdb":
        _exec(raw, backend, "COMMIT" if do_commit else "ROLLBACK")
    elif backend == "sqlite":
        guard = _sqlite_guard(raw)
        guard.mode = "control"
        try:
            raw.commit() if do_commit else raw.rollback()
        finally:
            # Between runs the connection stays as restricted as its pragma says.
            guard.mode = "read" if raw.info.get(_QUERY_ONLY_KEY) else "base"
    else:
        raw.commit() if do_commit else raw.rollback()
