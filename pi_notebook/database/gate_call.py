"""One write call going through the database gate (:mod:`.gate`): measured, run inside a live
grant, or put to the person, with the decision committed to the audit before anything runs.

An approval becomes a capability bound to (call id, args hash, previewed rows). An edited
statement is classified again (:mod:`.gate_edit`): a read runs as it is, a write is previewed
again and, when its measured effect differs from the one shown, asked about again.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from pi_notebook.approvals import (
    ApprovalDecided,
    ApprovalEntry,
    ApprovalOutcome,
    ApprovalRequest,
    GateAnswer,
    Grant,
    GrantUsed,
    WritePreview,
    ask,
    commit_record,
)
from pi_notebook.approvals.tools import unrecorded
from pi_notebook.database.gate_edit import (
    Blocked,
    Edit,
    Final,
    again_reasons,
    edited_final,
    unseen,
)
from pi_notebook.database.gate_records import (
    approval_entry,
    approved_entry,
    preview_record,
    suggest_grant,
    within_grant,
)
from pi_notebook.database.grants import ActiveGrant, GrantStore
from pi_notebook.database.names import TOOL_NAME
from pi_notebook.database.scope import StatementScope
from pi_notebook.database.triggers import hidden_effects
from pi_notebook.database.views import query_call_view
from pi_notebook.errors import AbortError, GrantError, QueryRefused
from pi_notebook.sql import POLICY_VERSION
from pi_notebook.sql.backend import DatabaseBackend, query_args_hash

if TYPE_CHECKING:
    from pi_notebook.extensions import ExtensionAPI

__all__ = [
    "MAX_ASK_ROUNDS",
    "NO_UI_REASON",
    "TITLE",
    "Blocked",
    "Edit",
    "Final",
    "GateSettings",
    "WriteCall",
    "audit_of",
    "block",
]

TITLE = "Database write"
NO_UI_REASON = "Write query requires interactive approval."
MAX_ASK_ROUNDS = 4
"""How often one call asks again about edits whose preview differs, before refusing."""


class GateSettings(Protocol):
    """What the gate needs of its extension (``DatabaseExtension`` is one)."""

    @property
    def approval_timeout_s(self) -> float: ...

    @property
    def capability_ttl_s(self) -> float: ...

    @property
    def grants(self) -> GrantStore: ...

    @property
    def edits(self) -> dict[str, Edit]: ...


class WriteCall:
    """One write call going through the gate: its preview, grants, the person's decision
    and what runs after it."""

    def __init__(
        self,
        ext: GateSettings,
        backend: DatabaseBackend,
        pi: ExtensionAPI,
        event: Any,
        ctx: Any,
        sql: str,
        grants: GrantStore,
    ) -> None:
        self.ext, self.backend, self.event, self.ctx, self.sql = ext, backend, event, ctx, sql
        self.grants = grants
        self._hidden: dict[frozenset[str], str | None] = {}
        self.call_id: str = event.tool_call_id
        self.audit = audit_of(pi, ctx)
        self.signal = getattr(ctx, "signal", None)
        self.args_hash = query_args_hash(sql, backend.dialect)
        self.edited_others: dict[str, Any] = {}
        self.timeout_s: float = ext.approval_timeout_s

    async def preview(self, sql: str) -> WritePreview | None:
        """The backend's measurement of ``sql`` (``None`` if the backend cannot preview).

        Raises:
            AbortError: the run was aborted.
            Blocked: the preview's own audit record could not be committed.
        """
        measure = getattr(self.backend, "preview", None)
        if measure is None:
            return None
        try:
            return await measure(self.call_id, sql, signal=self.signal, audit=self.audit)
        except AbortError:
            raise
        except QueryRefused as exc:
            raise Blocked(f"Not run: the write could not be previewed ({exc})") from None
        except Exception as exc:  # the database may be down: the person still decides
            return WritePreview(affected_rows=None, note=f"The preview failed: {exc}")

    async def commit(self, record: type[ApprovalDecided], entry: ApprovalEntry) -> None:
        try:
            await commit_record(
                self.audit,
                record(
                    entry=entry,
                    tool_call_id=self.call_id,
                    tool_name=TOOL_NAME,
                    policy_version=POLICY_VERSION,
                ),
            )
        except Exception as exc:  # an approval we cannot record is no approval
            raise Blocked(unrecorded(exc)) from None

    async def try_grants(self, scope: StatementScope | None) -> tuple[WritePreview | None, bool]:
        """Run inside a live grant if one covers the statement: (preview taken, granted)."""
        candidates = self.grants.candidates(scope)
        if not candidates or scope is None or await self.hidden(scope) is not None:
            return None, False  # asked, and told why no grant covers it
        preview = None
        if any(g.grant.max_rows is not None for g in candidates):
            preview = await self.preview(self.sql)
        rows = preview.affected_rows if preview is not None else None
        chosen = next(
            (g for g in candidates if within_grant(g, rows, measured=preview is not None)), None
        )
        if chosen is None:  # outside every grant by row count: ask, with the preview taken
            return preview, False
        # Re-checked (still in force, not revoked or expired meanwhile) and counted before the
        # use is written: a grant_use record always stands for a use that happened.
        current = self.grants.used(chosen.grant_id)
        if current is None:
            return preview, False
        entry = ApprovalEntry(
            decision="granted",
            args_hash=self.args_hash,
            args={"sql": self.sql},
            via="grant",
            approver=current.approver,
            preview=preview_record(preview),
            grant=current.describe(),
        ).showing(query_call_view({"sql": self.sql}))
        await self.commit(GrantUsed, entry)
        self.backend.capabilities.grant(
            self.call_id,
            self.args_hash,
            self.ext.capability_ttl_s,
            expected_rows=rows,
            max_rows=current.grant.max_rows,
        )
        return preview, True

    async def ask_person(
        self,
        reasons: tuple[str, ...],
        scope: StatementScope | None,
        preview: WritePreview | None,
    ) -> dict[str, Any] | None:
        """Put the write to the person (measured first when there is a UI), record the
        decision, and let the call run as approved (or edited) or block it. An approved edit
        whose measured effect differs from the one shown is asked about again, at most
        :data:`MAX_ASK_ROUNDS` times."""
        if getattr(self.ctx, "has_ui", False):
            if preview is None:
                preview = await self.preview(self.sql)
            why = await self.hidden(scope) if scope is not None else None
            if why is not None:
                reasons = (*reasons, f"no scoped grant can cover it: {why}")
        shown = Final(sql=self.sql, args_hash=self.args_hash, kind="write", preview=preview)
        for round_ in range(1, MAX_ASK_ROUNDS + 1):
            request = await self._request(shown, reasons, scope)
            # As in the chapter, a confirm-only UI is asked confirm("Database write", sql).
            answer = await ask(request, self.ctx, message=shown.sql, no_ui_reason=NO_UI_REASON)
            entry = approval_entry(answer, request)
            if shown.sql != self.sql:  # asked again about an edit: the record keeps both
                entry = replace(
                    entry, original_args={"sql": self.sql}, original_args_hash=self.args_hash
                )
            final: Final | None = None
            active: ActiveGrant | None = None
            if answer.approved and answer.outcome is not None:
                last = round_ == MAX_ASK_ROUNDS
                final, active, again = await self._approved(answer.outcome, entry, shown, last)
                if again:
                    # The person approved the text, not its unseen effect: ask again with
                    # the edit's own preview (the reasons say why).
                    reasons = again_reasons(final, shown)
                    shown, scope = final, self.grants.scope_of(final.sql)
                    continue
                entry = approved_entry(
                    entry,
                    original_sql=self.sql,
                    original_args_hash=self.args_hash,
                    sql=final.sql,
                    args_hash=final.args_hash,
                    preview=final.preview,
                    active=active,
                )
            return await self._settle(entry, answer, final, active)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    async def _request(
        self, shown: Final, reasons: tuple[str, ...], scope: StatementScope | None
    ) -> ApprovalRequest:
        return ApprovalRequest(
            tool_call_id=self.call_id,
            tool_name=TOOL_NAME,
            title=TITLE,
            args={"sql": shown.sql},
            view=query_call_view({"sql": shown.sql}),
            args_hash=shown.args_hash,
            reasons=reasons,
            preview=shown.preview,
            editable=True,
            timeout_s=self.timeout_s,
            grant_scope=await self.suggest(scope, shown.preview),
        )

    async def _approved(
        self, outcome: ApprovalOutcome, entry: ApprovalEntry, shown: Final, last: bool
    ) -> tuple[Final, ActiveGrant | None, bool]:
        """What an approval lets run: ``(final, grant made, ask again)``; asked again when
        an edit's measured effect was not shown (refused instead on the ``last`` round). A
        refusal is recorded, then raised as :class:`Blocked`."""
        try:
            final = await self._final(outcome.edited_args, shown)
            if unseen(final, shown):
                if last:
                    raise Blocked(
                        "Not run: the statement was edited again and again; "
                        "approve it as it stands."
                    )
                return final, None, True
            active = None
            if outcome.grant is not None:
                active = self.grants.prepare(
                    outcome.grant, approver=outcome.approver, origin_call_id=self.call_id
                )
            return final, active, False
        except (Blocked, GrantError) as exc:
            reason = str(exc) if isinstance(exc, Blocked) else f"Not run: {exc}."
            await self.commit(ApprovalDecided, replace(entry, decision="refused", reason=reason))
            raise Blocked(reason) from None

    async def _settle(
        self,
        entry: ApprovalEntry,
        answer: GateAnswer,
        final: Final | None,
        active: ActiveGrant | None,
    ) -> dict[str, Any] | None:
        await self.commit(ApprovalDecided, entry)
        if final is None:
            return block(answer.reason)
        if active is not None:
            self.grants.activate(active)
        for name, value in self.edited_others.items():  # the tool's other arguments, as edited
            setattr(self.event.input, name, value)
        if final.sql != self.sql:
            self.event.input.sql = final.sql  # execute runs what the person approved
            self.ext.edits[self.call_id] = Edit(
                original_sql=self.sql,
                original_args_hash=self.args_hash,
                sql=final.sql,
                args_hash=final.args_hash,
                kind=final.kind,
            )
        if final.kind == "write":
            rows = final.preview.affected_rows if final.preview is not None else None
            self.backend.capabilities.grant(
                self.call_id, final.args_hash, self.ext.capability_ttl_s, expected_rows=rows
            )
        return None

    async def _final(self, edited: dict[str, Any] | None, shown: Final) -> Final:
        """What runs after an approval: the statement shown, or the person's edit of it (the
        tool's other arguments, as edited, are kept for :meth:`_settle`)."""
        final, others = await edited_final(
            edited, shown, self.event.input, self.backend, self.preview
        )
        if others is not None:
            self.edited_others = others
        return final

    async def suggest(
        self, scope: StatementScope | None, preview: WritePreview | None
    ) -> Grant | None:
        """The grant offered in the prompt (see :func:`_suggest`); none for a statement whose
        written tables have triggers, rules or cascades (no grant could cover it)."""
        if scope is None or await self.hidden(scope) is not None:
            return None
        return suggest_grant(scope, preview)

    async def hidden(self, scope: StatementScope) -> str | None:
        """Why writing the statement's tables may change more than it names (triggers, rules,
        cascades, a view), or ``None``; such a statement is outside every grant."""
        key = scope.written
        if key not in self._hidden:
            self._hidden[key] = await hidden_effects(self.backend, key, signal=self.signal)
        return self._hidden[key]


def block(reason: str) -> dict[str, Any]:
    """A ``tool_call`` handler's answer that blocks the call with ``reason``."""
    return {"block": True, "reason": reason}


def audit_of(pi: ExtensionAPI, ctx: Any) -> Any:
    """The audit log of this call: ``ctx.audit``, else the extension API's."""
    audit = getattr(ctx, "audit", None)
    return audit if audit is not None else getattr(pi, "audit", None)
