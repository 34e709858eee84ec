"""PostgreSQL values no Python type can hold come through as text, never as a failed read.

``date``, ``timestamp`` and ``timestamptz`` accept ``infinity``, ``-infinity``, BC dates and
years past 9999; ``interval`` (PostgreSQL 17) accepts ``infinity``; ``time`` and ``timetz``
accept ``24:00:00`` (Python's ``time`` stops at 23:59:59.999999). psycopg's loaders raise
on these, which fails the whole query. Each connection gets loaders that try
psycopg's own (C) loader first and, when it cannot make a Python value, return the server's
text instead (``"infinity"``, ``"0044-03-15 BC"``, ``"10000-01-01"``, ``"24:00:00"``): the
column then holds ``datetime`` objects and those few strings (arrays and ranges of these
types use the same loaders).
"""

from __future__ import annotations

from typing import Any

__all__ = ["LENIENT_TYPES", "register_lenient_loaders"]

LENIENT_TYPES = ("date", "timestamp", "timestamptz", "interval", "time", "timetz")


def register_lenient_loaders(conn: Any) -> None:
    """Register the lenient text loaders on a psycopg connection (its own adapters only)."""
    import psycopg
    from psycopg.adapt import Loader
    from psycopg.pq import Format

    for name in LENIENT_TYPES:
        info = conn.adapters.types.get(name)
        if info is None:
            continue
        strict = conn.adapters.get_loader(info.oid, Format.TEXT)
        if strict is None or getattr(strict, "_pi_lenient", False):
            continue

        class Lenient(Loader):
            _pi_lenient = True
            _strict: Any = strict

            def __init__(self, oid: int, context: Any = None) -> None:
                super().__init__(oid, context)
                self._inner = self._strict(oid, context)

            def load(self, data: Any) -> Any:
                try:
                    return self._inner.load(data)
                except (psycopg.DataError, ValueError, OverflowError):
                    return bytes(data).decode("utf-8", "replace")

        Lenient.__name__ = f"Lenient{name.capitalize()}Loader"
        conn.adapters.register_loader(info.oid, Lenient)
