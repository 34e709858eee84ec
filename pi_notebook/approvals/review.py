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
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from pi_notebook.approvals.protocol import ApprovalRequest
from pi_notebook.approvals.records import ReviewStep
from pi_notebook.approvals.review_store import (
    METADATA,
    REQUESTS,
    REVIEW_TABLE,
    ReviewRequest,
    ReviewState,
    closed_text,
    deadline,
    preview_dict,
    refusal,
    request_of_row,
    stored_moment,
    utc_now,
)
from pi_notebook.audit.durable import record_before
from pi_notebook.errors import ConfigurationError, ReviewRefused, StateError

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

REVIEW_KIND = ReviewStep.kind
"""The audit record kind of every review step."""

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
            METADATA.create_all(self.engine, checkfirst=True)
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
            created_at=utc_now(),
            expires_at=expires_at.astimezone(UTC),
        )
        with self.engine.begin() as conn:
            conn.execute(
                REQUESTS.insert().values(
                    request_id=found.request_id,
                    tool_call_id=found.tool_call_id,
                    tool_name=found.tool_name,
                    requester=found.requester,
                    reviewers=json.dumps(list(found.reviewers)),
                    args=json.dumps(found.args),
                    args_hash=found.args_hash,
                    reasons=json.dumps(list(found.reasons)),
                    preview=json.dumps(found.preview) if found.preview is not None else None,
                    created_at=stored_moment(found.created_at, self._backend),
                    expires_at=stored_moment(found.expires_at, self._backend),
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
                conn.execute(sa.select(REQUESTS).where(REQUESTS.c.request_id == request_id))
                .mappings()
                .first()
            )
        return request_of_row(dict(row)) if row is not None else None

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
                REQUESTS.update()
                .where(
                    REQUESTS.c.request_id == request_id,
                    REQUESTS.c.state == "open",
                )
                .values(state=state, decided_at=stored_moment(utc_now(), self._backend))
            )
        return done.rowcount == 1

    # -- the reviewer's side ------------------------------------------------------------------
    def pending(self, reviewer: str | None = None) -> list[ReviewRequest]:
        """Open requests whose deadline has not passed, oldest first (only those ``reviewer``
        may decide, when given)."""
        now = stored_moment(utc_now(), self._backend)
        with self.engine.connect() as conn:
            rows = (
                conn.execute(
                    sa.select(REQUESTS)
                    .where(
                        REQUESTS.c.state == "open",
                        REQUESTS.c.expires_at > now,
                    )
                    .order_by(REQUESTS.c.created_at)
                )
                .mappings()
                .all()
            )
        found = [request_of_row(dict(r)) for r in rows]
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
        found = self._decidable(request_id, decision, reviewer, edited_args)
        # On record first: a decision the requester may act on is always in the audit.
        self._record(
            "decision",
            found,
            approver=reviewer,
            decision=decision,
            note=note,
            edited_args=edited_args,
        )
        done = self._mark_decided(request_id, decision, reviewer, note, edited_args)
        after = self.get(request_id) or found
        if not done:
            self._record(
                "decision_lost",
                after,
                approver=after.reviewer,
                decision=decision,
                reviewer=reviewer,
                state=after.state,
            )
            raise StateError(closed_text(after, expired_now=after.state == "open"))
        return after

    def _decidable(
        self,
        request_id: str,
        decision: str,
        reviewer: str,
        edited_args: dict[str, Any] | None,
    ) -> ReviewRequest:
        """The request, when ``reviewer`` may make ``decision`` on it now (see
        :meth:`decide` for what is raised; a refused reviewer is audited)."""
        if decision not in ("approved", "rejected"):
            raise ValueError(f"a review decision is 'approved' or 'rejected', not {decision!r}")
        if edited_args is not None and decision != "approved":
            raise ValueError("only an approval carries edited arguments")
        found = self.get(request_id)
        if found is None:
            raise StateError(f"no review request {request_id!r} in this store")
        why = refusal(found, reviewer)
        if why is not None:
            self._record("refused", found, decision=decision, reviewer=reviewer, reason=why)
            raise ReviewRefused(f"Refused: {why}; the request stays open.")
        if found.state != "open" or found.expires_at <= utc_now():
            raise StateError(closed_text(found, expired_now=found.state == "open"))
        return found

    def _mark_decided(
        self,
        request_id: str,
        decision: str,
        reviewer: str,
        note: str | None,
        edited_args: dict[str, Any] | None,
    ) -> bool:
        """The one conditional update that decides: whether the request was still open and
        within its deadline (``False``: another reviewer, an expiry or a withdrawal won)."""
        now = utc_now()
        with self.engine.begin() as conn:
            done = conn.execute(
                REQUESTS.update()
                .where(
                    REQUESTS.c.request_id == request_id,
                    REQUESTS.c.state == "open",
                    REQUESTS.c.expires_at > stored_moment(now, self._backend),
                )
                .values(
                    state=decision,
                    reviewer=reviewer,
                    note=note,
                    edited_args=json.dumps(edited_args) if edited_args is not None else None,
                    decided_at=stored_moment(now, self._backend),
                )
            )
        return done.rowcount == 1

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
