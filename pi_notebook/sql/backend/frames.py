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

DuckDB's rows with infinite dates named (:func:`duckdb_rows` and its streamed readers) live
in :mod:`.duckdb_days` and are importable from here too.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from pi_notebook.readers.frames import column_labels
from pi_notebook.readers.pandas_internals import frame_2d
from pi_notebook.sql.backend.duckdb_days import (
    DuckdbEdgeDays,
    duckdb_chunks,
    duckdb_fixed_chunks,
    duckdb_rows,
)

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
