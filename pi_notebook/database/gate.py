"""The approval gate of ``query_database``: a ``tool_call`` handler (S24, D10).

A read passes; a ``reject`` verdict is refused at once; a write asks the user, records the
decision durably, and on approval grants the backend a one-shot capability for this call id
and the canonical hash of the statement shown.
"""

from __future__ import annotations

import asyncio
import getpass
import time
from typing import TYPE_CHECKING, Any

from pi_notebook.approvals import ApprovalRecord
from pi_notebook.approvals.records import ApprovalDecision
from pi_notebook.sql import POLICY_VERSION, classify
from pi_notebook.sql.backend import DatabaseBackend, query_args_hash
from pi_notebook.sql.backend.auditing import commit_before, unavailable_reason

if TYPE_CHECKING:
    from pi_notebook import ExtensionAPI
    from pi_notebook.database.extension import DatabaseExtension

__all__ = ["NO_UI_REASON", "REJECTED_REASON", "TOOL_NAME", "audit_of", "make_gate"]

TOOL_NAME = "query_database"
NO_UI_REASON = "Write query requires interactive approval."
REJECTED_REASON = "Rejected by user."
# Extra time a UI gets past its own timeout before its silence counts as "expired".
_UI_GRACE_S = 1.0


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
        args_hash = query_args_hash(sql, backend.dialect)
        asked = time.monotonic()
        decision, reason = await _ask(sql, ctx, ext.approval_timeout_s)
        wait_ms = round((time.monotonic() - asked) * 1000, 3)  # the person's time, for the audit
        record = ApprovalRecord(
            tool_call_id=event.tool_call_id, tool_name=TOOL_NAME, args_hash=args_hash,
            decision=decision, policy_version=POLICY_VERSION, sql=sql, user=_user(),
            session_id=_session_id(ctx), reason=None if decision == "approved" else reason,
        )  # fmt: skip
        try:
            await asyncio.to_thread(ext.approvals.record, record)
        except Exception as exc:  # an approval we cannot record is no approval
            return {
                "block": True,
                "reason": f"Approval could not be recorded ({type(exc).__name__}); not run.",
            }
        try:
            await commit_before(
                audit_of(pi, ctx), "approval",
                {"decision": decision, "args_hash": args_hash, "sql": sql,
                 "reasons": list(verdict.reasons), "user": record.user, "wait_ms": wait_ms},
                tool_call_id=event.tool_call_id, tool_name=TOOL_NAME,
                policy_version=POLICY_VERSION,
            )  # fmt: skip
        except Exception as exc:  # AuditUnavailableError: an unrecorded approval is none
            return {"block": True, "reason": unavailable_reason(exc)}
        if decision != "approved":
            return {"block": True, "reason": reason}
        backend.capabilities.grant(event.tool_call_id, args_hash, ext.capability_ttl_s)
        return None

    return gate


async def _ask(sql: str, ctx: Any, timeout: float) -> tuple[ApprovalDecision, str]:
    """Ask the user; anything but an explicit, timely ``True`` is a denial."""
    if not getattr(ctx, "has_ui", False):
        return "no_ui", NO_UI_REASON
    # As in the chapter: the message is the statement itself. A UI that wants to say why
    # asks `explain_approval(sql)` (the notebook does).
    signal = getattr(ctx, "signal", None)
    started = time.monotonic()
    try:
        answer = await asyncio.wait_for(
            ctx.ui.confirm("Database write", sql, signal=signal, timeout=timeout),
            timeout + _UI_GRACE_S,
        )
    except TimeoutError:
        return "expired", f"{REJECTED_REASON} (no decision within {timeout:g} s)"
    except Exception as exc:
        return "rejected", f"{REJECTED_REASON} (the approval prompt failed: {type(exc).__name__})"
    if signal is not None and signal.aborted:
        return "aborted", f"{REJECTED_REASON} (the run was aborted)"
    if answer is True:
        return "approved", ""
    if time.monotonic() - started >= timeout * 0.98:
        return "expired", f"{REJECTED_REASON} (no decision within {timeout:g} s)"
    return "rejected", REJECTED_REASON


def audit_of(pi: ExtensionAPI, ctx: Any) -> Any:
    """The audit log of this call: ``ctx.audit``, else the extension API's."""
    audit = getattr(ctx, "audit", None)
    return audit if audit is not None else getattr(pi, "audit", None)


def _session_id(ctx: Any) -> str | None:
    session = getattr(ctx, "session", None)
    value = getattr(session, "session_id", None)
    return value if isinstance(value, str) else None


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers
        return "unknown"
