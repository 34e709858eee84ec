"""The approval gate of ``query_database``: a ``tool_call`` handler (S24, D10).

A read passes; a ``reject`` verdict is refused at once; a write asks the person through the
one approval gate (:func:`pi_notebook.approvals.ask`: ``request_approval`` when the UI has it,
else ``confirm("Database write", sql)``), commits the decision to the audit, and on approval
grants the backend a one-shot capability for this call id and the canonical hash of the
statement shown. The backend checks again on the SQL it is about to run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pi_notebook.approvals import (
    REJECTED_REASON,
    ApprovalEntry,
    ApprovalRequest,
    GateAnswer,
    ask,
    commit_record,
)
from pi_notebook.sql import POLICY_VERSION, classify
from pi_notebook.sql.backend import DatabaseBackend, query_args_hash

if TYPE_CHECKING:
    from pi_notebook import ExtensionAPI
    from pi_notebook.database.extension import DatabaseExtension

__all__ = ["NO_UI_REASON", "REJECTED_REASON", "TITLE", "TOOL_NAME", "audit_of", "make_gate"]

TOOL_NAME = "query_database"
TITLE = "Database write"
NO_UI_REASON = "Write query requires interactive approval."


def make_gate(ext: DatabaseExtension, backend: DatabaseBackend, pi: ExtensionAPI) -> Any:
    """The ``tool_call`` handler guarding ``query_database`` on ``backend``."""

    async def gate(event: Any, ctx: Any) -> dict[str, Any] | None:
        if event.tool_name != TOOL_NAME:
            return None
        sql = getattr(event.input, "sql", None)
        sql = sql if isinstance(sql, str) else ""
        verdict = classify(sql, backend.dialect)
        if verdict.kind == "read":
            return None
        if verdict.kind != "write":  # reject, or anything unknown: refuse without asking
            return {"block": True, "reason": "Refused: " + "; ".join(verdict.reasons)}
        call_id = event.tool_call_id
        if backend.capabilities.used(call_id):
            return _block(f"Refused: the call id {call_id!r} was already used in this session; "
                          "each call needs a new id. Nothing was run.")  # fmt: skip
        args_hash = query_args_hash(sql, backend.dialect)
        request = ApprovalRequest(tool_call_id=call_id, tool_name=TOOL_NAME, title=TITLE,
                                  args={"sql": sql}, args_hash=args_hash,
                                  reasons=tuple(verdict.reasons),
                                  timeout_s=ext.approval_timeout_s)  # fmt: skip
        # As in the chapter, a confirm-only UI is asked confirm("Database write", sql).
        answer = await ask(request, ctx, message=sql, no_ui_reason=NO_UI_REASON)
        entry = _entry(answer, request)
        try:
            await commit_record(audit_of(pi, ctx), "approval", entry.payload(),
                                tool_call_id=call_id, tool_name=TOOL_NAME,
                                policy_version=POLICY_VERSION)  # fmt: skip
        except Exception as exc:  # an approval we cannot record is no approval
            return _block(f"Not run: the approval could not be recorded ({type(exc).__name__}).")
        if not answer.approved:
            return _block(answer.reason)
        backend.capabilities.grant(call_id, args_hash, ext.capability_ttl_s)
        return None

    return gate


def _entry(answer: GateAnswer, request: ApprovalRequest) -> ApprovalEntry:
    return ApprovalEntry(
        decision=answer.decision, args_hash=request.args_hash, args=request.args,
        reasons=request.reasons, reason=None if answer.approved else answer.reason,
        approver=answer.outcome.approver if answer.outcome else None, via=answer.via,
        waited_ms=answer.waited_ms, timeout_s=request.timeout_s, problem=answer.problem,
    )  # fmt: skip


def _block(reason: str) -> dict[str, Any]:
    return {"block": True, "reason": reason}


def audit_of(pi: ExtensionAPI, ctx: Any) -> Any:
    """The audit log of this call: ``ctx.audit``, else the extension API's."""
    audit = getattr(ctx, "audit", None)
    return audit if audit is not None else getattr(pi, "audit", None)
