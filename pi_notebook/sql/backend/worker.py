"""The blocking part of a run: one pooled connection, one transaction, one statement.

Runs in a worker thread. The policy decision is already made when this is called; this
module only applies the engine mode for ``kind`` and keeps the cancel window exact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from pi_notebook.sql.backend.cancel import Canceller, driver_cancel
from pi_notebook.sql.backend.readonly import RunKind, begin, finish

__all__ = ["ConnectFailed", "Fetched", "RunSettings", "run_statement"]

_CHUNK = 5_000


class ConnectFailed(Exception):
    """Opening the connection failed (wraps the driver error)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class _Cancelled(Exception):
    pass


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """Limits for one run."""

    row_cap: int
    count_limit: int
    statement_timeout_s: float
    progress_every: int


@dataclass(kw_only=True)
class Fetched:
    """Raw output of one statement, before shaping."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    row_count: int
    row_count_exact: bool
    has_rows: bool


def run_statement(
    engine: sa.Engine,
    backend: str,
    kind: RunKind,
    sql: str,
    settings: RunSettings,
    canceller: Canceller,
    progress: Callable[[int], None] | None,
) -> Fetched:
    """Run ``sql`` in the mode of ``kind``; commit only an approved write that fully succeeded.

    Raises:
        ConnectFailed: the connection could not be opened.
        Exception: the driver's error (cancelled statements included); the transaction is
            rolled back before it propagates.
    """
    try:
        raw = engine.raw_connection()
    except Exception as exc:
        raise ConnectFailed(exc) from exc
    healthy = True
    try:
        begin(raw, backend, kind, timeout_s=settings.statement_timeout_s,
              mariadb=bool(getattr(engine.dialect, "is_mariadb", False)))  # fmt: skip
        canceller.started(driver_cancel(engine, backend, raw))
        try:
            if canceller.reason is not None:
                raise _Cancelled
            fetched = _execute(raw, backend, kind, sql, settings, progress)
        finally:
            canceller.stopped()
        if canceller.reason is not None:  # aborted after the last row: still roll back
            raise _Cancelled
        finish(raw, backend, kind, commit=True)
        return fetched
    except BaseException:
        try:
            finish(raw, backend, kind, commit=False)
        except Exception:  # a connection we cannot roll back must never go back to the pool
            healthy = False
        raise
    finally:
        raw.close() if healthy else raw.invalidate()


def _execute(
    raw: Any,
    backend: str,
    kind: RunKind,
    sql: str,
    settings: RunSettings,
    progress: Callable[[int], None] | None,
) -> Fetched:
    # DuckDB: a cursor() is a second connection with its own transaction, so use the
    # connection itself.
    cur = raw.driver_connection if backend == "duckdb" else raw.cursor()
    try:
        cur.execute(sql)
        desc = cur.description
        if desc is None:
            return Fetched(columns=[], rows=[], row_count=max(cur.rowcount, 0),
                           row_count_exact=True, has_rows=False)  # fmt: skip
        columns = [str(d[0]) for d in desc]
        rows: list[tuple[Any, ...]] = []
        count, exact, next_report = 0, True, settings.progress_every
        while True:
            chunk = cur.fetchmany(_CHUNK)
            if not chunk:
                break
            room = settings.row_cap - len(rows)
            if room > 0:
                rows.extend(chunk if len(chunk) <= room else chunk[:room])
            count += len(chunk)
            if progress is not None and count >= next_report:
                progress(count)
                next_report = count + settings.progress_every
            if count >= settings.count_limit:
                exact = False
                break
        if backend == "duckdb" and kind == "write" and columns == ["Count"] and len(rows) == 1:
            # DuckDB answers DML with a one-row "Count" result instead of a rowcount.
            return Fetched(columns=[], rows=[], row_count=int(rows[0][0]),
                           row_count_exact=True, has_rows=False)  # fmt: skip
        return Fetched(columns=columns, rows=rows, row_count=count,
                       row_count_exact=exact, has_rows=True)  # fmt: skip
    finally:
        if backend != "duckdb":
            cur.close()
