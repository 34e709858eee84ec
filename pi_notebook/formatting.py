"""Numbers for people, one rule for every place a value is shown.

The tool card's table in a notebook (``pi_notebook.notebook.format``), the durable record
and the text preview the model reads (``pi_notebook.sql.backend.results``) write a value the
same way, from the same values (the first rows as the database returned them, see
``QueryOutcome.head``), so what a person sees is what the model talks about. A number is
written exactly: no digit the database returned is dropped.

- ``NULL`` for a missing value; ``true`` / ``false`` for a boolean.
- A whole number (an integer, or a float or decimal without a fraction) gets thousands
  separators from 10,000 on (``1,234,567``; ``2024`` stays ``2024``, so a year reads as a
  year); a number with a fraction gets them from 1,000 (``1,234.5``).
- No separators, ever, in a column whose name says it holds codes rather than quantities:
  ``id``, ``*_id``, ``year``, ``*_year``, ``yr``, ``code``, ``*_code``, ``zip``, ``zipcode``,
  ``postcode``, ``phone``, ``no``, ``nr`` (``customer_id`` 10001 stays ``10001``).
- A decimal keeps every digit and its own scale, written out in full (money keeps its
  cents: ``Decimal("70131.10")`` is ``70,131.10``, ``Decimal("1E-7")`` is ``0.0000001``), as
  ``psql`` writes a ``numeric``.
- A float is the shortest text that reads back as the same float (Python's ``repr``; for
  NumPy's narrower floats, NumPy's shortest text for that type): ``70131.16`` is
  ``70,131.16``, ``0.125`` is ``0.125``, ``2.0`` is ``2``. Where that text has an exponent,
  the exponent stays: below 1e-4 and from 1e16 on (``1e-07``, ``1.2e-05``, ``1e+20``), as
  PostgreSQL and DuckDB write a ``double``. ``NaN``, ``inf`` and ``-inf`` are words.
- A datetime is ISO with a space (``2024-05-01 12:00:00``); bytes are ``<n bytes>``.

NumPy and pandas scalars (``int64``, ``float32``, the nullable ``Int64``'s values) follow the
same rules as Python's. A table right-aligns a column whose values are all numbers
(:func:`is_number`) once missing values are set aside (:func:`is_missing`). Where a table
cuts long text to a width, it never cuts a number: a cut number would be a wrong one.
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
"""Column names whose numbers are codes, not quantities (no thousands separators)."""
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


def _grouped(text: str, column: str) -> str:
    """``text`` (a plain number: sign, digits, maybe a fraction) with thousands separators
    where the rules above put them."""
    whole, dot, fraction = text.partition(".")
    digits = len(whole) - (whole[:1] == "-")
    if digits <= 3 or (not dot and digits < 5) or is_code_column(column):
        return text
    sign = "-" if whole[:1] == "-" else ""
    return f"{sign}{int(whole[len(sign) :]):,}{dot}{fraction}"


def format_float(value: float | numbers.Real, column: str = "") -> str:
    """A float as the shortest text that reads back as the same float (``repr``), with
    separators and without a ``.0`` of a whole number; an exponent stays where ``repr``
    writes one (below 1e-4, from 1e16 on). NumPy's ``float32`` and ``float16`` take NumPy's
    shortest text for their own type (``0.1``, not ``0.10000000149011612``).

    Examples: ``70131.16`` → ``70,131.16``; ``0.125`` → ``0.125``; ``1e-7`` → ``1e-07``;
    ``12345678901234.0`` → ``12,345,678,901,234``; ``1e20`` → ``1e+20``.
    """
    number = float(value)
    if number != number:
        return "NaN"
    if number in (math.inf, -math.inf):
        return "inf" if number > 0 else "-inf"
    if not isinstance(value, float) and type(value).__module__ == "numpy":
        text = str(value)  # NumPy's narrower floats: their own shortest text
        if "e" in text:
            return text
        return _grouped(text.removesuffix(".0"), column)
    size = abs(number)
    if size < 1_000 or is_code_column(column):
        text = repr(number)  # no separators to add
    else:
        text = f"{number:,}"  # repr's digits, grouped (an exponent stays as repr writes it)
    if text.endswith(".0"):
        text = text[:-2]
        if size < _GROUP_FROM and "," in text:  # a whole number: separators from 10,000
            text = text.replace(",", "")
    return text


def _format_decimal(value: Decimal, column: str) -> str:
    if not value.is_finite():
        return str(value)
    exponent = value.as_tuple().exponent
    whole = isinstance(exponent, int) and exponent >= 0
    if (whole and abs(value) < _GROUP_FROM) or is_code_column(column):
        return f"{value:f}"
    return f"{value:,f}"


def format_value(value: Any, column: str = "") -> str:
    """One value as a person reads it: ``NULL``, ``12,345``, ``70,131.16``, ``1e-07``.

    Args:
        value: a value from a database row or a DataFrame cell.
        column: the column's name (numbers in code-like columns get no separators).
    """
    kind = type(value)
    if kind is str:  # the common exact types first, as the general rules below write them
        return value
    if kind is int:
        grouped = abs(value) >= _GROUP_FROM and not is_code_column(column)
        return f"{value:,}" if grouped else str(value)
    if kind is float:
        return format_float(value, column)
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
        return format_float(value, column)
    if isinstance(value, Decimal):
        return _format_decimal(value, column)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(value):,} bytes>"
    return str(value)
