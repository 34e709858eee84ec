"""The database backend: the last policy check (D5) and the controlled execution of SQL.

Whatever the ``tool_call`` handlers did, :meth:`DatabaseBackend.run` decides again on the SQL it
is about to run: it classifies it, requires the one-shot capability for anything that is not a
pure read (bound to this call id and the canonical hash of these final arguments), records the
final arguments durably, and runs the statement in a worker thread inside the engine's
read-only mode (reads) or a transaction that commits only on success (approved writes).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pandas as pd
from sqlalchemy.engine import URL, make_url

from pi_notebook.ai.abort import AbortSignal
from pi_notebook.approvals.capabilities import CapabilityStore
from pi_notebook.sql import POLICY_VERSION, args_hash, classify
from pi_notebook.sql.backend.auditing import (
    AuditSink,
    commit_before,
    record_after,
    unavailable_reason,
)
from pi_notebook.sql.backend.cancel import Canceller
from pi_notebook.sql.backend.engines import (
    create_backend_engine,
    sqlglot_dialect,
    supported_backend,
)
from pi_notebook.sql.backend.errors import QueryAborted, QueryError, QueryRefused, describe_error
from pi_notebook.sql.backend.readonly import RunKind
from pi_notebook.sql.backend.results import QueryOutcome, render_preview
from pi_notebook.sql.backend.worker import ConnectFailed, Fetched, RunSettings, run_statement

__all__ = ["DatabaseBackend", "ProgressCallback", "query_args_hash"]

ProgressCallback = Callable[[int], None]
TOOL_NAME = "query_database"


def query_args_hash(sql: str, dialect: str) -> str:
    """Canonical hash of ``query_database``'s arguments (the gate and the backend share it)."""
    return args_hash({"sql": sql}, dialect)


class DatabaseBackend:
    """Runs SQL for ``query_database`` against one database.

    Args:
        url: SQLAlchemy URL (SQLite, PostgreSQL, MySQL/MariaDB or DuckDB).
        row_cap: most rows kept in the result DataFrame.
        statement_timeout_s: a statement running longer is cancelled at the driver.
        approvals: the capability store the approval gate grants into.
        audit: default audit sink (``run`` may be given another one per call).
        count_limit: rows counted past the cap before the count is reported as a lower bound.
        progress_every: rows between two progress reports.
    """

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
        tool_name: str = TOOL_NAME,
    ) -> None:
        self.url = make_url(url)
        self.backend = supported_backend(self.url)
        self.dialect = sqlglot_dialect(self.url)
        self.capabilities = approvals if approvals is not None else CapabilityStore()
        self.audit = audit
        self.tool_name = tool_name
        self.settings = RunSettings(
            row_cap=row_cap,
            count_limit=max(count_limit, row_cap),
            statement_timeout_s=statement_timeout_s,
            progress_every=progress_every,
        )
        self.engine = create_backend_engine(self.url)

    def dispose(self) -> None:
        """Close every pooled connection (the backend reconnects if used again)."""
        self.engine.dispose()

    async def run(
        self,
        tool_call_id: str,
        sql: str,
        *,
        signal: AbortSignal | None = None,
        on_progress: ProgressCallback | None = None,
        audit: AuditSink | None = None,
    ) -> QueryOutcome:
        """Decide on ``sql`` and run it.

        Raises:
            QueryRefused: rejected SQL, or a write without a live capability for this call id
                and these exact arguments (the audit gets ``capability_mismatch`` with both
                hashes).
            QueryAborted: ``signal`` aborted; the statement was cancelled and rolled back.
            QueryError: connection, driver or timeout failure, as short credential-free text.
        """
        audit = audit if audit is not None else self.audit
        ids: dict[str, Any] = {"tool_call_id": tool_call_id, "tool_name": self.tool_name,
                               "policy_version": POLICY_VERSION}  # fmt: skip
        if signal is not None and signal.aborted:
            raise QueryAborted("Query not started: the run was aborted.")
        try:
            verdict = classify(sql, self.dialect)
            final_hash = query_args_hash(sql, self.dialect) if verdict.kind != "reject" else ""
        except Exception as exc:  # a classifier failure is a refusal, never a pass
            verdict, final_hash = None, ""
            reasons: tuple[str, ...] = (
                f"the statement could not be checked ({type(exc).__name__})",
            )
        else:
            reasons = tuple(verdict.reasons)
        if verdict is None or verdict.kind not in ("read", "write"):
            message = "Refused: " + ("; ".join(reasons) or "the statement is not allowed")
            record_after(audit, "query_refused", {"sql": sql, "reasons": list(reasons)}, **ids)
            raise QueryRefused(message)
        kind: RunKind = "read" if verdict.kind == "read" else "write"
        if kind == "write":
            check = self.capabilities.consume(tool_call_id, final_hash)
            if not check.ok:
                try:
                    await commit_before(audit, "capability_mismatch", {
                        "sql": sql, "approved_hash": check.approved_hash,
                        "final_hash": check.final_hash, "reason": check.reason}, **ids)  # fmt: skip
                except Exception:  # refused whether or not the mismatch could be recorded
                    pass
                raise QueryRefused(f"Refused: {check.reason}. Nothing was run.")
        payload = {"sql": sql, "args_hash": final_hash, "verdict": verdict.kind,
                   "reasons": list(reasons), "dialect": self.dialect}  # fmt: skip
        try:
            # A read's record need not wait for the server's disk flush (see commit_before).
            await commit_before(audit, "final_args", payload, sync=kind == "write", **ids)
        except Exception as exc:  # AuditUnavailableError: no durable record, no run
            raise QueryRefused(unavailable_reason(exc)) from None
        return await self._run_as(kind, sql, tool_call_id=tool_call_id, final_hash=final_hash,
                                  signal=signal, on_progress=on_progress, audit=audit)  # fmt: skip

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
    ) -> QueryOutcome:
        """Run ``sql`` as ``kind`` WITHOUT the policy check. Internal and for tests only: it is
        how the tests prove the engine's read-only mode stops what slipped past the classifier.
        """
        loop = asyncio.get_running_loop()
        canceller = Canceller()
        progress: ProgressCallback | None = None
        if on_progress is not None:
            report = on_progress

            def _progress(n: int) -> None:  # runs in the worker thread
                loop.call_soon_threadsafe(_report, report, n)

            progress = _progress

        timer = loop.call_later(self.settings.statement_timeout_s, canceller.request, "timeout")
        remove = signal.add_listener(lambda: canceller.request("abort")) if signal else None
        ids = {"tool_call_id": tool_call_id, "tool_name": self.tool_name}
        started = time.perf_counter()
        future = loop.run_in_executor(None, run_statement, self.engine, self.backend, kind, sql,
                                      self.settings, canceller, progress)  # fmt: skip
        try:
            try:
                fetched = await asyncio.shield(future)
            except asyncio.CancelledError:
                canceller.request("abort")
                await asyncio.wait([future])  # never leave the statement running behind us
                raise
        except Exception as exc:
            error = self._error(exc, canceller)
            kind_ = "query_aborted" if isinstance(error, QueryAborted) else "query_error"
            record_after(audit, kind_, {"error": str(error), "args_hash": final_hash}, **ids)
            raise error from None
        finally:
            timer.cancel()
            if remove is not None:
                remove()
        outcome = self._shape(fetched, kind, final_hash, time.perf_counter() - started)
        record_after(audit, "query_result", {
            "row_count": outcome.row_count, "truncated": outcome.truncated,
            "duration_ms": outcome.duration_ms, "statement_kind": kind,
            "args_hash": final_hash}, **ids)  # fmt: skip
        return outcome

    def _error(self, exc: Exception, canceller: Canceller) -> QueryError:
        if canceller.reason == "abort":
            return QueryAborted("Query cancelled: the run was aborted; nothing was written.")
        if canceller.reason == "timeout":
            return QueryError(
                f"Query cancelled: it ran longer than the statement timeout "
                f"({self.settings.statement_timeout_s:g} s); nothing was written."
            )
        if isinstance(exc, ConnectFailed):
            return QueryError(describe_error(exc.cause, self.url, connecting=True))
        return QueryError(describe_error(exc, self.url))

    def _shape(
        self, fetched: Fetched, kind: RunKind, final_hash: str, seconds: float
    ) -> QueryOutcome:
        frame = pd.DataFrame.from_records(fetched.rows, columns=fetched.columns, coerce_float=True)
        truncated = fetched.has_rows and len(fetched.rows) < fetched.row_count
        preview = render_preview(fetched.columns, fetched.rows, row_count=fetched.row_count,
                                 row_count_exact=fetched.row_count_exact, truncated=truncated,
                                 has_rows=fetched.has_rows)  # fmt: skip
        return QueryOutcome(dataframe=frame, columns=fetched.columns, row_count=fetched.row_count,
                            truncated=truncated, row_count_exact=fetched.row_count_exact,
                            duration_ms=round(seconds * 1000, 3), statement_kind=kind,
                            dialect=self.dialect, args_hash=final_hash,
                            has_rows=fetched.has_rows, preview=preview)  # fmt: skip


def _report(on_progress: ProgressCallback, n: int) -> None:
    try:
        on_progress(n)
    except Exception:  # a broken progress listener must not break the query
        pass
