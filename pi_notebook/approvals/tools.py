"""Approval for any tool: enforcing ``ToolDefinition.requires_approval``.

The session calls :meth:`ToolApprovals.gate` after every extension ``tool_call`` handler ran,
so the approval binds to the hash of the canonical JSON of the *final* arguments; the wrapper
calls :meth:`ToolApprovals.check` right before ``execute``, which refuses a call whose
arguments changed since (audited as ``capability_mismatch`` with both hashes) or that needs an
approval it does not hold; :meth:`ToolApprovals.end` burns the call's capability when the call
ends, however it ends.

``requires_approval`` is ``True`` (every call asks), ``False`` or a callable of the validated
parameters returning the reason a call needs approval, or ``None`` (it may be async; if it
raises, the call is blocked). What does not belong here: asking (:mod:`.gate`), SQL (the
database extension has its own gate, with previews and grants).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from pydantic import BaseModel, ValidationError

from pi_notebook.agent.views import CallDescriber, call_view
from pi_notebook.ai.abort import AbortSignal
from pi_notebook.approvals.capabilities import CapabilityStore
from pi_notebook.approvals.gate import GateAnswer, ask
from pi_notebook.approvals.hashing import args_hash, canonical_args, canonical_json
from pi_notebook.approvals.protocol import ApprovalRequest
from pi_notebook.approvals.records import ApprovalDecided, ApprovalEntry
from pi_notebook.audit.durable import commit_before
from pi_notebook.audit.records import AuditRecord, CapabilityMismatch
from pi_notebook.errors import ApprovalRefused

__all__ = ["TOOL_POLICY_VERSION", "ApprovalRule", "ToolApprovals", "commit_record", "unrecorded"]

log = logging.getLogger(__name__)

TOOL_POLICY_VERSION = "tool-approval/1"
"""Recorded with every decision about a ``requires_approval`` tool."""

ApprovalRule: TypeAlias = bool | Callable[[Any], Any]


async def commit_record(audit: Any, record: AuditRecord) -> None:
    """Commit a durable audit record before what it authorises (``audit=None``: no audit).

    Raises:
        Exception: the record could not be committed; whatever it authorises must not happen.
    """
    await commit_before(audit, record)


def unrecorded(exc: BaseException) -> str:
    """The block reason when a decision could not be committed to the audit."""
    return (
        f"Not run: the audit store is unavailable, so the decision could not be recorded "
        f"({_describe(exc)}). Fix the audit store and retry."
    )


@dataclass(kw_only=True)
class _Edit:
    original_args: dict[str, Any]
    original_hash: str
    args: dict[str, Any]
    args_hash: str


class ToolApprovals:
    """Approvals of ``requires_approval`` tools in one session.

    Args:
        audit: returns the session's audit log (or ``None``) when a record is written.
        timeout_s: how long a person has to decide; no decision is a denial.
        capability_ttl_s: how long an approval stays usable before ``execute`` starts.
    """

    def __init__(
        self, audit: Callable[[], Any], *, timeout_s: float = 30.0, capability_ttl_s: float = 120.0
    ) -> None:
        self._audit = audit
        self.timeout_s = timeout_s
        self.capability_ttl_s = capability_ttl_s
        self.capabilities = CapabilityStore()
        self._approved: set[str] = set()
        self._edits: dict[str, _Edit] = {}

    async def requirement(
        self, tool_name: str, rule: ApprovalRule | None, params: Any
    ) -> str | None:
        """Why this call needs approval, or ``None``. May raise (the rule's own error)."""
        if rule is None or rule is False:
            return None
        if rule is True:
            return f"{tool_name} asks for approval before every call"
        value = rule(params)
        if inspect.isawaitable(value):
            value = await value
        if value is None or value is False:
            return None
        if isinstance(value, str) and value.strip():
            return value.strip()
        return f"{tool_name} asks for approval for these arguments"

    async def before(
        self,
        definition: Any,
        tool_call_id: str,
        params: BaseModel,
        signal: AbortSignal | None,
        ctx: Callable[[], Any],
    ) -> str | None:
        """The session's hook after the ``tool_call`` chain: :meth:`gate` for the tool
        ``definition`` (a ``ToolDefinition``); ``ctx()`` makes the call's context."""
        rule = definition.requires_approval
        if not rule:
            return None
        return await self.gate(
            tool_call_id=tool_call_id,
            tool_name=definition.name,
            title=definition.label or definition.name,
            rule=rule,
            params=params,
            ctx=ctx(),
            signal=signal,
            describe=getattr(definition, "describe_call", None),
        )

    async def before_execute(self, tool_call_id: str, definition: Any, params: BaseModel) -> None:
        """The wrapper's hook right before ``execute``: :meth:`check` for ``definition``."""
        await self.check(
            tool_call_id=tool_call_id,
            tool_name=definition.name,
            rule=definition.requires_approval,
            params=params,
        )

    async def gate(
        self,
        *,
        tool_call_id: str,
        tool_name: str,
        title: str,
        rule: ApprovalRule | None,
        params: BaseModel,
        ctx: Any,
        signal: AbortSignal | None,
        describe: CallDescriber | None = None,
    ) -> str | None:
        """Ask for approval if the call needs it; the block reason, or ``None`` to go on.

        ``describe`` is the tool's ``describe_call``: the request shows the call by it.

        On approval the decision is committed to the audit first, then the call gets a
        one-shot capability for the hash of its final arguments. Edited arguments are
        validated against the tool's parameter model and written into ``params`` (which is
        what ``execute`` receives: its whole state, extra arguments included, becomes the
        validated edit); the approval binds to them.
        """
        try:
            reason = await self.requirement(tool_name, rule, params)
        except Exception as exc:
            return f"Not run: the approval check of {tool_name} failed ({_describe(exc)})."
        if reason is None:
            return None
        if self.capabilities.used(tool_call_id):
            return (
                f"Refused: the call id {tool_call_id!r} was already used in this session; "
                "each call needs a new id. Nothing was run."
            )
        try:
            args = canonical_args(params)
            approved_hash = args_hash(args)
        except Exception as exc:
            return f"Not run: the arguments cannot be approved ({_describe(exc)})."
        request = ApprovalRequest(
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            title=title,
            args=args,
            args_hash=approved_hash,
            reasons=(reason,),
            editable=True,
            timeout_s=self.timeout_s,
            view=call_view(title, args, describe),
        )
        answer = await ask(request, ctx, signal=signal)
        entry, block = self._settle(answer, request, params)
        unrecorded_reason = await self._commit(entry, tool_call_id, tool_name)
        if unrecorded_reason is not None:
            return unrecorded_reason
        if block is not None:
            return block
        self.capabilities.grant(tool_call_id, entry.args_hash, self.capability_ttl_s)
        self._approved.add(tool_call_id)
        return None

    async def _commit(self, entry: ApprovalEntry, tool_call_id: str, tool_name: str) -> str | None:
        """Commit the decision to the audit; the block reason when it cannot be recorded (an
        approval we cannot record is no approval: its edit is dropped too)."""
        try:
            await commit_record(
                self._audit(),
                ApprovalDecided(
                    entry=entry,
                    tool_call_id=tool_call_id,
                    tool_name=tool_name,
                    policy_version=TOOL_POLICY_VERSION,
                ),
            )
        except Exception as exc:
            self._edits.pop(tool_call_id, None)
            return unrecorded(exc)
        return None

    def _settle(
        self, answer: GateAnswer, request: ApprovalRequest, params: BaseModel
    ) -> tuple[ApprovalEntry, str | None]:
        """The record of ``answer``, and the block reason (``None`` when the call may run)."""
        base: dict[str, Any] = {
            "args_hash": request.args_hash,
            "args": request.args,
            "reasons": request.reasons,
            "via": answer.via,
            "waited_ms": answer.waited_ms,
            "timeout_s": request.timeout_s,
            "problem": answer.problem,
            "approver": answer.outcome.approver if answer.outcome else None,
        }
        shown = ApprovalEntry(decision="approved", **base).showing(request.view)
        base.update(code_argument=shown.code_argument, code=shown.code)
        outcome = answer.outcome
        if not answer.approved or outcome is None:
            return ApprovalEntry(
                decision=answer.decision, reason=answer.reason, **base
            ), answer.reason
        if outcome.grant is not None:
            reason = "Not run: scoped grants are offered for database statements only."
            return ApprovalEntry(decision="refused", reason=reason, **base), reason
        if outcome.edited_args is None:
            return ApprovalEntry(decision="approved", **base), None
        try:
            edited = type(params).model_validate(outcome.edited_args)
            _replace_state(params, edited)
            args = canonical_args(params)
            new_hash = args_hash(args)
        except (ValidationError, TypeError, ValueError) as exc:
            reason = f"Not run: the edited arguments are not valid ({_describe(exc)})."
            return ApprovalEntry(decision="refused", reason=reason, **base), reason
        self._edits[request.tool_call_id] = _Edit(
            original_args=request.args,
            original_hash=request.args_hash,
            args=args,
            args_hash=new_hash,
        )
        base.update(
            args=args,
            args_hash=new_hash,
            original_args=request.args,
            original_args_hash=request.args_hash,
            code=None,  # the code shown was the original's; the edited code argument stays named
        )
        return ApprovalEntry(decision="approved", **base), None

    async def check(
        self, *, tool_call_id: str, tool_name: str, rule: ApprovalRule | None, params: BaseModel
    ) -> None:
        """Right before ``execute``: the final arguments must be the approved ones.

        Raises:
            ApprovalRefused: the arguments changed since they were approved, the approval was
                used or expired, or the call needs an approval it does not hold. The audit
                gets ``capability_mismatch`` with both hashes first.
        """
        if tool_call_id in self._approved:
            final_hash = self._final_hash(params)
            check = self.capabilities.consume(tool_call_id, final_hash)
            if check.ok:
                return
            await self._mismatch(
                tool_call_id, tool_name, check.approved_hash, final_hash, check.reason
            )
            raise ApprovalRefused(f"Refused: {check.reason}. Nothing was run.")
        if rule is None or rule is False:
            return  # the common case: nothing to check
        try:
            reason = await self.requirement(tool_name, rule, params)
        except Exception as exc:
            reason = f"its approval check failed ({_describe(exc)})"
        if reason is not None:
            text = "this call needs approval and has none"
            final_hash = self._final_hash(params)
            await self._mismatch(tool_call_id, tool_name, None, final_hash, f"{text}: {reason}")
            raise ApprovalRefused(f"Refused: {text} ({reason}). Nothing was run.")

    @staticmethod
    def _final_hash(params: BaseModel) -> str:
        try:
            return args_hash(canonical_args(params))
        except Exception as exc:
            raise ApprovalRefused(
                f"Refused: the final arguments cannot be checked ({_describe(exc)}). "
                "Nothing was run."
            ) from None

    async def _mismatch(
        self, tool_call_id: str, tool_name: str, approved: str | None, final: str, reason: str
    ) -> None:
        try:
            await commit_record(
                self._audit(),
                CapabilityMismatch(
                    approved_hash=approved,
                    final_hash=final,
                    reason=reason,
                    tool_call_id=tool_call_id,
                    tool_name=tool_name,
                    policy_version=TOOL_POLICY_VERSION,
                ),
            )
        except Exception:  # the call is refused either way
            log.exception("audit: capability_mismatch of %s could not be recorded", tool_call_id)

    def edit_note(self, tool_call_id: str) -> str | None:
        """What the model is told when the person edited this call's arguments."""
        edit = self._edits.get(tool_call_id)
        if edit is None:
            return None
        return (
            "Note: the user edited the arguments before approving this call; it ran with "
            f"{canonical_json(edit.args)}"
        )

    def end(self, tool_call_id: str) -> None:
        """The call is over: its capability dies and its id is burnt."""
        if tool_call_id in self._approved:
            self._approved.discard(tool_call_id)
            self.capabilities.revoke(tool_call_id)
        self._edits.pop(tool_call_id, None)


def _replace_state(params: BaseModel, edited: BaseModel) -> None:
    """Make ``params`` (the object ``execute`` gets) the validated ``edited`` model: its
    fields, and its extra arguments too (a model with ``extra="allow"``, such as an MCP tool's,
    keeps every argument there), private attributes and which fields were set."""
    params.__setstate__(edited.__getstate__())


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__
