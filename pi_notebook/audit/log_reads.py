"""What an audit log reads back from its store: the chain check, the records as a DataFrame,
the last hash of each call, and one row per call.

:class:`LogReads` is the read side of :class:`~.log.AuditLog`; each read first makes what
the log queued visible (``_written``: a flush while the log is open).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from .chain import VerifyReport
from .schema import records, verify_store

if TYPE_CHECKING:
    import pandas as pd

    from ..agent.views import ViewOf

__all__ = ["LogReads"]


class LogReads(ABC):
    """The reads of an audit log over its store (``engine``), for its session
    (``session_id``), showing calls as ``call_views`` says."""

    engine: sa.Engine
    session_id: str
    call_views: ViewOf | None

    @abstractmethod
    def _written(self) -> None:
        """Make every record queued so far visible to a read (a no-op once closed)."""

    def verify(self, session_id: str | None = None) -> VerifyReport:
        """Check the hash chains: every session in the store, or only ``session_id``.

        Returns:
            A ``VerifyReport``; ``ok`` is true only if no record was altered, inserted or
            removed. ``problems`` names the session, sequence number and what happened.
        """
        self._written()
        return verify_store(self.engine, session_id)

    def to_dataframe(
        self,
        session: str | None = None,
        tool: str | None = None,
        tool_call_id: str | None = None,
        since: Any = None,
        kind: str | Sequence[str] | None = None,
        decode: bool = True,
        user: str | None = None,
    ) -> pd.DataFrame:
        """The records as a DataFrame, one row per record, ordered by session and seq (D9).

        Args:
            session: Only this session id.
            tool: Only records of this tool name.
            tool_call_id: Only records of this call.
            since: Only records at or after this time (datetime, pandas Timestamp or ISO
                string; naive means UTC).
            kind: Only records of this kind (or these kinds).
            user: Only records written by this user's sessions (``current_user()`` of the
                writing process), e.g. one person's records in a team's shared store.
            decode: Payloads as dicts (the default); ``False`` keeps them as JSON text,
                which is several times faster on large stores (``decode_payloads(frame)``
                decodes later).

        Every filter runs in the store's SQL: nothing is loaded to be thrown away.

        Returns:
            Columns id, session_id, seq, timestamp (datetime64, UTC), kind, tool_call_id,
            tool_name, user, policy_version, payload (dict, or JSON text), prev_hash, hash.
        """
        from .frames import read_records

        self._written()
        return read_records(
            self.engine,
            session=session,
            tool=tool,
            tool_call_id=tool_call_id,
            since=since,
            kind=kind,
            user=user,
            decode=decode,
        )

    def last_hashes(self, call_ids: Sequence[str], session: str | None = None) -> dict[str, str]:
        """The hash of each call's last record in the store (after a flush).

        Args:
            call_ids: the calls to look up; ids with no record are left out of the result.
            session: the session they belong to; ``None`` means this log's.

        Blocks on the store: call it from a thread when on the event loop.
        """
        self._written()
        wanted = [str(c) for c in call_ids]
        out: dict[str, str] = {}
        if not wanted:
            return out
        sid = self.session_id if session is None else session
        c = records.c
        with self.engine.connect() as conn:
            for start in range(0, len(wanted), 500):
                rows = conn.execute(
                    sa.select(c.tool_call_id, c.hash)
                    .where(c.session_id == sid, c.tool_call_id.in_(wanted[start : start + 500]))
                    .order_by(c.seq)
                )
                for call_id, digest in rows:
                    out[call_id] = digest
        return out

    def calls_dataframe(
        self, session: str | None = None, *, call_views: ViewOf | None = None
    ) -> pd.DataFrame:
        """One row per (session_id, tool_call_id): session_id, tool_call_id, tool_name, sql,
        args_hash, decision, outcome, rows, is_error, approval_wait_ms, execution_ms,
        duration_ms (without the approval wait), started_at, ended_at (see
        ``calls.summarise_calls``). ``session=None`` means every session in the store.
        ``call_views`` (default: this log's) says how the tools' calls read."""
        from .calls import summarise_calls
        from .frames import read_records

        self._written()
        return summarise_calls(
            read_records(self.engine, session=session, calls_only=True, decode=False),
            call_views if call_views is not None else self.call_views,
        )
