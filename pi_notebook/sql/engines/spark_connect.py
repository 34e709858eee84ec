"""Spark SQL through Spark Connect (``sc://HOST:15002``; the ``spark`` extra: pyspark's
Connect client, no JVM in the kernel).

The policy path is :class:`~pi_notebook.sql.backend.DatabaseBackend`'s (``run``: classify,
capability, audit first); what differs is how a statement runs:

* Spark has no read-only switch (``CREATE TABLE ... AS SELECT`` runs in any session), so a
  read passes the classifier only: everything else (writes, ``SET``, cache and refresh,
  ``ADD JAR``, temporary views, path reads such as ``parquet.`/path` ``, ``reflect``) asks
  or is refused before anything reaches the cluster (:mod:`pi_notebook.sql.spark`);
* a read runs as ``spark.sql(text).limit(cap + 1)`` (the limit is a plan node around the
  statement, not text pasted after it: a sort becomes a top-N) and comes back as Arrow
  (``toArrow``), then is kept to the row cap and the byte bound;
* every statement runs under an operation tag; Stop and the statement timeout interrupt its
  job on the cluster (``interruptTag``); the job's tasks are reported while it runs
  (:mod:`.spark_session`);
* an approved write runs as one ``spark.sql`` call. Spark has no transactions: stopped, what
  it had written stays, and the error says so. Nor can a write be tried and rolled back: the
  preview counts rows with the derived ``SELECT count(*)`` (an approval's bounds are checked
  with it before the write runs) or says plainly they cannot be counted;
* a read's cost is estimated with ``EXPLAIN COST`` (:mod:`.spark_cost`), one statement.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from sqlalchemy.engine import URL

from pi_notebook.ai.abort import AbortSignal
from pi_notebook.approvals.capabilities import CapabilityStore
from pi_notebook.approvals.protocol import WritePreview
from pi_notebook.audit.durable import record_after
from pi_notebook.audit.records import WritePreviewRecord
from pi_notebook.sql import lexical
from pi_notebook.sql.backend import AuditSink, DatabaseBackend, ProgressCallback, QueryError
from pi_notebook.sql.backend.arrow import fetched_from_table, to_frame
from pi_notebook.sql.backend.derive import WritePlan, plan_write
from pi_notebook.sql.backend.errors import ConnectFailed, QueryAborted, QueryRefused, QueryTimeout
from pi_notebook.sql.backend.execution import Execution
from pi_notebook.sql.backend.fetch import Fetched, RunSettings, read_limit
from pi_notebook.sql.backend.measure import METHOD_TEXT
from pi_notebook.sql.backend.readonly import RunKind
from pi_notebook.sql.backend.results import QueryOutcome, render_fetched
from pi_notebook.sql.backend.sizes import DEFAULT_MAX_RESULT_BYTES, arrow_rows_within
from pi_notebook.sql.backend.worker import AuditBlocked, Bounds, DriftError
from pi_notebook.sql.engines.base import ReadEstimate
from pi_notebook.sql.engines.spark_cost import cost_estimate
from pi_notebook.sql.engines.spark_session import SparkCluster, SparkSchema, spark_remote

__all__ = ["SparkBackend"]

_ROW_STARTS = frozenset({"SELECT", "WITH", "FROM", "VALUES", "TABLE", "SHOW", "DESCRIBE",
                         "DESC", "EXPLAIN", "LIST"})  # fmt: skip
"""First words of statements that return rows (an approved path read too)."""
_QUERIES = frozenset({"SELECT", "WITH", "FROM", "VALUES", "TABLE"})
"""Of those, the ones ``EXPLAIN COST`` estimates."""


class SparkBackend(DatabaseBackend):
    """``query_database``'s backend for Spark Connect (see the module docstring); the policy
    path (``run``: classify, capability, audit) is :class:`DatabaseBackend`'s."""

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
        max_result_bytes: int | None = DEFAULT_MAX_RESULT_BYTES,
        **_ignored: Any,
    ) -> None:
        shown, remote, secrets = spark_remote(url)
        self.url = shown
        self.backend = "spark"
        self.dialect = "spark"
        self.capabilities = approvals if approvals is not None else CapabilityStore()
        self.audit = audit
        self.tool_name = tool_name
        self.settings = RunSettings(
            row_cap=row_cap, count_limit=max(count_limit, row_cap + 1),
            statement_timeout_s=statement_timeout_s, progress_every=progress_every,
            arrow=True, max_result_bytes=max_result_bytes)  # fmt: skip
        self._cluster = SparkCluster(remote, secrets)
        self.schema_source = SparkSchema(self._cluster, self.url)
        self._execution = Execution(self.url, statement_timeout_s)
        self._inline = None
        self._adbc = None

    def dispose(self) -> None:
        """Let the worker go and release the Spark Connect session on the server."""
        self._execution.close()
        self._cluster.close()

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
        """Run ``sql`` as ``kind`` WITHOUT the policy check (internal; the tests set up their
        tables with it)."""
        if role is not None:  # role_per_user is PostgreSQL's; create_backend refuses it here
            raise QueryRefused(f"role_per_user needs PostgreSQL; {self.backend} has no SET ROLE")
        ids = {"tool_call_id": tool_call_id, "tool_name": self.tool_name}
        settings = replace(self.settings, count_rows=True) if count_rows else self.settings
        plan = plan_write(sql, "spark") if bounds is not None and bounds.active else None
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
            if kind == "write" and isinstance(error, QueryAborted | QueryTimeout):
                error = type(error)(_no_rollback(str(error)))
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
        counted: int | None = None
        try:
            if kind == "write" and bounds is not None and bounds.active:
                counted = self._count(plan, canceller)
                if not bounds.allows(counted):
                    raise DriftError(counted)
            fetched = self._cluster.run(
                lambda spark: self._execute(spark, kind, sql, settings, counted), canceller,
                progress)  # fmt: skip
        except (DriftError, AuditBlocked):
            raise
        except BaseException as exc:
            if audited is not None:
                _audited(audited)  # the record first, even for the read's error text
            raise self._clean(exc, canceller) from None
        if audited is not None:
            _audited(audited)
        if fetched.preview is None:
            fetched.preview = render_fetched(fetched)
        return fetched

    def _execute(
        self, spark: Any, kind: RunKind, sql: str, settings: RunSettings, counted: int | None
    ) -> Fetched:
        frame = spark.sql(sql)  # a command (a write) runs here; a query when fetched
        if kind == "write" and _first_word(sql) not in _ROW_STARTS:
            fetched = Fetched(columns=[], row_count=counted or 0, has_rows=False,
                              row_count_exact=counted is not None)  # fmt: skip
            fetched.preview = (
                f"Statement executed; {counted:,} row(s) affected (counted before it ran)."
                if counted is not None else
                "Statement executed (Spark does not report the rows a statement changed).")  # fmt: skip
            return fetched
        return _take(frame, settings)

    def _count(self, plan: WritePlan | None, canceller: Any) -> int:
        if plan is not None and plan.static_rows is not None:
            return plan.static_rows
        if plan is None or plan.count_sql is None:
            why = plan.note if plan is not None and plan.note else "no count can be derived"
            raise DriftError(None, f"Spark cannot try a write and roll it back, and {why}")
        count_sql = plan.count_sql
        return int(self._cluster.run(lambda spark: _scalar(spark, count_sql), canceller))

    def _clean(self, exc: BaseException, canceller: Any) -> BaseException:
        """``exc`` as the worker hands it back: a Spark error as its first line, without the
        URL's token (the canceller's reason, when set, decides the message anyway)."""
        if isinstance(exc, QueryError | ConnectFailed | KeyboardInterrupt | SystemExit) or (
            canceller.reason is not None):  # fmt: skip
            return exc
        return RuntimeError(self._cluster.clean(exc))

    # -- read estimate -------------------------------------------------------------------
    async def estimate(self, sql: str, *, signal: AbortSignal | None = None) -> ReadEstimate:
        """What the read ``sql`` would scan, from ``EXPLAIN COST`` (see :mod:`.spark_cost`).

        Raises:
            QueryAborted: ``signal`` aborted.
            QueryError: the server could not be reached.
        """
        return await self._execution.call(self._estimate, sql, signal=signal)

    def _estimate(
        self, sql: str, *, canceller: Any, progress: Callable[[int], None] | None = None
    ) -> ReadEstimate:
        first = _first_word(sql)
        if first not in _QUERIES:
            return ReadEstimate(rows=None, bytes=None,
                                source=f"no estimate for {first or 'this'} statements")  # fmt: skip
        self._cluster.session()  # a server that cannot be reached is the read's error
        try:
            text = self._cluster.run(
                lambda spark: str(spark.sql(f"EXPLAIN COST {sql}").collect()[0][0]), canceller
            )
        except Exception as exc:
            if canceller.reason is not None:
                raise
            return ReadEstimate(rows=None, bytes=None, source="Spark EXPLAIN COST failed: "
                                f"{self._cluster.clean(exc)}")  # fmt: skip
        return cost_estimate(text)

    # -- write preview -------------------------------------------------------------------
    async def preview(
        self,
        tool_call_id: str,
        sql: str,
        *,
        signal: AbortSignal | None = None,
        audit: AuditSink | None = None,
    ) -> WritePreview:
        """Measure the write ``sql`` without running it: Spark has no transaction to try it
        in, so the rows are counted with the derived ``SELECT count(*)`` (a read) or the
        preview says plainly they cannot be counted. Audited as ``write_preview``.

        Raises:
            QueryRefused: ``sql`` is not a write, or the audit store cannot commit first.
            QueryAborted: ``signal`` aborted.
            QueryError: the server could not be reached.
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
        plan = plan_write(sql, "spark")
        base = WritePreviewRecord(sql=sql, args_hash=final_hash, operation=plan.operation,
                                  phase="start", **ids)  # fmt: skip
        await self._durable(audit, base)
        try:
            preview = await self._execution.call(self._measure, plan, signal=signal,
                                                 what="Preview")  # fmt: skip
        except QueryError as error:
            record_after(audit, replace(base, phase="error", error=str(error)))
            if isinstance(error, QueryAborted):
                raise
            return WritePreview(affected_rows=None, note=str(error))
        method = ("static" if plan.static_rows is not None else
                  "select" if preview.affected_rows is not None else None)  # fmt: skip
        record_after(audit, replace(base, phase="result", affected_rows=preview.affected_rows,
                                    method=method, note=preview.note))  # fmt: skip
        return preview

    def _measure(
        self, plan: WritePlan, *, canceller: Any, progress: Callable[[int], None] | None = None
    ) -> WritePreview:
        notes: list[str] = []
        affected: int | None = None
        method: str | None = None
        sample = None
        if plan.static_rows is not None:
            affected, method = plan.static_rows, METHOD_TEXT["static"]
        elif plan.count_sql is not None:
            count_sql = plan.count_sql
            try:
                affected = int(self._cluster.run(lambda s: _scalar(s, count_sql), canceller))
                method = METHOD_TEXT["select"]
            except Exception as exc:
                if canceller.reason is not None or isinstance(exc, ConnectFailed):
                    raise
                notes.append(f"the rows could not be counted: {self._cluster.clean(exc)}")
        else:
            why = plan.note or "its rows cannot be derived as a SELECT count(*)"
            notes.append("rows not counted: Spark has no transaction to try the statement and "
                         f"roll it back, and {why}")  # fmt: skip
        if plan.sample_sql is not None:
            sample_sql = plan.sample_sql
            try:
                sample = self._cluster.run(lambda s: s.sql(sample_sql).toPandas(), canceller)
            except Exception as exc:
                if canceller.reason is not None:
                    raise
                notes.append(f"no sample: {self._cluster.clean(exc)}")
        return WritePreview(affected_rows=affected, sample=sample, method=method,
                            note="; ".join(notes) or None)  # fmt: skip


def _take(frame: Any, settings: RunSettings) -> Fetched:
    """The result of ``frame`` as Arrow, fetched to the row cap + 1 (or counted to
    ``count_limit``), kept to the row cap and the byte bound."""
    cap = settings.row_cap
    table = frame.limit(cap + 1).toArrow()
    seen = table.num_rows
    exact = seen <= cap
    limit = read_limit(settings)
    if limit is None and not exact:  # count_rows: count on the cluster, up to the limit
        seen = int(frame.limit(settings.count_limit).count())
        exact = seen < settings.count_limit
    kept, sized = table.slice(0, cap), False
    if settings.max_result_bytes is not None:
        rows = arrow_rows_within(kept, settings.max_result_bytes)
        if rows < kept.num_rows:
            kept, sized = kept.slice(0, rows), True
            exact = exact and limit is None
    converted = to_frame(kept)
    pandas_frame = converted if converted is not None else kept.to_pandas()
    fetched = fetched_from_table(kept, pandas_frame, seen, exact, size_capped=sized)
    fetched.kept = len(pandas_frame)
    return fetched


def _scalar(spark: Any, sql: str) -> Any:
    return spark.sql(sql).collect()[0][0]


def _first_word(sql: str) -> str:
    tokens = lexical.tokens_of(sql, "spark")
    first = next((t for t in tokens if t.text != "("), None)
    return lexical.word(first) if first is not None else ""


def _no_rollback(message: str) -> str:
    """A stopped write's message, without the transactional engines' "nothing was written"."""
    head = message.split("; nothing was", 1)[0].rstrip(". ")
    return (f"{head}. Spark has no transactions: what the write had done before it was "
            "stopped stays (files its tasks had already committed).")  # fmt: skip


def _audited(wait: Callable[[], object]) -> None:
    try:
        wait()
    except BaseException as exc:
        raise AuditBlocked(str(exc)) from exc
