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
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from pi_notebook.approvals import (
    REJECTED_REASON,
    ApprovalDecided,
    ApprovalEntry,
    ApprovalRequest,
    GateAnswer,
    Grant,
    GrantUsed,
    WritePreview,
    ask,
    commit_record,
)
from pi_notebook.approvals.review_wait import ReviewWaiter
from pi_notebook.approvals.tools import unrecorded
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
    "NO_UI_REASON",
    "REJECTED_REASON",
    "TITLE",
    "TOOL_NAME",
    "Edit",
    "GateSettings",
    "audit_of",
    "make_gate",
]

TITLE = "Database write"
NO_UI_REASON = "Write query requires interactive approval."
GRANT_SUGGESTION_TTL_S = 1800.0
MAX_ASK_ROUNDS = 4
"""How often one call asks again about edits whose preview differs, before refusing."""
GRANT_SUGGESTION_ROWS_IF_NONE = 100
"""The row bound offered when the preview counted no rows."""


@dataclass(frozen=True, kw_only=True)
class Edit:
    """A statement the person edited before approving (the model is told in the result)."""

    original_sql: str
    original_args_hash: str
    sql: str
    args_hash: str
    kind: str


@dataclass(frozen=True, kw_only=True)
class _Final:
    """What may run once the decision is on record."""

    sql: str
    args_hash: str
    kind: str  # "read" or "write"
    preview: WritePreview | None
    reasons: tuple[str, ...] = ()


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
            return _block("Refused: " + "; ".join(verdict.reasons))
        if review is not None:  # a reviewer decides, through the same ask() as a local UI
            ctx = review.context(ctx)
        call = _Call(ext, backend, pi, event, ctx, sql, store)
        if review is not None:
            call.timeout_s = review.settings.timeout_s or ext.approval_timeout_s
        if backend.capabilities.used(call.call_id):
            return _block(
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
            )
            try:
                await call.commit(ApprovalDecided, entry)
            except _Blocked:
                pass  # blocked either way
            return _block(reason)
        except _Blocked as blocked:
            return _block(str(blocked))

    return gate


class _Blocked(Exception):
    """The call is blocked with this text (raised inside the gate only)."""


class _Call:
    """One write call going through the gate."""

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
            _Blocked: the preview's own audit record could not be committed.
        """
        measure = getattr(self.backend, "preview", None)
        if measure is None:
            return None
        try:
            return await measure(self.call_id, sql, signal=self.signal, audit=self.audit)
        except AbortError:
            raise
        except QueryRefused as exc:
            raise _Blocked(f"Not run: the write could not be previewed ({exc})") from None
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
            raise _Blocked(unrecorded(exc)) from None

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
            (g for g in candidates if _within(g, rows, measured=preview is not None)), None
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
            preview=_preview_record(preview),
            grant=current.describe(),
        )
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
        if getattr(self.ctx, "has_ui", False):
            if preview is None:
                preview = await self.preview(self.sql)
            why = await self.hidden(scope) if scope is not None else None
            if why is not None:
                reasons = (*reasons, f"no scoped grant can cover it: {why}")
        shown = _Final(sql=self.sql, args_hash=self.args_hash, kind="write", preview=preview)
        for round_ in range(1, MAX_ASK_ROUNDS + 1):
            request = ApprovalRequest(
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
            # As in the chapter, a confirm-only UI is asked confirm("Database write", sql).
            answer = await ask(request, self.ctx, message=shown.sql, no_ui_reason=NO_UI_REASON)
            entry = _entry(answer, request)
            if shown.sql != self.sql:  # asked again about an edit: the record keeps both
                entry = replace(
                    entry, original_args={"sql": self.sql}, original_args_hash=self.args_hash
                )
            final: _Final | None = None
            active: ActiveGrant | None = None
            if answer.approved and answer.outcome is not None:
                try:
                    final = await self._final(answer.outcome.edited_args, shown)
                    if _unseen(final, shown):
                        if round_ == MAX_ASK_ROUNDS:
                            raise _Blocked(
                                "Not run: the statement was edited again and again; "
                                "approve it as it stands."
                            )
                        # The person approved the text, not its unseen effect: ask again with
                        # the edit's own preview (the reasons say why).
                        reasons = _again_reasons(final, shown)
                        shown, scope = final, self.grants.scope_of(final.sql)
                        continue
                    if answer.outcome.grant is not None:
                        active = self.grants.prepare(
                            answer.outcome.grant,
                            approver=answer.outcome.approver,
                            origin_call_id=self.call_id,
                        )
                except (_Blocked, GrantError) as exc:
                    reason = str(exc) if isinstance(exc, _Blocked) else f"Not run: {exc}."
                    await self.commit(
                        ApprovalDecided, replace(entry, decision="refused", reason=reason)
                    )
                    raise _Blocked(reason) from None
                entry = _approved_entry(entry, self, final, active)
            return await self._settle(entry, answer, final, active)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    async def _settle(
        self,
        entry: ApprovalEntry,
        answer: GateAnswer,
        final: _Final | None,
        active: ActiveGrant | None,
    ) -> dict[str, Any] | None:
        await self.commit(ApprovalDecided, entry)
        if final is None:
            return _block(answer.reason)
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

    async def _final(self, edited: dict[str, Any] | None, shown: _Final) -> _Final:
        """What runs after an approval: the statement shown, or the person's edit of it."""
        if edited is None:
            return shown
        new_sql = edited.get("sql")
        unknown = sorted(set(edited) - set(type(self.event.input).model_fields))
        if unknown or not isinstance(new_sql, str) or not new_sql.strip():
            raise _Blocked(
                "Not run: an edit gives the statement as sql (and only the tool's "
                f"own arguments{': not ' + ', '.join(unknown) if unknown else ''})."
            )
        try:
            checked = type(self.event.input).model_validate(
                {**self.event.input.model_dump(), **edited}
            )
            self.edited_others = {k: getattr(checked, k) for k in edited if k != "sql"}
        except ValidationError as exc:
            raise _Blocked(
                f"Not run: the edited arguments are not valid ({exc.error_count()} "
                f"problem(s): {exc.errors()[0]['msg']})."
            ) from None
        if new_sql == shown.sql:
            return shown
        verdict = self.backend.classify(new_sql)
        new_hash = query_args_hash(new_sql, self.backend.dialect)
        if verdict.kind == "read":
            return _Final(sql=new_sql, args_hash=new_hash, kind="read", preview=None)
        if verdict.kind != "write":
            raise _Blocked(
                "Refused: the edited statement may not run: " + "; ".join(verdict.reasons)
            )
        return _Final(
            sql=new_sql,
            args_hash=new_hash,
            kind="write",
            preview=await self.preview(new_sql),
            reasons=tuple(verdict.reasons),
        )

    async def suggest(
        self, scope: StatementScope | None, preview: WritePreview | None
    ) -> Grant | None:
        """The grant offered in the prompt (see :func:`_suggest`); none for a statement whose
        written tables have triggers, rules or cascades (no grant could cover it)."""
        if scope is None or await self.hidden(scope) is not None:
            return None
        return _suggest(scope, preview)

    async def hidden(self, scope: StatementScope) -> str | None:
        """Why writing the statement's tables may change more than it names (triggers, rules,
        cascades, a view), or ``None``; such a statement is outside every grant."""
        key = scope.written
        if key not in self._hidden:
            self._hidden[key] = await hidden_effects(self.backend, key, signal=self.signal)
        return self._hidden[key]


def _rows(preview: WritePreview | None) -> int | None:
    return preview.affected_rows if preview is not None else None


def _unseen(final: _Final, shown: _Final) -> bool:
    """Whether an approved edit is a write whose measured effect the person has not seen: a
    different statement whose previewed row count differs from the count shown."""
    return (
        final.kind == "write"
        and final.sql != shown.sql
        and _rows(final.preview) != _rows(shown.preview)
    )


def _again_reasons(final: _Final, shown: _Final) -> tuple[str, ...]:
    def count(rows: int | None) -> str:
        return "an unknown number of rows" if rows is None else f"{rows} row(s)"

    why = (
        f"you edited the statement: it would change {count(_rows(final.preview))}, "
        f"not {count(_rows(shown.preview))} as shown before; approve it as edited"
    )
    return (why, *final.reasons)


def _within(grant: ActiveGrant, rows: int | None, *, measured: bool) -> bool:
    bound = grant.grant.max_rows
    if bound is None or not measured:  # unmeasured: the backend enforces the bound itself
        return True
    return rows is not None and rows <= bound


def _suggest(scope: StatementScope | None, preview: WritePreview | None) -> Grant | None:
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


def _preview_record(preview: WritePreview | None) -> dict[str, Any] | None:
    if preview is None:
        return None
    return {"affected_rows": preview.affected_rows, "method": preview.method, "note": preview.note}


def _entry(answer: GateAnswer, request: ApprovalRequest) -> ApprovalEntry:
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
        preview=_preview_record(request.preview),
    )


def _approved_entry(
    entry: ApprovalEntry, call: _Call, final: _Final, active: ActiveGrant | None
) -> ApprovalEntry:
    grant = active.describe() if active is not None else None
    if final.sql == call.sql:
        return replace(entry, grant=grant)
    return replace(
        entry,
        args={"sql": final.sql},
        args_hash=final.args_hash,
        original_args={"sql": call.sql},
        original_args_hash=call.args_hash,
        preview=_preview_record(final.preview),
        grant=grant,
    )


def _block(reason: str) -> dict[str, Any]:
    return {"block": True, "reason": reason}


def audit_of(pi: ExtensionAPI, ctx: Any) -> Any:
    """The audit log of this call: ``ctx.audit``, else the extension API's."""
    audit = getattr(ctx, "audit", None)
    return audit if audit is not None else getattr(pi, "audit", None)
