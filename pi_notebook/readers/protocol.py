"""The one reader protocol: how a query's result is read as Arrow, within limits.

A reader (:class:`ArrowReader`) takes a :class:`Query` and :class:`ReadLimits` and gives an
:class:`ArrowRead`: the rows it kept as a ``pyarrow.Table``, how many it saw, whether that is
all of them, whether it stopped at the byte bound. Or it gives ``None``: it cannot read this
result the way the plain DB-API path would (a type or value Arrow would change, a process
that failed, an empty result), and the caller takes the DB-API path instead. That path (a
driver cursor, rows fetched in chunks) is the reference every reader is held to: the table,
turned into a DataFrame by :func:`pi_notebook.readers.frames.to_frame`, is the DataFrame the
cursor's rows give.

The readers: SQLite files through ADBC in a child process (:mod:`.sqlite`), PostgreSQL
through a plain ADBC connection (:mod:`.postgres`), DuckDB natively (:mod:`.duckdb`); the
database backend adds its walled PostgreSQL reader on top of these types.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "HAVE_PYARROW",
    "QUERY_TEXT",
    "ArrowRead",
    "ArrowReader",
    "CancelHooks",
    "ProgressSteps",
    "Query",
    "ReadLimits",
    "arrow_available",
]

QUERY_TEXT = re.compile(r"^\s*(?:\(\s*)*(?:SELECT|WITH|VALUES|TABLE)\b", re.I)
"""Statement texts that are a query (PostgreSQL can run them as a cursor or ``COPY``)."""

HAVE_PYARROW = importlib.util.find_spec("pyarrow") is not None
_HAVE_ADBC_PG = HAVE_PYARROW and importlib.util.find_spec("adbc_driver_postgresql") is not None
_HAVE_ADBC_SQLITE = HAVE_PYARROW and importlib.util.find_spec("adbc_driver_sqlite") is not None


def arrow_available(backend: str) -> bool:
    """Whether a reader of ``backend`` (``postgresql``, ``sqlite``, ``duckdb``) can run here:
    pyarrow, and for PostgreSQL and SQLite their ADBC driver, are installed."""
    if backend == "postgresql":
        return _HAVE_ADBC_PG
    if backend == "sqlite":
        return _HAVE_ADBC_SQLITE
    return backend == "duckdb" and HAVE_PYARROW


@dataclass(frozen=True)
class Query:
    """One statement a reader runs.

    Attributes:
        sql: the statement's text, in the reader's parameter style.
        params: its bound values, by position.
        role: PostgreSQL: the role the read's transaction runs as (a reader without roles
            ignores it).
    """

    sql: str
    params: Sequence[Any] = ()
    role: str | None = None


@dataclass(frozen=True, kw_only=True)
class ReadLimits:
    """How much of a result a read keeps, and how far it reads.

    Attributes:
        row_cap: most rows kept; ``None``: every row (and the read takes them all).
        count_rows: read on past the cap, counting, up to ``count_limit`` rows.
        count_limit: most rows counted; ``None``: no bound.
        max_bytes: most bytes of values kept (Arrow's ``nbytes``); ``None``: no bound.
        timeout_s: the statement timeout the reader's database enforces, if it can.
        progress: told the rows seen so far, in steps of ``progress_every``.
    """

    row_cap: int | None = None
    count_rows: bool = False
    count_limit: int | None = None
    max_bytes: int | None = None
    timeout_s: float | None = None
    progress: Callable[[int], None] | None = None
    progress_every: int = 10_000

    @property
    def read_limit(self) -> int | None:
        """Rows a read takes at most: ``row_cap + 1`` (the extra row says "more than"), or
        ``None`` when counting (up to ``count_limit``) or without a cap."""
        if self.count_rows or self.row_cap is None:
            return None
        return self.row_cap + 1


@dataclass(frozen=True)
class ArrowRead:
    """What a reader gives.

    Attributes:
        table: the rows kept, as a ``pyarrow.Table`` (at most ``row_cap``).
        seen: the rows read (all of them when ``exact``).
        exact: ``seen`` is the result's whole length.
        sized: the rows kept stopped at ``max_bytes``, not at the row cap.
    """

    table: Any
    seen: int
    exact: bool
    sized: bool = False


class CancelHooks(Protocol):
    """How a reader lets its caller cancel it: it calls :meth:`started` with a thread-safe
    callable that stops the read, and :meth:`stopped` when the read is over; ``reason`` is
    set once the caller asked for a cancel."""

    reason: Any

    def started(self, cancel: Callable[[], None]) -> None: ...

    def stopped(self) -> None: ...


class ArrowReader(Protocol):
    """One way a query's result is read as Arrow (see the module docstring)."""

    def accepts(self, sql: str) -> bool:
        """Whether this reader can run ``sql`` at all (else the DB-API path runs it)."""
        ...

    def read_arrow(
        self, query: Query, limits: ReadLimits, cancel: CancelHooks | None = None
    ) -> ArrowRead | None:
        """The rows of ``query`` within ``limits``, or ``None``: take the DB-API path.

        Raises:
            Exception: the database's error, or the read was cancelled through ``cancel``.
        """
        ...

    def close(self) -> None:
        """Release what the reader holds (a later read opens it again)."""
        ...


class ProgressSteps:
    """Reports the rows seen so far to ``progress`` in round steps of ``every`` rows, each
    step once (a chunk or batch may cross several)."""

    __slots__ = ("_every", "_next", "_progress")

    def __init__(self, progress: Callable[[int], None] | None, every: int) -> None:
        self._progress, self._every, self._next = progress, every, every

    def update(self, seen: int) -> None:
        if self._progress is not None and seen >= self._next:
            step = seen - seen % self._every
            self._progress(step)
            self._next = step + self._every
