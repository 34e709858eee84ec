"""Decisions on record: the audit is the one store (D3), and this is its view of approvals.

A gate writes each decision as a durable audit record of kind ``approval`` (payload: an
:class:`ApprovalEntry`) before anything it authorises runs; a call that runs inside a scoped
grant writes ``grant_use`` instead. The audit redacts and hash-chains them like every other
record. :func:`approvals_dataframe` reads them back, one row per decision (what
``%pi_approvals`` shows); :class:`AuditApprovals` is the same view as an object (both in
:mod:`.decisions`, re-exported here).

What does not belong here: asking (:mod:`.gate`), the capability the backend consumes
(:mod:`.capabilities`), and writing the audit itself (:mod:`pi_notebook.audit`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

from pi_notebook.approvals.decisions import (
    APPROVAL_COLUMNS,
    APPROVAL_KINDS,
    ApprovalRecord,
    AuditApprovals,
    approval_records,
    approvals_dataframe,
)
from pi_notebook.approvals.protocol import Decision, is_decision
from pi_notebook.audit.records import AuditRecord
from pi_notebook.identity import requester

if TYPE_CHECKING:
    from pi_notebook.agent.views import CallView

__all__ = [
    "APPROVAL_COLUMNS",
    "APPROVAL_KINDS",
    "ApprovalDecided",
    "ApprovalEntry",
    "ApprovalRecord",
    "AuditApprovals",
    "GrantUsed",
    "ReviewStep",
    "approval_records",
    "approvals_dataframe",
]


@dataclass(frozen=True, kw_only=True)
class ApprovalEntry:
    """The payload of one ``approval`` (or ``grant_use``) audit record.

    Attributes:
        decision: see :data:`~pi_notebook.approvals.Decision`.
        args_hash: the hash the approval binds to (of the edited arguments, after an edit).
        args: the arguments approved, as shown (for SQL tools, ``{"sql": ...}``).
        reasons: why the call needed approval.
        reason: the block reason given to the model, when not approved.
        user: the login running the session.
        requester: whom the call acts for (:func:`pi_notebook.identity.requester` when the
            entry is made: the session's user, or the subject a served request acts for).
        approver: who decided: the person who answered (the UI's word, else the requester,
            who is the person at the keyboard), a grant's approver for ``granted``, ``None``
            when nobody decided (``expired``, ``aborted``, ``no_ui``).
        via: how the person was asked (``request_approval``, ``confirm``, ``none``, ``grant``).
        waited_ms: how long the decision took.
        timeout_s: the request's deadline.
        problem: why a UI answer was not accepted (it raised or was malformed).
        original_args_hash: the hash of the arguments before the person edited them.
        original_args: those arguments.
        preview: the measured effect the person saw (``affected_rows``, ``method``, ...).
        grant: the grant created by this decision, or used by this call.
        code_argument: the argument of ``args`` its tool shows as code (its view's
            ``code_argument``, e.g. ``"sql"``), so a reader without the tool's package shows
            the statement decided on; ``None`` (left out) when the tool shows none.
        code: the code its tool shows when that is not one argument of ``args``; ``None``
            (left out) otherwise. Both are set from the call's view by :meth:`showing`.
    """

    decision: Decision
    args_hash: str
    args: Mapping[str, Any]
    reasons: Sequence[str] = ()
    reason: str | None = None
    user: str | None = None
    requester: str | None = field(default_factory=requester)
    approver: str | None = None
    via: str = "none"
    waited_ms: float | None = None
    timeout_s: float | None = None
    problem: str | None = None
    original_args_hash: str | None = None
    original_args: Mapping[str, Any] | None = None
    preview: Mapping[str, Any] | None = None
    grant: Mapping[str, Any] | None = None
    code_argument: str | None = None
    code: str | None = None

    def __post_init__(self) -> None:
        if not is_decision(self.decision):
            raise ValueError(f"unknown approval decision {self.decision!r}")

    def showing(self, view: CallView | None) -> ApprovalEntry:
        """This entry with the code ``view`` (the call's view of ``args``) shows: the name of
        the argument that is the code when ``args`` holds it as shown, else the code itself;
        unchanged when there is no view or it shows no code (a tool that does not describe
        itself writes what it did before)."""
        if view is None or not isinstance(view.code, str) or not view.code:
            return self
        name = view.code_argument
        if name is not None and self.args.get(name) == view.code:
            return replace(self, code_argument=name, code=None)
        return replace(self, code_argument=None, code=view.code)

    def payload(self) -> dict[str, Any]:
        """The record's payload: plain JSON values, absent fields left out."""
        out: dict[str, Any] = {}
        for key, value in asdict(self).items():
            if value is None:
                continue
            if key in ("args", "original_args", "preview", "grant"):
                value = dict(value)
            elif key == "reasons":
                value = list(value)
            out[key] = value
        return out


@dataclass(frozen=True, kw_only=True)
class ApprovalDecided(AuditRecord):
    """The durable ``approval`` record: a gate's decision, committed before what it authorises."""

    kind: ClassVar[str] = "approval"
    durable: ClassVar[bool] = True
    entry: ApprovalEntry
    """The decision; the payload is :meth:`ApprovalEntry.payload`."""

    def payload(self) -> dict[str, Any]:
        return self.entry.payload()


@dataclass(frozen=True, kw_only=True)
class GrantUsed(ApprovalDecided):
    """The durable ``grant_use`` record: a call ran inside a scoped grant, nobody was asked."""

    kind: ClassVar[str] = "grant_use"


_REVIEW_EXTRAS: dict[str, tuple[str, ...]] = {
    "posted": (),
    "expired": ("decision",),
    "withdrawn": ("decision",),
    "refused": ("decision", "reviewer", "reason"),
    "decision": ("decision", "note", "edited_args"),
    "decision_lost": ("decision", "reviewer", "state"),
}


@dataclass(frozen=True, kw_only=True)
class ReviewStep(AuditRecord):
    """The durable ``review`` record of one step of a four-eyes review
    (:mod:`pi_notebook.approvals.review`): the request as posted, and what each event adds."""

    kind: ClassVar[str] = "review"
    durable: ClassVar[bool] = True
    event: str
    """``posted``, ``refused``, ``decision``, ``decision_lost``, ``expired`` or ``withdrawn``."""
    request_id: str
    """The review request."""
    requester: str
    """Who asked."""
    approver: str | None = None
    """Who decided (``None`` until decided)."""
    reviewers: Sequence[str] = ()
    """Who may decide."""
    args: Mapping[str, Any]
    """The arguments the decision binds to."""
    args_hash: str
    """Their hash."""
    expires_at: str
    """When the request stops being decidable (ISO 8601, UTC)."""
    decision: str | None = None
    """The decision attempted or taken (every event but ``posted``)."""
    reviewer: str | None = None
    """Who tried to decide (``refused``, ``decision_lost``)."""
    reason: str | None = None
    """Why the reviewer was refused (``refused``)."""
    note: str | None = None
    """The reviewer's note (``decision``)."""
    edited_args: Mapping[str, Any] | None = None
    """The arguments as the reviewer edited them (``decision``)."""
    state: str | None = None
    """The state the request was already in (``decision_lost``)."""

    def __post_init__(self) -> None:
        if self.event not in _REVIEW_EXTRAS:
            raise ValueError(f"unknown review event {self.event!r}")

    def payload(self) -> dict[str, Any]:
        """The request's fields, then those this event carries (present even when ``None``)."""
        out: dict[str, Any] = {
            "event": self.event,
            "request_id": self.request_id,
            "requester": self.requester,
            "approver": self.approver,
            "reviewers": list(self.reviewers),
            "args": self.args,
            "args_hash": self.args_hash,
            "expires_at": self.expires_at,
        }
        for name in _REVIEW_EXTRAS[self.event]:
            out[name] = getattr(self, name)
        return out
