"""DuckDB read as Arrow on an open connection, natively.

A relation with a ``LIMIT`` (DuckDB's own relational API, not text pasted around the
statement) is read as a stream of record batches, stopped at the byte bound; stopping early
stops the query. It runs on the caller's connection, inside whatever transaction the caller
opened (the database backend's ``BEGIN TRANSACTION READ ONLY``).
"""

from __future__ import annotations

from typing import Any

from .batches import take_batches
from .protocol import QUERY_TEXT, ArrowRead, CancelHooks, Query, ReadLimits

__all__ = ["DuckdbReader"]

_BATCH_ROWS = 65_536


class DuckdbReader:
    """Reads on one DuckDB connection; an :class:`~.protocol.ArrowReader`.

    Args:
        conn: the ``duckdb`` connection (the reader neither opens nor closes it).
    """

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    @staticmethod
    def accepts(sql: str) -> bool:
        """Whether ``sql`` is a query text."""
        return QUERY_TEXT.match(sql) is not None

    def read_arrow(
        self, query: Query, limits: ReadLimits, cancel: CancelHooks | None = None
    ) -> ArrowRead | None:
        """The rows of ``query`` under ``LIMIT row_cap + 1`` (without a cap, all of them);
        ``None`` for an exact count, a statement that is no relation, or a value Arrow cannot
        hold (fetch them as rows).

        Raises:
            Exception: DuckDB's own error for the statement (it aborted the transaction, so
                the row path could only report that).
        """
        if limits.count_rows:
            return None
        params = list(query.params)
        relation = self._conn.sql(query.sql, params=params) if params else self._conn.sql(query.sql)
        if relation is None:
            return None
        limit = limits.read_limit
        import pyarrow as pa

        try:
            reader = _record_batches(relation if limit is None else relation.limit(limit))
            taken = take_batches(reader, limits, stop=reader.close)
        except Exception:
            # A value Arrow cannot hold: fetch it as rows. But a statement that failed in DuckDB
            # itself has aborted the transaction, where the row path could only report "the
            # transaction is aborted": that error is the statement's own, so it stands.
            if _transaction_aborted(self._conn):
                raise
            return None
        table = pa.Table.from_batches(taken.batches, schema=reader.schema)
        return ArrowRead(table, taken.seen, taken.exact, taken.sized)

    def close(self) -> None:
        """Nothing to release: the connection is the caller's."""


def _record_batches(relation: Any) -> Any:
    """The relation's result as a stream of Arrow record batches (``to_arrow_reader`` from
    DuckDB 2.0, ``fetch_record_batch`` before): stopping early stops the query."""
    if hasattr(relation, "to_arrow_reader"):
        return relation.to_arrow_reader(_BATCH_ROWS)
    return relation.fetch_record_batch(_BATCH_ROWS)


def _transaction_aborted(conn: Any) -> bool:
    try:
        conn.execute("SELECT 1").fetchall()
    except Exception:
        return True
    return False
