"""The few plain-English requests the offline model understands, as plain reads.

List the tables, describe a table (its columns and first rows), count a table's rows
(optionally per a column).
"""

from __future__ import annotations

import re

__all__ = ["understood_request"]

_I = re.IGNORECASE | re.DOTALL
_STOP = {
    "the",
    "a",
    "an",
    "table",
    "tables",
    "all",
    "of",
    "in",
    "me",
    "my",
    "our",
    "rows",
    "records",
    "entries",
    "are",
    "there",
    "is",
    "do",
    "we",
    "have",
    "please",
}
_TABLE = r"(?:the\s+)?[\"`]?(?P<table>[A-Za-z_][A-Za-z0-9_]*)[\"`]?(?:\s+table)?"
_LIST = re.compile(r"^\s*(?:please\s+)?(?:list|show(?:\s+me)?|what|which|name)\b.*\btables\b", _I)
_DESCRIBE = re.compile(
    rf"^\s*(?:please\s+)?(?:describe|(?:what|which)\s+columns\s+(?:does|do|are\s+in|in)|"
    rf"(?:show(?:\s+me)?\s+)?(?:the\s+)?(?:columns|schema|structure)\s+(?:of|in|for))\s+{_TABLE}"
    r"(?:\s+(?:have|has))?\s*[.?!]*\s*$",
    _I,
)
_COUNT = re.compile(
    r"^\s*(?:please\s+)?(?:how\s+many\s+(?:rows\s+(?:are\s+)?(?:there\s+)?(?:in|of)\s+)?|"
    rf"count\s+(?:the\s+)?(?:rows\s+)?(?:in\s+|of\s+)?){_TABLE}"
    r"(?:\s+(?:are\s+there|do\s+we\s+have|are\s+in\s+the\s+database))?"
    r"(?:\s+(?:per|by|for\s+each)\s+(?P<column>[A-Za-z_][A-Za-z0-9_]*))?\s*[.?!]*\s*$",
    _I,
)


def _table(name: str | None) -> str | None:
    return None if name is None or name.lower() in _STOP else name


def understood_request(prompt: str, dialect: str | None = None) -> tuple[str, str] | None:
    """One of the few requests the offline model understands, as ``(what, sql)``; else None.

    List the tables, describe a table (its columns and first rows), count a table's rows
    (optionally per a column). Every statement it makes is a plain read.
    """
    text = " ".join(prompt.split())
    if _LIST.match(text):
        if dialect == "sqlite":
            sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        else:
            sql = (
                "SELECT table_name FROM information_schema.tables WHERE table_schema NOT IN "
                "('information_schema', 'pg_catalog', 'mysql', 'performance_schema', 'sys') "
                "ORDER BY table_name"
            )
        return "Listing the tables.", sql
    described = _DESCRIBE.match(text)
    if described and _table(described.group("table")):
        table = described.group("table")
        return (
            f"Showing the columns of `{table}` and its first 5 rows.",
            f"SELECT * FROM {table} LIMIT 5",
        )
    counted = _COUNT.match(text)
    if counted and _table(counted.group("table")):
        table, column = counted.group("table"), counted.group("column")
        if column:
            return (
                f"Counting the rows of `{table}` per `{column}`.",
                f"SELECT {column}, COUNT(*) AS n FROM {table} GROUP BY {column} ORDER BY n DESC",
            )
        return f"Counting the rows of `{table}`.", f"SELECT COUNT(*) AS n FROM {table}"
    return None
