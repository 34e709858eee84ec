"""SQLAlchemy engines for the backend, and the sqlglot dialect of each URL.

One engine per URL, configured so that the engine's own read-only mode can be switched on
per statement (see :mod:`.readonly`). Nothing here decides what may run.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import StaticPool

from pi_notebook.sql.backend.readonly import install_sqlite_guard

__all__ = ["create_backend_engine", "sqlglot_dialect", "supported_backend"]

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


def create_backend_engine(url: str | URL) -> sa.Engine:
    """Create the engine for ``url`` with the per-engine settings the backend relies on.

    - SQLite: connections usable from worker threads, and an authorizer installed on each
      connection (it denies ATTACH/DETACH and pragma writes always, and anything but a pure
      read while a read runs).
    - DuckDB: every connection opens with ``enable_external_access=false`` and then locks the
      configuration, so SQL cannot read host files or turn the setting back on. DuckDB allows
      only one configuration per database file in a process, hence one config for all.
    """
    u = make_url(url)
    backend = supported_backend(u)
    kwargs: dict[str, Any] = {}
    if backend == "sqlite":
        kwargs["connect_args"] = {"check_same_thread": False}
        if u.database in (None, "", ":memory:"):
            # One shared connection: a second one would see a different, empty database.
            kwargs["poolclass"] = StaticPool
    elif backend == "duckdb":
        # No host files, and no Python replacement scans: without this, `FROM df` would read
        # any pandas variable of the kernel by name.
        kwargs["connect_args"] = {
            "config": {"enable_external_access": False, "python_enable_replacements": False}
        }
    engine = sa.create_engine(u, **kwargs)
    if backend == "sqlite":
        event.listen(engine, "connect", _on_sqlite_connect)
    elif backend == "duckdb":
        event.listen(engine, "connect", _on_duckdb_connect)
    return engine


# SQLite runs in the kernel's own process: cap the size of any one value (a string or blob
# built by randomblob/printf/replace/a recursive CTE) so a read cannot exhaust its memory.
SQLITE_MAX_VALUE_BYTES = 64 * 1024 * 1024


def _on_sqlite_connect(dbapi_connection: Any, record: Any) -> None:
    dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, SQLITE_MAX_VALUE_BYTES)
    install_sqlite_guard(dbapi_connection, record.info)


def _on_duckdb_connect(dbapi_connection: Any, _record: Any) -> None:
    # The lock is global to the database instance: a second connection to an open instance
    # finds it already set, and setting it again would fail.
    locked = dbapi_connection.execute("SELECT current_setting('lock_configuration')").fetchone()
    if not (locked and locked[0]):
        dbapi_connection.execute("SET lock_configuration = true")
