"""The review store's table and what one of its rows is: ``pi_review_requests`` (in the team's
audit database), :class:`ReviewRequest` as read back, a preview as stored for the reviewer, and
moments as the store compares them (SQLite keeps naive UTC text).

:class:`~.review.ReviewQueue` posts, lists and decides the requests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import sqlalchemy as sa

from pi_notebook.approvals.protocol import WritePreview
from pi_notebook.identity import current_user

__all__ = [
    "METADATA",
    "REQUESTS",
    "REVIEW_TABLE",
    "SAMPLE_ROWS",
    "ReviewRequest",
    "ReviewState",
    "as_utc",
    "closed_text",
    "deadline",
    "preview_dict",
    "refusal",
    "request_of_row",
    "stored_moment",
    "utc_now",
]

REVIEW_TABLE = "pi_review_requests"
SAMPLE_ROWS = 20
"""Rows of a preview's sample kept in the store for the reviewer."""

ReviewState = Literal["open", "approved", "rejected", "expired", "withdrawn"]

METADATA = sa.MetaData()
"""The metadata of the review table (created on first use)."""
REQUESTS = sa.Table(
    REVIEW_TABLE,
    METADATA,
    sa.Column("request_id", sa.String(64), primary_key=True),
    sa.Column("tool_call_id", sa.String(255), nullable=False),
    sa.Column("tool_name", sa.String(255), nullable=False),
    sa.Column("requester", sa.String(255), nullable=False),
    sa.Column("reviewers", sa.Text, nullable=False),  # JSON list
    sa.Column("args", sa.Text, nullable=False),  # JSON object
    sa.Column("args_hash", sa.String(128), nullable=False),
    sa.Column("reasons", sa.Text, nullable=False),  # JSON list
    sa.Column("preview", sa.Text, nullable=True),  # JSON object
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("reviewer", sa.String(255), nullable=True),
    sa.Column("note", sa.Text, nullable=True),
    sa.Column("edited_args", sa.Text, nullable=True),  # JSON object: the reviewer's edit
    sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
)


@dataclass(frozen=True, kw_only=True)
class ReviewRequest:
    """One request in the review store, as read back.

    Attributes:
        request_id: the request's id in the store.
        tool_call_id: the call that asks.
        requester: who asked (never its reviewer).
        reviewers: who may decide it.
        tool_name: the tool being called.
        args: the arguments the decision binds to (for SQL, ``{"sql": ...}``).
        args_hash: their hash (what the requester's gate checks again).
        reasons: why the call needs approval.
        preview: the measured effect (``affected_rows``, ``plan``, ``method``, ``note``,
            ``sample`` as a list of row dicts), or ``None``.
        created_at: when it was posted (UTC).
        expires_at: when it stops being decidable (UTC).
        state: ``open``, ``approved``, ``rejected``, ``expired`` or ``withdrawn``.
        reviewer: who decided (``None`` while open or when nobody decided).
        note: the reviewer's note.
        decided_at: when it left ``open`` (UTC), if it did.
        edited_args: the arguments as the reviewer edited them before approving (the
            requester's gate previews an edit whose effect differs again and posts it anew).
    """

    request_id: str
    tool_call_id: str
    requester: str
    reviewers: tuple[str, ...]
    tool_name: str
    args: dict[str, Any]
    args_hash: str
    reasons: tuple[str, ...]
    preview: dict[str, Any] | None
    created_at: datetime
    expires_at: datetime
    state: ReviewState = "open"
    reviewer: str | None = None
    note: str | None = None
    decided_at: datetime | None = None
    edited_args: dict[str, Any] | None = None


def preview_dict(preview: WritePreview | None) -> dict[str, Any] | None:
    """``preview`` as plain JSON values (its sample: the first :data:`SAMPLE_ROWS` rows)."""
    if preview is None:
        return None
    out: dict[str, Any] = {
        "affected_rows": preview.affected_rows,
        "plan": preview.plan,
        "method": preview.method,
        "note": preview.note,
    }
    sample: Any = preview.sample
    if sample is not None:
        out["sample"] = json.loads(
            sample.head(SAMPLE_ROWS).to_json(orient="records", date_format="iso")
        )
    return out


def as_utc(value: Any) -> datetime:
    """A stored timestamp as an aware UTC datetime."""
    if not isinstance(value, datetime):
        raise ValueError(f"review store: not a timestamp: {value!r}")
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utc_now() -> datetime:
    """Now, in UTC."""
    return datetime.now(UTC)


def stored_moment(moment: datetime, backend: str) -> datetime:
    """A UTC moment as the store compares it (SQLite keeps naive text, so naive UTC)."""
    moment = moment.astimezone(UTC)
    return moment.replace(tzinfo=None) if backend == "sqlite" else moment


def request_of_row(row: dict[str, Any]) -> ReviewRequest:
    """A row of the review table as a :class:`ReviewRequest`."""
    preview: Any = json.loads(row["preview"]) if row["preview"] else None
    decided = row["decided_at"]
    return ReviewRequest(
        request_id=row["request_id"],
        tool_call_id=row["tool_call_id"],
        requester=row["requester"],
        reviewers=tuple(json.loads(row["reviewers"])),
        tool_name=row["tool_name"],
        args=json.loads(row["args"]),
        args_hash=row["args_hash"],
        reasons=tuple(json.loads(row["reasons"])),
        preview=preview,
        created_at=as_utc(row["created_at"]),
        expires_at=as_utc(row["expires_at"]),
        state=row["state"],
        reviewer=row["reviewer"],
        note=row["note"],
        decided_at=as_utc(decided) if decided is not None else None,
        edited_args=json.loads(row["edited_args"]) if row.get("edited_args") else None,
    )


def deadline(timeout_s: float) -> datetime:
    """The moment ``timeout_s`` seconds from now (UTC)."""
    return utc_now() + timedelta(seconds=timeout_s)


def refusal(found: ReviewRequest, reviewer: str) -> str | None:
    """Why ``reviewer`` may not decide ``found`` (not this process's user, its requester, or
    not on its list), or ``None``."""
    me = current_user()
    if reviewer != me:
        return f"{reviewer!r} is not the user of this process ({me!r}); decide as yourself"
    if reviewer == found.requester:
        return f"{reviewer!r} asked for this request and cannot review it (four eyes)"
    if reviewer not in found.reviewers:
        return (
            f"{reviewer!r} is not a reviewer of this request (reviewers: "
            f"{', '.join(found.reviewers)})"
        )
    return None


def closed_text(found: ReviewRequest, *, expired_now: bool = False) -> str:
    """Why ``found`` can no longer be decided."""
    if expired_now or found.state == "expired":
        return f"review request {found.request_id} expired: nothing was decided"
    if found.state == "withdrawn":
        return f"review request {found.request_id} was withdrawn by its requester"
    return f"review request {found.request_id} was already {found.state} by {found.reviewer}"
