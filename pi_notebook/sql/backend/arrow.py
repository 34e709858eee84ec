"""The Arrow path for large reads: PostgreSQL through ADBC, DuckDB natively, SQLite
through ADBC in a child process (:mod:`.arrow_sqlite`).

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
  read as a stream of record batches (stopped at the size bound); out-of-range dates and
  types outside the safe set fall back to row fetching too.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pandas as pd
from sqlalchemy.engine import URL

from pi_notebook.sql.backend.cancel import Canceller
from pi_notebook.sql.backend.errors import ConnectFailed
from pi_notebook.sql.backend.fetched import (
    CURSOR_TEXT,
    Fetched,
    ProgressSteps,
    RunSettings,
    read_limit,
)
from pi_notebook.sql.backend.frames import column_labels
from pi_notebook.sql.backend.roles import check_role, set_role_sql
from pi_notebook.sql.backend.sizes import arrow_rows_within

__all__ = [
    "ARROW_MIN_CAP",
    "AdbcPostgres",
    "Taken",
    "arrow_available",
    "duckdb_arrow_read",
    "fetched_from_table",
    "take_batches",
    "to_frame",
]

ARROW_MIN_CAP = 100_000
"""Row caps from this size on read large results through Arrow."""

_AUTOCOMMIT = "adbc.connection.autocommit"
_END = "\n"  # ends a trailing "--" comment before the driver's ") TO STDOUT ..." suffix

_HAVE_PYARROW = importlib.util.find_spec("pyarrow") is not None
_HAVE_ADBC_PG = _HAVE_PYARROW and importlib.util.find_spec("adbc_driver_postgresql") is not None
_HAVE_ADBC_SQLITE = _HAVE_PYARROW and importlib.util.find_spec("adbc_driver_sqlite") is not None
_MIN_DAY, _MAX_DAY = -719_162, 2_932_896  # 0001-01-01 and 9999-12-31 as days since 1970
_MIN_US, _MAX_US = -62_135_596_800_000_000, 253_402_300_799_999_999


def arrow_available(backend: str) -> bool:
    """Whether reads on ``backend`` can take the Arrow path here."""
    if backend == "postgresql":
        return _HAVE_ADBC_PG
    if backend == "sqlite":
        return _HAVE_ADBC_SQLITE
    return backend == "duckdb" and _HAVE_PYARROW


def to_frame(table: Any) -> pd.DataFrame | None:
    """The DataFrame the DBAPI path would give for ``table``, or ``None`` when a column's
    type or values need the DBAPI path (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns: list[Any] = []
    for column in table.columns:
        converted = _convert(column, pa, pc)
        if converted is None:
            return None
        columns.append(converted)
    names = [str(i) for i in range(len(columns))]  # positional: the real names may repeat
    frame = pa.table(columns, names=names).to_pandas() if columns else pd.DataFrame()
    frame.columns = column_labels(tuple(str(n) for n in table.column_names))
    return frame


def _convert(column: Any, pa: Any, pc: Any) -> Any:
    t = column.type
    if isinstance(t, pa.ExtensionType):
        if _is_pg_numeric(t, pa):
            storage = pa.chunked_array([c.storage for c in column.chunks], type=t.storage_type)
            try:
                return pc.cast(storage, pa.float64())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
        return None
    types = pa.types
    if types.is_decimal(t):
        return pc.cast(column, pa.float64())
    if types.is_date32(t):
        low, high = _bounds(column.cast(pa.int32()), pc)
        return column if low is None or (_MIN_DAY <= low and high <= _MAX_DAY) else None
    if types.is_timestamp(t):
        as_us = column.cast(pa.timestamp("us", tz=t.tz), safe=False).cast(pa.int64())
        low, high = _bounds(as_us, pc)
        return column if low is None or (_MIN_US <= low and high <= _MAX_US) else None
    if types.is_time64(t):  # PostgreSQL's 24:00:00 is no Python time: DBAPI path (text)
        day = 86_400 * (1_000_000 if t.unit == "us" else 1_000_000_000)
        _, high = _bounds(column.cast(pa.int64()), pc)
        return column if high is None or high < day else None
    safe = (
        types.is_integer(t)
        or types.is_floating(t)
        or types.is_boolean(t)
        or types.is_string(t)
        or types.is_large_string(t)
        or types.is_binary(t)
        or types.is_null(t)
    )
    return column if safe else None


def _bounds(column: Any, pc: Any) -> tuple[Any, Any]:
    found = pc.min_max(column)
    return found["min"].as_py(), found["max"].as_py()


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
        elif _is_pg_numeric(column.type, pa):
            texts = pa.chunked_array(
                [c.storage for c in column.chunks], type=column.type.storage_type
            )
            columns[i] = [
                None if t is None else Decimal(t) for t in texts.slice(0, len(first)).to_pylist()
            ]
    return list(zip(*columns, strict=True))


def _is_pg_numeric(arrow_type: Any, pa: Any) -> bool:
    return (
        isinstance(arrow_type, pa.ExtensionType)
        and getattr(arrow_type, "extension_name", "") == "arrow.opaque"
        and getattr(arrow_type, "type_name", "") == "numeric"
    )


@dataclass
class Taken:
    """What :func:`take_batches` kept of a stream of record batches."""

    batches: list[Any]
    seen: int  # rows read (all of them when ``exact``)
    exact: bool
    sized: bool  # the rows kept stopped at the size bound


def take_batches(
    reader: Any,
    settings: RunSettings,
    progress: Callable[[int], None] | None,
    *,
    stop: Callable[[], None] = lambda: None,
) -> Taken:
    """Read ``reader``'s record batches, keeping the first ``row_cap`` rows within
    ``max_result_bytes``, and stop (calling ``stop``, which ends the producer) at the read's
    limit, at the size bound, or at ``count_limit`` when counting: the process holds the rows
    kept plus one batch."""
    limit = read_limit(settings)
    batches: list[Any] = []  # the first ``row_cap`` rows: counting keeps no more
    seen, kept, steps = 0, 0, ProgressSteps(progress, settings.progress_every)
    cap, budget, sized = settings.row_cap, settings.max_result_bytes, False
    for batch in reader:
        if kept < cap:
            taken = batch.slice(0, cap - kept)
            if budget is not None:  # the bytes kept so far stay within the bound
                rows = arrow_rows_within(taken, budget)
                if rows < taken.num_rows:
                    taken, sized, cap = taken.slice(0, rows), True, kept + rows
                budget -= taken.nbytes
            batches.append(taken)
            kept += taken.num_rows
        seen += batch.num_rows
        steps.update(seen)
        if (limit is not None and (seen >= limit or sized)) or seen >= settings.count_limit:
            stop()
            break
    exact = (seen < limit and not sized) if limit is not None else seen < settings.count_limit
    return Taken(batches, min(seen, limit) if limit is not None else seen, exact, sized)


def duckdb_arrow_read(conn: Any, sql: str, settings: RunSettings) -> Fetched | None:
    """A DuckDB read as Arrow on the backend's connection (inside its read-only transaction);
    ``None`` when it must be fetched as rows instead."""
    limit = read_limit(settings)
    relation = conn.sql(sql)
    if relation is None or limit is None:
        return None
    import pyarrow as pa

    try:
        reader = _duckdb_reader(relation.limit(limit))
        taken = take_batches(reader, settings, None, stop=reader.close)
    except Exception:
        # A value Arrow cannot hold: fetch it as rows. But a statement that failed in DuckDB
        # itself has aborted the transaction, where the row path could only report "the
        # transaction is aborted": that error is the statement's own, so it stands.
        if _transaction_aborted(conn):
            raise
        return None
    table = pa.Table.from_batches(taken.batches, schema=reader.schema)
    frame = to_frame(table)
    if frame is None:
        return None
    return fetched_from_table(table, frame, taken.seen, taken.exact, size_capped=taken.sized)


def _duckdb_reader(relation: Any) -> Any:
    """The relation's result as a stream of Arrow record batches (``to_arrow_reader`` from
    DuckDB 2.0, ``fetch_record_batch`` before): stopping early stops the query."""
    if hasattr(relation, "to_arrow_reader"):
        return relation.to_arrow_reader(_DUCKDB_BATCH_ROWS)
    return relation.fetch_record_batch(_DUCKDB_BATCH_ROWS)


_DUCKDB_BATCH_ROWS = 65_536


def _transaction_aborted(conn: Any) -> bool:
    try:
        conn.execute("SELECT 1").fetchall()
    except Exception:
        return True
    return False


class AdbcPostgres:
    """ADBC connections to one PostgreSQL database, opened on first use (see the module
    docstring for the walls each one gets). Thread-safe; connections are reused.

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
        conn = self._checkout()
        healthy = False
        try:
            cur = conn.cursor()
            try:
                role = settings.role
                if role is not None:  # on every Arrow read: a large read, one round trip more
                    check_role(cur, None, role, param="$1")
                    cur.execute(set_role_sql(role))  # the schema is read as the person too
                schema = cur.adbc_execute_schema(sql + _END)
                conn.rollback()
                if to_frame(schema.empty_table()) is None:
                    healthy = True
                    return None
                cur.execute("SET TRANSACTION READ ONLY")
                cur.execute(
                    f"SET LOCAL statement_timeout = {int(settings.statement_timeout_s * 1000)}"
                )
                if role is not None:
                    cur.execute(set_role_sql(role))
                cur.execute("SELECT current_setting('transaction_read_only'), current_user")
                (read_only, user), *_ = cur.fetchall()
                if read_only != "on" or (role is not None and user != role):
                    raise RuntimeError(
                        "the ADBC transaction is not read-only or not under the person's "
                        "role; the read was not run"
                    )
                fetched = self._stream(cur, sql, settings, canceller, progress)
                conn.rollback()
                healthy = True
                return fetched
            finally:
                cur.close()
        finally:
            self._checkin(conn, healthy)

    def _stream(
        self,
        cur: Any,
        sql: str,
        settings: RunSettings,
        canceller: Canceller,
        progress: Callable[[int], None] | None,
    ) -> Fetched | None:
        import pyarrow as pa

        canceller.started(cur.adbc_cancel)
        try:
            cur.execute(sql + _END)
            reader = cur.fetch_record_batch()
            # Stopping cancels the rest of the COPY.
            taken = take_batches(reader, settings, progress, stop=cur.adbc_cancel)
            schema = reader.schema
            try:
                reader.close()
            except Exception:  # the cancel ends the COPY with an error: the read is over
                pass
        finally:
            canceller.stopped()
        table = pa.Table.from_batches(taken.batches, schema=schema)  # at most ``row_cap`` rows
        frame = to_frame(table)
        if frame is None:  # a value outside what Python holds (infinity, BC): DBAPI path
            return None
        return fetched_from_table(table, frame, taken.seen, taken.exact, size_capped=taken.sized)

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
