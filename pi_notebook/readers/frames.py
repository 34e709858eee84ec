"""Arrow results as the DataFrame the DB-API path gives for the same rows.

:func:`to_frame` is what every reader's table goes through on its way to the user: it keeps
what Arrow and the DB-API path agree on (integers, floats, booleans, text, blobs, NULLs,
dates and timestamps within years 1-9999, times of day), widens narrower integers and floats
to 64 bits (a Python number is one) and turns decimals (PostgreSQL's ``numeric`` too) into
floats, as ``DataFrame.from_records(coerce_float=True)`` does; a column of NULLs only is one
of ``None`` objects, as there. Anything else (an extension type such as
PostgreSQL's json or uuid, a nested type, a date Python cannot hold) makes it answer ``None``:
that result takes the DB-API path.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import pandas as pd

__all__ = ["column_labels", "is_pg_numeric", "to_frame"]

_MIN_DAY, _MAX_DAY = -719_162, 2_932_896  # 0001-01-01 and 9999-12-31 as days since 1970
_MIN_US, _MAX_US = -62_135_596_800_000_000, 253_402_300_799_999_999


def to_frame(table: Any) -> pd.DataFrame | None:
    """The DataFrame the DB-API path would give for ``table``, or ``None`` when a column's
    type or values need the DB-API path (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns: list[Any] = []
    for column in table.columns:
        converted = _convert(column, pa, pc)
        if converted is None:
            return None
        if column.null_count == len(column) > 0:  # NULLs only: None objects, as from_records
            converted = pa.nulls(len(column))
        columns.append(converted)
    names = [str(i) for i in range(len(columns))]  # positional: the real names may repeat
    frame = pa.table(columns, names=names).to_pandas() if columns else pd.DataFrame()
    frame.columns = column_labels(tuple(str(n) for n in table.column_names))
    return frame


def column_labels(names: tuple[str, ...]) -> pd.Index:
    """The column ``Index`` for ``names``: an object ``Index``, a view of one built once
    (building one costs more than a small result's whole DataFrame). Each frame gets its own
    view, so setting one frame's ``columns.name`` leaves the others alone."""
    return _labels(names).view()


@lru_cache(maxsize=512)
def _labels(names: tuple[str, ...]) -> pd.Index:
    return pd.Index(list(names), dtype=object)


def is_pg_numeric(arrow_type: Any) -> bool:
    """Whether ``arrow_type`` is PostgreSQL's ``numeric`` as the ADBC driver sends it (an
    opaque extension type holding the digits as text)."""
    import pyarrow as pa

    return (
        isinstance(arrow_type, pa.BaseExtensionType)  # the driver's opaque type is no ExtensionType
        and getattr(arrow_type, "extension_name", "") == "arrow.opaque"
        and getattr(arrow_type, "type_name", "") == "numeric"
    )


def _convert(column: Any, pa: Any, pc: Any) -> Any:
    t = column.type
    if isinstance(t, pa.BaseExtensionType):
        if is_pg_numeric(t):
            storage = pa.chunked_array([c.storage for c in column.chunks], type=t.storage_type)
            try:
                return pc.cast(storage, pa.float64())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
        return None
    types = pa.types
    if types.is_integer(t) and t.bit_width < 64:  # a Python int is an int64 in pandas
        return pc.cast(column, pa.int64())
    if types.is_floating(t) and t.bit_width < 64:  # a Python float is a float64
        return pc.cast(column, pa.float64())
    if types.is_decimal(t):
        return pc.cast(column, pa.float64())
    if types.is_date32(t):
        low, high = _bounds(column.cast(pa.int32()), pc)
        return column if low is None or (_MIN_DAY <= low and high <= _MAX_DAY) else None
    if types.is_timestamp(t):
        as_us = column.cast(pa.timestamp("us", tz=t.tz), safe=False).cast(pa.int64())
        low, high = _bounds(as_us, pc)
        return column if low is None or (_MIN_US <= low and high <= _MAX_US) else None
    if types.is_time64(t):  # PostgreSQL's 24:00:00 is no Python time: DB-API path (text)
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
