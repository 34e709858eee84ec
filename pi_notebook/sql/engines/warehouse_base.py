"""What a warehouse reached through its own DB-API-like client (not SQLAlchemy) shares.

:class:`WarehouseBackend` keeps :class:`~pi_notebook.sql.backend.DatabaseBackend`'s policy
path (``run``: classify, capability, audit first; ``_record_failure``/``_finish``) and runs
each statement on the backend's worker thread through the engine's hooks:

* ``_execute``: run one statement, inside :class:`Running` (its cancel window), and return
  its :class:`~pi_notebook.sql.backend.fetch.Fetched` (a read through :func:`take_arrow`);
* ``_read_frame``: a small derived read (a count, a sample) as a DataFrame;
* ``_estimate``: the engine's estimate of what a read scans;
* ``close``: close the client.

A warehouse has no transaction to try a write in and roll back here, so a write is measured
with the derived ``SELECT count(*)`` of :func:`~pi_notebook.sql.backend.derive.plan_write`
(run as a read), or the preview says plainly that its rows cannot be counted; an approval's
bounds are checked with the same count before the write runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import pandas as pd
from sqlalchemy.engine import URL, make_url

from pi_notebook.ai.abort import AbortSignal
from pi_notebook.approvals.capabilities import CapabilityStore
from pi_notebook.approvals.protocol import WritePreview
from pi_notebook.audit.durable import record_after
from pi_notebook.audit.records import WritePreviewRecord
from pi_notebook.sql.backend import AuditSink, DatabaseBackend, ProgressCallback, QueryError
from pi_notebook.sql.backend.derive import WritePlan, plan_write
from pi_notebook.sql.backend.errors import QueryAborted, QueryRefused
from pi_notebook.sql.backend.execution import Execution
from pi_notebook.sql.backend.fetch import Fetched, ProgressSteps, RunSettings, read_limit
from pi_notebook.sql.backend.measure import METHOD_TEXT
from pi_notebook.sql.backend.readonly import RunKind
from pi_notebook.sql.backend.results import QueryOutcome, render_fetched
from pi_notebook.sql.backend.sizes import DEFAULT_MAX_RESULT_BYTES, arrow_rows_within
from pi_notebook.sql.backend.worker import AuditBlocked, Bounds, DriftError
from pi_notebook.sql.engines.base import ReadEstimate

__all__ = ["Running", "WarehouseBackend", "short", "take_arrow"]

_HEAD_ROWS = 50


class Running:
    """The cancel window of one statement: Stop and the timeout reach it only while it runs."""

    def __init__(self, canceller: Any, cancel: Callable[[], None]) -> None:
        self.canceller, self.cancel = canceller, cancel

    def __enter__(self) -> None:
        self.canceller.started(self.cancel)
        if self.canceller.reason is not None:
            self.canceller.stopped()
            raise QueryAborted("cancelled before it started")

    def __exit__(self, *exc: object) -> None:
        self.canceller.stopped()


def take_arrow(
    batches: Iterable[Any],
    columns: Callable[[], list[str]],
    settings: RunSettings,
    progress: Callable[[int], None] | None,
) -> Fetched:
    """Keep the first ``row_cap`` rows of a stream of Arrow tables (or record batches) within
    ``max_result_bytes``, and stop reading the stream at the read's limit or the size bound.
    The DataFrame is built once, from the kept Arrow data; ``columns`` names the columns
    of an empty result (asked once the stream is read: a client may learn them only then)."""
    import pyarrow as pa

    limit = read_limit(settings)
    cap, budget = settings.row_cap, settings.max_result_bytes
    kept: list[Any] = []
    seen = kept_rows = 0
    sized = False
    steps = ProgressSteps(progress, settings.progress_every)
    for batch in batches:
        rows = batch.num_rows
        if kept_rows < cap and not sized:
            piece = batch.slice(0, min(rows, cap - kept_rows))
            if budget is not None:
                fits = arrow_rows_within(piece, budget)
                if fits < piece.num_rows:
                    sized, piece = True, piece.slice(0, fits)
                budget -= piece.nbytes
            kept.append(piece if isinstance(piece, pa.Table) else pa.Table.from_batches([piece]))
            kept_rows += piece.num_rows
        seen += rows
        steps.update(seen)
        if (limit is not None and (seen >= limit or sized)) or seen >= settings.count_limit:
            break
    exact = (seen < limit and not sized) if limit is not None else seen < settings.count_limit
    seen = min(seen, limit) if limit is not None else seen
    frame = pa.concat_tables(kept).to_pandas() if kept else pd.DataFrame(columns=columns())
    return Fetched(columns=[str(c) for c in frame.columns], row_count=seen, row_count_exact=exact,
                   truncated=seen > len(frame), size_capped=sized, head=_head(frame),
                   kept=len(frame), frame=frame)  # fmt: skip


def _head(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
    """The first rows as tuples of plain values, missing ones as ``None`` (for the preview)."""
    values = frame.head(_HEAD_ROWS).to_numpy(dtype=object, copy=True)
    if values.size:
        values[pd.isna(values)] = None
    return list(map(tuple, values))


class WarehouseBackend(DatabaseBackend):
    """``query_database``'s backend for a warehouse reached through its own client (see the
    module docstring); subclasses provide the hooks."""

    schema_source: Any
    """What the schema cache reads the catalog from (see ``pi_notebook.database.schema``)."""
    no_transaction = "the warehouse has no transaction here to try the write and roll it back"
    """Why a write's rows are counted with a derived read (said in the preview)."""

    def __init__(
        self,
        url: str | URL,
        *,
        backend: str,
        dialect: str,
        row_cap: int = 10_000,
        statement_timeout_s: float = 30,
        approvals: CapabilityStore | None = None,
        audit: AuditSink | None = None,
        count_limit: int = 1_000_000,
        progress_every: int = 10_000,
        tool_name: str = "query_database",
        max_result_bytes: int | None = DEFAULT_MAX_RESULT_BYTES,
    ) -> None:
        self.url = make_url(url)
        self.backend = backend
        self.dialect = dialect
        self.capabilities = approvals if approvals is not None else CapabilityStore()
        self.audit = audit
        self.tool_name = tool_name
        self.settings = RunSettings(
            row_cap=row_cap, count_limit=max(count_limit, row_cap + 1),
            statement_timeout_s=statement_timeout_s, progress_every=progress_every,
            max_result_bytes=max_result_bytes)  # fmt: skip
        self._execution = Execution(self.url, statement_timeout_s)
        self._inline = None
        self._adbc = None

    # -- hooks ---------------------------------------------------------------------------
    def close(self) -> None:
        """Close the client (blocking)."""
        raise NotImplementedError

    def _execute(
        self,
        kind: RunKind,
        sql: str,
        settings: RunSettings,
        canceller: Any,
        progress: Callable[[int], None] | None,
    ) -> Fetched:
        raise NotImplementedError

    def _read_frame(self, sql: str, canceller: Any) -> pd.DataFrame:
        raise NotImplementedError

    def _estimate(
        self, sql: str, *, canceller: Any, progress: Callable[[int], None] | None = None
    ) -> ReadEstimate:
        raise NotImplementedError

    # -- shared --------------------------------------------------------------------------
    def dispose(self) -> None:
        """Stop the worker and close the client."""
        self._execution.close()
        self.close()

    async def estimate(self, sql: str, *, signal: AbortSignal | None = None) -> ReadEstimate:
        """What the read ``sql`` would scan, from the engine, in one call on the worker.

        Raises:
            QueryAborted: ``signal`` aborted.
            QueryError: the warehouse could not be reached.
        """
        return await self._execution.call(self._estimate, sql, signal=signal)

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
        """Run ``sql`` as ``kind`` WITHOUT the policy check (internal, and for the tests that
        show what the engine itself stops)."""
        if role is not None:  # role_per_user is PostgreSQL's; create_backend refuses it here
            raise QueryRefused(f"role_per_user needs PostgreSQL; {self.backend} has no SET ROLE")
        ids = {"tool_call_id": tool_call_id, "tool_name": self.tool_name}
        settings = replace(self.settings, count_rows=True) if count_rows else self.settings
        plan = plan_write(sql, self.dialect) if bounds is not None and bounds.active else None
        if on_slow is not None:
            try:
                on_slow()
            except Exception:  # a broken listener must not break the statement
                pass
        started = time.perf_counter()
        try:
            fetched = await self._execution.call(
                self._statement, kind, sql, settings, bounds, plan, audited, signal=signal,
                on_progress=on_progress)  # fmt: skip
        except QueryError as error:
            self._record_failure(audit, error, final_hash, ids)
            raise error from None
        return self._finish(fetched, kind, started, final_hash, ids,
                            audit if record_result else None)  # fmt: skip

    def _statement(
        self,
        kind: RunKind,
        sql: str,
        settings: RunSettings,
        bounds: Bounds | None,
        plan: WritePlan | None,
        audited: Callable[[], object] | None,
        *,
        canceller: Any,
        progress: Callable[[int], None] | None = None,
    ) -> Fetched:
        """The worker's part: wait for the audit record (a write before it runs), check the
        approval's bounds, run, fetch within the bounds."""
        if audited is not None and kind == "write":
            _audited(audited)
            audited = None
        try:
            if kind == "write" and bounds is not None and bounds.active:
                counted = self._count(plan, canceller)
                if not bounds.allows(counted):
                    raise DriftError(counted)
            fetched = self._execute(kind, sql, settings, canceller, progress)
        except BaseException:
            if audited is not None:
                _audited(audited)  # the record first, even for the read's error text
            raise
        if audited is not None:
            _audited(audited)
        fetched.preview = render_fetched(fetched)
        return fetched

    def _count(self, plan: WritePlan | None, canceller: Any) -> int:
        if plan is not None and plan.static_rows is not None:
            return plan.static_rows
        if plan is None or plan.count_sql is None:
            why = plan.note if plan is not None and plan.note else "no count can be derived"
            raise DriftError(None, f"{self.no_transaction}, and {why}")
        return int(self._read_frame(plan.count_sql, canceller).iloc[0, 0])

    async def preview(
        self,
        tool_call_id: str,
        sql: str,
        *,
        signal: AbortSignal | None = None,
        audit: AuditSink | None = None,
    ) -> WritePreview:
        """Measure the write ``sql`` without running it: its rows counted with the derived
        ``SELECT count(*)`` (run as a read), or the preview says plainly they cannot be
        counted. Audited as ``write_preview``.

        Raises:
            QueryRefused: ``sql`` is not a write, or the audit store cannot commit first.
            QueryAborted: ``signal`` aborted.
            QueryError: the warehouse could not be reached.
        """
        audit = audit if audit is not None else self.audit
        ids = self._ids(tool_call_id)
        if signal is not None and signal.aborted:
            raise QueryAborted("Preview not started: the run was aborted.")
        verdict, reasons, final_hash = self._verdict(sql)
        if verdict is None or verdict.kind != "write":
            why = "a read needs no preview" if verdict is not None and verdict.is_read else (
                "; ".join(reasons) or "the statement is not allowed")  # fmt: skip
            raise QueryRefused(f"Refused: not previewed: {why}.")
        plan = plan_write(sql, self.dialect)
        base = WritePreviewRecord(sql=sql, args_hash=final_hash, operation=plan.operation,
                                  phase="start", **ids)  # fmt: skip
        await self._durable(audit, base)
        try:
            preview = await self._execution.call(self._measure, plan, signal=signal,
                                                 what="Preview")  # fmt: skip
        except QueryError as error:
            record_after(audit, WritePreviewRecord(
                sql=sql, args_hash=final_hash, operation=plan.operation, phase="error",
                error=str(error), **ids))  # fmt: skip
            if isinstance(error, QueryAborted):
                raise
            return WritePreview(affected_rows=None, note=str(error))
        record_after(audit, WritePreviewRecord(
            sql=sql, args_hash=final_hash, operation=plan.operation, phase="result",
            affected_rows=preview.affected_rows,
            method="select" if plan.static_rows is None and preview.affected_rows is not None
            else ("static" if plan.static_rows is not None else None),
            note=preview.note, **ids))  # fmt: skip
        return preview

    def _measure(
        self, plan: WritePlan, *, canceller: Any, progress: Callable[[int], None] | None = None
    ) -> WritePreview:
        notes: list[str] = []
        affected: int | None = None
        method: str | None = None
        sample: pd.DataFrame | None = None
        if plan.static_rows is not None:
            affected, method = plan.static_rows, METHOD_TEXT["static"]
        elif plan.count_sql is not None:
            try:
                affected = int(self._read_frame(plan.count_sql, canceller).iloc[0, 0])
                method = METHOD_TEXT["select"]
            except Exception as exc:
                if canceller.reason is not None:
                    raise
                notes.append(f"the rows could not be counted: {short(exc)}")
        else:
            why = plan.note or "its rows cannot be derived as a SELECT count(*)"
            notes.append(f"rows not counted: {self.no_transaction}, and {why}")
        if plan.sample_sql is not None:
            try:
                sample = self._read_frame(plan.sample_sql, canceller)
            except Exception as exc:
                if canceller.reason is not None:
                    raise
                notes.append(f"no sample: {short(exc)}")
        return WritePreview(affected_rows=affected, sample=sample, method=method,
                            note="; ".join(notes) or None)  # fmt: skip


def _audited(wait: Callable[[], object]) -> None:
    try:
        wait()
    except BaseException as exc:
        raise AuditBlocked(str(exc)) from exc


def short(exc: BaseException) -> str:
    """``exc``'s text on one line, at most 200 characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:199] + "…"
