"""One row per tool call, from a records frame: what ran, what was decided, how it ended.

Calls are keyed by (session_id, tool_call_id): model-issued ids repeat across sessions. The
wait for a person is a column of its own, and ``duration_ms`` excludes it. What does not belong
here: reading the store (``frames``).

A call's statement is the backend's own record of it (``final_args``, ``query_refused``,
``capability_mismatch`` carry ``sql``); for a call that never reached the backend it is the code
its tool shows for the call's raw arguments, as its start record keeps it (``code_argument`` or
``code``, from the tool's ``describe_call`` when the call began); for a start record without
them (written before they were kept), ``view_of(tool_name, args).code``, when the caller knows
the tools.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from ..agent.views import ViewOf

__all__ = ["CALL_COLUMNS", "summarise_calls"]

CALL_COLUMNS = [
    # What a person reads first: the decision, the statement, what it did, how long, when.
    "decision",
    "outcome",
    "sql",
    "rows",
    "duration_ms",
    "execution_ms",
    "approval_wait_ms",
    "started_at",
    "ended_at",
    "tool_name",
    "is_error",
    # Ids and hashes last: they join to the audit records, they are not read.
    "tool_call_id",
    "session_id",
    "args_hash",
]
# The kinds whose payloads the summary reads; others are not decoded at all.
_READ = frozenset(
    {
        "tool_execution_start",
        "tool_call",
        "approval",
        "grant_use",
        "final_args",
        "capability_mismatch",
        "query_refused",
        "query_result",
        "query_aborted",
        "tool_execution_end",
    }
)


def _payload(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return {}
        return decoded if isinstance(decoded, dict) else {}  # pyright: ignore[reportUnknownVariableType]
    return {}


def _new(session_id: Any, call_id: Any, ts: Any) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "tool_call_id": call_id,
        "tool_name": None,
        "sql": None,
        "raw_sql": None,
        "args_hash": None,
        "final": False,
        "approval": None,
        "gate": None,
        "outcome": "incomplete",
        "why": None,
        "rows": None,
        "is_error": None,
        "wait": None,
        "approved_at": None,
        "execution_ms": None,
        "total_ms": None,
        "started_at": ts,
        "ended_at": None,
    }


def _shown_code(p: dict[str, Any], tool_name: Any, view_of: ViewOf | None) -> str | None:
    """The code a start record's tool shows for its raw arguments: as the record keeps it
    (the argument that is the code, or the code), else by ``view_of`` (older records)."""
    args: Any = p.get("args")
    code, argument = p.get("code"), p.get("code_argument")
    if isinstance(code, str):
        return code
    if isinstance(args, dict):
        if isinstance(argument, str):
            shown = args.get(argument)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            return shown if isinstance(shown, str) else None
        if view_of is not None and isinstance(tool_name, str):
            return view_of(tool_name, args).code
    return None


def _apply(
    row: dict[str, Any], kind: str, ts: Any, p: dict[str, Any], view_of: ViewOf | None
) -> None:
    if kind == "tool_execution_start":
        row["started_at"] = ts
        row["raw_sql"] = _shown_code(p, row["tool_name"], view_of)
    elif kind == "tool_call":
        decision = p.get("decision")
        if decision is not None and row["gate"] in (None, "seen", "allowed"):
            row["gate"] = decision
    elif kind in ("approval", "grant_use"):
        row["approval"] = p.get("decision", "granted" if kind == "grant_use" else None)
        row["approved_at"] = ts
        waited = p.get("waited_ms", p.get("wait_ms"))
        if isinstance(waited, int | float) and not isinstance(waited, bool):
            row["wait"] = float(waited)
        if not row["final"]:
            row["args_hash"] = p.get("args_hash", row["args_hash"])
    elif kind == "final_args":
        if p.get("args_hash") is not None:
            row["args_hash"], row["final"] = p["args_hash"], True
        if isinstance(p.get("sql"), str):
            row["sql"] = p["sql"]
    elif kind in ("capability_mismatch", "query_refused"):
        row["why"] = "refused"
        if row["sql"] is None and isinstance(p.get("sql"), str):
            row["sql"] = p["sql"]
    elif kind == "query_aborted":
        row["why"] = "aborted"
    elif kind == "query_result":
        row["rows"] = p.get("row_count")
        row["execution_ms"] = p.get("duration_ms")
    elif kind == "tool_execution_end":
        # In a session the end record holds the outcome (no query_result): its details.
        details = p.get("result", {}).get("details") if isinstance(p.get("result"), dict) else None
        if isinstance(details, dict):
            if row["rows"] is None:
                row["rows"] = details.get("row_count")
            if row["execution_ms"] is None:
                row["execution_ms"] = details.get("duration_ms")
        row["is_error"] = bool(p.get("is_error"))
        row["total_ms"] = p.get("duration_ms")
        row["ended_at"] = ts


def _finish(row: dict[str, Any]) -> dict[str, Any]:
    decision = row["approval"] if row["approval"] is not None else row["gate"]
    outcome = row["outcome"]
    if row["is_error"] is not None:
        if not row["is_error"]:
            outcome = "ok"
        elif row["why"] is not None:
            outcome = row["why"]
        elif decision not in (None, "allowed", "approved", "granted"):
            outcome = "blocked"
        else:
            outcome = "error"
    wait = row["wait"]
    if wait is None and row["approved_at"] is not None and row["started_at"] is not None:
        wait = (row["approved_at"] - row["started_at"]).total_seconds() * 1000
    total = row["total_ms"]
    duration = None if total is None else max(0.0, float(total) - (wait or 0.0))
    execution = row["execution_ms"] if row["execution_ms"] is not None else duration
    return {
        "session_id": row["session_id"],
        "tool_call_id": row["tool_call_id"],
        "tool_name": row["tool_name"],
        "sql": row["sql"] or row["raw_sql"],
        "args_hash": row["args_hash"],
        "decision": decision,
        "outcome": outcome,
        "rows": row["rows"],
        "is_error": row["is_error"],
        "approval_wait_ms": wait,
        "execution_ms": execution,
        "duration_ms": duration,
        "started_at": row["started_at"],
        "ended_at": row["ended_at"],
    }


def summarise_calls(frame: pd.DataFrame, view_of: ViewOf | None = None) -> pd.DataFrame:
    """One row per (session_id, tool_call_id) of a records frame, in order of first record.

    Columns, in this order: decision (the approval's, or ``granted``; else the ``tool_call``
    chain's: allowed / blocked); outcome (ok, error, refused, aborted, blocked, or incomplete
    without an end); sql (the final arguments' statement, else the code the tool showed for
    the raw arguments, as the start record keeps it or ``view_of`` shows it); rows (the
    statement's row count); duration_ms (start to end without the approval wait);
    execution_ms (the statement's time at the backend, else duration_ms); approval_wait_ms
    (the person's time to decide); started_at, ended_at (UTC); tool_name; is_error; then the
    ids and hashes: tool_call_id, session_id, args_hash (the final arguments', else the
    approval's).
    """
    import pandas as pd

    calls: dict[tuple[Any, Any], dict[str, Any]] = {}
    sub = frame[frame["tool_call_id"].notna()]
    for sid, call_id, tool_name, kind, ts, payload in zip(
        sub["session_id"],
        sub["tool_call_id"],
        sub["tool_name"],
        sub["kind"],
        sub["timestamp"],
        sub["payload"],
        strict=True,
    ):
        row = calls.get((sid, call_id))
        if row is None:
            row = calls[(sid, call_id)] = _new(sid, call_id, ts)
        if row["tool_name"] is None and isinstance(tool_name, str):
            row["tool_name"] = tool_name
        if kind in _READ:
            _apply(row, kind, ts, _payload(payload), view_of)
    out = pd.DataFrame([_finish(r) for r in calls.values()], columns=CALL_COLUMNS)
    out["is_error"] = out["is_error"].astype("boolean")
    out["rows"] = pd.Series(pd.to_numeric(out["rows"], errors="coerce"), index=out.index).astype(
        "Int64"
    )
    for col in ("approval_wait_ms", "execution_ms", "duration_ms"):
        out[col] = pd.Series(pd.to_numeric(out[col], errors="coerce"), index=out.index).astype(
            "Float64"
        )
    for col in ("started_at", "ended_at"):
        out[col] = pd.to_datetime(out[col], utc=True)
    return out
