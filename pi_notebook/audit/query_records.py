"""The database backend's own audit records: the final arguments it runs (durable), a capability
that did not match, a refusal, the preview of a write and its drift, and how a query ended
(its result, error or abort). A record of a statement carries it as ``sql``: that is the
record's field, not a tool's argument.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from .record_base import AuditRecord

__all__ = [
    "CapabilityMismatch",
    "FinalArgs",
    "PreviewDrift",
    "QueryAbort",
    "QueryFailure",
    "QueryRefusal",
    "QueryResult",
    "WritePreviewRecord",
]


@dataclass(frozen=True, kw_only=True)
class FinalArgs(AuditRecord):
    """What the backend is about to run, and its own verdict (durable before it runs)."""

    kind: ClassVar[str] = "final_args"
    durable: ClassVar[bool] = True
    sql: str
    """The statement."""
    args_hash: str
    """The canonical hash of the final arguments."""
    verdict: str
    """The backend's classification: ``read`` or ``write``."""
    reasons: Sequence[str] = ()
    """The classifier's reasons."""
    dialect: str = ""
    """The sqlglot dialect it was checked with."""
    db_role: str | None = None
    """The database role it runs under (PostgreSQL ``role_per_user``; ``None``, and left
    out of the payload, otherwise)."""
    omitted_at_default: ClassVar[tuple[str, ...]] = ("db_role",)


@dataclass(frozen=True, kw_only=True)
class CapabilityMismatch(AuditRecord):
    """A write without a live capability for these exact arguments (D4); nothing ran."""

    kind: ClassVar[str] = "capability_mismatch"
    durable: ClassVar[bool] = True
    sql: str | None = None
    """The statement the backend was given (``None``, and left out of the payload, for a
    tool that is not SQL)."""
    approved_hash: str | None
    """The hash the approval bound to (``None`` without one)."""
    final_hash: str
    """The hash of the final arguments."""
    reason: str
    """Why the capability did not match."""
    omitted_at_default: ClassVar[tuple[str, ...]] = ("sql",)


@dataclass(frozen=True, kw_only=True)
class QueryRefusal(AuditRecord):
    """The backend refused a statement before it reached the database."""

    kind: ClassVar[str] = "query_refused"
    sql: str
    """The statement."""
    reasons: Sequence[str] = ()
    """Why."""


@dataclass(frozen=True, kw_only=True)
class WritePreviewRecord(AuditRecord):
    """One phase of measuring a write before it is asked about: ``start`` is
    durable (committed before the measuring statement runs, and rolled back after it), then
    ``result`` or ``error``."""

    kind: ClassVar[str] = "write_preview"
    sql: str
    """The statement measured."""
    args_hash: str
    """The canonical hash of its arguments."""
    operation: str | None
    """The write's operation (``UPDATE``, ``DELETE``...), where the plan knows it."""
    phase: str
    """``start``, ``result`` or ``error``."""
    affected_rows: int | None = None
    """Rows it would change (``result``), or ``None`` where it could not be counted."""
    method: str | None = None
    """How they were counted (``rollback``, ``count``...)."""
    note: str | None = None
    """What the person is told beside the count."""
    error: str | None = None
    """The short error (``error``)."""
    db_role: str | None = None
    """The database role it was measured under (left out of the payload when ``None``)."""
    omitted_at_default: ClassVar[tuple[str, ...]] = ("db_role",)


@dataclass(frozen=True, kw_only=True)
class PreviewDrift(AuditRecord):
    """An approved write changed a different number of rows than the approval was bound to:
    it was rolled back and refused."""

    kind: ClassVar[str] = "preview_drift"
    sql: str
    """The statement."""
    args_hash: str
    """The canonical hash of its arguments."""
    expected_rows: int | None
    """The count shown to the person (``None`` when only a bound applied)."""
    max_rows: int | None
    """The grant's row bound, where a grant applied."""
    actual_rows: int | None
    """What the write would have changed (``None`` where it could not be counted)."""
    reason: str | None = None
    """Why its rows could not be counted, where they could not."""


@dataclass(frozen=True, kw_only=True)
class QueryResult(AuditRecord):
    """A statement ran."""

    kind: ClassVar[str] = "query_result"
    row_count: int
    """Rows returned (or affected, for a write)."""
    truncated: bool
    """Whether the DataFrame holds fewer rows than the statement returned."""
    duration_ms: float
    """The statement's wall time at the backend, fetch included."""
    statement_kind: str
    """``read`` or ``write``."""
    args_hash: str
    """The canonical hash of the arguments that ran."""


@dataclass(frozen=True, kw_only=True)
class QueryFailure(AuditRecord):
    """A statement failed; it was rolled back."""

    kind: ClassVar[str] = "query_error"
    error: str
    """The short, credential-free error text."""
    args_hash: str = ""
    """The canonical hash of the arguments."""


@dataclass(frozen=True, kw_only=True)
class QueryAbort(QueryFailure):
    """A statement was cancelled by an abort; it was rolled back."""

    kind: ClassVar[str] = "query_aborted"
