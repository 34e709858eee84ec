"""How one chained batch reaches the store: one transaction per batch, on a held connection.

SQLite and PostgreSQL are written through the driver (prepared statements, ``executemany``):
SQLAlchemy's per-transaction and per-row work is most of the cost of a small commit there.
Other engines go through SQLAlchemy Core. A transaction that fails is rolled back and its
connection discarded, so the next attempt starts on a fresh one. Only the writer thread uses a
``RowStore``. What does not belong here: chaining, hashing, queueing and retrying (``writer``).
"""

from __future__ import annotations

import datetime as dt
import logging
import sqlite3
from collections.abc import Sequence
from itertools import chain
from typing import Any

import sqlalchemy as sa

from .schema import heads, records

__all__ = ["Row", "RowStore"]

# Up to this many rows a PostgreSQL batch is one INSERT ... VALUES statement (one round trip,
# the common case of a call's few records); a huge VALUES list costs the server more to parse
# and plan than a pipelined executemany.
_ONE_STATEMENT_ROWS = 64

# SQLite: batches from this size on are written as multi-row INSERTs of up to this many rows
# (powers of two: see ``RowStore._sqlite_insert``), within the driver's variable limit.
_SQLITE_MIN_MULTI = 16
_SQLITE_MULTI_ROWS = 1024

_log = logging.getLogger("pi_notebook.audit")

# (session_id, seq, ts, kind, tool_call_id, tool_name, user, policy_version, payload,
#  prev_hash, hash): ts as ``RowStore.text_ts`` gives it: on SQLite already the text written
#  (SQLAlchemy's own format), elsewhere the datetime.
Row = tuple[
    str, int, dt.datetime | str, str, str | None, str | None, str, str | None, str, str, str
]

_COLUMNS = (
    'session_id, seq, ts, kind, tool_call_id, tool_name, "user", policy_version, payload, '
    "prev_hash, hash"
)
_NAMES = (
    "session_id",
    "seq",
    "ts",
    "kind",
    "tool_call_id",
    "tool_name",
    "user",
    "policy_version",
    "payload",
    "prev_hash",
    "hash",
)


def _sqlite_ts(ts: dt.datetime) -> str:
    if ts.tzinfo is dt.UTC:  # what the log stamps: only the "+00:00" to drop
        iso = ts.isoformat(timespec="microseconds")[:-6]
    else:
        iso = ts.astimezone(dt.UTC).replace(tzinfo=None).isoformat(timespec="microseconds")
    return f"{iso[:10]} {iso[11:]}"


class RowStore:
    """Writes batches of ready rows and the session head, each batch in one transaction."""

    def text_ts(self, ts: dt.datetime, stamp: str) -> dt.datetime | str:
        """What a row holds for ``ts``, given its ``format_ts`` text ``stamp``: on SQLite the
        text the store gets (derived from ``stamp``: no second formatting per record)."""
        if not self._text_ts:
            return ts
        if ts.tzinfo is dt.UTC:  # stamp is "YYYY-MM-DDTHH:MM:SS.ffffffZ"
            return f"{stamp[:10]} {stamp[11:-1]}"
        return _sqlite_ts(ts)

    @staticmethod
    def in_place_possible(engine: sa.Engine) -> bool:
        """Whether ``engine``'s store may take commits in place (``Writer.commit_here``):
        a SQLite file through the stdlib driver (WAL mode is checked on connecting)."""
        database = engine.url.database
        return (
            engine.dialect.name == "sqlite"
            and engine.dialect.driver == "pysqlite"
            and not isinstance(engine.pool, sa.StaticPool)
            and database not in (None, "", ":memory:")
            and "mode=memory" not in str(engine.url)
        )

    def __init__(self, engine: sa.Engine, *, in_place: bool = False) -> None:
        self._engine = engine
        # A store for commits in place (SQLite, see ``in_place_possible``): its connection
        # never waits for a lock (busy_timeout 0: a locked store fails the attempt at once)
        # and never checkpoints (which waits for the disk); it is discarded, not pooled.
        self._in_place = in_place
        self.usable = True
        """False once an in-place store found its database not in WAL mode."""
        name = engine.dialect.name
        self._raw = name in ("sqlite", "postgresql") and engine.dialect.paramstyle in (
            "qmark",
            "format",
            "pyformat",
        )
        self._sqlite = name == "sqlite"
        self._text_ts = self._raw and self._sqlite
        self._multi_rows: int | None = None  # rows per multi-row INSERT (SQLite), once known
        self._multi_insert: dict[int, str] = {}
        mark = "?" if engine.dialect.paramstyle == "qmark" else "%s"
        marks = ", ".join([mark] * len(_NAMES))
        self._insert = f"INSERT INTO pi_audit_records ({_COLUMNS}) VALUES ({marks})"
        self._select_head = f"SELECT count, last_hash FROM pi_audit_heads WHERE session_id = {mark}"
        self._update_head = f"UPDATE pi_audit_heads SET count = {mark}, last_hash = {mark} WHERE session_id = {mark}"
        self._insert_head = f"INSERT INTO pi_audit_heads (session_id, count, last_hash) VALUES ({mark}, {mark}, {mark})"
        self._row_marks = f"({marks})"
        self._upsert_head = (
            f"INSERT INTO pi_audit_heads (session_id, count, last_hash) VALUES ({mark}, {mark}, "
            f"{mark}) ON CONFLICT (session_id) DO UPDATE SET count = EXCLUDED.count, "
            "last_hash = EXCLUDED.last_hash"
        )
        self._sync = True  # the connection's synchronous_commit (PostgreSQL)
        self._conn: Any = None  # the pooled connection held between batches (raw mode)
        self._shared = isinstance(engine.pool, sa.StaticPool)  # one connection for everyone

    # -- raw DBAPI path ------------------------------------------------------------
    def _connection(self) -> Any:
        if self._conn is None:
            conn = self._engine.raw_connection()
            if self._sqlite:
                # Explicit transactions: BEGIN IMMEDIATE takes the write lock up front, under
                # the busy timeout, instead of failing on a lock upgrade mid-transaction.
                conn.driver_connection.isolation_level = None  # pyright: ignore[reportOptionalMemberAccess]
                if self._in_place:
                    try:
                        self._in_place_settings(conn.driver_connection)
                    except BaseException:
                        conn.invalidate()
                        raise
            else:
                conn.driver_connection.autocommit = True  # pyright: ignore[reportOptionalMemberAccess]
                self._sync = True
            self._conn = conn
        return self._conn

    @property
    def ready(self) -> bool:
        """Whether this store holds an open connection (an in-place store is opened by the
        writer thread, ``open``, so that a caller never waits for a connection)."""
        return self._conn is not None

    def open(self) -> None:
        """Open the connection now if it is not open; never raises (``ready`` tells)."""
        if not self._raw or self._conn is not None:
            return
        try:
            self._connection()
        except Exception:  # the next ``open``, or the writer's own connection, says more
            _log.debug("audit: opening a store connection failed", exc_info=True)

    def _in_place_settings(self, driver: Any) -> None:
        mode = driver.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() != "wal":  # a commit would wait for the disk: not here
            self.usable = False
            raise RuntimeError(f"the audit store is in {mode} mode, not WAL")
        driver.execute("PRAGMA busy_timeout=0")
        driver.execute("PRAGMA wal_autocheckpoint=0")

    def checkpoint(self) -> None:
        """A passive checkpoint of a SQLite store's log (commits in place run none); never
        raises."""
        if not (self._raw and self._sqlite):
            return
        try:
            cur = self._connection().driver_connection.cursor()
            try:
                cur.execute("PRAGMA wal_checkpoint(PASSIVE)")
                cur.fetchall()
            finally:
                cur.close()
        except Exception:  # the next commit's own checkpoint, or the next one of these
            _log.debug("audit: a checkpoint of the store failed", exc_info=True)

    def _discard(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            self._restore(conn)
        except Exception:  # a broken connection may refuse; it is dropped anyway
            _log.debug("audit: resetting the writer's connection failed", exc_info=True)
        try:
            if self._shared:
                conn.close()  # the one connection of an in-memory store must survive
            else:
                conn.invalidate()
        except Exception:
            _log.debug("audit: discarding the writer's connection failed", exc_info=True)

    def _restore(self, conn: Any) -> None:
        # Hand the connection back as the pool gave it.
        driver = conn.driver_connection
        if self._sqlite:
            driver.isolation_level = ""
        else:
            if not self._sync:
                driver.execute("SET synchronous_commit TO DEFAULT")
            driver.autocommit = False

    def close(self) -> None:
        """Return the held connection to the pool (an in-place store's is discarded)."""
        if self._in_place:
            self._discard()
            return
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            self._restore(conn)
            conn.close()
        except Exception:
            _log.debug("audit: releasing the writer's connection failed", exc_info=True)

    def load_head(self, session_id: str) -> tuple[int, str] | None:
        """The session's committed (count, last hash), or ``None`` if it has no head yet.

        Raises:
            Exception: whatever the driver raised.
        """
        if not self._raw:
            with self._engine.connect() as conn:
                found = conn.execute(
                    sa.select(heads.c.count, heads.c.last_hash).where(
                        heads.c.session_id == session_id
                    )
                ).first()
        else:
            conn = self._connection()
            cur = conn.driver_connection.cursor()
            try:
                cur.execute(self._select_head, (session_id,))
                found = cur.fetchone()
            except BaseException:
                cur.close()
                self._discard()
                raise
            cur.close()
        return (int(found[0]), str(found[1])) if found is not None else None

    def write(
        self, session_id: str, rows: Sequence[Row], head_exists: bool, *, sync: bool = True
    ) -> None:
        """Insert ``rows`` and set the head to the last row's (seq, hash), atomically.

        Args:
            sync: PostgreSQL only: wait for the server to flush the commit to its WAL
                (``synchronous_commit``). Without it the commit is complete and visible at
                once and survives a crash of this process, but a crash of the server's
                machine may lose the last fraction of a second (as SQLite's ``synchronous=
                NORMAL`` in WAL mode, the SQLite store's setting).

        Raises:
            Exception: whatever the driver raised; nothing of the batch is then committed.
        """
        if not self._raw:
            self._write_core(session_id, rows, head_exists)
            return
        count, last = rows[-1][1], rows[-1][10]
        conn = self._connection()
        driver = conn.driver_connection
        cur = driver.cursor()
        try:
            if self._sqlite:
                cur.execute("BEGIN IMMEDIATE")
                self._sqlite_insert(driver, cur, rows)
                if head_exists:
                    cur.execute(self._update_head, (count, last, session_id))
                else:
                    cur.execute(self._insert_head, (session_id, count, last))
                cur.execute("COMMIT")
            else:
                if sync != self._sync:
                    cur.execute(f"SET synchronous_commit TO {'on' if sync else 'off'}")
                    self._sync = sync
                if len(rows) <= _ONE_STATEMENT_ROWS:
                    # One statement, so one round trip and its own transaction (autocommit):
                    # the rows and the head commit together or not at all.
                    values = ", ".join([self._row_marks] * len(rows))
                    cur.execute(
                        f"WITH ins AS (INSERT INTO pi_audit_records ({_COLUMNS}) VALUES {values}) "
                        f"{self._upsert_head}",
                        [v for r in rows for v in r] + [session_id, count, last],
                    )
                else:  # a large batch: the driver's pipelined executemany, in a transaction
                    with driver.transaction():
                        cur.executemany(self._insert, rows)
                        cur.execute(self._upsert_head, (session_id, count, last))
        except BaseException:
            try:
                if self._sqlite and driver.in_transaction:
                    cur.execute("ROLLBACK")
            except Exception:  # the connection is discarded next
                pass
            cur.close()
            self._discard()
            raise
        cur.close()

    def _sqlite_insert(self, driver: Any, cur: Any, rows: Sequence[Row]) -> None:
        # A large batch goes in as multi-row INSERTs of 2**k rows (a few statement shapes for
        # the driver's statement cache), the rest through executemany. One statement is one
        # sqlite3_step, and the driver releases the GIL around each step: per row (what
        # executemany does) the writer waits for the GIL after every row while a thread that
        # records holds it; per statement, SQLite's work on a whole chunk runs alongside.
        size = self._multi_rows
        if size is None:
            try:
                limit = int(driver.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))
            except Exception:  # not the stdlib driver: per row
                limit = 0
            size = self._multi_rows = min(_SQLITE_MULTI_ROWS, limit // len(_NAMES))
        start = 0
        while size >= _SQLITE_MIN_MULTI and len(rows) - start >= _SQLITE_MIN_MULTI:
            if len(rows) - start >= size:
                statement = self._multi_statement(size)
                cur.execute(statement, list(chain.from_iterable(rows[start : start + size])))
                start += size
            else:
                size //= 2
        rest = rows[start:] if start else rows
        if 1 < len(rest) <= (self._multi_rows or 0):
            # A short batch (a call's few records, committed in place) or the tail of a large
            # one: one statement too, not a step and a GIL hand-back per row (about 3x
            # faster for four rows).
            cur.execute(self._multi_statement(len(rest)), list(chain.from_iterable(rest)))
        elif rest:
            cur.executemany(self._insert, rest)

    def _multi_statement(self, size: int) -> str:
        """The INSERT of ``size`` rows (kept: one shape per size for the statement cache)."""
        statement = self._multi_insert.get(size)
        if statement is None:
            statement = f"INSERT INTO pi_audit_records ({_COLUMNS}) VALUES " + ", ".join(
                [self._row_marks] * size
            )
            self._multi_insert[size] = statement
        return statement

    # -- SQLAlchemy Core path (MySQL, MariaDB, ...) -------------------------------
    def _write_core(self, session_id: str, rows: Sequence[Row], head_exists: bool) -> None:
        count, last = rows[-1][1], rows[-1][10]
        with self._engine.begin() as conn:
            conn.execute(sa.insert(records), [dict(zip(_NAMES, r, strict=True)) for r in rows])
            if head_exists:
                conn.execute(
                    sa.update(heads)
                    .where(heads.c.session_id == session_id)
                    .values(count=count, last_hash=last)
                )
            else:
                conn.execute(
                    sa.insert(heads).values(session_id=session_id, count=count, last_hash=last)
                )
