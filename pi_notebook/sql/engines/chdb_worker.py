"""chDB inside its worker process (see :mod:`pi_notebook.sql.engines.chdb` for the kernel's
side, :mod:`pi_notebook.sql.backend.engine_process` for the process): the sessions, and how
one statement runs in them.

The worker imports this module (and with it chDB, whose library is ~400 MB resident) before
it caps its own memory; the kernel never imports chDB. :class:`ChdbHost` answers the
kernel's calls, each naming a method of :class:`ChdbLocal` (the statement path of
:class:`~pi_notebook.sql.engines.direct.DirectBackend`, run here), with the kernel's
:class:`~pi_notebook.sql.backend.fetch.RunSettings`.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from itertools import chain, count
from pathlib import Path
from typing import Any, cast

import chdb  # noqa: F401 - imported before the worker caps its memory
import numpy as np
import pandas as pd
from sqlalchemy.engine import URL

from pi_notebook.readers.pandas_internals import column_arrays
from pi_notebook.sql.backend.errors import ConnectFailed
from pi_notebook.sql.backend.fetch import Fetched, RunSettings, read_limit
from pi_notebook.sql.backend.readonly import RunKind
from pi_notebook.sql.engines.chdb import PackedResult, chdb_path, read_memory_limit
from pi_notebook.sql.engines.clickhouse_common import (
    READ_CLAUSE,
    ROW_STARTS,
    STREAMED,
    ClickHouseBackend,
    first_word,
    has_totals,
    mutated_table,
    quote,
    read_limits,
)
from pi_notebook.sql.engines.direct import Running, statement_body
from pi_notebook.sql.engines.rows import Stream, Whole, take

__all__ = ["CALLS", "ChdbHost", "ChdbLocal"]

CALLS = frozenset({"_statement", "_measure", "_estimate", "_read_frame"})
"""The methods of :class:`ChdbLocal` the kernel may call."""


class _Database:
    """The chDB sessions of one set of read limits, lazily opened (the first open starts the
    engine): a read-only one for reads, whose limits are set when it opens (``read_settings``,
    ``readonly=1`` among them, so no statement in it can change one), one for approved
    writes, and one for cancels (a session runs one statement at a time)."""

    def __init__(self, path: str, read_settings: dict[str, str]) -> None:
        self.path = path
        self.read_settings = read_settings
        self._lock = threading.Lock()
        self._session: Any = None
        self._reader: Any = None
        self._control: Any = None

    def session(self) -> Any:
        """The session approved writes run in."""
        with self._lock:
            if self._session is None:
                self._session = self._open()
                self._session.query("SET mutations_sync = 2")
            return self._session

    def reader(self) -> Any:
        """The read-only session every read runs in."""
        with self._lock:
            if self._reader is None:
                options = "&".join(f"{k}={v}" for k, v in self.read_settings.items())
                self._reader = self._open(options)
            return self._reader

    def kill(self, marker: str) -> None:
        """Cancel the statement carrying ``marker`` (thread-safe; the canceller repeats it)."""
        with self._lock:
            if self._control is None:
                self._control = self._open()
            control = self._control
        control.query(f"KILL QUERY WHERE startsWith(query, '{marker}') ASYNC")

    def kill_mutations(self, table: tuple[str, str]) -> None:
        """Stop the unfinished mutations of ``(database, table)`` (``database`` "" for the
        current one): the statement that waited for one is already killed."""
        with self._lock:
            control = self._control
        if control is None:
            return
        database, name = table
        where = f"database = {quote(database)}" if database else "database = currentDatabase()"
        control.query(f"KILL MUTATION WHERE {where} AND table = {quote(name)} AND NOT is_done")

    def _open(self, options: str = "") -> Any:
        from chdb import session

        if self.path != ":memory:":
            Path(self.path).mkdir(parents=True, exist_ok=True)
        try:
            return session.Session(f"{self.path}?{options}" if options else self.path)
        except Exception as exc:
            raise ConnectFailed(exc) from exc

    def close(self) -> None:
        with self._lock:
            sessions = (self._reader, self._session, self._control)
            self._reader = self._session = self._control = None
        for session in sessions:
            if session is not None:
                try:
                    session.close()
                except Exception:  # closing a session that failed to open
                    pass


class ChdbLocal(ClickHouseBackend):
    """The statement path of a chDB database, in the worker: :class:`DirectBackend`'s
    ``_statement``, ``_measure`` and ``_estimate`` on chDB's sessions (see the module
    docstring of :mod:`pi_notebook.sql.engines.chdb` for what a read and a write run with)."""

    backend = "chdb"

    def __init__(self, url: URL, settings: RunSettings, memory_limit: int) -> None:
        super().__init__(url)
        self.settings = settings
        self._database = _Database(chdb_path(url), read_limits(settings, memory_limit))

    def close(self) -> None:
        self._database.close()

    def _read_frame(self, sql: str, canceller: Any) -> pd.DataFrame:
        """A small derived read (a count, a sample, an estimate, the catalog) in the
        read-only session, cancellable."""
        marker = _marker()
        session = self._database.reader()
        with Running(canceller, lambda: self._database.kill(marker)):
            return session.query(
                f"{marker}{statement_body(sql, 'clickhouse')}{READ_CLAUSE}", "DataFrame"
            )

    def _execute(
        self,
        kind: RunKind,
        sql: str,
        settings: RunSettings,
        canceller: Any,
        progress: Callable[[int], None] | None,
        counted: int | None = None,
    ) -> Fetched:
        session = self._database.reader() if kind == "read" else self._database.session()
        marker = _marker()
        text = f"{marker}{statement_body(sql, 'clickhouse')}" + (
            READ_CLAUSE if kind == "read" else ""
        )
        mutated = mutated_table(sql) if kind == "write" else None

        def cancel() -> None:
            self._database.kill(marker)
            if mutated is not None:
                self._database.kill_mutations(mutated)

        with Running(canceller, cancel):
            starts = first_word(sql)
            if starts == "SELECT" and _one_row(sql):
                frame = session.query(text, "DataFrame")
                return _small_numbers(frame, settings) or take(Whole(frame), settings, progress)
            if starts in STREAMED and not has_totals(sql) and not _kept_whole(settings):
                return _read_stream(session.send_query(text, "DataFrame"), settings, progress)
            if starts in ROW_STARTS:  # SHOW, DESCRIBE, EXPLAIN, WITH TOTALS: not streamable
                return take(Whole(session.query(text, "DataFrame")), settings, progress)
            # Not a query (a write, or a forced "read" in the tests): chDB streams queries only.
            result = session.query(text, "CSV")
        written = int(result.rows_written())
        return Fetched(columns=[], row_count=written, has_rows=False)


class ChdbHost:
    """What the worker process runs for the kernel (``setup["host"]`` names it): the calls
    ``(method, settings, args)`` on the :class:`ChdbLocal` of those settings' read limits
    (backends on one path share the worker, each with its own limits).

    ``max_memory_usage`` of a read is :func:`~.chdb.read_memory_limit` of the worker's
    ``memory_limit_bytes`` (60 %; ``PI_NOTEBOOK_CHDB_MEMORY_LIMIT`` overrides it): ClickHouse's own
    tracker stops most statements before the OS cap does, with the same error in the kernel.
    """

    def __init__(self, url: URL, setup: dict[str, Any]) -> None:
        self.url = url
        self.path = chdb_path(url)
        self.memory_limit = read_memory_limit(int(setup.get("memory_limit_bytes") or 0))
        self._locals: dict[tuple[float, int], ChdbLocal] = {}

    def call(self, args: tuple[Any, ...], canceller: Any, progress: Any) -> Any:
        name, settings, call_args = args
        if name not in CALLS:
            raise ValueError(f"unknown chDB call {name!r}")
        # What read_limits takes from the settings (the memory limit is the worker's own).
        limits = (settings.statement_timeout_s, settings.count_limit)
        local = self._locals.get(limits)
        if local is None:
            local = self._locals[limits] = ChdbLocal(self.url, settings, self.memory_limit)
        if name == "_statement":
            kind, sql, run_settings, bounds, plan = call_args
            fetched = local._statement(
                kind, sql, run_settings, bounds, plan, None, canceller=canceller, progress=progress
            )
            return PackedResult.pack(fetched)
        if name == "_read_frame":
            (sql,) = call_args
            return local._read_frame(sql, canceller)
        return getattr(local, name)(*call_args, canceller=canceller, progress=progress)

    def release(self) -> None:
        """Close every session (a backend's ``dispose``; the next call opens them again)."""
        locals_, self._locals = list(self._locals.values()), {}
        for local in locals_:
            local.close()


_SMALL_ROWS = 50
"""Most rows of a result :func:`_small_numbers` takes (the preview's head is all of them)."""


def _read_stream(
    stream: Any, settings: RunSettings, progress: Callable[[int], None] | None
) -> Fetched:
    """:func:`~.rows.take` of chDB's DataFrame stream, with :func:`_small_numbers` for a
    result of one small chunk of numbers (a count, a sum, ``SELECT 1``)."""
    chunks = iter(stream)
    try:
        first = next(chunks, None)
        if first is not None and len(first) <= _SMALL_ROWS:
            rest = next(chunks, None)
            if rest is None:
                small = _small_numbers(first, settings)
                if small is not None:
                    stream.close()
                    return small
                return take(Stream([first], stream.close), settings, progress)
            return take(Stream(chain([first, rest], chunks), stream.close), settings, progress)
    except BaseException:
        stream.close()
        raise
    return take(
        Stream([] if first is None else chain([first], chunks), stream.close), settings, progress
    )


def _small_numbers(frame: pd.DataFrame, settings: RunSettings) -> Fetched | None:
    """What :func:`~.rows.take` makes of ``frame``, the whole result, when it is within
    the row cap and the byte bound and holds numbers only (integers, booleans, floats), else
    ``None``: its head as plain values without pandas' slicing and deep size count, which
    cost about 100 µs of a 1-row read."""
    rows = len(frame)
    if rows > settings.row_cap or not isinstance(frame.index, pd.RangeIndex):
        return None
    # The column arrays without a Series each (pandas' items() costs ~20 us a column).
    columns = column_arrays(frame)
    if not all(isinstance(c, np.ndarray) and c.dtype.kind in "iubf" for c in columns):
        return None
    arrays = cast("list[np.ndarray[Any, Any]]", columns)
    budget = settings.max_result_bytes
    if budget is not None and sum(array.nbytes for array in arrays) > budget:
        return None
    values = [
        [None if v != v else v for v in array.tolist()]
        if array.dtype.kind == "f"
        else array.tolist()
        for array in arrays
    ]
    limit = read_limit(settings)
    return Fetched(
        columns=[str(c) for c in frame.columns],
        row_count=rows,
        row_count_exact=rows < limit if limit is not None else rows < settings.count_limit,
        head=list(zip(*values, strict=True)) if values else [],
        kept=rows,
        frame=frame,
    )


_MANY_ROWS = ("FROM", "JOIN", "ARRAY", "UNION", "INTERSECT", "EXCEPT", "TOTALS", "`", '"')
"""Text that keeps a ``SELECT`` off :func:`_one_row`: a source of rows, a row-multiplying
``arrayJoin`` / ``ARRAY JOIN``, a set operation, totals, a quoted identifier (which could name
a function)."""


def _one_row(sql: str) -> bool:
    """Whether the ``SELECT`` ``sql`` returns at most one row: it names no table (no FROM,
    so no table function either), no ``arrayJoin``, no set operation (anywhere in its text,
    strings and comments too: a false "no" only costs the stream). Such a read runs as one
    query, not a stream: chDB's stream costs about 80 us more, and it would read the same
    single row whole. Were it wrong, the session's own ``max_result_rows`` (``break``),
    ``max_memory_usage`` and ``max_execution_time`` still bound the query, and the row cap
    and byte bound are applied to what it returns."""
    upper = sql.upper()
    return not any(text in upper for text in _MANY_ROWS)


def _kept_whole(settings: RunSettings) -> bool:
    """Whether a read is kept whole anyway: no byte bound, and a row limit no lower than the
    session's ``max_result_rows`` (the count limit, ``break``), where ClickHouse itself stops
    the result. Such a read runs as one query, not a stream: chDB's DataFrame stream costs
    about twice its one-piece DataFrame (a 1M-row read: ~60 ms against ~35 ms)."""
    limit = read_limit(settings)
    return settings.max_result_bytes is None and (limit is None or limit >= settings.count_limit)


_MARKER_PREFIX = f"/* pi-{uuid.uuid4().hex[:16]}-"
"""The start of every statement marker of this worker (one chDB per process)."""
_MARKER_NUMBERS = count()


def _marker() -> str:
    """A comment that names one statement (``KILL QUERY`` finds it by its start): the
    worker's random prefix and a number, closed by ``*/`` so no marker starts another."""
    return f"{_MARKER_PREFIX}{next(_MARKER_NUMBERS)} */ "
