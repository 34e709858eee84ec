"""Per-engine transaction setup: the engine's read-only mode for reads, a plain transaction
for approved writes.

This is the second wall. The classifier decides first; these modes stop what slips past it
where the engine can (each engine's ``read_only_backstop`` on the seam, :mod:`pi_notebook.sql.engines`, says what
its mode does and does not stop).
"""

from __future__ import annotations

import sqlite3
from typing import Any, Literal

from pi_notebook.sql.backend.roles import check_role, set_role_sql
from pi_notebook.sql.catalogs import SECRET_TABLES
from pi_notebook.sql.functions import REJECT_FUNCTIONS
from pi_notebook.sql.pragmas import sqlite_allows

__all__ = [
    "RunKind",
    "begin",
    "finish",
    "install_sqlite_guard",
    "sqlite_control",
    "take_pending_begin",
]

RunKind = Literal["read", "write"]

_GUARD_KEY = "pi_notebook_sqlite_guard"
_QUERY_ONLY_KEY = "pi_notebook_sqlite_query_only"
_PENDING_BEGIN_KEY = "pi_notebook_pg_pending_begin"

# The guard's policy is the classifier's: the pragma table (``sql/pragmas.py``), the functions
# that must never run and the tables that hold secrets (``sql/functions.py``,
# ``sql/catalogs.py``). ``tests/db/test_db_read_corpus_backend.py`` runs the read corpus
# through the backend, so the two cannot drift apart unnoticed.
_READ_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE})
_NEVER_FUNCTIONS = REJECT_FUNCTIONS["sqlite"] | {"load_extension"}
_SECRET_TABLES = SECRET_TABLES["sqlite"]
# The first use of an eponymous virtual table on a connection (json_each, pragma_table_info...)
# asks to UPDATE these columns of the schema table while SQLite declares the table (verified on
# SQLite 3.40). No statement can really change the schema table: SQLite refuses it ("may not be
# modified") unless PRAGMA writable_schema is on, which this guard denies in every mode.
_SCHEMA_TABLES = frozenset(
    {"sqlite_master", "sqlite_temp_master", "sqlite_schema", "sqlite_temp_schema"}
)
_SCHEMA_COLUMNS = frozenset({"type", "name", "tbl_name", "rootpage", "sql"})


class _SqliteGuard:
    """The authorizer of one SQLite connection; ``mode`` says what may be prepared now.

    - ``base``: anything except ATTACH/DETACH, pragmas other than the listed reads (no pragma
      ever sets a value) and the functions that must never run (``load_extension``...).
    - ``read``: only pure reads: SELECT, table reads (not of secret tables), functions,
      recursive CTEs, the pragmas the classifier calls reads, and the schema-table bookkeeping
      of an eponymous virtual table's first use.
    - ``control``: everything; only while the backend itself issues its own setup statements.
    """

    def __init__(self) -> None:
        self.mode: Literal["base", "read", "control"] = "base"

    def __call__(self, action: int, arg1: str | None, arg2: str | None, *_: str | None) -> int:
        if self.mode == "control":
            return sqlite3.SQLITE_OK
        if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_FUNCTION:
            never = (arg2 or "").lower() in _NEVER_FUNCTIONS
            return sqlite3.SQLITE_DENY if never else sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA:
            return sqlite3.SQLITE_OK if sqlite_allows(arg1, arg2) else sqlite3.SQLITE_DENY
        if self.mode == "read":
            return self._read(action, arg1, arg2)
        return sqlite3.SQLITE_OK

    @staticmethod
    def _read(action: int, table: str | None, column: str | None) -> int:
        if action in _READ_ACTIONS:
            secret = action == sqlite3.SQLITE_READ and (table or "").lower() in _SECRET_TABLES
            return sqlite3.SQLITE_DENY if secret else sqlite3.SQLITE_OK
        if (
            action == sqlite3.SQLITE_UPDATE
            and (table or "").lower() in _SCHEMA_TABLES
            and (column or "").lower() in _SCHEMA_COLUMNS
        ):
            return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY


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


def sqlite_control(raw: Any, sql: str) -> None:
    """Run one of the backend's own setup statements (a pragma that sets a value, say) on a
    guarded SQLite connection between runs; the authorizer is back in its mode afterwards."""
    guard = _sqlite_guard(raw)
    mode, guard.mode = guard.mode, "control"
    try:
        _exec(raw, "sqlite", sql)
    finally:
        guard.mode = mode


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
    role: str | None = None,
) -> None:
    """Open the transaction ``kind`` needs on the pooled DBAPI connection ``raw``.

    ``select_limit`` (MySQL/MariaDB reads): the server returns at most that many rows of a
    SELECT; every other run resets it, since the setting lives on the pooled session.

    ``role`` (PostgreSQL only, see :mod:`.roles`): the transaction runs ``SET LOCAL ROLE``
    to it, once the role was checked on this connection (else ``RoleRefused``, nothing run).
    """
    if role is not None and backend != "postgresql":  # fail closed: never the login's rights
        raise RuntimeError(f"a per-user role cannot be set on {backend}")
    if backend == "postgresql":
        _begin_postgresql(raw, kind, timeout_s, role)
    elif backend == "mysql":
        _begin_mysql(raw, kind, timeout_s, mariadb, select_limit)
    elif backend == "duckdb":
        _exec(
            raw, backend, "BEGIN TRANSACTION READ ONLY" if kind == "read" else "BEGIN TRANSACTION"
        )
    elif backend == "sqlite":
        _begin_sqlite(raw, kind)
    else:  # pragma: no cover - supported_backend() filters these out
        raise ValueError(f"no read-only mode for {backend}")


def _begin_postgresql(raw: Any, kind: RunKind, timeout_s: float, role: str | None) -> None:
    timeout = f"SET LOCAL statement_timeout = {int(timeout_s * 1000)}"
    if role is not None:
        _check_role(raw, role)
        timeout = f"{timeout}; {set_role_sql(role)}"
    if raw.driver_connection.autocommit:
        # The backend's engine runs psycopg in autocommit and opens the transaction
        # itself: BEGIN and its settings in one round trip. A read's is sent with its
        # first statement (see ``take_pending_begin``), a round trip less.
        if kind == "read":
            raw.info[_PENDING_BEGIN_KEY] = f"BEGIN READ ONLY; {timeout}"
        else:
            _exec(raw, "postgresql", f"BEGIN; {timeout}")
    else:
        # psycopg opens the transaction itself; SET TRANSACTION as its first statement
        # makes it exactly ``BEGIN READ ONLY``.
        if kind == "read":
            _exec(raw, "postgresql", "SET TRANSACTION READ ONLY")
        _exec(raw, "postgresql", timeout)


def _begin_mysql(
    raw: Any, kind: RunKind, timeout_s: float, mariadb: bool, select_limit: int | None
) -> None:
    limit = str(int(select_limit)) if select_limit is not None and kind == "read" else "DEFAULT"
    if mariadb:
        timeout = f"max_statement_time = {float(timeout_s)}"
    else:
        timeout = f"max_execution_time = {int(timeout_s * 1000)}"
    _exec(raw, "mysql", f"SET SESSION {timeout}, sql_select_limit = {limit}")
    _exec(raw, "mysql", "START TRANSACTION READ ONLY" if kind == "read" else "START TRANSACTION")


def _begin_sqlite(raw: Any, kind: RunKind) -> None:
    # query_only stays ON between reads (a connection is switched only when a write
    # comes), which saves two statements per read; the authorizer's mode is set per run.
    guard = _sqlite_guard(raw)
    if kind == "read" and raw.info.get(_QUERY_ONLY_KEY) is True:
        guard.mode = "read"  # query_only is already ON: nothing to run
        return
    guard.mode = "control"
    try:
        read = kind == "read"
        if raw.info.get(_QUERY_ONLY_KEY, False) != read:
            raw.info[_QUERY_ONLY_KEY] = None  # unknown until the pragma ran
            _exec(raw, "sqlite", f"PRAGMA query_only = {'ON' if read else 'OFF'}")
            raw.info[_QUERY_ONLY_KEY] = read
        if not read:
            _exec(raw, "sqlite", "BEGIN")
    finally:
        guard.mode = "read" if kind == "read" else "base"


def _check_role(raw: Any, role: str) -> None:
    """:func:`.roles.check_role` on ``raw``, outside the run's transaction."""
    cur = raw.cursor()
    try:
        check_role(cur, raw.info, role)
    finally:
        cur.close()
    if not raw.driver_connection.autocommit:
        raw.rollback()  # the check's own transaction: ``SET TRANSACTION`` must come first


def take_pending_begin(raw: Any) -> str | None:
    """The ``BEGIN READ ONLY`` (with its settings) that :func:`begin` left for a PostgreSQL
    read to send in front of its first statement, once; ``None`` when the transaction is
    open already. Whoever runs the read's first statement must take it and send it first."""
    return raw.info.pop(_PENDING_BEGIN_KEY, None)


def finish(raw: Any, backend: str, kind: RunKind, *, commit: bool) -> None:
    """End the transaction: commit an approved write that succeeded, roll back anything else.

    (A PostgreSQL read may have ended its transaction in its last round trip already; the
    driver's rollback then sends nothing.)
    """
    do_commit = commit and kind == "write"
    if backend == "postgresql":
        raw.info.pop(_PENDING_BEGIN_KEY, None)  # never left for the next run
    if backend == "duckdb":
        _exec(raw, backend, "COMMIT" if do_commit else "ROLLBACK")
    elif backend == "sqlite":
        guard = _sqlite_guard(raw)
        # A read opens no transaction (the stdlib driver begins one only before a write):
        # there is then nothing to roll back, and the driver's rollback would do nothing.
        if do_commit or raw.driver_connection.in_transaction:
            guard.mode = "control"
            try:
                raw.commit() if do_commit else raw.rollback()
            finally:
                guard.mode = _between_runs(raw)
        else:
            guard.mode = _between_runs(raw)
    else:
        raw.commit() if do_commit else raw.rollback()


def _between_runs(raw: Any) -> Literal["read", "base"]:
    """Between runs a SQLite connection stays as restricted as its ``query_only`` pragma."""
    return "read" if raw.info.get(_QUERY_ONLY_KEY) else "base"
