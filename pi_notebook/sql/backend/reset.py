"""The session reset after every call: the pooled connection goes back as it was found (D5).

A read's rollback undoes its transaction, not what a view or function did to the session: a
PostgreSQL advisory lock (``pg_try_advisory_lock``), a MariaDB named lock (``GET_LOCK``) or
user variable, and, after an approved write that committed, a session setting or temporary
table. After each call the backend resets the session with the engine's own command:

* PostgreSQL: ``DISCARD ALL`` (locks, settings, temporary objects, prepared statements,
  cursors, listeners). It cannot run in a transaction block, so it is its own round trip
  after the rollback; psycopg sees it and forgets its own prepared statements, and it is sent
  unprepared (psycopg would otherwise prepare the command itself after a few runs, and the
  command would drop its own prepared statement).
* MySQL/MariaDB: ``COM_RESET_CONNECTION`` (locks, user variables, temporary tables, session
  variables; the connection's character set stays). The server's ``autocommit`` goes back to
  its default, which the backend does not rely on: every run opens its transaction itself.
* SQLite and DuckDB: nothing for a read (their read modes let a statement create nothing in
  the session, and neither has session locks); an approved write's temporary tables and views
  are dropped.

Any other engine has no known reset: its connection is dropped (:func:`reset_session`
answers ``False``). A reset that fails drops the connection too: fail closed.
"""

from __future__ import annotations

from typing import Any

from pi_notebook.sql.backend.readonly import RunKind, sqlite_control

__all__ = ["reset_session"]

_COM_RESET_CONNECTION = 0x1F


def reset_session(raw: Any, backend: str, kind: RunKind) -> bool:
    """Reset the session of the pooled DBAPI connection ``raw`` (idle, its transaction over)
    after a run of ``kind``; ``False`` when it could not be (the caller must drop it)."""
    try:
        if backend == "postgresql":
            _postgres(raw.driver_connection)
        elif backend == "mysql":
            _mysql(raw.driver_connection)
        elif backend == "sqlite":
            if kind == "write":
                _sqlite_temp(raw)
        elif backend == "duckdb":
            if kind == "write":
                _duckdb_temp(raw.driver_connection)
        else:
            return False
    except Exception:  # a connection we cannot reset must never serve another call
        return False
    return True


def _postgres(conn: Any) -> None:
    if conn.autocommit:
        conn.execute("DISCARD ALL", prepare=False)
        return
    conn.autocommit = True  # psycopg would open a transaction for it otherwise
    try:
        conn.execute("DISCARD ALL", prepare=False)
    finally:
        conn.autocommit = False


def _mysql(conn: Any) -> None:
    # PyMySQL has no public call for it; its command API is what ``ping`` uses.
    conn._execute_command(_COM_RESET_CONNECTION, b"")
    conn._read_ok_packet()


def _sqlite_temp(raw: Any) -> None:
    cur = raw.cursor()
    try:
        cur.execute("SELECT type, name FROM sqlite_temp_master WHERE type IN ('table', 'view')")
        found = [(str(t), str(n)) for t, n in cur.fetchall()]
    finally:
        cur.close()
    for kind, name in found:
        quoted = '"' + name.replace('"', '""') + '"'
        sqlite_control(raw, f"DROP {kind.upper()} IF EXISTS temp.{quoted}")
    if found and raw.driver_connection.in_transaction:
        raw.commit()


def _duckdb_temp(conn: Any) -> None:
    found = conn.execute(
        "SELECT 'TABLE', table_name FROM duckdb_tables() WHERE temporary UNION ALL "
        "SELECT 'VIEW', view_name FROM duckdb_views() WHERE temporary AND NOT internal"
    ).fetchall()
    for kind, name in found:
        quoted = '"' + str(name).replace('"', '""') + '"'
        conn.execute(f"DROP {kind} IF EXISTS temp.main.{quoted}")
