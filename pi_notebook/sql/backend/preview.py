"""Statements measured, never committed: the engine's estimate of a read
(:func:`estimate_statement`) and the preview of a write (:func:`preview_statement`), each in
a transaction that is always rolled back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import sqlalchemy as sa

from pi_notebook.sql.backend.cancel import Canceller
from pi_notebook.sql.backend.derive import WritePlan
from pi_notebook.sql.backend.fetch import RunSettings
from pi_notebook.sql.backend.measure import (
    Measured,
    choose_method,
    count_rows,
    execute_counting,
    explain,
    sample,
)
from pi_notebook.sql.backend.references import reached
from pi_notebook.sql.backend.transaction import ConnectionSlot, transaction

__all__ = ["estimate_statement", "preview_statement"]

T = TypeVar("T")


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
