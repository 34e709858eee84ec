"""Building the result DataFrame from fetched rows, chunk by chunk, in the worker thread.

Small results go through ``pandas.DataFrame.from_records(coerce_float=True)``, as before,
except that a small result whose columns all hold numbers of one kind (integers, booleans,
or floats with NULLs: counts, sums, ``SELECT 1``) is handed to pandas as one 2-D NumPy array
of the dtype ``from_records`` would infer (:func:`_numeric_frame`, built by
:func:`pi_notebook.readers.pandas_internals.frame_2d`; ``from_records`` alone costs about as
much as a small query's whole fixed overhead budget).
Past :data:`ARROW_AFTER` rows, and when pyarrow is installed, every chunk of rows becomes one
Arrow array per column as soon as it is fetched and the Python tuples are dropped, so a large
result is held once, compactly, instead of as millions of Python objects; the DataFrame is
then one ``to_pandas`` away. The dtypes are those ``from_records`` gives (decimals as floats,
integers with NULLs as floats, dates and times as objects): a column whose values Arrow would
change (mixed types, nested values, integers too big for 64 bits) keeps its Python values.
Without pyarrow every result takes the small path.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pi_notebook.readers.frames import column_labels
from pi_notebook.readers.pandas_internals import frame_2d

__all__ = [
    "ARROW_AFTER",
    "HAVE_PYARROW",
    "DuckdbEdgeDays",
    "FrameBuilder",
    "column_labels",
    "duckdb_chunks",
    "duckdb_fixed_chunks",
    "duckdb_rows",
]

ARROW_AFTER = 2_048
"""Rows kept as Python tuples before a result switches to Arrow chunks."""

HAVE_PYARROW = importlib.util.find_spec("pyarrow") is not None

_Piece = Any  # a pyarrow Array, or a list of Python values for a column Arrow cannot hold


class FrameBuilder:
    """Collects the kept rows of one result and builds its DataFrame.

    Args:
        columns: the result's column names (duplicates allowed).
        arrow: use Arrow chunks for large results (default: when pyarrow is installed).
    """

    def __init__(self, columns: Sequence[str], *, arrow: bool | None = None) -> None:
        self.columns = list(columns)
        self._arrow = HAVE_PYARROW if arrow is None else (arrow and HAVE_PYARROW)
        self._rows: list[tuple[Any, ...]] = []
        self._pieces: list[list[_Piece]] | None = None
        self.head: list[tuple[Any, ...]] = []
        self.count = 0

    def add(self, chunk: Sequence[tuple[Any, ...]]) -> None:
        """Keep ``chunk`` (rows in order)."""
        if not chunk:
            return
        if len(self.head) < _HEAD_ROWS:
            self.head.extend(chunk[: _HEAD_ROWS - len(self.head)])
        self.count += len(chunk)
        if self._pieces is None:
            self._rows.extend(chunk)
            if self._arrow and len(self._rows) > ARROW_AFTER:
                self._pieces = [[] for _ in self.columns]
                rows, self._rows = self._rows, []
                self._to_arrow(rows)
            return
        self._to_arrow(chunk)

    @property
    def rows_only(self) -> bool:
        """Whether every kept row is still a Python tuple (none went into Arrow chunks)."""
        return self._pieces is None

    def build(self) -> pd.DataFrame:
        """The DataFrame of every kept row (call once).

        The column labels are a plain object ``Index``: building pandas' Arrow-backed string
        index costs more than the rest of a small result's DataFrame.
        """
        labels = column_labels(tuple(self.columns))
        if self._pieces is None:
            rows, self._rows = self._rows, []
            if not rows:
                return pd.DataFrame(columns=labels)
            if len(rows) <= NUMERIC_FAST_ROWS:
                fast = _numeric_frame(rows, labels)
                if fast is not None:
                    return fast
            frame = pd.DataFrame.from_records(rows, coerce_float=True)
        else:
            pieces, self._pieces = self._pieces, None
            frame = _arrow_frame([_column(p) for p in pieces])
        frame.columns = labels
        return frame

    def _to_arrow(self, rows: Sequence[tuple[Any, ...]]) -> None:
        import pyarrow as pa

        assert self._pieces is not None
        for pieces, values in zip(self._pieces, zip(*rows, strict=True), strict=True):
            if pieces and isinstance(pieces[-1], list):  # this column already fell back
                pieces[-1].extend(values)
                continue
            try:
                array = pa.array(values)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
                array = None
            if array is None or not _faithful(array.type):
                pieces[:] = [_python(pieces, values)]
            else:
                pieces.append(array)
                if len(pieces) >= _COMPACT_AT:
                    _compact(pieces)


_HEAD_ROWS = 50

NUMERIC_FAST_ROWS = 256
"""Most rows of a result :func:`_numeric_frame` looks at (it checks every value's type)."""

_NONE = type(None)
_FLOAT_TYPES = frozenset({int, float, _NONE})
_EXACT_INT = 2**53  # an integer a float column holds exactly
_DTYPES: dict[type, Any] = {
    int: np.dtype(np.int64),
    float: np.dtype(np.float64),
    bool: np.dtype(np.bool_),
}


def _numeric_frame(rows: Sequence[tuple[Any, ...]], labels: pd.Index) -> pd.DataFrame | None:
    """The DataFrame ``from_records(rows, coerce_float=True)`` gives, with ``labels``, built
    from one 2-D NumPy array; ``None`` unless every column is of the same one of these kinds
    (what ``from_records`` makes of it in brackets):

    * integers only, each fitting 64 bits (``int64``);
    * booleans only (``bool``);
    * floats, integers within 2**53 and NULLs, with a float or a NULL and at least one
      number (``float64``, NULL as NaN).

    Anything else (columns of different kinds, text, dates, decimals, a column of NULLs only,
    booleans with NULLs, huge integers) returns ``None`` and takes ``from_records`` itself.
    """
    if len(rows) == 1:  # one row (a count, a sum, ``SELECT 1``): one value per column
        types = set(map(type, rows[0]))
        kind = types.pop() if len(types) == 1 else None
        values = _array(rows, kind) if kind is not None and kind in _DTYPES else None
        return None if values is None else frame_2d(values, labels)
    kinds: list[type] = []
    for values in zip(*rows, strict=True):
        types = set(map(type, values))
        if len(types) == 1 and (int in types or bool in types or float in types):
            kinds.append(types.pop())
        elif types <= _FLOAT_TYPES and len(types) > 1:  # numbers with NULLs, or mixed
            if int in types and any(
                type(v) is int and not -_EXACT_INT <= v <= _EXACT_INT for v in values
            ):
                return None
            kinds.append(float)
        else:
            return None
    if not kinds or any(kind is not kinds[0] for kind in kinds):
        return None  # several dtypes: pandas' own assembly costs as much as from_records
    values = _array(rows, kinds[0])
    return None if values is None else frame_2d(values, labels)


def _array(rows: Sequence[tuple[Any, ...]], kind: type) -> np.ndarray[Any, Any] | None:
    """``rows`` as one array of ``kind``'s dtype; ``None`` if a value does not fit it."""
    try:
        return np.array(rows, dtype=_DTYPES[kind])
    except OverflowError:  # an integer beyond 64 bits: from_records keeps it as an object
        return None


_COMPACT_AT = 64  # Arrow pieces per column before they are joined into one


def _compact(pieces: list[_Piece]) -> None:
    """Join a column's trailing pieces of one type into one array, so a large result leaves a
    few hundred long-lived objects instead of thousands (each would count towards the
    collector's full collections, which stall the event loop)."""
    import pyarrow as pa

    last = pieces[-1].type
    start = len(pieces)
    while start > 0 and not isinstance(pieces[start - 1], list) and pieces[start - 1].type == last:
        start -= 1
    if len(pieces) - start > 1:
        pieces[start:] = [pa.concat_arrays(pieces[start:])]


def _faithful(arrow_type: Any) -> bool:
    """Arrow types whose pandas form is what ``from_records`` gives for the same values."""
    import pyarrow as pa

    t = pa.types
    return bool(
        t.is_integer(arrow_type)
        or t.is_floating(arrow_type)
        or t.is_boolean(arrow_type)
        or t.is_string(arrow_type)
        or t.is_large_string(arrow_type)
        or t.is_binary(arrow_type)
        or t.is_timestamp(arrow_type)
        or t.is_date32(arrow_type)
        or t.is_time64(arrow_type)
        or t.is_duration(arrow_type)
        or t.is_decimal(arrow_type)
        or t.is_null(arrow_type)
    )


def _python(pieces: list[_Piece], values: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for piece in pieces:
        out.extend(piece if isinstance(piece, list) else piece.to_pylist())
    out.extend(values)
    return out


def _column(pieces: list[_Piece]) -> Any:
    import pyarrow as pa

    if len(pieces) == 1 and isinstance(pieces[0], list):
        return _records_column(pieces[0])
    kinds = {p.type for p in pieces if not pa.types.is_null(p.type)}
    if not kinds:
        target = pa.null()
    elif len(kinds) == 1:
        target = next(iter(kinds))
    elif all(pa.types.is_integer(k) or pa.types.is_floating(k) for k in kinds):
        target = pa.float64()
    else:  # e.g. text in one chunk and numbers in another (SQLite's dynamic typing)
        return _records_column(_python(pieces, ()))
    chunked = pa.chunked_array(
        [p if p.type == target else p.cast(target) for p in pieces], type=target
    )
    if pa.types.is_decimal(target):
        chunked = chunked.cast(pa.float64())  # as from_records(coerce_float=True)
    return chunked


def _arrow_frame(columns: list[Any]) -> pd.DataFrame:
    """One DataFrame from Arrow columns (converted together: Arrow uses its threads) and
    columns already in pandas form (the fallbacks), in order."""
    import pyarrow as pa

    arrow = [(i, c) for i, c in enumerate(columns) if isinstance(c, pa.ChunkedArray)]
    converted: dict[int, Any] = {}
    if arrow:
        table = pa.table([c for _, c in arrow], names=[str(i) for i, _ in arrow])
        as_pandas = table.to_pandas()
        converted = {i: as_pandas.iloc[:, k] for k, (i, _) in enumerate(arrow)}
    return pd.DataFrame({i: converted.get(i, c) for i, c in enumerate(columns)}, copy=False)


def _records_column(values: list[Any]) -> Any:
    """One column exactly as ``from_records(coerce_float=True)`` makes it."""
    frame = pd.DataFrame.from_records([(v,) for v in values], columns=[0], coerce_float=True)
    return frame.iloc[:, 0]


# -- DuckDB: infinite dates and timestamps --------------------------------------------------

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
