"""Numbers for people, one rule for every place a value is shown.

The tool card's table in a notebook (``pi_notebook.notebook.format``) and the text preview
the model reads (``pi_notebook.sql.backend.results``) write a value the same way, so what a
person sees is what the model talks about:

- ``NULL`` for a missing value; ``true`` / ``false`` for a boolean.
- Integers get thousands separators from 10,000 on (``1,234,567``; ``2024`` stays ``2024``,
  so a year reads as a year), and never in a column whose name says it holds codes rather
  than quantities: ``id``, ``*_id``, ``year``, ``*_year``, ``yr``, ``code``, ``*_code``,
  ``zip``, ``zipcode``, ``postcode``, ``phone``, ``no``, ``nr`` (``customer_id`` 10001 stays
  ``10001``).
- Floats get separators, about six significant digits, trailing zeros dropped, and no
  exponent between 1e-4 and 1e15 (``1,234.57``, ``0.37``, ``12,300,000,000``, ``1.2e-05``).
- Decimals keep their scale (up to six places) with separators (``1,234.50``); beyond that
  they are written as floats.
- A datetime is ISO with a space (``2024-05-01 12:00:00``); bytes are ``<n bytes>``.

NumPy and pandas scalars (``int64``, ``float32``, the nullable ``Int64``'s values) follow the
same rules as Python's. A table right-aligns a column whose values are all numbers
(:func:`is_number`) once missing values are set aside (:func:`is_missing`).
"""

from __future__ import annotations

import datetime as dt
import math
import numbers
import re
from decimal import Decimal
from typing import Any

__all__ = [
    "CODE_COLUMN",
    "format_count",
    "format_float",
    "format_value",
    "is_code_column",
    "is_missing",
    "is_number",
]

CODE_COLUMN = re.compile(r"(?:^|_)(?:id|year|yr|code|zip|zipcode|postcode|phone|no|nr)$", re.I)
"""Column names whose integers are codes, not quantities (no thousands separators)."""
_GROUP_FROM = 10_000


def is_code_column(column: str) -> bool:
    """Whether ``column`` is named like a code (``customer_id``, ``year``, ``zip``...)."""
    return CODE_COLUMN.search(column) is not None


def is_missing(value: Any) -> bool:
    """``None``, a float NaN, pandas' ``NA`` or ``NaT``: what a table shows as ``NULL``."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, numbers.Integral)
        and (math.isnan(float(value)))
    )


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool) or type(value).__name__ in ("bool_", "bool")


def is_number(value: Any) -> bool:
    """An integer, float or decimal (Python's, NumPy's or pandas'), not a boolean."""
    return not _is_bool(value) and isinstance(value, numbers.Real | Decimal)


def format_count(n: int) -> str:
    """A count of things (rows, calls): always with separators, ``1234567`` → ``1,234,567``."""
    return f"{n:,}"


def format_float(value: float) -> str:
    """A float: separators, about six significant digits, no exponent in everyday sizes."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    size = abs(value)
    if size == 0:
        return "0"
    if size >= 1e15 or size < 1e-4:
        return f"{value:.4g}"
    if size >= 1:
        digits = int(math.log10(size)) + 1
        text = f"{value:,.{max(0, 6 - digits)}f}"
    else:
        text = f"{value:.{3 - math.floor(math.log10(size))}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def format_value(value: Any, column: str = "") -> str:
    """One value as a person reads it: ``NULL``, ``12,345``, ``1,234.57``, ``0.0001235``.

    Args:
        value: a value from a database row or a DataFrame cell.
        column: the column's name (integers in code-like columns get no separators).
    """
    kind = type(value)
    if kind is str:  # the common exact types first, as the general rules below write them
        return value
    if kind is int:
        grouped = abs(value) >= _GROUP_FROM and not is_code_column(column)
        return f"{value:,}" if grouped else str(value)
    if kind is float:
        return format_float(value)
    if value is None or kind.__name__ in ("NAType", "NaTType"):
        return "NULL"
    if _is_bool(value):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        number = int(value)
        if abs(number) >= _GROUP_FROM and not is_code_column(column):
            return f"{number:,}"
        return str(number)
    if isinstance(value, numbers.Real):
        return format_float(float(value))
    if isinstance(value, Decimal):
        if not value.is_finite():
            return str(value)
        exponent = value.as_tuple().exponent
        if isinstance(exponent, int) and exponent >= -6 and abs(value) < 10**15:
            return f"{value:,}"
        return format_float(float(value))
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(value):,} bytes>"
    return str(value)
