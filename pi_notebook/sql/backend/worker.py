"""The blocking part of a run: one pooled connection, one transaction, one statement.

Runs in the backend's worker thread. The policy decision is already made when these are
called; this module applies the engine mode for the statement's kind, keeps the cancel
window exact, and ends every transaction itself:

* :func:`run_statement` commits only an approved write that fully succeeded and, when the
  approval is bounded, whose count of changed rows is within its bounds;
* :func:`preview_statement` always rolls back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa

from pi_notebook.sql.backend.arrow import AdbcPostgres
from pi_notebook.sql.backend.arrow_sqlite import SqliteArrow, compiles_as_read
from pi_notebook.sql.backend.cancel import Canceller, driver_cancel
from pi_notebook.sql.backend.derive import WritePlan
from pi_notebook.sql.backend.errors import ConnectFailed
from pi_notebook.sql.backend.fetch import Fetched, RunSettings, execute_and_fetch, read_limit
from pi_notebook.sql.backend.measure import (
    Measured,
    choose_method,
    count_rows,
    execute_counting,
    explain,
    sample,
)
from pi_notebook.sql.backend.readonly import RunKind, begin, finish
from pi_notebook.sql.backend.references import reached
from pi_notebook.sql.backend.reset import reset_session
from pi_notebook.sql.backend.results import render_fetched
from pi_notebook.sql.backend.roles import forget_role

__all__ = [
    "SEND_ROWS_AT_MOST",
    "AuditBlocked",
    "Bounds",
    "Cancelled",
    "ConnectionSlot",
    "DriftError",
    "Fetched",
    "RunSettings",
    "preview_statement",
    "run_statement",
    "wait_audited",
]

T = TypeVar("T")


class Cancelled(Exception):
    """The run was cancelled before or after the driver call; the transaction rolls back."""


@dataclass(frozen=True, kw_only=True)
class Bounds:
    """What an approval allows: exactly ``expected_rows`` and at most ``max_rows`` changed."""

    expected_rows: int | None = None
    max_rows: int | None = None

    @property
    def active(self) -> bool:
        return self.expected_rows is not None or self.max_rows is not None

    def allows(self, rows: int) -> bool:
        if self.expected_rows is not None and rows != self.expected_rows:
            return False
        return self.max_rows is None or rows <= self.max_rows


class DriftError(Exception):
    """The write would change a number of rows its approval does not allow.

    ``actual`` is ``None`` when the rows could not be counted (then ``why`` says why).
    """

    def __init__(self, actual: int | None, why: str | None = None) -> None:
        super().__init__(f"actual rows: {actual}")
        self.actual = actual
        self.why = why


class AuditBlocked(Exception):
    """The record that must precede the statement (its final arguments) was not committed:
    a write did not run; a read's rows (or its error) are withheld. Fail closed."""


def wait_audited(wait: Callable[[], object]) -> None:
    """Wait for the record that must precede the statement; ``AuditBlocked`` if it failed."""
    try:
        wait()
    except BaseException as exc:
        raise AuditBlocked(str(exc)) from exc


class ConnectionSlot:
    """One idle pooled connection kept between runs, so a run skips the pool's checkout and
    checkin (the backend's worker runs one statement at a time). Thread-safe.

    :meth:`release` (the backend's ``dispose``) returns the kept connection to the pool; a
    connection taken before a release goes back to the pool instead of into the slot.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._raw: Any = None
        self._generation = 0

    def take(self, engine: sa.Engine) -> tuple[Any, int]:
        """The kept connection, else a new one from the pool, and the slot's generation.

        Raises:
            ConnectFailed: the pool could not open a connection.
        """
        with self._lock:
            raw, self._raw = self._raw, None
            generation = self._generation
        if raw is not None:
            return raw, generation
        try:
            return engine.raw_connection(), generation
        except Exception as exc:
            raise ConnectFailed(exc) from exc

    def give(self, raw: Any, generation: int) -> None:
        """Keep ``raw`` for the next run (or return it to the pool if the slot moved on)."""
        with self._lock:
            if self._raw is None and generation == self._generation:
                self._raw = raw
                return
        raw.close()

    def release(self) -> None:
        """Return the kept connection to the pool."""
        with self._lock:
            raw, self._raw = self._raw, None
            self._generation += 1
        if raw is not None:
            raw.close()


@contextmanager
def transaction(
    engine: sa.Engine,
    backend: str,
    kind: RunKind,
    settings: RunSettings,
    canceller: Canceller,
    *,
    commit: bool,
    slot: ConnectionSlot | None = None,
) -> Iterator[Any]:
    """A pooled DBAPI connection inside the transaction ``kind`` needs.

    The transaction commits only when ``commit`` is true, the body returned normally and no
    cancel was requested; anything else rolls back. Then the session is reset (see
    :mod:`.reset`). A connection that cannot be rolled back or reset is invalidated, never
    returned to the pool (nor kept in ``slot``).

    Raises:
        ConnectFailed: the connection could not be opened.
        Cancelled: a cancel was requested before the body ran or after it returned.
    """
    if slot is not None:
        raw, generation = slot.take(engine)
    else:
        try:
            raw, generation = engine.raw_connection(), 0
        except Exception as exc:
            raise ConnectFailed(exc) from exc
    healthy = True
    try:
        begin(
            raw,
            backend,
            kind,
            timeout_s=settings.statement_timeout_s,
            mariadb=bool(getattr(engine.dialect, "is_mariadb", False)),
            select_limit=read_limit(settings),
            role=settings.role,
        )
        canceller.started(driver_cancel(engine, backend, raw))
        try:
            if canceller.reason is not None:
                raise Cancelled
            yield raw
        finally:
            canceller.stopped()
        if canceller.reason is not None:  # cancelled after the last driver call: roll back
            raise Cancelled
        finish(raw, backend, kind, commit=commit)
    except BaseException:
        forget_role(raw.info, settings.role)  # checked again before its next use here
        try:
            finish(raw, backend, kind, commit=False)
        except Exception:  # a connection we cannot roll back must never go back to the pool
            healthy = False
        raise
    finally:
        if healthy:
            healthy = reset_session(raw, backend, kind)
        if not healthy:
            raw.invalidate()
        elif slot is not None:
            slot.give(raw, generation)
        else:
            raw.close()


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
    if audited is not None and kind == "write":
        wait_audited(audited)  # before the write connects
        audited = None
    if audited is None:
        return _run_statement(
            engine,
            backend,
            kind,
            sql,
            settings,
            canceller=canceller,
            progress=progress,
            bounds=bounds,
            plan=plan,
            adbc=adbc,
            slot=slot,
            build_small=build_small,
        )
    try:
        fetched = _run_statement(
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


def estimate_statement(
    engine: sa.Engine,
    backend: str,
    hook: Callable[[Any, str], T],
    sql: str,
    settings: RunSettings,
    *,
    canceller: Canceller,
    progress: Callable[[int], None] | None = None,
    slot: ConnectionSlot | None = None,
) -> T:
    """The engine's estimate of the read ``sql``: ``hook(raw, sql)`` inside the read-only
    transaction and statement timeout the read itself runs in, always rolled back (then the
    session reset, as after any read).

    Raises:
        ConnectFailed: the connection could not be opened.
        Exception: the hook's error, or a cancel (abort, timeout) that reached the driver.
    """
    with transaction(engine, backend, "read", settings, canceller, commit=False, slot=slot) as raw:
        return hook(raw, sql)


def preview_statement(
    engine: sa.Engine,
    backend: str,
    sql: str,
    plan: WritePlan,
    settings: RunSettings,
    *,
    canceller: Canceller,
    describe: Callable[[BaseException], str],
    progress: Callable[[int], None] | None = None,
    slot: ConnectionSlot | None = None,
) -> Measured:
    """Measure the write ``sql`` in a transaction that is always rolled back.

    Each step (choosing how to count, the plan, the sample, the count) that fails adds a
    note instead of failing the preview; ``describe`` turns a driver error into safe text.

    Raises:
        ConnectFailed: the connection could not be opened.
        Exception: a cancel (abort, timeout) reached the driver; nothing changed.
    """
    out = Measured(notes=[])
    with transaction(engine, backend, "write", settings, canceller, commit=False, slot=slot) as raw:
        step = _Steps(raw, backend, canceller, describe, out.notes)
        chosen = step.run(
            "the way to count its rows could not be checked",
            lambda: choose_method(raw, backend, plan),
        )
        method, why = chosen if chosen is not None else (None, None)
        if plan.dml:
            out.plan = step.run("no plan", lambda: explain(raw, backend, sql))
        out.sample = step.run("no sample", lambda: sample(raw, backend, plan))
        # Before the statement runs: the rows that reference what it deletes, as they stand.
        others = step.run(
            "what it does to rows of other tables could not be checked",
            lambda: reached(raw, backend, plan),
        )
        out.notes[:0] = others or []
        if method == "execute":
            out.affected_rows = step.run(
                "the statement fails", lambda: execute_counting(raw, backend, sql)
            )
        elif method is not None:
            out.affected_rows = step.run(
                "the rows could not be counted", lambda: count_rows(raw, backend, plan, method)
            )
        else:
            out.notes.append(f"rows not counted: {why or 'no way to count them safely'}")
        if out.affected_rows is not None:
            out.method = method
            if method == "select" and why:
                out.notes.append(f"not run to count: {why}")
    return out


class _Steps:
    """Runs optional preview steps; a failed step becomes a note (PostgreSQL steps run in a
    savepoint so one failure does not abort the rest). A cancel is never swallowed."""

    def __init__(
        self,
        raw: Any,
        backend: str,
        canceller: Canceller,
        describe: Callable[[BaseException], str],
        notes: list[str],
    ) -> None:
        self.raw, self.backend, self.canceller = raw, backend, canceller
        self.describe, self.notes = describe, notes

    def run(self, what: str, fn: Callable[[], T]) -> T | None:
        savepoint = self.backend == "postgresql"
        if savepoint:
            self._plain("SAVEPOINT pi_preview_step")
        try:
            value = fn()
        except Exception as exc:
            if self.canceller.reason is not None:
                raise
            if savepoint:
                self._plain("ROLLBACK TO SAVEPOINT pi_preview_step")
            self.notes.append(f"{what}: {self.describe(exc)}")
            return None
        if savepoint:
            self._plain("RELEASE SAVEPOINT pi_preview_step")
        return value

    def _plain(self, sql: str) -> None:
        cur = self.raw.cursor()
        try:
            cur.execute(sql)
        finally:
            cur.close()
