"""The notebook's own events of a run, beside the session's: what the reducer of
:mod:`.store` also understands.

An approval requested and resolved on a call's card, a call's decision as the audit recorded
it, a stop requested, a run that failed, and a notice to show.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..approvals.protocol import Decision

__all__ = [
    "ApprovalRequested",
    "ApprovalResolved",
    "Decided",
    "Notice",
    "RunFailed",
    "StopRequested",
]


@dataclass(frozen=True, kw_only=True)
class ApprovalRequested:
    tool_call_id: str
    reasons: tuple[str, ...] = ()
    type: Literal["approval_requested"] = "approval_requested"


@dataclass(frozen=True, kw_only=True)
class ApprovalResolved:
    tool_call_id: str
    decision: Decision  # approved, granted, rejected, expired, aborted
    edited_args: Any = None  # the arguments as the person edited them before approving
    type: Literal["approval_resolved"] = "approval_resolved"


@dataclass(frozen=True, kw_only=True)
class Decided:
    """A call's decision as the audit recorded it, learnt when the run settles: the word, who
    decided, the grant it created or ran inside, and how long the person took."""

    tool_call_id: str
    decision: Decision
    approver: str | None = None
    grant: str | None = None  # "granted scope g-… (UPDATE products, ≤ 50 rows, 30 min)", "(g-…)"
    waited_s: float | None = None
    type: Literal["decided"] = "decided"


@dataclass(frozen=True, kw_only=True)
class StopRequested:
    reason: str = "stopped"  # or "interrupted" (the kernel's interrupt button)
    type: Literal["stop_requested"] = "stop_requested"


@dataclass(frozen=True, kw_only=True)
class RunFailed:
    error: str
    type: Literal["run_failed"] = "run_failed"


@dataclass(frozen=True, kw_only=True)
class Notice:
    message: str
    level: str = "info"
    type: Literal["notice"] = "notice"
