"""How many bytes of values a result keeps: the size bound beside the row cap.

A read keeps at most ``row_cap`` rows, but ten thousand rows of documents or blobs can be
gigabytes. So a read also stops once the values it keeps pass ``max_result_bytes``
(:data:`DEFAULT_MAX_RESULT_BYTES`), and says so, as it does at the row cap.

The size is an estimate of the values' own bytes, not of Python's objects around them: text
counts its characters, bytes their length, a JSON value (a dict or list from the driver) the
length of its text, and anything else (numbers, dates, NULL) 8 bytes. It is computed per
column with a few C-level passes over the chunk, and per row only for the chunk that crosses
the bound, to cut it at the last row that fits.
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Sequence
from typing import Any

from pi_notebook.readers.batches import arrow_rows_within

__all__ = [
    "DEFAULT_MAX_RESULT_BYTES",
    "arrow_rows_within",
    "chunk_bytes",
    "rows_within",
    "value_bytes",
]

DEFAULT_MAX_RESULT_BYTES = 64 << 20
"""64 MiB of values: far more than any table a person reads, far less than a kernel holds."""

_FIXED = 8  # what a number, a date or a NULL counts
_FIXED_TYPES = frozenset(
    {
        int,
        float,
        bool,
        type(None),
        decimal.Decimal,
        dt.datetime,
        dt.date,
        dt.time,
        dt.timedelta,
        uuid.UUID,
    }
)
_SIZED_TYPES = frozenset({str, bytes, bytearray, memoryview})
_TEXT_OR_NULL = frozenset({str, type(None)})
_BYTES_OR_NULL = frozenset({bytes, type(None)})


def value_bytes(value: Any) -> int:
    """The estimated size of one value (see the module docstring)."""
    kind = type(value)
    if kind in _SIZED_TYPES:
        return len(value)
    if kind in _FIXED_TYPES:
        return _FIXED
    if isinstance(value, dict | list | tuple):
        return len(str(value))  # a JSON or array value: the length of its text
    return _FIXED


def chunk_bytes(chunk: Sequence[tuple[Any, ...]]) -> int:
    """The estimated size of every value in ``chunk`` (rows of equal length)."""
    if not chunk:
        return 0
    total = 0
    for column in zip(*chunk, strict=True):
        kinds = set(map(type, column))
        if kinds <= _FIXED_TYPES:
            total += _FIXED * len(column)
        elif kinds <= _TEXT_OR_NULL or kinds <= _BYTES_OR_NULL:
            nulls = column.count(None) if type(None) in kinds else 0
            total += sum(map(len, filter(_not_none, column))) + _FIXED * nulls
        else:
            total += sum(map(value_bytes, column))
    return total


def rows_within(chunk: Sequence[tuple[Any, ...]], budget: int) -> int:
    """How many of ``chunk``'s first rows fit in ``budget`` bytes (at least none)."""
    used = 0
    for taken, row in enumerate(chunk):
        used += sum(map(value_bytes, row))
        if used > budget:
            return taken
    return len(chunk)


def _not_none(value: Any) -> bool:
    return value is not None
