"""SQLAlchemy engines for the backend, and the sqlglot dialect of each URL.

One engine per URL, configured so that the engine's own read-only mode can be switched on
per statement (see :mod:`.readonly`). Nothing here decides what may run.
"""

from __future__ import annotations

import math
import os
import sqlite3
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import StaticPool

from pi_notebook.sql.backend.pgtypes import register_lenient_loaders
from pi_notebook.sql.backend.readonly import install_sqlite_guard

__all__ = ["CONNECT_TIMEOUT_S", "create_backend_engine", "sqlglot_dialect", "supported_backend"]

# SQLAlchemy backend name -> sqlglot dialect name.
_DIALECTS = {
    "sqlite": "sqlite",
    "postgresql": "postgres",
    "mysql": "mysql",
    "mariadb": "mysql",
    "duckdb": "duckdb",
}


def supported_backend(url: str | URL) -> str:
    """The SQLAlchemy backend name of ``url`` (``sqlite``, ``postgresql``, ``mysql``, ...).

    Raises:
        ValueError: for an engine the backend cannot run safely (no read-only mode known).
    """
    name = make_url(url).get_backend_name()
    if name not in _DIALECTS:
        raise ValueError(
            f"Unsupported database {name!r}: use SQLite, PostgreSQL, MySQL/MariaDB or DuckDB."
        )
    return "mysql" if name == "mariadb" else name


def sqlglot_dialect(url: str | URL) -> str:
    """The sqlglot dialect name for ``url`` (``postgresql`` -> ``postgres``, ...)."""
    return _DIALECTS[supported_backend(url)]


CONNECT_TIMEOUT_S = 10.0
"""Default bound on opening a connection (a server that accepts TCP and never answers)."""


def create_backend_engine(
    url: str | URL,
    *,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
    statement_timeout_s: float = 30.0,
    memory_limit_bytes: int | None = None,
) -> sa.Engine:
    """Create the engine for ``url`` with the per-engine settings the backend relies on.

    - Every engine bounds what can hang: PostgreSQL and MySQL/MariaDB get a connect timeout
      (PostgreSQL counts whole seconds, at least 2), MySQL/MariaDB socket read/write timeouts
      past the statement timeout (the server's own limit stops statements first), SQLite a
      busy timeout on file locks; a setting given in the URL wins.
    - PostgreSQL: autocommit at the driver (the backend opens each transaction itself);
      dates and timestamps no Python type holds (``infinity``, BC, year 10000 and
      later) load as text instead of failing the read (see :mod:`.pgtypes`).
    - SQLite: ``memory_limit_bytes`` as its ``hard_heap_limit`` (SQLite's allocator fails
      past it, a ``MemoryError``, instead of growing the kernel; the limit is the process's
      and the pragma only ever lowers it, so the lowest value given holds for every SQLite
      connection of the kernel, the audit store's included), connections usable from worker
      threads, foreign keys enforced, and an authorizer installed on each connection (it
      denies ATTACH/DETACH and pragma writes always, and anything but a pure read while a
      read runs).
    - DuckDB: every connection opens with ``enable_external_access=false`` and then locks the
      configuration, so SQL cannot read host files or turn the setting back on. DuckDB allows
      only one configuration per database file in a process, hence one config for all.
    """
    u = make_url(url)
    backend = supported_backend(u)
    kwargs, connect_args = _engine_options(u, backend, connect_timeout_s, statement_timeout_s)
    kwargs["connect_args"] = {k: v for k, v in connect_args.items() if k not in u.query}
    engine = sa.create_engine(u, **kwargs)
    if backend == "mysql" and "read_timeout" not in u.query:
        event.listen(engine, "do_connect", _mysql_connector(connect_timeout_s))
    if backend == "sqlite":
        event.listen(engine, "connect", _sqlite_connect(memory_limit_bytes))
    elif backend == "duckdb":
        event.listen(engine, "connect", _on_duckdb_connect)
    elif backend == "postgresql":
        event.listen(engine, "connect", _on_postgres_connect)
    return engine


def _engine_options(
    u: URL, backend: str, connect_timeout_s: float, statement_timeout_s: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The engine's keyword arguments and its driver's connect arguments for ``backend``
    (before a setting given in the URL wins over them)."""
    kwargs: dict[str, Any] = {}
    connect_args: dict[str, Any] = {}
    if backend == "sqlite":
        connect_args = {"check_same_thread": False, "timeout": min(5.0, statement_timeout_s)}
        if u.database in (None, "", ":memory:"):
            # One shared connection: a second one would see a different, empty database.
            kwargs["poolclass"] = StaticPool
    elif backend == "duckdb":
        # No host files, and no Python replacement scans: without this, `FROM df` would read
        # any Python variable by name. DuckDB runs in its worker process under an OS memory
        # cap (see :mod:`.engine_process`), and its own memory limit (a share of that cap)
        # stops aggregates over huge inputs (string_agg, list) first, with its own error.
        connect_args = {
            "config": {
                "enable_external_access": False,
                "python_enable_replacements": False,
                "memory_limit": os.environ.get(DUCKDB_MEMORY_ENV, DUCKDB_MEMORY_LIMIT),
            }
        }
    elif backend == "postgresql":
        connect_args = {"connect_timeout": max(2, math.ceil(connect_timeout_s))}
        # The backend opens every transaction itself (BEGIN READ ONLY and its settings in one
        # round trip, see readonly.begin): psycopg must not open one first.
        kwargs["isolation_level"] = "AUTOCOMMIT"
    elif backend == "mysql":
        socket_s = statement_timeout_s + 30.0
        connect_args = {
            "connect_timeout": connect_timeout_s,
            "read_timeout": socket_s,
            "write_timeout": socket_s,
        }
    return kwargs, connect_args


DUCKDB_MEMORY_LIMIT = "1GB"
"""DuckDB's memory limit for a connection opened outside the worker process (the worker sets
it to 60 % of ``memory_limit_bytes``); ``PI_NOTEBOOK_DUCKDB_MEMORY_LIMIT`` overrides both,
e.g. ``4GB``."""
DUCKDB_MEMORY_ENV = "PI_NOTEBOOK_DUCKDB_MEMORY_LIMIT"

# SQLite runs in the kernel's own process: cap the size of any one value (a string or blob
# built by randomblob/printf/replace/a recursive CTE) so a read cannot exhaust its memory.
SQLITE_MAX_VALUE_BYTES = 64 * 1024 * 1024


def _sqlite_connect(memory_limit_bytes: int | None) -> Any:
    def connect(dbapi_connection: Any, record: Any) -> None:
        if memory_limit_bytes:  # a pragma write: before the guard, which denies them
            dbapi_connection.execute(f"PRAGMA hard_heap_limit = {int(memory_limit_bytes)}")
        _on_sqlite_connect(dbapi_connection, record)

    return connect


def _on_sqlite_connect(dbapi_connection: Any, record: Any) -> None:
    dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, SQLITE_MAX_VALUE_BYTES)
    # SQLite enforces declared foreign keys only when asked, per connection (and only outside
    # a transaction): without it an approved DELETE would leave rows referencing nothing. Set
    # before the authorizer, which denies every pragma write afterwards.
    dbapi_connection.execute("PRAGMA foreign_keys = ON")
    install_sqlite_guard(dbapi_connection, record.info)


def _mysql_connector(handshake_s: float) -> Any:
    """PyMySQL reads the server's greeting with ``read_timeout``: bound the handshake by the
    connect timeout, then give the connection its statement-length read timeout."""

    def do_connect(dialect: Any, _record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
        statement_s = cparams.get("read_timeout")
        conn = dialect.loaded_dbapi.connect(*cargs, **{**cparams, "read_timeout": handshake_s})
        if hasattr(conn, "_read_timeout"):
            conn._read_timeout = statement_s
            return conn
        conn.close()  # an unknown PyMySQL: connect without the handshake bound
        return dialect.loaded_dbapi.connect(*cargs, **cparams)

    return do_connect


def _on_postgres_connect(dbapi_connection: Any, _record: Any) -> None:
    register_lenient_loaders(dbapi_connection)


def _on_duckdb_connect(dbapi_connection: Any, _record: Any) -> None:
    # The lock is global to the database instance: a second connection to an open instance
    # finds it already set, and setting it again would fail.
    locked = dbapi_connection.execute("SELECT current_setting('lock_configuration')").fetchone()
    if not (locked and locked[0]):
        dbapi_connection.execute("SET lock_configuration = true")
