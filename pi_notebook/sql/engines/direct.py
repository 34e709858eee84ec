"""The one backend of an engine reached through its own client, not SQLAlchemy, with no
transaction to try a write in and roll it back: chDB, a ClickHouse server and Trino
subclass :class:`DirectBackend` directly, Snowflake and BigQuery through
:class:`~pi_notebook.sql.engines.warehouse_base.WarehouseBackend`, Spark Connect as
:class:`~pi_notebook.sql.engines.spark_connect.SparkBackend`.

The policy path is :class:`~pi_notebook.sql.backend.DatabaseBackend`'s (``run``: classify,
capability, audit first); what :class:`DirectBackend` holds for all of them is how a
statement runs once decided:

* on the backend's worker thread (:class:`~pi_notebook.sql.backend.execution.Execution`:
  statement timeout, Stop), with the engine's cancel registered while it runs
  (:class:`Running`);
* a write waits for its audit record before anything is sent, and when its approval is
  bounded by a row count, the rows are counted first with the derived ``SELECT count()``
  (:meth:`DirectBackend._plan`): a count outside the bounds, or no count, refuses it;
* a write's preview counts rows with the derived ``SELECT count()`` (run as a read) or says
  plainly that they cannot be counted: nothing is ever run to be rolled back.

A subclass gives the engine's hooks: :meth:`DirectBackend._execute` (one statement, a read
kept to the row cap and the byte bound, or an approved write), :meth:`DirectBackend._read_frame`
(a small derived read), :meth:`DirectBackend._estimate`, its ``schema_source``, and where it
differs :meth:`DirectBackend._plan`, :meth:`DirectBackend._scalar`,
:meth:`DirectBackend._clean`, :meth:`DirectBackend._error_text` and the words
:attr:`DirectBackend.engine_name`, :attr:`DirectBackend.no_transaction` and
:attr:`DirectBackend.no_rollback` (what a stopped statement leaves behind).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pandas as pd
from sqlalchemy.engine import URL, make_url

from pi_notebook.ai.abort import AbortSignal
from pi_notebook.approvals.capabilities import CapabilityStore
from pi_notebook.approvals.protocol import WritePreview
from pi_notebook.audit.durable import record_after
from pi_notebook.audit.records import WritePreviewRecord
from pi_notebook.sql import lexical
from pi_notebook.sql.backend import AuditSink, DatabaseBackend, ProgressCallback, QueryError
from pi_notebook.sql.backend.derive import WritePlan, plan_write
from pi_notebook.sql.backend.engines import CONNECT_TIMEOUT_S
from pi_notebook.sql.backend.errors import QueryAborted, QueryRefused, QueryTimeout
from pi_notebook.sql.backend.execution import Execution
from pi_notebook.sql.backend.fetch import Fetched, RunSettings
from pi_notebook.sql.backend.measure import METHOD_TEXT
from pi_notebook.sql.backend.readonly import RunKind
from pi_notebook.sql.backend.results import QueryOutcome, render_fetched
from pi_notebook.sql.backend.run_records import commit_or_refuse, record_failure
from pi_notebook.sql.backend.runner import tell_slow
from pi_notebook.sql.backend.sizes import DEFAULT_MAX_RESULT_BYTES
from pi_notebook.sql.backend.worker import AuditBlocked, Bounds, DriftError, wait_audited
from pi_notebook.sql.engines.base import ReadEstimate

__all__ = ["DirectBackend", "Running", "short", "statement_body"]


class DirectBackend(DatabaseBackend):
    """``query_database``'s backend for an engine with its own client (see the module
    docstring). Options as :class:`DatabaseBackend`'s (``arrow`` is the engine's own
    matter); a subclass names its ``backend`` and ``dialect`` and sets ``schema_source``."""

    backend: str
    dialect: str
    schema_source: Any
    """What the schema cache reads the catalog from (``catalog()``)."""
    _inline: Any = None
    _adbc: Any = None

    def __init__(
        self,
        url: str | URL,
        *,
        row_cap: int = 10_000,
        statement_timeout_s: float = 30,
        approvals: CapabilityStore | None = None,
        audit: AuditSink | None = None,
        count_limit: int = 1_000_000,
        progress_every: int = 10_000,
        tool_name: str = "query_database",
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        max_result_bytes: int | None = DEFAULT_MAX_RESULT_BYTES,
        **_ignored: Any,
    ) -> None:
        self.url = make_url(url)
        self.capabilities = approvals if approvals is not None else CapabilityStore()
        self.audit = audit
        self.tool_name = tool_name
        self.connect_timeout_s = connect_timeout_s
        self.settings = RunSettings(
            row_cap=row_cap,
            count_limit=max(count_limit, row_cap + 1),
            statement_timeout_s=statement_timeout_s,
            progress_every=progress_every,
            max_result_bytes=max_result_bytes,
        )
        self._execution = Execution(self.url, statement_timeout_s)

    engine_name = "the engine"
    """The engine's name in messages."""
    no_transaction = ""
    """Why a write's rows are counted with a derived read, when not "ENGINE has no
    transaction to try the statement and roll it back" (said in the preview and the bounds'
    refusal)."""
    no_rollback: str | None = (
        "the engine has no transaction: what the write had done before it was stopped stays"
    )
    """Said instead of "nothing was written" when a statement is stopped (``None``: the
    error is left as it is)."""
    count_words = "SELECT count()"
    """How the derived count is named when there is none."""
    preview_fatal: tuple[type[BaseException], ...] = ()
    """Errors of the preview's count that fail the preview instead of being noted."""

    # -- what a subclass gives ---------------------------------------------------------
    def _plan(self, sql: str) -> WritePlan:
        """How the rows of the write ``sql`` are counted (the derived ``SELECT count()``)."""
        return plan_write(sql, self.dialect)

    def _execute(
        self,
        kind: RunKind,
        sql: str,
        settings: RunSettings,
        canceller: Any,
        progress: Callable[[int], None] | None,
        counted: int | None,
    ) -> Fetched:
        """Run one statement (a read kept to the row cap and the byte bound, or an approved
        write whose rows were ``counted`` first when its approval is bounded) on the worker;
        cancellable."""
        raise NotImplementedError

    def _read_frame(self, sql: str, canceller: Any) -> pd.DataFrame:
        """A small derived read (a count, a sample, an estimate) run read-only; cancellable."""
        raise NotImplementedError

    def _scalar(self, sql: str, canceller: Any) -> int:
        """The count a derived ``SELECT count()`` reads."""
        return int(self._read_frame(sql, canceller).iloc[0, 0])

    def _clean(self, exc: BaseException, canceller: Any) -> BaseException:
        """A statement's error as the worker hands it back (here: as raised)."""
        return exc

    def _error_text(self, exc: BaseException) -> str:
        """A derived read's error, as the preview's note says it."""
        return short(exc)

    def _says_no_rollback(self, kind: RunKind, error: QueryError) -> bool:
        """Whether a stopped statement's error says :attr:`no_rollback`."""
        return "nothing was written" in str(error)

    def _estimate(
        self, sql: str, *, canceller: Any, progress: Callable[[int], None] | None = None
    ) -> ReadEstimate:
        """The engine's estimate of what the read ``sql`` scans (on the worker)."""
        raise NotImplementedError

    async def estimate(self, sql: str, *, signal: AbortSignal | None = None) -> ReadEstimate:
        """What the read ``sql`` would scan, from the engine's own plan, read-only, in one
        call on the worker (an ``EXPLAIN`` that fails is said in the estimate's source).

        Raises:
            QueryAborted: ``signal`` aborted.
            QueryError: the database could not be reached.
        """
        return await self._execution.call(self._estimate, sql, signal=signal)

    # -- statements ----------------------------------------------------------------------
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
        show the engine's own backstop stops what slipped past the classifier)."""
        if role is not None:  # role_per_user is PostgreSQL's; create_backend refuses it here
            raise QueryRefused(f"role_per_user needs PostgreSQL; {self.backend} has no SET ROLE")
        ids = {"tool_call_id": tool_call_id, "tool_name": self.tool_name}
        settings = replace(self.settings, count_rows=True) if count_rows else self.settings
        plan = self._plan(sql) if bounds is not None and bounds.active else None
        tell_slow(on_slow)
        started = time.perf_counter()
        try:
            fetched = await self._execution.call(
                self._statement,
                kind,
                sql,
                settings,
                bounds,
                plan,
                audited,
                signal=signal,
                on_progress=on_progress,
            )
        except QueryError as error:
            if (
                self.no_rollback is not None
                and isinstance(error, QueryAborted | QueryTimeout)
                and self._says_no_rollback(kind, error)
            ):
                head = str(error).split("; nothing was", 1)[0].rstrip(". ")
                error = type(error)(f"{head}. {self.no_rollback}.")
            record_failure(audit, error, final_hash, ids)
            raise error from None
        return self._finish(
            fetched, kind, started, final_hash, ids, audit if record_result else None
        )

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
            wait_audited(audited)
            audited = None
        counted: int | None = None
        try:
            if kind == "write" and bounds is not None and bounds.active:
                counted = self._count(plan, canceller)
                if not bounds.allows(counted):
                    raise DriftError(counted)
            fetched = self._execute(kind, sql, settings, canceller, progress, counted)
        except (DriftError, AuditBlocked):
            raise
        except BaseException as exc:
            if audited is not None:
                wait_audited(audited)  # the record first, even for the read's error text
            cleaned = self._clean(exc, canceller)
            if cleaned is exc:
                raise
            raise cleaned from None
        if audited is not None:
            wait_audited(audited)
        if fetched.preview is None:
            fetched.preview = render_fetched(fetched)
        return fetched

    def _count(self, plan: WritePlan | None, canceller: Any) -> int:
        if plan is not None and plan.static_rows is not None:
            return plan.static_rows
        if plan is None or plan.count_sql is None:
            why = plan.note if plan is not None and plan.note else "no count can be derived"
            said = self.no_transaction or f"{self.engine_name} cannot try a write and roll it back"
            raise DriftError(None, f"{said}, and {why}")
        return self._scalar(plan.count_sql, canceller)

    # -- write preview -------------------------------------------------------------------
    async def preview(
        self,
        tool_call_id: str,
        sql: str,
        *,
        signal: AbortSignal | None = None,
        audit: AuditSink | None = None,
    ) -> WritePreview:
        """Measure the write ``sql`` without running it: the engine has no transaction to try
        it in, so the rows are counted with the derived ``SELECT count()`` (run read-only) or
        the preview says plainly they cannot be counted. Audited as ``write_preview``.

        Raises:
            QueryRefused: ``sql`` is not a write, or the audit store cannot commit first.
            QueryAborted: ``signal`` aborted.
            QueryError: the database could not be reached.
        """
        audit = audit if audit is not None else self.audit
        ids = self._ids(tool_call_id)
        final_hash = self._previewable(sql, signal)
        plan = self._plan(sql)
        base = WritePreviewRecord(
            sql=sql, args_hash=final_hash, operation=plan.operation, phase="start", **ids
        )
        await commit_or_refuse(audit, base)
        try:
            preview = await self._execution.call(self._measure, plan, signal=signal, what="Preview")
        except QueryError as error:
            record_after(audit, replace(base, phase="error", error=str(error)))
            if isinstance(error, QueryAborted):
                raise
            return WritePreview(affected_rows=None, note=str(error))
        record_after(
            audit,
            replace(
                base,
                phase="result",
                affected_rows=preview.affected_rows,
                method="select"
                if plan.static_rows is None and preview.affected_rows is not None
                else ("static" if plan.static_rows is not None else None),
                note=preview.note,
            ),
        )
        return preview

    def _measure(
        self,
        plan: WritePlan,
        *,
        canceller: Any,
        progress: Callable[[int], None] | None = None,
    ) -> WritePreview:
        notes: list[str] = []
        affected: int | None = None
        method: str | None = None
        sample: pd.DataFrame | None = None
        if plan.static_rows is not None:
            affected, method = plan.static_rows, METHOD_TEXT["static"]
        elif plan.count_sql is not None:
            try:
                affected = self._scalar(plan.count_sql, canceller)
                method = METHOD_TEXT["select"]
            except Exception as exc:
                if canceller.reason is not None or isinstance(exc, self.preview_fatal):
                    raise
                notes.append(f"the rows could not be counted: {self._error_text(exc)}")
        else:
            why = plan.note or f"its rows cannot be derived as a {self.count_words}"
            said = self.no_transaction or (
                f"{self.engine_name} has no transaction to try the statement and roll it back"
            )
            notes.append(f"rows not counted: {said}, and {why}")
        if plan.sample_sql is not None:
            try:
                sample = self._read_frame(plan.sample_sql, canceller)
            except Exception as exc:
                if canceller.reason is not None:
                    raise
                notes.append(f"no sample: {self._error_text(exc)}")
        return WritePreview(
            affected_rows=affected, sample=sample, method=method, note="; ".join(notes) or None
        )


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


def statement_body(sql: str, dialect: str) -> str:
    """``sql`` up to the end of its statement's last token, without trailing semicolons and
    comments (a server may refuse them; ClickHouse's ``SETTINGS`` clause goes right after)."""
    tokens = lexical.tokens_of(sql, dialect)
    for token in reversed(tokens):
        if token.text != ";":
            return sql[: token.end + 1]
    return sql


def short(exc: BaseException) -> str:
    """An error's text on one line, at most 200 characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:199] + "…"
