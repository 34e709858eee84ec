"""Decisions read back from the audit: one :class:`ApprovalRecord` per ``approval`` or
``grant_use`` record (:func:`approval_records`), as a DataFrame (:func:`approvals_dataframe`,
what ``%pi_approvals`` shows), and as the database extension's ``approvals``
(:class:`AuditApprovals`). Values are as the audit stored them, so its redaction applies.

The records themselves (what a gate writes) are :mod:`.records`'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, cast

from pi_notebook.approvals.protocol import Decision, is_decision

if TYPE_CHECKING:
    import pandas as pd  # pyright: ignore[reportMissingTypeStubs]

    from ..agent.views import ViewOf

__all__ = [
    "APPROVAL_COLUMNS",
    "APPROVAL_KINDS",
    "ApprovalRecord",
    "AuditApprovals",
    "approval_records",
    "approvals_dataframe",
]

APPROVAL_KINDS = ("approval", "grant_use")
"""Audit record kinds that hold a decision."""


@dataclass(frozen=True, kw_only=True)
class ApprovalRecord:
    """One decision as read back from the audit (already redacted by it)."""

    tool_call_id: str
    tool_name: str
    args_hash: str
    decision: Decision | None
    policy_version: str | None
    sql: str | None
    user: str | None = None
    requester: str | None = None
    approver: str | None = None
    asked_because: str | None = None
    session_id: str | None = None
    reason: str | None = None
    affected_rows: int | None = None
    original_args_hash: str | None = None
    grant_id: str | None = None
    kind: str = "approval"
    audit_hash: str | None = None
    timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))


APPROVAL_COLUMNS = [
    # What a person reads first: when, what was decided about which statement, its size, who.
    "timestamp",
    "decision",
    "sql",
    "affected_rows",
    "requester",
    "approver",
    "asked_because",
    "reason",
    "tool_name",
    "kind",
    "grant_id",
    "user",
    "session_id",
    # Ids and hashes last: for joining and verifying, not for reading.
    "tool_call_id",
    "args_hash",
    "original_args_hash",
    "policy_version",
    "audit_hash",
]
"""The columns of :func:`approvals_dataframe`: every :class:`ApprovalRecord` field."""


def _code(payload: dict[str, Any], view_of: ViewOf | None, tool_name: Any, args: Any) -> str | None:
    """The code a decision's tool showed for its arguments: as the record keeps it (the
    code, or the argument that is the code), else by ``view_of`` (records written before
    approvals kept it)."""
    code, argument = payload.get("code"), payload.get("code_argument")
    if isinstance(code, str):
        return code
    if isinstance(argument, str) and isinstance(args, dict):
        shown: Any = cast(dict[str, Any], args).get(argument)
        return shown if isinstance(shown, str) else None
    if view_of is None or not isinstance(tool_name, str) or not isinstance(args, dict):
        return None
    return _opt(view_of(tool_name, args).code)


class _AuditReader(Protocol):
    def to_dataframe(
        self,
        session: str | None = None,
        tool: str | None = None,
        tool_call_id: str | None = None,
        since: Any = None,
        kind: str | Sequence[str] | None = None,
    ) -> pd.DataFrame: ...


def approvals_dataframe(
    audit: _AuditReader | None,
    *,
    session: str | None = None,
    tool_call_id: str | None = None,
    call_views: ViewOf | None = None,
) -> pd.DataFrame:
    """Every decision in ``audit`` (all sessions unless ``session``), oldest first.

    Columns, in :data:`APPROVAL_COLUMNS`' order (what a person reads first, ids and hashes
    last): timestamp (UTC datetimes), decision, sql, affected_rows, requester, approver,
    asked_because (why the call needed approval, the prompt's reasons joined by "; "), reason
    (why it did not run, when it did not), tool_name, kind, grant_id, user, session_id, tool_call_id, args_hash,
    original_args_hash, policy_version, audit_hash. Values are as the audit stored them, so
    its redaction applies (a password literal in an approved statement is masked here too).
    ``audit=None`` gives the empty frame with these columns. ``sql`` is the code the tool shows
    for the approved arguments, as the record keeps it, else by ``call_views`` (default the
    log's own ``call_views``: see :func:`approval_records`).
    """
    import pandas as pd  # pyright: ignore[reportMissingTypeStubs]

    records = approval_records(
        audit, session=session, tool_call_id=tool_call_id, call_views=call_views
    )
    frame: Any = pd.DataFrame([asdict(r) for r in records], columns=APPROVAL_COLUMNS)
    frame["timestamp"] = cast(Any, pd).to_datetime(frame["timestamp"], utc=True)
    frame["affected_rows"] = frame["affected_rows"].astype("Int64")
    return frame


def approval_records(
    audit: _AuditReader | None,
    *,
    session: str | None = None,
    tool_call_id: str | None = None,
    call_views: ViewOf | None = None,
) -> list[ApprovalRecord]:
    """The decisions of :func:`approvals_dataframe`, as :class:`ApprovalRecord` objects.

    A record's ``sql`` is the code its tool shows for the approved arguments, as the record
    keeps it (``code``, or the argument ``code_argument`` names, from the call's view when the
    decision was written), so any reader shows it without the tool's package. A record
    without them (written before they were kept, or by a tool that shows no code) is read
    through ``call_views(tool_name, args).code`` (default: the log's ``call_views``, which a
    session sets to its tools' views); ``None`` without views or for a tool that shows none.
    """
    if audit is None:
        return []
    view_of: ViewOf | None = (
        call_views if call_views is not None else getattr(audit, "call_views", None)
    )
    frame: Any = audit.to_dataframe(
        session=session, tool_call_id=tool_call_id, kind=list(APPROVAL_KINDS)
    )
    rows_of_frame: list[dict[str, Any]] = frame.to_dict("records")
    out = [_record_of_row(row, view_of) for row in rows_of_frame]
    out.sort(key=lambda r: r.timestamp)  # the audit orders by session; decisions read by time
    return out


def _record_of_row(row: dict[str, Any], view_of: ViewOf | None) -> ApprovalRecord:
    """One decision record of the audit's frame as an :class:`ApprovalRecord`."""
    raw: Any = row.get("payload")
    payload: dict[str, Any] = cast(dict[str, Any], raw) if isinstance(raw, dict) else {}
    args: Any = payload.get("args")
    preview: Any = payload.get("preview")
    grant: Any = payload.get("grant")
    rows: Any = (
        cast(dict[str, Any], preview).get("affected_rows") if isinstance(preview, dict) else None
    )
    kind = str(row.get("kind"))
    return ApprovalRecord(
        tool_call_id=str(row.get("tool_call_id")),
        tool_name=str(row.get("tool_name")),
        args_hash=str(payload.get("args_hash", "")),
        decision=_decision(payload.get("decision", "granted" if kind == "grant_use" else None)),
        policy_version=_opt(row.get("policy_version")),
        sql=_code(payload, view_of, row.get("tool_name"), args),
        user=_opt(payload.get("user", row.get("user"))),
        requester=_opt(payload.get("requester")),
        approver=_opt(payload.get("approver")),
        asked_because=_reasons(payload.get("reasons")),
        session_id=_opt(row.get("session_id")),
        reason=_opt(payload.get("reason")),
        affected_rows=rows if isinstance(rows, int) else None,
        original_args_hash=_opt(payload.get("original_args_hash")),
        grant_id=(
            _opt(cast(dict[str, Any], grant).get("grant_id")) if isinstance(grant, dict) else None
        ),
        kind=kind,
        audit_hash=_opt(row.get("hash")),
        timestamp=_datetime(row.get("timestamp")),
    )


def _decision(value: Any) -> Decision | None:
    """The decision stored, or ``None`` for a record that holds none we know."""
    return value if is_decision(value) else None


def _datetime(value: Any) -> datetime:
    to_py = getattr(value, "to_pydatetime", None)
    value = to_py() if callable(to_py) else value
    if not isinstance(value, datetime):
        raise ValueError(f"audit record without a timestamp: {value!r}")
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _reasons(value: Any) -> str | None:
    if isinstance(value, list | tuple):
        texts = [str(v) for v in cast(list[Any], value) if v]
        return "; ".join(texts) or None
    return _opt(value)


def _opt(value: Any) -> str | None:
    return None if value is None or value != value else str(value)  # NaN from pandas is None


class AuditApprovals:
    """The decisions of one audit log, as the database extension's ``approvals`` shows them.

    Args:
        audit: the audit log (``None``: no audit, so no decisions on record).
        call_views: how the tools' calls read (a record's ``sql`` is its code); ``None``: the
            log's own ``call_views``.
    """

    def __init__(self, audit: _AuditReader | None, call_views: ViewOf | None = None) -> None:
        self.audit = audit
        self.call_views = call_views

    def records(
        self, *, tool_call_id: str | None = None, session: str | None = None
    ) -> list[ApprovalRecord]:
        """Decisions in order, optionally of one call or one session."""
        return approval_records(
            self.audit, session=session, tool_call_id=tool_call_id, call_views=self.call_views
        )

    def to_dataframe(
        self, *, tool_call_id: str | None = None, session: str | None = None
    ) -> pd.DataFrame:
        """Decisions as a DataFrame (see :func:`approvals_dataframe`)."""
        return approvals_dataframe(
            self.audit, session=session, tool_call_id=tool_call_id, call_views=self.call_views
        )
