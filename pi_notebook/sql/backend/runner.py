"""Running what the policy has decided on: :class:`StatementRunner`, the base of
:class:`~pi_notebook.sql.backend.backend.DatabaseBackend` between its policy check and
:class:`~.placement.Placement` (where a statement runs).

It runs a decided statement where the engine runs it (:meth:`StatementRunner._run_as`), measures
a write the policy let through to its preview (:meth:`StatementRunner._measure_write`) and runs
the engine's estimate of a read (:meth:`StatementRunner.estimate_with`), each under the
person's database role with ``role_per_user`` (see :mod:`.roles`), and writes the records of
how each ended (see :mod:`.run_records`). It never classifies a statement and never consumes a
capability: that is the backend's policy path.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from pi_notebook.ai.abort import AbortSignal
from pi_notebook.approvals.protocol import WritePreview
from pi_notebook.audit.durable import AuditSink, record_after
from pi_notebook.audit.records import WritePreviewRecord
from pi_notebook.sql import POLICY_VERSION
from pi_notebook.sql.backend.derive import plan_write
from pi_notebook.sql.backend.errors import QueryError, QueryTimeout
from pi_notebook.sql.backend.measure import METHOD_TEXT, Measured
from pi_notebook.sql.backend.placement import Placement, ProgressCallback
from pi_notebook.sql.backend.readonly import RunKind
from pi_notebook.sql.backend.results import QueryOutcome, shape
from pi_notebook.sql.backend.roles import RoleFor, role_for_call
from pi_notebook.sql.backend.run_records import commit_or_refuse, record_failure, record_result
from pi_notebook.sql.backend.worker import Bounds, Fetched

T = TypeVar("T")

__all__ = ["StatementRunner", "tell_slow"]


class StatementRunner(Placement):
    """Runs, measures and estimates statements the policy has decided on (see the module
    docstring), and records how each ended.

    The backend's options (``tool_name``, ``dialect``, ``role_per_user``, ``role_for``, and
    :class:`~.placement.Placement`'s) are set before :meth:`_place` opens the engine."""

    tool_name: str
    dialect: str
    role_per_user: bool = False
    role_for: RoleFor | None = None

    def _ids(self, tool_call_id: str) -> dict[str, Any]:
        """The ids of this call's audit records."""
        return {
            "tool_call_id": tool_call_id,
            "tool_name": self.tool_name,
            "policy_version": POLICY_VERSION,
        }

    def _role(self) -> str | None:
        """The role this call runs under (``role_per_user``), named on the caller's side.

        Raises:
            RoleRefused: no usable role for whom the call acts for.
        """
        return role_for_call(self.role_for) if self.role_per_user else None

    async def _run_as(
        self,
        kind: RunKind,
        sql: str,
        *,
        tool_call_id: str = "",
        final_hash: str = "",
        signal: AbortSignal | None = None,
        on_progress: ProgressCallback | None = None,
        audit: AuditSink | None = None,
        bounds: Bounds | None = None,
        count_rows: bool = False,
        audited: Callable[[], object] | None = None,
        on_slow: Callable[[], None] | None = None,
        record_result: bool = True,
        role: str | None = None,
    ) -> QueryOutcome:
        """Run ``sql`` as ``kind`` WITHOUT the policy check. Internal and for tests only: it is
        how the tests prove the engine's read-only mode stops what slipped past the classifier.

        Raises:
            DriftError: ``bounds`` are active and the count is outside them (rolled back).
        """
        ids = {"tool_call_id": tool_call_id, "tool_name": self.tool_name}
        plan = plan_write(sql, self.dialect) if bounds is not None and bounds.active else None
        settings = replace(self.settings, count_rows=True) if count_rows else self.settings
        if self.role_per_user:  # never without the person's role, even when called directly
            settings = replace(settings, role=role if role is not None else self._role())
        started = time.perf_counter()
        try:
            aborted = signal is not None and signal.aborted  # the worker's path reports it
            fetched = (
                None if aborted else self._inline_read(kind, sql, settings, on_progress, audited)
            )
            if fetched is None:
                tell_slow(on_slow)
                fetched = await self._run_on_worker(
                    kind,
                    sql,
                    settings,
                    bounds=bounds,
                    plan=plan,
                    signal=signal,
                    on_progress=on_progress,
                    audited=audited,
                )
        except QueryError as error:
            record_failure(audit, error, final_hash, ids)
            raise
        return self._finish(
            fetched, kind, started, final_hash, ids, audit if record_result else None
        )

    def _finish(
        self,
        fetched: Fetched,
        kind: RunKind,
        started: float,
        final_hash: str,
        ids: dict[str, Any],
        audit: AuditSink | None,
    ) -> QueryOutcome:
        """The outcome of a statement that ran, and its ``query_result`` record when
        ``audit`` is given (best effort)."""
        outcome = shape(
            fetched,
            kind=kind,
            dialect=self.dialect,
            args_hash=final_hash,
            seconds=time.perf_counter() - started,
        )
        if audit is not None:
            record_result(audit, outcome, kind, final_hash, ids)
        return outcome

    async def _measure_write(
        self,
        sql: str,
        final_hash: str,
        ids: dict[str, Any],
        *,
        signal: AbortSignal | None,
        audit: AuditSink | None,
    ) -> WritePreview:
        """Measure the write ``sql`` (the policy let it through to its preview, hashed as
        ``final_hash``) on the worker, in a transaction always rolled back; audited as
        ``write_preview``: ``start`` committed before anything runs, then its result or error.

        Raises:
            QueryRefused: the audit store cannot commit the ``start`` record, or the person's
                role cannot be used (``RoleRefused``).
            QueryAborted: ``signal`` aborted; nothing was changed.
            QueryError: the database could not be reached (a timeout is a preview's note).
        """
        plan = plan_write(sql, self.dialect)
        role = self._role()
        base = WritePreviewRecord(
            sql=sql,
            args_hash=final_hash,
            operation=plan.operation,
            phase="start",
            db_role=role,
            **ids,
        )
        await commit_or_refuse(audit, base)
        try:
            measured = await self._preview_on_worker(
                sql, plan, replace(self.settings, role=role), signal
            )
        except QueryError as error:
            record_after(audit, replace(base, phase="error", error=str(error)))
            if not isinstance(error, QueryTimeout):
                raise
            return WritePreview(affected_rows=None, note=str(error))
        return _previewed(measured, base, audit)

    async def estimate_with(
        self, hook: Callable[[Any, str], T], sql: str, *, signal: AbortSignal | None = None
    ) -> T:
        """Run the engine's estimate ``hook(raw, sql)`` for the read ``sql`` on the worker,
        inside the read-only transaction and statement timeout a read runs in (rolled back).

        Raises:
            QueryAborted: ``signal`` aborted.
            QueryTimeout: the statement timeout passed.
            QueryError: the database could not be reached, or the hook failed (safe text).
        """
        settings = replace(self.settings, role=self._role())
        return await self._estimate_on_worker(hook, sql, settings, signal)


def _previewed(
    measured: Measured, base: WritePreviewRecord, audit: AuditSink | None
) -> WritePreview:
    """The preview of a write that was measured, and its ``write_preview`` result record
    (best effort)."""
    method = METHOD_TEXT[measured.method] if measured.method is not None else None
    preview = WritePreview(
        affected_rows=measured.affected_rows,
        plan=measured.plan,
        sample=measured.sample,
        method=method,
        note="; ".join(measured.notes) or None,
    )
    record_after(
        audit,
        replace(
            base,
            phase="result",
            affected_rows=preview.affected_rows,
            method=measured.method,
            note=preview.note,
        ),
    )
    return preview


def tell_slow(on_slow: Callable[[], None] | None) -> None:
    """Tell ``on_slow`` that the statement went to the worker; a broken listener must not
    break the statement."""
    if on_slow is not None:
        try:
            on_slow()
        except Exception:
            pass
