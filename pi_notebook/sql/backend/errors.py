"""Errors the backend raises, and the rewriting of driver errors into short, safe text.

Driver messages can carry the connection URL, the password (some drivers echo the DSN) and
long hints. The model and the audit get one or two short lines with every credential removed.
Some messages also echo a row's values (a duplicate key, a failing row, a value that would not
convert): those values are cut to ``…``, since they may be a password the statement wrote or
a protected value a read reached; the message keeps what went wrong and where.
"""

from __future__ import annotations

import re

from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError

from pi_notebook.errors import QueryAborted, QueryError, QueryRefused
from pi_notebook.secrets import safe_url, scrub

__all__ = [
    "MemoryLimitExceeded",
    "QueryAborted",
    "QueryError",
    "QueryRefused",
    "QueryTimeout",
    "describe_error",
    "safe_url",
    "scrub",
]

_MAX_CHARS = 300
_SQLITE_FOREIGN_KEY = (
    " (rows of another table still reference a row it deletes or whose key "
    "it changes, or a key it writes references no row)"
)


_ECHOED_VALUES = [
    # PostgreSQL: "DETAIL: Key (email)=(a@b.c) already exists." and the like.
    (
        re.compile(
            r"(Key \((?:[^()]|\([^()]*\))*\)=\().*?(\)(?: already exists| is not present"
            r"| is still referenced| conflicts with)|\)\.?$)",
            re.M,
        ),
        r"\1…\2",
    ),
    (re.compile(r"(Failing row contains \().*(\))", re.M), r"\1…\2"),  # PostgreSQL CHECK, NOT NULL
    (re.compile(r'(invalid input (?:syntax|value) for[^:"]*: )".*"', re.M), r'\1"…"'),  # PostgreSQL
    (re.compile(r"(Duplicate entry )'.*'( for key)", re.S), r"\1'…'\2"),  # MySQL/MariaDB
    (re.compile(r'(Duplicate key )".*"( violates)', re.S), r'\1"…"\2'),  # DuckDB
    (re.compile(r"(Could not convert string )'.*?'( to )", re.S), r"\1'…'\2"),  # DuckDB
    # The statement quoted back ("LINE 1: SELECT ..."): the audit holds it already, redacted.
    (re.compile(r"\s*\bLINE \d+: .*", re.S), ""),
]
"""Driver messages that echo values, and how each is cut (the value becomes ``…``)."""


def _without_values(text: str) -> str:
    for pattern, replacement in _ECHOED_VALUES:
        text = pattern.sub(replacement, text)
    return text


def _first_lines(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    # psycopg puts the useful part of a connection failure on the first line, a hint after.
    short = " ".join(lines[:2])
    short = re.sub(r"\s*\(Background on this error at: [^)]*\)", "", short)
    return short if len(short) <= _MAX_CHARS else short[: _MAX_CHARS - 1] + "…"


def describe_error(exc: BaseException, url: URL, *, connecting: bool = False) -> str:
    """A short, credential-free description of a driver or SQLAlchemy error.

    Args:
        exc: the exception raised while connecting or running.
        url: the engine's URL, whose password must not appear.
        connecting: True when the connection itself failed (the text then says where to).
    """
    orig: BaseException = exc
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        orig = exc.orig
    message = _first_lines(_without_values(scrub(str(orig) or type(orig).__name__, url)))
    if connecting:
        return f"Could not connect to {safe_url(url)}: {message}"
    if message == "FOREIGN KEY constraint failed":  # SQLite names neither key nor table
        message += _SQLITE_FOREIGN_KEY
    return f"Database error ({url.get_backend_name()}): {message}"


class QueryTimeout(QueryError):
    """The statement ran longer than the statement timeout and was cancelled."""


class MemoryLimitExceeded(QueryError):
    """The statement needed more memory than ``memory_limit_bytes`` allows where it ran."""

    @classmethod
    def of(cls, limit: int, what: str = "") -> MemoryLimitExceeded:
        """The error for ``limit`` bytes; ``what`` says what else happened (a restart)."""
        size = f"{limit / (1 << 30):.1f} GiB" if limit >= 1 << 30 else f"{limit >> 20} MiB"
        return cls(
            f"The statement stopped at the memory limit of {size} (memory_limit_bytes); "
            f"nothing was written, and the kernel and its variables are unaffected.{what} "
            f"Make the statement smaller, or raise the limit with "
            f"database_extension(memory_limit_bytes=...)."
        )


class ConnectFailed(Exception):
    """Internal: opening a connection failed (wraps the driver error). The backend turns it
    into a :class:`QueryError` naming the database without credentials."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause
