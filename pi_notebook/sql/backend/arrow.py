"""The Arrow path for large reads: PostgreSQL through ADBC, DuckDB natively, SQLite
through ADBC in a child process (:mod:`.arrow_sqlite`).

Each is an :class:`~pi_notebook.readers.protocol.ArrowReader`: the SQLite and DuckDB readers
are :mod:`pi_notebook.readers`' own, :class:`AdbcPostgres` (the walls below) is the
backend's. :func:`read_fetched` is the one place a reader's table becomes a :class:`Fetched`
(the DataFrame by :func:`~pi_notebook.readers.frames.to_frame`, the same as the DBAPI path's).

Used only for statements the backend classified as a pure ``read``, and only when the row cap
allows large results (``row_cap >= ARROW_MIN_CAP``; a small cap is served faster by the
streaming cursors of :mod:`.fetch`, which stop exactly at the cap). Without pyarrow (and, for
PostgreSQL and SQLite, their ADBC driver) every read takes the :mod:`.fetch` path.

Security review (what changes against the DBAPI path, and why it holds):

* **SQLite reads through ADBC in a child process**, after the kernel's guarded ``sqlite3``
  connection compiled the statement under its authorizer; see :mod:`.arrow_sqlite` for its
  own review. Without the driver, SQLite's large results are assembled in Arrow chunks by
  :mod:`.frames`.
* **PostgreSQL, same walls.** The ADBC connection is a second connection, not taken from the
  SQLAlchemy pool, so it gets the walls itself: the session default is ``READ ONLY``
  (``SET SESSION CHARACTERISTICS``, committed at connect), every read opens with ``SET
  TRANSACTION READ ONLY`` and ``SET LOCAL statement_timeout``, and the read runs only after
  ``current_setting('transaction_read_only')`` answered ``on`` (else it is refused: fail
  closed). With a per-person role (:mod:`.roles`) the role is checked, set with ``SET LOCAL
  ROLE`` before the schema is read and again in the read's transaction, and ``current_user``
  must answer it before the read runs. Every transaction is rolled back, then the session reset (``DISCARD ALL``, see
  :mod:`.reset`). Abort and timeout cancel through
  ``adbc_cancel`` (PostgreSQL's cancel request), like psycopg's ``cancel_safe``. The connect
  timeout is a libpq URI parameter. Errors go through the same credential scrubbing.
* **COPY wrapping.** The driver runs a query as ``COPY (<query>) TO STDOUT (FORMAT
  binary)``. The text is one statement the classifier parsed as a read, with balanced
  parentheses outside strings and comments, and no unterminated string or block comment (the
  tokenizer refuses those), and it is handed over with a newline at the end, so a trailing
  ``--`` comment cannot swallow the driver's suffix: whatever the text, the suffix stays part
  of the statement, and anything but the query the classifier saw is a syntax error. ``COPY (query) TO STDOUT`` is a read
  PostgreSQL allows in a read-only transaction; ``COPY ... TO PROGRAM``/file would need the
  text to escape the parentheses, which it cannot. Statements COPY cannot wrap (SHOW,
  EXPLAIN) never get here: only ``SELECT``/``WITH``/``VALUES``/``TABLE`` texts do.
* **Values, not just walls.** ADBC maps ``infinity`` and out-of-range dates to wrapped-around
  integers silently: a date or timestamp outside years 1-9999 sends the whole read back to
  the DBAPI path (lenient loaders, :mod:`.pgtypes`). Types whose pandas form would differ from
  the DBAPI path's (json, uuid, arrays, intervals, other extension types) are detected from
  the schema before any row is read and take the DBAPI path too; ``numeric`` becomes float,
  as ``from_records(coerce_float=True)`` makes it.
* **DuckDB** reads through its own relation API on the backend's connection (same
  ``BEGIN TRANSACTION READ ONLY``, same locked configuration), a relation with a ``LIMIT``
  read as a stream of record batches (stopped at the size bound,
  :class:`pi_notebook.readers.duckdb.DuckdbReader`); out-of-range dates and types outside the
  safe set fall back to row fetching too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pandas as pd
from sqlalchemy.engine import URL

from pi_notebook.readers.batches import take_batches
from pi_notebook.readers.duckdb import DuckdbReader
from pi_notebook.readers.frames import is_pg_numeric, to_frame
from pi_notebook.readers.postgres import in_session_zone
from pi_notebook.readers.protocol import (
    ArrowRead,
    ArrowReader,
    CancelHooks,
    Query,
    ReadLimits,
    arrow_available,
)
from pi_notebook.sql.backend.cancel import Canceller
from pi_notebook.sql.backend.errors import ConnectFailed
from pi_notebook.sql.backend.fetched import CURSOR_TEXT, Fetched, RunSettings, read_limits
from pi_notebook.sql.backend.roles import check_role, set_role_sql

__all__ = [
    "ARROW_MIN_CAP",
    "AdbcPostgres",
    "arrow_available",
    "duckdb_arrow_read",
    "fetched_from_table",
    "read_fetched",
    "to_frame",
]

ARROW_MIN_CAP = 100_000
"""Row caps from this size on read large results through Arrow."""

_AUTOCOMMIT = "adbc.connection.autocommit"
_END = "\n"  # ends a trailing "--" comment before the driver's ") TO STDOUT ..." suffix


def read_fetched(
    reader: ArrowReader,
    sql: str,
    settings: RunSettings,
    canceller: CancelHooks | None,
    progress: Callable[[int], None] | None,
) -> Fetched | None:
    """The read ``sql`` through ``reader`` within ``settings``, as the DBAPI path's
    :class:`Fetched`; ``None`` when it must take the DBAPI path (the reader said so, or a
    column's type or values would differ there)."""
    query = Query(sql, role=settings.role)
    read = reader.read_arrow(query, read_limits(settings, progress), canceller)
    if read is None:
        return None
    frame = to_frame(read.table)
    if frame is None:
        return None
    return fetched_from_table(read.table, frame, read.seen, read.exact, size_capped=read.sized)


def fetched_from_table(
    table: Any, frame: pd.DataFrame, seen: int, exact: bool, *, size_capped: bool = False
) -> Fetched:
    """The :class:`Fetched` of an Arrow read: ``frame`` (from :func:`to_frame`) holds the
    kept rows of ``table``; ``seen`` rows were read, all of them when ``exact``."""
    return Fetched(
        columns=[str(n) for n in table.column_names],
        row_count=seen,
        row_count_exact=exact,
        truncated=seen > len(frame),
        size_capped=size_capped,
        head=_head(table, frame),
        frame=frame,
    )


_HEAD_ROWS = 50


def _head(table: Any, frame: pd.DataFrame) -> list[tuple[Any, ...]]:
    """The first rows as the DBAPI path returns them (what the model's preview and the card
    are written from): the DataFrame's values (``NULL`` as ``None``), except that a
    ``numeric`` or ``decimal`` column, a float in the DataFrame, keeps the server's digits and
    scale as a ``Decimal``."""
    import pyarrow as pa

    first = frame.head(_HEAD_ROWS)
    if not first.shape[1]:
        return [() for _ in range(len(first))]
    values = first.astype(object).where(first.notna(), None)
    columns = [values.iloc[:, i].tolist() for i in range(values.shape[1])]
    for i, column in enumerate(table.columns[: len(columns)]):
        if pa.types.is_decimal(column.type):
            columns[i] = column.slice(0, len(first)).to_pylist()
        elif is_pg_numeric(column.type):
            texts = pa.chunked_array(
                [c.storage for c in column.chunks], type=column.type.storage_type
            )
            columns[i] = [
                None if t is None else Decimal(t) for t in texts.slice(0, len(first)).to_pylist()
            ]
    return list(zip(*columns, strict=True))


def duckdb_arrow_read(conn: Any, sql: str, settings: RunSettings) -> Fetched | None:
    """A DuckDB read as Arrow on the backend's connection (inside its read-only transaction);
    ``None`` when it must be fetched as rows instead."""
    return read_fetched(DuckdbReader(conn), sql, settings, None, None)


class AdbcPostgres:
    """ADBC connections to one PostgreSQL database, opened on first use (see the module
    docstring for the walls each one gets); an :class:`~pi_notebook.readers.protocol.ArrowReader`.
    Thread-safe; connections are reused.

    Args:
        url: the SQLAlchemy URL (its driver name is dropped for libpq).
        connect_timeout_s: libpq's ``connect_timeout``.
    """

    def __init__(self, url: URL, connect_timeout_s: float) -> None:
        query = dict(url.query)
        query.setdefault("connect_timeout", str(max(2, int(connect_timeout_s + 0.999))))
        self._uri = url.set(drivername="postgresql", query=query).render_as_string(
            hide_password=False
        )
        self._lock = threading.Lock()
        self._idle: list[Any] = []

    @staticmethod
    def accepts(sql: str) -> bool:
        """Whether COPY can wrap ``sql`` (a SELECT, WITH, VALUES or TABLE text)."""
        return CURSOR_TEXT.match(sql) is not None

    def read(
        self,
        sql: str,
        settings: RunSettings,
        canceller: Canceller,
        progress: Callable[[int], None] | None,
    ) -> Fetched | None:
        """Run the read ``sql`` through ADBC; ``None`` when it must take the DBAPI path.

        Raises:
            RuntimeError: the transaction is not read-only (never runs the read).
            Exception: the driver's error (connect failures, cancels, SQL errors).
        """
        return read_fetched(self, sql, settings, canceller, progress)

    def read_arrow(
        self, query: Query, limits: ReadLimits, cancel: CancelHooks | None = None
    ) -> ArrowRead | None:
        """The rows of ``query`` (no parameters) inside the walls, as role ``query.role``
        under the statement timeout ``limits.timeout_s``; ``None`` when a column's type needs
        the DBAPI path.

        Raises:
            RuntimeError: the transaction is not read-only (never runs the read).
            Exception: the driver's error (connect failures, cancels, SQL errors).
        """
        conn = self._checkout()
        healthy = False
        sql = query.sql
        try:
            cur = conn.cursor()
            try:
                role = query.role
                if role is not None:  # on every Arrow read: a large read, one round trip more
                    check_role(cur, None, role, param="$1")
                    cur.execute(set_role_sql(role))  # the schema is read as the person too
                schema = cur.adbc_execute_schema(sql + _END)
                conn.rollback()
                if to_frame(schema.empty_table()) is None:
                    healthy = True
                    return None
                cur.execute("SET TRANSACTION READ ONLY")
                if limits.timeout_s is not None:
                    cur.execute(f"SET LOCAL statement_timeout = {int(limits.timeout_s * 1000)}")
                if role is not None:
                    cur.execute(set_role_sql(role))
                cur.execute(
                    "SELECT current_setting('transaction_read_only'), current_user, "
                    "current_setting('TimeZone')"
                )
                (read_only, user, zone), *_ = cur.fetchall()
                if read_only != "on" or (role is not None and user != role):
                    raise RuntimeError(
                        "the ADBC transaction is not read-only or not under the person's "
                        "role; the read was not run"
                    )
                read = self._stream(cur, sql, limits, cancel)
                conn.rollback()
                healthy = True
                zoned = in_session_zone(read.table, zone)  # as psycopg gives them
                return None if zoned is None else replace(read, table=zoned)
            finally:
                cur.close()
        finally:
            self._checkin(conn, healthy)

    def _stream(
        self, cur: Any, sql: str, limits: ReadLimits, cancel: CancelHooks | None
    ) -> ArrowRead:
        import pyarrow as pa

        if cancel is not None:
            cancel.started(cur.adbc_cancel)
        try:
            cur.execute(sql + _END)
            reader = cur.fetch_record_batch()
            # Stopping cancels the rest of the COPY.
            taken = take_batches(reader, limits, stop=cur.adbc_cancel)
            schema = reader.schema
            try:
                reader.close()
            except Exception:  # the cancel ends the COPY with an error: the read is over
                pass
        finally:
            if cancel is not None:
                cancel.stopped()
        table = pa.Table.from_batches(taken.batches, schema=schema)  # at most ``row_cap`` rows
        return ArrowRead(table, taken.seen, taken.exact, taken.sized)

    def _checkout(self) -> Any:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        import adbc_driver_postgresql.dbapi as adbc_pg

        try:
            conn = adbc_pg.connect(self._uri)
        except Exception as exc:
            raise ConnectFailed(exc) from exc
        try:
            cur = conn.cursor()
            cur.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            cur.close()
            conn.commit()
        except BaseException:
            conn.close()
            raise
        return conn

    @staticmethod
    def _reset(conn: Any) -> bool:
        """``DISCARD ALL`` after the read (see :mod:`.reset`), outside a transaction block,
        and the session's read-only default again; ``False`` when it failed."""
        options = conn.adbc_connection
        try:
            options.set_options(**{_AUTOCOMMIT: "true"})
            cur = conn.cursor()
            try:
                cur.execute("DISCARD ALL")
                cur.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            finally:
                cur.close()
            options.set_options(**{_AUTOCOMMIT: "false"})
        except Exception:
            return False
        return True

    def _checkin(self, conn: Any, healthy: bool) -> None:
        if healthy and self._reset(conn):
            with self._lock:
                self._idle.append(conn)
                return
        try:
            conn.close()
        except Exception:  # a broken connection: nothing more to do with it
            pass

    def close(self) -> None:
        """Close the idle connections."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            self._checkin(conn, False)
