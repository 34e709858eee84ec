"""The audit records the backend writes around one statement, and the rules for each.

* the final arguments (``final_args``) before anything runs: committed first for a write and
  for a read run on the caller's thread; queued for a read on the worker, which waits for
  the commit before anything of the read leaves it (:func:`record_final_args`);
* a record that must be committed before anything runs, or the call is refused
  (:func:`commit_or_refuse`, :data:`AUDIT_UNAVAILABLE`);
* after the run, best effort: its failure or abort (:func:`record_failure`), its result
  (:func:`record_result`), or the drift of a bounded write and the refusal it becomes
  (:func:`drift_refusal`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pi_notebook.audit.durable import AuditSink, commit_before, queue_before, record_after
from pi_notebook.audit.records import (
    AuditRecord,
    FinalArgs,
    PreviewDrift,
    QueryAbort,
    QueryFailure,
    QueryResult,
)
from pi_notebook.sql.backend.errors import QueryAborted, QueryError, QueryRefused
from pi_notebook.sql.backend.readonly import RunKind
from pi_notebook.sql.backend.results import QueryOutcome
from pi_notebook.sql.backend.worker import Bounds, DriftError

__all__ = [
    "AUDIT_UNAVAILABLE",
    "commit_or_refuse",
    "drift_refusal",
    "record_failure",
    "record_final_args",
    "record_result",
]

AUDIT_UNAVAILABLE = "Refused: not run: the audit store is unavailable."


async def commit_or_refuse(
    audit: AuditSink | None, record: AuditRecord, *, sync: bool = True
) -> None:
    """A record that must be committed before anything runs; refuses if it cannot be.

    Raises:
        QueryRefused: the audit store could not commit it (:data:`AUDIT_UNAVAILABLE`).
    """
    try:
        await commit_before(audit, record, sync=sync)
    except Exception:  # AuditUnavailableError, or any other failure to commit: fail closed
        raise QueryRefused(AUDIT_UNAVAILABLE) from None


async def record_final_args(
    audit: AuditSink, final: FinalArgs, *, kind: RunKind, inline: bool
) -> Callable[[], object] | None:
    """Record the final arguments before the statement runs.

    Returns:
        For a read on the worker, what the worker waits on before anything of the read
        (rows or error) leaves it; else ``None`` (the record is already committed).

    Raises:
        QueryRefused: the record could not be committed or queued (fails closed).
    """
    if kind == "write":
        # Committed before the statement is even handed to the worker.
        await commit_or_refuse(audit, final)
        return None
    if inline:
        # A short read may run on this thread (see :mod:`.inline`): its record is committed
        # first (on a SQLite store by this very call, see ``AuditLog.commit``), so nothing of
        # the read can leave before it.
        await commit_or_refuse(audit, final, sync=False)
        return None
    # A read's record is queued now (its place in the chain) and the worker waits for its
    # commit before anything of the read (rows or error) leaves it: the read runs meanwhile
    # (it changes nothing), and the loop makes one hop, not two. It need not wait for the
    # server's WAL flush (see commit_before).
    try:
        return queue_before(audit, final, sync=False)
    except Exception:  # AuditUnavailableError, or any failure to queue: fail closed
        raise QueryRefused(AUDIT_UNAVAILABLE) from None


def record_failure(
    audit: AuditSink | None, error: QueryError, final_hash: str, ids: dict[str, Any]
) -> None:
    """The audit record of a statement that failed or was stopped (best effort)."""
    failure = QueryAbort if isinstance(error, QueryAborted) else QueryFailure
    record_after(audit, failure(error=str(error), args_hash=final_hash, **ids))


def record_result(
    audit: AuditSink | None,
    outcome: QueryOutcome,
    kind: RunKind,
    final_hash: str,
    ids: dict[str, Any],
) -> None:
    """The ``query_result`` record of a statement that ran (best effort)."""
    record_after(
        audit,
        QueryResult(
            row_count=outcome.row_count,
            truncated=outcome.truncated,
            duration_ms=outcome.duration_ms,
            statement_kind=kind,
            args_hash=final_hash,
            **ids,
        ),
    )


def drift_refusal(
    drift: DriftError,
    bounds: Bounds,
    sql: str,
    final_hash: str,
    audit: AuditSink | None,
    ids: dict[str, Any],
) -> QueryRefused:
    """Record ``preview_drift`` for a bounded write whose count fell outside its approval
    (rolled back), and the refusal that tells the caller why."""
    record_after(
        audit,
        PreviewDrift(
            sql=sql,
            args_hash=final_hash,
            expected_rows=bounds.expected_rows,
            max_rows=bounds.max_rows,
            actual_rows=drift.actual,
            reason=drift.why,
            **ids,
        ),
    )
    if drift.actual is None:
        message = (
            f"Refused: the approval is bounded by a row count, but this statement's "
            f"rows cannot be counted ({drift.why or 'unknown'}); nothing was changed."
        )
    elif bounds.expected_rows is not None and drift.actual != bounds.expected_rows:
        message = (
            f"Refused: the statement would change {drift.actual:,} rows, the approval "
            f"was for {bounds.expected_rows:,}; nothing was changed."
        )
    else:
        message = (
            f"Refused: the statement would change {drift.actual:,} rows, the approval "
            f"allows at most {bounds.max_rows:,}; nothing was changed."
        )
    return QueryRefused(message)
