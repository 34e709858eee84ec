"""Provenance of a run's record: the audit hashes its calls end with, and its own record.

When a run settles, :func:`call_stamps` reads from the audit, for each call of the run, the
hash of its last record, its arguments hash and whether a grant let it run; the record's
output is digested (:func:`pi_notebook.audit.notebook.output_digest`) and
:func:`record_output` writes a durable ``notebook_output`` record ``{"run_id",
"output_digest", "calls"}`` whose hash stamps the output's metadata. A shared ``.ipynb`` can
then be checked against the store (``pi_notebook.audit.verify_notebook``).

Both functions block on the store (a flush and a read): call them in a worker thread. They
never raise: without an audit, or when it cannot be read, the stamps say ``None``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from ..approvals import is_decision
from ..audit.durable import record_before
from ..audit.records import NotebookOutput
from .store import CardState, Decided

__all__ = [
    "CallStamp",
    "args_hash_of",
    "call_stamps",
    "grant_words",
    "record_output",
    "stamped_calls",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class CallStamp:
    """What the audit says about one call of the run."""

    tool_call_id: str
    audit_hash: str | None = None
    args_hash: str | None = None
    granted: bool = False
    approval: str | None = None
    approver: str | None = None
    grant: dict[str, Any] | None = None
    waited_ms: float | None = None

    def decided(self) -> Decided | None:
        """The call's decision as the audit recorded it (``None``: it recorded none).

        A call the person was asked about keeps the person's word (``approved``, also when
        the answer was a grant); a call that ran inside a grant without asking is
        ``granted``."""
        if self.approval is not None and is_decision(self.approval):
            grant = f"granted scope {grant_words(self.grant)}" if self.grant else None
            waited = self.waited_ms / 1000 if self.waited_ms is not None else None
            return Decided(
                tool_call_id=self.tool_call_id,
                decision=self.approval,
                approver=self.approver,
                grant=grant,
                waited_s=waited,
            )
        if self.granted:
            grant_id = (self.grant or {}).get("grant_id")
            return Decided(
                tool_call_id=self.tool_call_id,
                decision="granted",
                approver=self.approver,
                grant=f"({grant_id})" if grant_id else None,
            )
        return None


def grant_words(grant: dict[str, Any]) -> str:
    """``g-1a2b (UPDATE products, ≤ 50 rows, 30 min)``: a grant's id and scope, in words."""
    operations = " ".join(str(op) for op in grant.get("operations") or ())
    tables = ", ".join(str(t) for t in grant.get("tables") or ())
    parts = [f"{operations} {tables}".strip()]
    if grant.get("max_rows") is not None:
        parts.append(f"≤ {grant['max_rows']} rows")
    ttl = grant.get("ttl_s")
    if isinstance(ttl, int | float):
        parts.append(f"{ttl / 60:g} min" if ttl >= 60 else f"{ttl:g} s")
    scope = ", ".join(p for p in parts if p)
    return f"{grant.get('grant_id', '?')} ({scope})" if scope else str(grant.get("grant_id", "?"))


def args_hash_of(args: Any) -> str:
    """SHA-256 of the canonical JSON of ``args`` (for calls the audit kept no hash of)."""
    text = json.dumps(args, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _records(audit: Any, session_id: str, since: dt.datetime, kind: str | None = None) -> Any:
    return audit.to_dataframe(session=session_id, since=since, kind=kind)


def call_stamps(
    audit: Any, session_id: str, call_ids: list[str], since: dt.datetime
) -> dict[str, CallStamp]:
    """Per call id of this run (records at or after ``since``): last hash, args hash, grant."""
    if audit is None or not call_ids:
        return {}
    try:
        frame = _records(audit, session_id, since)
    except Exception:
        log.exception("pi_notebook: could not read the audit to stamp the run")
        return {}
    wanted = set(call_ids)
    found: dict[str, dict[str, Any]] = {}
    for call_id, kind, payload, hash_ in zip(
        frame["tool_call_id"], frame["kind"], frame["payload"], frame["hash"], strict=True
    ):
        if call_id not in wanted:
            continue
        row = found.setdefault(call_id, {})
        row["audit_hash"] = hash_  # records come in seq order: the last one wins
        payload = payload if isinstance(payload, dict) else {}
        if kind == "final_args" and payload.get("args_hash"):
            row["args_hash"] = payload["args_hash"]
        elif kind == "approval":
            row.setdefault("args_hash", payload.get("args_hash"))
            row["approval"] = payload.get("decision")
            row["approver"] = payload.get("approver")
            row["grant"] = payload.get("grant") if isinstance(payload.get("grant"), dict) else None
            waited = payload.get("waited_ms")
            row["waited_ms"] = float(waited) if isinstance(waited, int | float) else None
        elif kind == "grant_use":
            row["granted"] = True
            row["approver"] = payload.get("approver")
            row["grant"] = payload.get("grant") if isinstance(payload.get("grant"), dict) else None
    return {call_id: CallStamp(tool_call_id=call_id, **row) for call_id, row in found.items()}


def record_output(
    audit: Any, session_id: str, record: NotebookOutput, since: dt.datetime
) -> str | None:
    """Write the durable ``notebook_output`` record; returns its hash (``None`` if it failed)."""
    if audit is None:
        return None
    try:
        record_before(audit, record)
        frame = _records(audit, session_id, since, kind=record.kind)
    except Exception:
        log.exception("pi_notebook: could not record the run's output in the audit")
        return None
    for stored, hash_ in zip(
        reversed(list(frame["payload"])), reversed(list(frame["hash"])), strict=True
    ):
        if isinstance(stored, dict) and stored.get("run_id") == record.run_id:
            return str(hash_)
    return None


def stamped_calls(cards: list[CardState], stamps: dict[str, CallStamp]) -> list[dict[str, Any]]:
    """The calls of a settled run as its record's stamp lists them: id, tool, the hash of its
    arguments (the audit's, else the result's, else computed here), decision, outcome, rows
    and the hash of its last audit record."""
    calls: list[dict[str, Any]] = []
    for card in cards:
        stamp = stamps.get(card.tool_call_id)
        details = card.details if isinstance(card.details, dict) else {}
        args_hash = (stamp.args_hash if stamp else None) or details.get("args_hash")
        calls.append(
            {
                "tool_call_id": card.tool_call_id,
                "tool_name": card.tool_name,
                "args_hash": args_hash or args_hash_of(card.args),
                "decision": card.decision or "error",
                "outcome": card.outcome,
                "rows": rows if isinstance(rows := details.get("row_count"), int) else None,
                "audit_hash": stamp.audit_hash if stamp else None,
            }
        )
    return calls
