"""Four-eyes review: a shared queue of approval requests that another person decides.

A requester's gate posts an :class:`~pi_notebook.approvals.ApprovalRequest` to a
:class:`ReviewQueue` (its own table, ``pi_review_requests``, in the team's audit database:
SQLite for one machine, PostgreSQL for a team) and waits; a reviewer in another process lists
the open requests with :meth:`ReviewQueue.pending` and decides one with
:meth:`ReviewQueue.decide`. The rules:

- the reviewer is the deciding process's :func:`~pi_notebook.identity.current_user`;
- the requester never decides their own request, and nobody outside the request's list of
  reviewers decides it: both raise :class:`~pi_notebook.errors.ReviewRefused` (a
  ``PermissionError``), the request stays open, and the attempt is audited;
- a decision is one conditional ``UPDATE ... WHERE state = 'open'`` that also requires the
  deadline not to have passed, so two reviewers racing cannot both decide, and nobody decides a
  request after its requester stopped waiting (``expire`` is the same kind of update).

Audit: every step (``posted``, ``refused``, ``decision``, ``decision_lost``, ``expired``,
``withdrawn``) is a durable audit record of kind ``review`` whose payload carries ``requester``
and ``approver`` (``None`` until decided). They go to the ``AuditLog`` given to the queue, else
to the queue's own ``AuditLog`` in the same store (its own session, the process's user), so
both sides' records land in the shared audit with its hash chain.

What does not belong here: waiting for a decision inside a gate (:mod:`.review_wait`).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, cast

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from pi_notebook.approvals.protocol import ApprovalRequest, WritePreview
from pi_notebook.approvals.records import ReviewStep
from pi_notebook.audit.durable import record_before
from pi_notebook.errors import ConfigurationError, ReviewRefused, StateError
from pi_notebook.identity import current_user

if TYPE_CHECKING:
    import pandas as pd  # pyright: ignore[reportMissingTypeStubs]

__all__ = [
    "REVIEW_COLUMNS",
    "REVIEW_KIND",
    "REVIEW_TABLE",
    "ReviewQueue",
    "ReviewRequest",
    "ReviewState",
    "deadline",
    "preview_dict",
]

REVIEW_TABLE = "pi_review_requests"
REVIEW_KIND = ReviewStep.kind
"""The audit record kind of every review step."""
SAMPLE_ROWS = 20
"""Rows of a preview's sample kept in the store for the reviewer."""

ReviewState = Literal["open", "approved", "rejected", "expired", "withdrawn"]

_metadata = sa.MetaData()
_requests = sa.Table(
    REVIEW_TABLE,
    _metadata,
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


REVIEW_COLUMNS = [
    "request_id",
    "requester",
    "tool_name",
    "args",
    "affected_rows",
    "reasons",
    "expires_at",
    "reviewers",
    "created_at",
    "tool_call_id",
    "args_hash",
]
"""The columns of :meth:`ReviewQueue.to_dataframe`: what a reviewer reads first, ids last."""


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


def _utc(value: Any) -> datetime:
    if not isinstance(value, datetime):
        raise ValueError(f"review store: not a timestamp: {value!r}")
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _now() -> datetime:
    return datetime.now(UTC)


def _stored(moment: datetime, backend: str) -> datetime:
    """A UTC moment as the store compares it (SQLite keeps naive text, so naive UTC)."""
    moment = moment.astimezone(UTC)
    return moment.replace(tzinfo=None) if backend == "sqlite" else moment


class ReviewQueue:
    """The open and decided review requests of one store.

    Args:
        url: the store's SQLAlchemy URL (the team's audit database) or an Engine.
        audit: where the review steps are recorded; ``None`` opens the queue's own
            ``AuditLog`` on the same store when the first step is recorded.

    Raises:
        sqlalchemy.exc.SQLAlchemyError: the store cannot be reached or its table created.
    """

    def __init__(self, url: str | sa.URL | sa.Engine, *, audit: Any = None) -> None:
        from pi_notebook.audit.engine import make_engine

        self._own_engine = not isinstance(url, sa.Engine)
        self.engine: sa.Engine = url if isinstance(url, sa.Engine) else make_engine(url)
        self._backend = self.engine.dialect.name
        self._audit = audit
        self._own_audit: Any = None
        try:
            _metadata.create_all(self.engine, checkfirst=True)
        except SQLAlchemyError:  # another process created it at the same moment
            if not sa.inspect(self.engine).has_table(REVIEW_TABLE):
                raise

    # -- audit ------------------------------------------------------------------------------
    @property
    def audit(self) -> Any:
        """The audit log the review steps go to (opened on first use when none was given)."""
        if self._audit is None:
            from pi_notebook.audit import AuditLog

            self._own_audit = AuditLog(self.engine)
            self._audit = self._own_audit
        return self._audit

    def _record(
        self, event: str, found: ReviewRequest, *, approver: str | None = None, **more: Any
    ) -> None:
        """A durable ``review`` record of one step (raises if it cannot be committed)."""
        step = ReviewStep(
            event=event,
            request_id=found.request_id,
            requester=found.requester,
            approver=approver,
            reviewers=found.reviewers,
            args=found.args,
            args_hash=found.args_hash,
            expires_at=found.expires_at.isoformat(),
            tool_call_id=found.tool_call_id,
            tool_name=found.tool_name,
            **more,
        )
        record_before(self.audit, step)

    # -- the requester's side -----------------------------------------------------------------
    def post(
        self,
        request: ApprovalRequest,
        requester: str,
        reviewers: list[str] | tuple[str, ...],
        expires_at: datetime,
    ) -> ReviewRequest:
        """Put ``request`` up for review by ``reviewers`` until ``expires_at``; the request
        as stored (its ``request_id`` is what a reviewer decides).

        Raises:
            ConfigurationError: no reviewer other than the requester is named.
            sqlalchemy.exc.SQLAlchemyError: the store cannot be written.
            AuditUnavailableError: the ``posted`` record could not be committed (the request
                is withdrawn again).
        """
        names = tuple(dict.fromkeys(r for r in reviewers if r and r != requester))
        if not names:
            raise ConfigurationError("a review needs at least one reviewer besides the requester")
        found = ReviewRequest(
            request_id=uuid.uuid4().hex,
            tool_call_id=request.tool_call_id,
            requester=requester,
            reviewers=names,
            tool_name=request.tool_name,
            args=dict(request.args),
            args_hash=request.args_hash,
            reasons=tuple(request.reasons),
            preview=preview_dict(request.preview),
            created_at=_now(),
            expires_at=expires_at.astimezone(UTC),
        )
        with self.engine.begin() as conn:
            conn.execute(
                _requests.insert().values(
                    request_id=found.request_id,
                    tool_call_id=found.tool_call_id,
                    tool_name=found.tool_name,
                    requester=found.requester,
                    reviewers=json.dumps(list(found.reviewers)),
                    args=json.dumps(found.args),
                    args_hash=found.args_hash,
                    reasons=json.dumps(list(found.reasons)),
                    preview=json.dumps(found.preview) if found.preview is not None else None,
                    created_at=_stored(found.created_at, self._backend),
                    expires_at=_stored(found.expires_at, self._backend),
                    state="open",
                )
            )
        try:
            self._record("posted", found)
        except Exception:
            self._close(found.request_id, "withdrawn")
            raise
        return found

    def get(self, request_id: str) -> ReviewRequest | None:
        """The request ``request_id`` in any state, or ``None`` if the store has none."""
        with self.engine.connect() as conn:
            row = (
                conn.execute(sa.select(_requests).where(_requests.c.request_id == request_id))
                .mappings()
                .first()
            )
        return _from_row(dict(row)) if row is not None else None

    def expire(self, request_id: str) -> bool:
        """Close an open request as ``expired`` (its requester stopped waiting): whether it
        was still open (``False``: it was decided first). Audited when it closes."""
        return self._close_audited(request_id, "expired")

    def withdraw(self, request_id: str) -> bool:
        """Close an open request as ``withdrawn`` (its run was aborted): whether it was open."""
        return self._close_audited(request_id, "withdrawn")

    def _close_audited(self, request_id: str, state: ReviewState) -> bool:
        closed = self._close(request_id, state)
        found = self.get(request_id) if closed else None
        if found is not None:
            self._record(state, found, decision=state)
        return closed

    def _close(self, request_id: str, state: ReviewState) -> bool:
        with self.engine.begin() as conn:
            done = conn.execute(
                _requests.update()
                .where(
                    _requests.c.request_id == request_id,
                    _requests.c.state == "open",
                )
                .values(state=state, decided_at=_stored(_now(), self._backend))
            )
        return done.rowcount == 1

    # -- the reviewer's side ------------------------------------------------------------------
    def pending(self, reviewer: str | None = None) -> list[ReviewRequest]:
        """Open requests whose deadline has not passed, oldest first (only those ``reviewer``
        may decide, when given)."""
        now = _stored(_now(), self._backend)
        with self.engine.connect() as conn:
            rows = (
                conn.execute(
                    sa.select(_requests)
                    .where(
                        _requests.c.state == "open",
                        _requests.c.expires_at > now,
                    )
                    .order_by(_requests.c.created_at)
                )
                .mappings()
                .all()
            )
        found = [_from_row(dict(r)) for r in rows]
        if reviewer is not None:
            found = [r for r in found if reviewer in r.reviewers and reviewer != r.requester]
        return found

    def to_dataframe(self, reviewer: str | None = None) -> pd.DataFrame:
        """:meth:`pending` as a DataFrame (columns :data:`REVIEW_COLUMNS`)."""
        import pandas as pd  # pyright: ignore[reportMissingTypeStubs]

        rows: list[dict[str, Any]] = []
        for r in self.pending(reviewer):
            rows.append(
                {
                    "request_id": r.request_id,
                    "requester": r.requester,
                    "tool_name": r.tool_name,
                    "args": r.args.get("sql", json.dumps(r.args)),
                    "affected_rows": (r.preview or {}).get("affected_rows"),
                    "reasons": "; ".join(r.reasons),
                    "expires_at": r.expires_at,
                    "reviewers": ", ".join(r.reviewers),
                    "created_at": r.created_at,
                    "tool_call_id": r.tool_call_id,
                    "args_hash": r.args_hash,
                }
            )
        frame: Any = pd.DataFrame(rows, columns=REVIEW_COLUMNS)
        frame["affected_rows"] = frame["affected_rows"].astype("Int64")
        return cast("pd.DataFrame", frame)

    def decide(
        self,
        request_id: str,
        decision: str,
        reviewer: str,
        note: str | None = None,
        *,
        edited_args: dict[str, Any] | None = None,
    ) -> ReviewRequest:
        """Approve or reject an open request as ``reviewer``; the request as decided.

        ``edited_args`` (with ``approved``) replaces the arguments, e.g. ``{"sql": ...}``: as
        with a local edit, the requester's gate checks it again, and a statement whose preview
        differs from the one shown comes back as a new request with its own preview.

        Raises:
            ValueError: ``decision`` is not ``approved`` or ``rejected``.
            ReviewRefused: ``reviewer`` is not this process's user, is the requester, or is
                not on the request's list (the request stays open; the attempt is audited).
            StateError: no such request, or it is no longer open (decided, expired or
                withdrawn, perhaps by a reviewer who decided first).
            AuditUnavailableError: the decision could not be recorded; it was not made.
        """
        if decision not in ("approved", "rejected"):
            raise ValueError(f"a review decision is 'approved' or 'rejected', not {decision!r}")
        if edited_args is not None and decision != "approved":
            raise ValueError("only an approval carries edited arguments")
        found = self.get(request_id)
        if found is None:
            raise StateError(f"no review request {request_id!r} in this store")
        why = _refusal(found, reviewer)
        if why is not None:
            self._record("refused", found, decision=decision, reviewer=reviewer, reason=why)
            raise ReviewRefused(f"Refused: {why}; the request stays open.")
        if found.state != "open" or found.expires_at <= _now():
            raise StateError(_closed_text(found, expired_now=found.state == "open"))
        # On record first: a decision the requester may act on is always in the audit.
        self._record(
            "decision",
            found,
            approver=reviewer,
            decision=decision,
            note=note,
            edited_args=edited_args,
        )
        now = _now()
        with self.engine.begin() as conn:
            done = conn.execute(
                _requests.update()
                .where(
                    _requests.c.request_id == request_id,
                    _requests.c.state == "open",
                    _requests.c.expires_at > _stored(now, self._backend),
                )
                .values(
                    state=decision,
                    reviewer=reviewer,
                    note=note,
                    edited_args=json.dumps(edited_args) if edited_args is not None else None,
                    decided_at=_stored(now, self._backend),
                )
            )
        after = self.get(request_id) or found
        if done.rowcount != 1:
            self._record(
                "decision_lost",
                after,
                approver=after.reviewer,
                decision=decision,
                reviewer=reviewer,
                state=after.state,
            )
            raise StateError(_closed_text(after, expired_now=after.state == "open"))
        return after

    def close(self) -> None:
        """Close the queue's own audit log and engine (not those it was given)."""
        if self._own_audit is not None:
            self._own_audit.close()
            self._own_audit = None
            self._audit = None
        if self._own_engine:
            self.engine.dispose()

    def __enter__(self) -> ReviewQueue:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _refusal(found: ReviewRequest, reviewer: str) -> str | None:
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


def _closed_text(found: ReviewRequest, *, expired_now: bool = False) -> str:
    if expired_now or found.state == "expired":
        return f"review request {found.request_id} expired: nothing was decided"
    if found.state == "withdrawn":
        return f"review request {found.request_id} was withdrawn by its requester"
    return f"review request {found.request_id} was already {found.state} by {found.reviewer}"


def _from_row(row: dict[str, Any]) -> ReviewRequest:
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
        created_at=_utc(row["created_at"]),
        expires_at=_utc(row["expires_at"]),
        state=row["state"],
        reviewer=row["reviewer"],
        note=row["note"],
        decided_at=_utc(decided) if decided is not None else None,
        edited_args=json.loads(row["edited_args"]) if row.get("edited_args") else None,
    )


def deadline(timeout_s: float) -> datetime:
    """The moment ``timeout_s`` seconds from now (UTC)."""
    return _now() + timedelta(seconds=timeout_s)
