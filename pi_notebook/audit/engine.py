"""The audit store's SQLAlchemy engine: which URL by default, and the settings it needs.

SQLite runs in WAL mode with ``synchronous=NORMAL`` (committed records survive a killed
process) and a short busy timeout (a locked store fails the attempt, which the writer retries,
rather than holding it); PostgreSQL and MySQL get a connect timeout, so an unreachable store
fails fast. What does not belong here: the schema (``schema``) and writing (``store``).
"""

from __future__ import annotations

import os
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event as sa_event

__all__ = ["default_audit_url", "make_engine", "sqlite_pragmas"]

_ENV = "PI_NOTEBOOK_AUDIT_URL"


def default_audit_url() -> str:
    """``PI_NOTEBOOK_AUDIT_URL`` if set, else a SQLite file ``audit.sqlite`` in the data dir."""
    env = os.environ.get(_ENV)
    if env:
        return env
    from pi_notebook._paths import data_dir

    return f"sqlite:///{data_dir() / 'audit.sqlite'}"


def sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    try:
        # WAL lets readers (to_dataframe, other kernels) run beside the writer; NORMAL sync is
        # durable against a killed process, which is the failure the audit must survive.
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        # A locked store fails the attempt (it is retried) rather than holding the writer.
        cur.execute("PRAGMA busy_timeout=2000")
    finally:
        cur.close()


def make_engine(url: str | sa.URL) -> sa.Engine:
    parsed = sa.make_url(url)
    if parsed.get_backend_name() != "sqlite":
        args: dict[str, Any] = {}
        if parsed.get_backend_name() in ("postgresql", "mysql", "mariadb") and (
            "connect_timeout" not in parsed.query
        ):
            args["connect_timeout"] = 5  # an unreachable store fails fast, and is retried
        return sa.create_engine(parsed, pool_pre_ping=True, connect_args=args)
    if parsed.database in (None, "", ":memory:"):
        # One shared connection, or the writer and readers would each see an empty database.
        engine = sa.create_engine(
            parsed, poolclass=sa.StaticPool, connect_args={"check_same_thread": False}
        )
    else:
        engine = sa.create_engine(parsed)
    sa_event.listen(engine, "connect", sqlite_pragmas)
    return engine
