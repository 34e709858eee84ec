"""PostgreSQL read as Arrow through a plain ADBC connection, one per read.

For a package's own SELECTs over its own tables (the audit's records): no user SQL comes
here, so the connection gets none of the walls the database backend puts around a person's
read (:class:`pi_notebook.sql.backend.arrow.AdbcPostgres` does). The query's parameters are
PostgreSQL's own (``$1``, ``$2``...).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .batches import take_batches
from .protocol import QUERY_TEXT, ArrowRead, CancelHooks, Query, ReadLimits

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

__all__ = ["PostgresReader", "in_session_zone"]

_ZONE = "SELECT current_setting('TimeZone')"


def in_session_zone(table: Any, zone: str) -> Any:
    """``table`` with its ``timestamptz`` columns in the session's time zone ``zone``, as
    psycopg gives them (the driver sends them in UTC); ``None`` when Arrow does not know the
    zone (a POSIX-style one): the DB-API path reads it."""
    import pyarrow as pa

    for i, column in enumerate(table.columns):
        t = column.type
        if pa.types.is_timestamp(t) and t.tz is not None and t.tz != zone:
            try:
                zoned = column.cast(pa.timestamp(t.unit, tz=zone))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
            table = table.set_column(i, table.field(i).name, zoned)
    return table


class PostgresReader:
    """Reads of one PostgreSQL database through ADBC; an :class:`~.protocol.ArrowReader`.
    Each read opens its own connection and closes it.

    Args:
        url: the SQLAlchemy URL (its driver name is dropped for libpq).
    """

    def __init__(self, url: URL) -> None:
        self._uri = url.set(drivername="postgresql").render_as_string(hide_password=False)

    @staticmethod
    def accepts(sql: str) -> bool:
        """Whether ``sql`` is a query text."""
        return QUERY_TEXT.match(sql) is not None

    def read_arrow(
        self, query: Query, limits: ReadLimits, cancel: CancelHooks | None = None
    ) -> ArrowRead | None:
        """The rows of ``query`` (a role is not set: see the module docstring), its
        timestamps in the session's time zone; ``None`` when Arrow does not know that zone."""
        import adbc_driver_postgresql.dbapi as adbc_pg

        conn = adbc_pg.connect(self._uri)
        try:
            cursor = conn.cursor()
            try:
                if cancel is not None:
                    cancel.started(cursor.adbc_cancel)
                try:
                    cursor.execute(_ZONE)
                    (zone,), *_ = cursor.fetchall()
                    cursor.execute(query.sql, tuple(query.params) or None)
                    if limits.read_limit is None and limits.max_bytes is None:
                        table = cursor.fetch_arrow_table()
                        read = ArrowRead(table, table.num_rows, True)
                    else:
                        import pyarrow as pa

                        reader = cursor.fetch_record_batch()
                        taken = take_batches(reader, limits, stop=cursor.adbc_cancel)
                        table = pa.Table.from_batches(taken.batches, schema=reader.schema)
                        read = ArrowRead(table, taken.seen, taken.exact, taken.sized)
                finally:
                    if cancel is not None:
                        cancel.stopped()
            finally:
                cursor.close()
            zoned = in_session_zone(read.table, zone)
            return None if zoned is None else replace(read, table=zoned)
        finally:
            conn.close()

    def close(self) -> None:
        """Nothing to release: each read closes its connection."""
