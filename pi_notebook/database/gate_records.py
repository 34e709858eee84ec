"""What the database gate writes and offers: the audit entry of a decision (as asked, and as
approved, with an edit's original), the preview as recorded, and the grant offered in a prompt.

A grant is offered only with a row bound: the previewed count, or
:data:`GRANT_SUGGESTION_ROWS_IF_NONE` when the preview counted none. A live grant covers a write
within its bound (an unmeasured write: the backend enforces the bound itself).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pi_notebook.approvals import (
    ApprovalEntry,
    ApprovalRequest,
    GateAnswer,
    Grant,
    WritePreview,
)
from pi_notebook.database.grants import ActiveGrant
from pi_notebook.database.scope import StatementScope

__all__ = [
    "GRANT_SUGGESTION_ROWS_IF_NONE",
    "GRANT_SUGGESTION_TTL_S",
    "approval_entry",
    "approved_entry",
    "preview_record",
    "suggest_grant",
    "within_grant",
]

GRANT_SUGGESTION_TTL_S = 1800.0
GRANT_SUGGESTION_ROWS_IF_NONE = 100
"""The row bound offered when the preview counted no rows."""


def within_grant(grant: ActiveGrant, rows: int | None, *, measured: bool) -> bool:
    """Whether a write of ``rows`` (previewed when ``measured``) is within ``grant``'s bound."""
    bound = grant.grant.max_rows
    if bound is None or not measured:  # unmeasured: the backend enforces the bound itself
        return True
    return rows is not None and rows <= bound


def suggest_grant(scope: StatementScope | None, preview: WritePreview | None) -> Grant | None:
    """The scope offered in the prompt: the statement's operations on the tables it writes,
    the tables it only reads as read-only patterns, bounded by the previewed row count
    (:data:`GRANT_SUGGESTION_ROWS_IF_NONE` when it counted 0). None when the preview could not
    count: a grant is never offered without a row bound."""
    rows = preview.affected_rows if preview is not None else None
    if scope is None or rows is None:
        return None
    return Grant(
        operations=tuple(sorted(scope.operations)),
        tables=tuple(sorted(scope.written)),
        reads=tuple(sorted(scope.read)),
        max_rows=rows if rows > 0 else GRANT_SUGGESTION_ROWS_IF_NONE,
        ttl_s=GRANT_SUGGESTION_TTL_S,
    )


def preview_record(preview: WritePreview | None) -> dict[str, Any] | None:
    """A preview as the approval record keeps it."""
    if preview is None:
        return None
    return {"affected_rows": preview.affected_rows, "method": preview.method, "note": preview.note}


def approval_entry(answer: GateAnswer, request: ApprovalRequest) -> ApprovalEntry:
    """The record of ``answer`` to ``request``, as asked."""
    return ApprovalEntry(
        decision=answer.decision,
        args_hash=request.args_hash,
        args=request.args,
        reasons=request.reasons,
        reason=None if answer.approved else answer.reason,
        approver=answer.outcome.approver if answer.outcome else None,
        via=answer.via,
        waited_ms=answer.waited_ms,
        timeout_s=request.timeout_s,
        problem=answer.problem,
        preview=preview_record(request.preview),
    ).showing(request.view)


def approved_entry(
    entry: ApprovalEntry,
    *,
    original_sql: str,
    original_args_hash: str,
    sql: str,
    args_hash: str,
    preview: WritePreview | None,
    active: ActiveGrant | None,
) -> ApprovalEntry:
    """``entry`` approved: with the grant it made (``active``), and, when the person edited
    the statement, the edit (``sql``, its hash and preview) beside the original."""
    grant = active.describe() if active is not None else None
    if sql == original_sql:
        return replace(entry, grant=grant)
    return replace(
        entry,
        args={"sql": sql},
        args_hash=args_hash,
        original_args={"sql": original_sql},
        original_args_hash=original_args_hash,
        preview=preview_record(preview),
        grant=grant,
    )
