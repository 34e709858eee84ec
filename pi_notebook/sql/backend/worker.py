"""The blocking part of a run: one pooled connection, one transaction, one statement.

Runs in the backend's worker thread. The policy decision is already made when these are
called; :func:`run_statement` applies the engine mode for the statement's kind and commits
only an approved write that fully succeeded and, when the approval is bounded, whose count
of changed rows is within its bounds.

Its parts live beside it and are importable from here too: the transaction around one
pooled connection (:mod:`.transaction`), the approval's bounds and the audit gate
(:mod:`.run_guards`), and the estimate and preview that always roll back (:mod:`.preview`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import sqlalchemy as sa

from pi_notebook.sql.backend.arrow import AdbcPostgres
from pi_notebook.sql.backend.arrow_sqlite import SqliteArrow, compiles_as_read
from pi_notebook.sql.backend.cancel import Canceller
from pi_notebook.sql.backend.derive import WritePlan
from pi_notebook.sql.backend.fetch import Fetched, RunSettings, execute_and_fetch
from pi_notebook.sql.backend.measure import choose_method, count_rows
from pi_notebook.sql.backend.preview import estimate_statement, preview_statement
from pi_notebook.sql.backend.readonly import RunKind
from pi_notebook.sql.backend.results import render_fetched
from pi_notebook.sql.backend.run_guards import AuditBlocked, Bounds, DriftError, wait_audited
from pi_notebook.sql.backend.transaction import Cancelled, ConnectionSlot, transaction

__all__ = [
    "SEND_ROWS_AT_MOST",
    "AuditBlocked",
    "Bounds",
    "Cancelled",
    "ConnectionSlot",
    "DriftError",
    "Fetched",
    "RunSettings",
    "estimate_statement",
    "preview_statement",
    "run_statement",
    "transaction",
    "wait_audited",
]


def run_statement(
    engine: sa.Engine,
    backend: str,
    kind: RunKind,
    sql: str,
    settings: RunSettings,
    *,
    canceller: Canceller,
    progress: Callable[[int], None] | None = None,
    bounds: Bounds | None = None,
    plan: WritePlan | None = None,
    adbc: AdbcPostgres | SqliteArrow | None = None,
    slot: ConnectionSlot | None = None,
    audited: Callable[[], object] | None = None,
    build_small: bool = True,
) -> Fetched:
    """Run ``sql`` in the mode of ``kind``; commit only an approved write that fully succeeded.

    ``audited`` waits for the commit of the record that must precede the statement (queued
    by the caller, so its place in the chain is taken): a write waits for it before it
    connects; a read runs meanwhile and waits for it before anything of the read (its rows or
    its error) is handed back, since a read changes nothing and only its result must not
    leave unaudited. Either way a record not committed raises ``AuditBlocked``.

    With active ``bounds`` (a write only), the rows it changes are counted inside the same
    transaction (running it, or with the derived count before running it where a rollback
    could not undo it, see :mod:`.measure`) and a count outside the bounds rolls back.

    ``build_small=False`` leaves a small result's DataFrame unbuilt (at most
    :data:`SEND_ROWS_AT_MOST` rows, all still Python tuples; no result set at all): its rows
    cross to another process in a fraction of what its DataFrame costs there and back, and
    the receiver builds it (:meth:`~.fetched.Fetched.build`). The preview is rendered either way.

    With ``settings.arrow``, a query read goes through ``adbc`` first (PostgreSQL: see
    :mod:`.arrow`; SQLite, once its guarded connection compiled it: :mod:`.arrow_sqlite`);
    what it hands back takes the DBAPI path.

    Raises:
        ConnectFailed: the connection could not be opened.
        DriftError: the count is outside ``bounds`` or could not be taken; nothing changed.
        AuditBlocked: ``audited`` raised (a write did not run; a read's result is dropped).
        Exception: the driver's error (cancelled statements included); the transaction is
            rolled back before it propagates.
    """
    run = partial(
        _run_statement,
        engine,
        backend,
        kind,
        sql,
        settings,
        canceller=canceller,
        progress=progress,
        adbc=adbc,
        slot=slot,
        build_small=build_small,
    )
    if audited is not None and kind == "write":
        wait_audited(audited)  # before the write connects
        audited = None
    if audited is None:
        return run(bounds=bounds, plan=plan)
    try:
        fetched = run()
    except BaseException:
        wait_audited(audited)  # the record first, even for the read's error text
        raise
    wait_audited(audited)
    return fetched


def _run_statement(
    engine: sa.Engine,
    backend: str,
    kind: RunKind,
    sql: str,
    settings: RunSettings,
    *,
    canceller: Canceller,
    progress: Callable[[int], None] | None = None,
    bounds: Bounds | None = None,
    plan: WritePlan | None = None,
    adbc: AdbcPostgres | SqliteArrow | None = None,
    slot: ConnectionSlot | None = None,
    build_small: bool = True,
) -> Fetched:
    if kind == "read" and settings.arrow and adbc is not None and adbc.accepts(sql):
        if canceller.reason is not None:
            raise Cancelled
        fetched = None
        if not isinstance(adbc, SqliteArrow) or _vetted(engine, settings, canceller, slot, sql):
            fetched = adbc.read(sql, settings, canceller, progress)
        if fetched is not None:
            fetched.preview = render_fetched(fetched)
            return fetched
    with transaction(engine, backend, kind, settings, canceller, commit=True, slot=slot) as raw:
        fetched = _bounded(raw, backend, kind, sql, settings, canceller, progress, bounds, plan)
    if build_small or not _small(fetched):
        fetched.build()  # the DataFrame, after the connection went back to the pool
    fetched.preview = render_fetched(fetched)  # off the event loop too
    return fetched


SEND_ROWS_AT_MOST = 256
"""Most rows of a result ``run_statement(build_small=False)`` leaves unbuilt."""


def _small(fetched: Fetched) -> bool:
    builder = fetched.builder
    if fetched.frame is not None:
        return False
    return builder is None or (builder.rows_only and builder.count <= SEND_ROWS_AT_MOST)


def _vetted(
    engine: sa.Engine,
    settings: RunSettings,
    canceller: Canceller,
    slot: ConnectionSlot | None,
    sql: str,
) -> bool:
    """Whether the SQLite read ``sql`` compiles under the read guard (see :mod:`.arrow_sqlite`)."""
    with transaction(engine, "sqlite", "read", settings, canceller, commit=False, slot=slot) as raw:
        return compiles_as_read(raw, sql)


def _bounded(
    raw: Any,
    backend: str,
    kind: RunKind,
    sql: str,
    settings: RunSettings,
    canceller: Canceller,
    progress: Callable[[int], None] | None,
    bounds: Bounds | None,
    plan: WritePlan | None,
) -> Fetched:
    def execute() -> Fetched:
        return execute_and_fetch(raw, backend, kind, sql, settings, progress, canceller.interrupt)

    if kind != "write" or bounds is None or not bounds.active:
        return execute()
    if plan is None:
        raise DriftError(None, "the statement's rows cannot be derived")
    method, why = choose_method(raw, backend, plan)
    if method is None:
        raise DriftError(None, why)
    if method != "execute":
        counted = count_rows(raw, backend, plan, method)
        if not bounds.allows(counted):
            raise DriftError(counted)
    fetched = execute()
    if method == "execute" and not bounds.allows(fetched.row_count):
        raise DriftError(fetched.row_count)
    return fetched
