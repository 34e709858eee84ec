"""The approval gate of ``query_database``: a ``tool_call`` handler (S24, D10).

- A read passes; a ``reject`` verdict is refused at once, without asking.
- A write inside a live scoped grant runs without asking: ``grant_use`` is committed to the
  audit and the call gets a one-shot capability bounded by the grant's ``max_rows``.
- Any other write is measured first (``backend.preview``: affected rows, plan, sample), then
  put to the person through the one approval gate (``request_approval`` when the UI has it,
  else ``confirm("Database write", sql)``). The decision is committed to the audit before
  anything runs; an approval becomes a capability bound to (call id, args hash, previewed
  rows), which the backend consumes and re-counts inside the write's transaction.
- Edit, then approve: edited SQL is classified and canonicalised again; a read runs as it is,
  a write is previewed again and approved as edited (bound to the new hash), a reject is
  refused. The edit replaces ``event.input.sql``, so ``execute`` runs it.

One write call's way through it is :class:`~.gate_call.WriteCall`; the records it writes and
the grant it offers are in :mod:`.gate_records`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pi_notebook.approvals import REJECTED_REASON, ApprovalDecided, ApprovalEntry
from pi_notebook.approvals.review_wait import ReviewWaiter
from pi_notebook.database.gate_call import (
    NO_UI_REASON,
    TITLE,
    Blocked,
    Edit,
    GateSettings,
    WriteCall,
    audit_of,
    block,
)
from pi_notebook.database.grants import GrantStore
from pi_notebook.database.names import TOOL_NAME
from pi_notebook.database.views import query_call_view
from pi_notebook.errors import AbortError
from pi_notebook.sql.backend import DatabaseBackend

if TYPE_CHECKING:
    from pi_notebook.extensions import ExtensionAPI

__all__ = [
    "NO_UI_REASON",
    "REJECTED_REASON",
    "TITLE",
    "TOOL_NAME",
    "Edit",
    "GateSettings",
    "audit_of",
    "make_gate",
]


def make_gate(
    ext: GateSettings,
    backend: DatabaseBackend,
    pi: ExtensionAPI,
    grants: GrantStore | None = None,
    review: ReviewWaiter | None = None,
) -> Any:
    """The ``tool_call`` handler guarding ``query_database`` on ``backend``, with the grants
    of this session (``grants``, default ``ext.grants`` as it is now). With ``review``, a
    write is put to a reviewer in that store instead of the call's own UI (four eyes)."""
    store = grants if grants is not None else ext.grants

    async def gate(event: Any, ctx: Any) -> dict[str, Any] | None:
        if event.tool_name != TOOL_NAME:
            return None
        sql = getattr(event.input, "sql", None)
        sql = sql if isinstance(sql, str) else ""
        verdict = backend.classify(sql)
        if verdict.kind == "read":
            return None
        if verdict.kind != "write":  # reject, or anything unknown: refuse without asking
            return block("Refused: " + "; ".join(verdict.reasons))
        if review is not None:  # a reviewer decides, through the same ask() as a local UI
            ctx = review.context(ctx)
        call = WriteCall(ext, backend, pi, event, ctx, sql, store)
        if review is not None:
            call.timeout_s = review.settings.timeout_s or ext.approval_timeout_s
        if backend.capabilities.used(call.call_id):
            return block(
                f"Refused: the call id {call.call_id!r} was already used in this "
                "session; each call needs a new id. Nothing was run."
            )
        scope = store.scope_of(sql)
        try:
            preview, granted = await call.try_grants(scope)
            if granted:
                return None
            return await call.ask_person(tuple(verdict.reasons), scope, preview)
        except AbortError:
            reason = "Not approved: the run was aborted while the write was previewed."
            entry = ApprovalEntry(
                decision="aborted",
                args_hash=call.args_hash,
                args={"sql": sql},
                reasons=verdict.reasons,
                reason=reason,
            ).showing(query_call_view({"sql": sql}))
            try:
                await call.commit(ApprovalDecided, entry)
            except Blocked:
                pass  # blocked either way
            return block(reason)
        except Blocked as blocked:
            return block(str(blocked))

    return gate
