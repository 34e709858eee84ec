"""DuckDB's rows with infinite dates and timestamps named, not turned into 9999-12-31.

DuckDB's Python client turns an infinite date or timestamp into the first or last day Python
holds. This module holds the readers that find such days and read them again as the words
``"infinity"``/``"-infinity"``: :func:`duckdb_rows` (the whole result at once),
:func:`duckdb_chunks` (streamed, raising :class:`DuckdbEdgeDays` at the first such day) and
:func:`duckdb_fixed_chunks` (streamed again with the flags that exception calls for).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "DuckdbEdgeDays",
    "duckdb_chunks",
    "duckdb_fixed_chunks",
    "duckdb_rows",
]

_DUCKDB_TEMPORAL = frozenset(
    {
        "DATE",
        "TIMESTAMP",
        "TIMESTAMP WITH TIME ZONE",
        "TIMESTAMP_S",
        "TIMESTAMP_MS",
        "TIMESTAMP_NS",
        "TIMESTAMPTZ",
    }
)
_DUCKDB_DAYLESS = frozenset(
    {
        "BOOLEAN",
        "TINYINT",
        "SMALLINT",
        "INTEGER",
        "BIGINT",
        "HUGEINT",
        "UTINYINT",
        "USMALLINT",
        "UINTEGER",
        "UBIGINT",
        "UHUGEINT",
        "FLOAT",
        "DOUBLE",
        "VARCHAR",
        "BLOB",
        "UUID",
        "TIME",
        "TIME WITH TIME ZONE",
        "INTERVAL",
        "BIT",
        "JSON",
        "BIGNUM",
        "VARINT",
    }
)
"""Column types whose values are never a date (checking them cost more than the fetch)."""


class DuckdbEdgeDays(Exception):
    """Raised by :func:`duckdb_chunks`: the rows hold a date or timestamp on the first or last
    day Python holds, maybe an infinite one. The rows yielded so far must be dropped and read
    again with :func:`duckdb_fixed_chunks`, given this exception.

    Attributes:
        flat: the date and timestamp columns holding such a day (by position).
        nested: the nested columns (list, struct) holding one.
    """

    def __init__(self, flat: list[int], nested: list[int]) -> None:
        super().__init__(f"days on the edge of Python's dates in columns {flat + nested}")
        self.flat, self.nested = flat, nested


def duckdb_rows(relation: Any) -> list[tuple[Any, ...]]:
    """The rows of a DuckDB relation, with ``infinity``/``-infinity`` dates and timestamps as
    those words.

    DuckDB's Python client turns an infinite date into ``date.max`` (9999-12-31) or
    ``date.min`` (0001-01-01), and timestamps alike: a silently wrong value, the same as a
    real one. Rows are fetched as usual; only when a date or timestamp on the first or last
    day Python holds appears (rare) is the relation read again, once, with ``isinf()`` of
    each such column alongside (one execution, so rows and flags belong together), and an
    infinite value becomes the text ``"infinity"`` or ``"-infinity"``; a nested column
    (list, struct) holding such a day comes back as DuckDB's own text for it.

    This reads the whole result at once; a read under the row cap streams it instead with
    :func:`duckdb_chunks`.
    """
    rows = relation.fetchall()
    if not rows:
        return rows
    flat, nested = _edge_columns(_duckdb_types(relation), rows)
    if not flat and not nested:
        return rows
    flagged = relation.project(_flag_columns(flat, nested)).fetchall()
    return _named_infinities(flagged, len(relation.columns), flat, nested)


def duckdb_chunks(conn: Any, relation: Any, size: int) -> Iterator[list[tuple[Any, ...]]]:
    """The rows of the DuckDB relation ``relation`` on ``conn``, ``size`` at a time, from one
    streamed run: the reader holds a chunk, not the result, and stopping early stops the
    query. (DuckDB computes a streamed result ahead of what is fetched, in vectors of 2,048
    rows: a vector or two on DuckDB 2.0, more on 1.x, whose threads read further ahead.)

    Each chunk is checked for days on the edge as :func:`duckdb_rows` checks its rows. At the
    first one, the rest of the run is read (and dropped) to find every column holding one,
    and :class:`DuckdbEdgeDays` is raised (see there).
    """
    types = _duckdb_types(relation)
    fetch = _duckdb_stream(conn, relation)
    while chunk := fetch(size):
        flat, nested = _edge_columns(types, chunk)
        if flat or nested:
            while rest := fetch(size):
                more_flat, more_nested = _edge_columns(types, rest)
                flat, nested = sorted({*flat, *more_flat}), sorted({*nested, *more_nested})
            raise DuckdbEdgeDays(flat, nested)
        yield chunk


def duckdb_fixed_chunks(
    conn: Any, relation: Any, edge: DuckdbEdgeDays, size: int
) -> Iterator[list[tuple[Any, ...]]]:
    """The rows of ``relation`` as :func:`duckdb_rows` gives them, infinite values named,
    ``size`` at a time from one streamed run with the flags ``edge`` calls for."""
    width = len(relation.columns)
    flagged = relation.project(_flag_columns(edge.flat, edge.nested))
    fetch = _duckdb_stream(conn, flagged)
    while chunk := fetch(size):
        yield _named_infinities(chunk, width, edge.flat, edge.nested)


def _duckdb_stream(conn: Any, relation: Any) -> Callable[[int], list[tuple[Any, ...]]]:
    """A function that fetches the next rows of one streamed run of ``relation``.

    DuckDB 1.x relations stream their own ``fetchmany``; from 2.0 a relation keeps no result
    between calls and has no ``fetchmany`` (its ``fetchall`` materializes the whole result
    first), so its SQL text, the statement the relation itself would run, is executed on
    ``conn``, whose result streams. (The class is asked: a 2.x relation's attributes name
    its columns.)
    """
    if hasattr(type(relation), "fetchmany"):
        return relation.fetchmany
    conn.execute(relation.sql_query())
    return conn.fetchmany


def _duckdb_types(relation: Any) -> list[str]:
    return [str(t) for t in relation.types]


def _edge_columns(types: list[str], rows: list[tuple[Any, ...]]) -> tuple[list[int], list[int]]:
    """The date or timestamp columns (flat) and the other columns (nested: lists, structs)
    whose values in ``rows`` hold a day on the edge; never-a-date types are not looked at."""
    flat: list[int] = []
    nested: list[int] = []
    for index, kind in enumerate(types):
        if kind in _DUCKDB_DAYLESS or kind.startswith(("DECIMAL(", "ENUM(")):
            continue
        values = [row[index] for row in rows]
        if kind in _DUCKDB_TEMPORAL:
            if any(_edge_day(value) for value in values):
                flat.append(index)
        elif any(_holds_edge_day(value) for value in values):
            nested.append(index)
    return flat, nested


def _flag_columns(flat: list[int], nested: list[int]) -> str:
    """The projection that reads every column with ``isinf()`` of each ``flat`` column and
    DuckDB's text of each ``nested`` one alongside."""
    extra = [f"isinf(#{i + 1})" for i in flat] + [f"CAST(#{i + 1} AS VARCHAR)" for i in nested]
    return ", ".join(["*", *extra])


def _named_infinities(
    flagged: list[tuple[Any, ...]], width: int, flat: list[int], nested: list[int]
) -> list[tuple[Any, ...]]:
    """Rows read with :func:`_flag_columns`, back to ``width`` columns: an infinite value as
    ``"infinity"``/``"-infinity"``, a nested column as its text."""
    fixed: list[tuple[Any, ...]] = []
    for row in flagged:
        values = list(row[:width])
        for k, index in enumerate(flat):
            if row[width + k]:
                values[index] = "infinity" if _edge_day(values[index]) == 1 else "-infinity"
        for k, index in enumerate(nested):
            values[index] = row[width + len(flat) + k]
        fixed.append(tuple(values))
    return fixed


def _edge_day(value: Any) -> int:
    """1 for a date or timestamp on 9999-12-31, -1 on 0001-01-01, else 0."""
    if not isinstance(value, dt.date):
        return 0
    if (value.year, value.month, value.day) == (9999, 12, 31):
        return 1
    return -1 if (value.year, value.month, value.day) == (1, 1, 1) else 0


def _holds_edge_day(value: Any) -> bool:
    if isinstance(value, list | tuple):
        return any(_holds_edge_day(item) for item in value)  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, dict):
        return any(_holds_edge_day(item) for item in value.values())  # pyright: ignore[reportUnknownVariableType]
    return _edge_day(value) != 0
