"""Approval records (D3): what the user decided about which exact arguments, kept durably.

Each decision is written and committed through SQLAlchemy (table ``pi_approvals``; by default
a SQLite file in the user's data directory) before an approved statement may run. What does
not belong here: the capability that lets the backend run the statement
(:mod:`pi_notebook.approvals.capabilities`) and the hash-chained audit log.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, get_args

import pandas as pd
import sqlalchemy as sa

from pi_notebook._paths import data_dir

__all__ = ["ApprovalDecision", "ApprovalRecord", "ApprovalStore", "default_approvals_url"]

ApprovalDecision = Literal["approved", "rejected", "expired", "no_ui", "aborted"]
DECISIONS: tuple[str, ...] = get_args(ApprovalDecision)

_metadata = sa.MetaData()
approvals_table = sa.Table(
    "pi_approvals",
    _metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("tool_call_id", sa.String(200), nullable=False, index=True),
    sa.Column("tool_name", sa.String(200), nullable=False),
    sa.Column("args_hash", sa.String(64), nullable=False),
    sa.Column("decision", sa.String(16), nullable=False),
    sa.Column("user", sa.String(200), nullable=True),
    sa.Column("session_id", sa.String(200), nullable=True),
    sa.Column("timestamp", sa.DateTime(timezone=True), nullable=False),
    sa.Column("policy_version", sa.String(100), nullable=False),
    sa.Column("sql", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=True),
)


@dataclass(frozen=True, kw_only=True)
class ApprovalRecord:
    """One approval decision, bound to the canonical hash of the arguments shown."""

    tool_call_id: str
    tool_name: str
    args_hash: str
    decision: ApprovalDecision
    policy_version: str
    sql: str
    user: str | None = None
    session_id: str | None = None
    reason: str | None = None
    timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __post_init__(self) -> None:
        if self.decision not in DECISIONS:
            raise ValueError(f"unknown approval decision {self.decision!r}")


def default_approvals_url() -> str:
    """``sqlite:///<data dir>/approvals.sqlite``."""
    return f"sqlite:///{data_dir() / 'approvals.sqlite'}"


class ApprovalStore:
    """Durable store of :class:`ApprovalRecord` (thread-safe; each ``record`` commits)."""

    def __init__(self, url: str | sa.URL | None = None) -> None:
        self._engine = sa.create_engine(url or default_approvals_url())
        self._lock = threading.Lock()
        self._created = False

    def _ensure_table(self) -> None:
        if not self._created:
            _metadata.create_all(self._engine)
            self._created = True

    def record(self, rec: ApprovalRecord) -> None:
        """Insert ``rec`` and commit before returning. Raises if it could not be stored."""
        with self._lock:
            self._ensure_table()
            with self._engine.begin() as conn:
                conn.execute(approvals_table.insert().values(**asdict(rec)))

    def records(self, *, tool_call_id: str | None = None) -> list[ApprovalRecord]:
        """All stored records in insertion order, optionally for one call id."""
        with self._lock:
            self._ensure_table()
            query = sa.select(approvals_table).order_by(approvals_table.c.id)
            if tool_call_id is not None:
                query = query.where(approvals_table.c.tool_call_id == tool_call_id)
            with self._engine.connect() as conn:
                rows = conn.execute(query).mappings().all()
        return [_from_row(dict(row)) for row in rows]

    def to_dataframe(self, *, tool_call_id: str | None = None) -> pd.DataFrame:
        """The records as a DataFrame, one row each (``timestamp`` as datetimes)."""
        recs = self.records(tool_call_id=tool_call_id)
        columns = [f.name for f in approvals_table.columns if f.name != "id"]
        frame = pd.DataFrame([asdict(r) for r in recs], columns=columns)
        frame["timestamp"] = pd.to_datetime(frame["timestamp"], utc=True)
        return frame

    def close(self) -> None:
        """Release the store's connections."""
        self._engine.dispose()


def _from_row(row: dict[str, Any]) -> ApprovalRecord:
    row.pop("id", None)
    ts = row["timestamp"]
    if isinstance(ts, datetime) and ts.tzinfo is None:  # SQLite drops the zone; we store UTC
        row["timestamp"] = ts.replace(tzinfo=UTC)
    return ApprovalRecord(**row)
