"""Reading the audit as pandas DataFrames: the records (D9) and a per-call summary.

``read_records`` is on the path of ``%pi_audit`` over stores with millions of rows, so it
avoids per-row Python work where it can: timestamps are parsed by pandas in one vectorised
call, and payloads are decoded by a single ``json.loads`` over all of them.
"""

from __future__ import annotations

import datetime as dt
import gc
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import sqlalchemy as sa

from .schema import records

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CALL_COLUMNS", "RECORD_COLUMNS", "read_records", "summarise_calls"]

RECORD_COLUMNS = [
    "id",
    "session_id",
    "seq",
    "timestamp",
    "kind",
    "tool_call_id",
    "tool_name",
    "user",
    "policy_version",
    "payload",
    "prev_hash",
    "hash",
]
CALL_COLUMNS = [
    "tool_call_id",
    "tool_name",
    "args_hash",
    "decision",
    "outcome",
    "is_error",
    "duration_ms",
    "started_at",
    "ended_at",
]


def _utc(value: Any) -> dt.datetime:
    import pandas as pd

    ts = pd.Timestamp(value)
    if ts is pd.NaT:
        raise ValueError(f"since={value!r} is not a point in time")
    ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
    out = ts.to_pydatetime()
    if not isinstance(out, dt.datetime):
        raise ValueError(f"since={value!r} is not a point in time")
    return out


def read_records(
    engine: sa.Engine,
    *,
    session: str | None = None,
    tool: str | None = None,
    tool_call_id: str | None = None,
    since: Any = None,
    kind: str | Sequence[str] | None = None,
    calls_only: bool = False,
) -> pd.DataFrame:
    """The matching records, ordered by session and seq, with typed columns."""
    import pandas as pd

    c = records.c
    sqlite = engine.dialect.name == "sqlite"
    # SQLite keeps timestamps as text: fetch the text and let pandas parse it in bulk rather
    # than have SQLAlchemy build a datetime object per row.
    ts_col = sa.type_coerce(c.ts, sa.String()) if sqlite else c.ts
    query = sa.select(
        c.id,
        c.session_id,
        c.seq,
        ts_col,
        c.kind,
        c.tool_call_id,
        c.tool_name,
        c.user,
        c.policy_version,
        c.payload,
        c.prev_hash,
        c.hash,
    )
    if session is not None:
        query = query.where(c.session_id == session)
    if tool is not None:
        query = query.where(c.tool_name == tool)
    if tool_call_id is not None:
        query = query.where(c.tool_call_id == tool_call_id)
    if calls_only:
        query = query.where(c.tool_call_id.is_not(None))
    if since is not None:
        bound = _utc(since)
        if sqlite:
            # Compare with SQLite's stored text (naive UTC, SQLAlchemy's own format).
            text = bound.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
            query = query.where(sa.type_coerce(c.ts, sa.String()) >= text)
        else:
            query = query.where(c.ts >= bound)
    if kind is not None:
        kinds = [kind] if isinstance(kind, str) else list(kind)
        query = query.where(c.kind.in_(kinds))
    query = query.order_by(c.session_id, c.seq)
    # Millions of new tuples, dicts and strings would trigger the cyclic garbage collector
    # over and over (it scans the whole growing heap); none of them can form a cycle.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        rows = _fetch(engine, query)
        columns = list(zip(*rows, strict=True)) if rows else [()] * len(RECORD_COLUMNS)
        del rows
        data: dict[str, Any] = dict(zip(RECORD_COLUMNS, columns, strict=True))
        data["id"] = np.array(data["id"], dtype=np.int64)
        data["seq"] = np.array(data["seq"], dtype=np.int64)
        data["timestamp"] = _timestamps(list(data["timestamp"]))
        payloads = np.empty(len(data["id"]), dtype=object)
        payloads[:] = _payloads(list(data["payload"]))
        data["payload"] = payloads
        for name in (
            "session_id",
            "kind",
            "tool_call_id",
            "tool_name",
            "user",
            "policy_version",
            "prev_hash",
            "hash",
        ):
            data[name] = np.array(data[name], dtype=object)
        return pd.DataFrame(data, columns=RECORD_COLUMNS)
    finally:
        if gc_was_enabled:
            gc.enable()


def _fetch(engine: sa.Engine, query: sa.Select[*tuple[Any, ...]]) -> list[Any]:
    if engine.dialect.name not in _RAW_DIALECTS:
        with engine.connect() as conn:
            return list(conn.execute(query).fetchall())
    # Through the driver's cursor: plain tuples instead of a SQLAlchemy Row per record,
    # which halves the fetch of a large frame. Every bound value here is a str or (on
    # PostgreSQL) an aware datetime, which these drivers take as they are.
    compiled = query.compile(dialect=engine.dialect, compile_kwargs={"render_postcompile": True})
    params = compiled.construct_params()
    args: Any = (
        tuple(params[name] for name in compiled.positiontup or ())
        if compiled.positional
        else params
    )
    with engine.connect() as conn:
        cursor = conn.connection.driver_connection.cursor()  # pyright: ignore[reportOptionalMemberAccess]
        try:
            cursor.execute(str(compiled), args)
            return cursor.fetchall()
        finally:
            cursor.close()


_RAW_DIALECTS = ("sqlite", "postgresql")


def _timestamps(values: list[Any]) -> pd.DatetimeIndex:
    import pandas as pd

    if values and isinstance(values[0], str):
        return pd.DatetimeIndex(pd.to_datetime(values, utc=True, format="ISO8601"))
    return pd.DatetimeIndex(pd.to_datetime(values, utc=True)).as_unit("us")


def _payloads(texts: list[Any]) -> list[Any]:
    if not texts:
        return []
    try:
        # One parse over all payloads instead of a million json.loads calls; it fails only if
        # a row was tampered with into invalid JSON, and then each is decoded on its own.
        decoded = json.loads(f"[{','.join(texts)}]")
        if len(decoded) == len(texts) and all(type(d) is dict for d in decoded):
            return decoded
    except (ValueError, TypeError):
        pass
    return [_one_payload(t) for t in texts]


def _one_payload(text: Any) -> dict[str, Any]:
    # The log only writes JSON objects; anything else was put there by hand. Show it, wrapped,
    # rather than fail the whole frame.
    try:
        value = json.loads(text)
    except (ValueError, TypeError):
        return {"_invalid_json": text if isinstance(text, str) else repr(text)}
    return value if isinstance(value, dict) else {"_not_an_object": value}


def summarise_calls(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per tool call from a records frame (as returned by ``read_records``).

    decision: the last ``approval`` record's ``decision``; else a ``tool_call`` record's
    decision other than "seen" (such as a block); else "seen" if the call reached the
    ``tool_call`` handlers. args_hash: the last ``final_args`` record's ``args_hash``, else the
    approval's. outcome: "error" or "ok" from ``tool_execution_end``, "incomplete" without one.
    """
    import pandas as pd

    calls: dict[str, dict[str, Any]] = {}
    sub = frame[frame["tool_call_id"].notna()]
    for call_id, tool_name, kind, ts, payload in zip(
        sub["tool_call_id"],
        sub["tool_name"],
        sub["kind"],
        sub["timestamp"],
        sub["payload"],
        strict=True,
    ):
        row = calls.setdefault(
            call_id,
            {
                "tool_call_id": call_id,
                "tool_name": None,
                "args_hash": None,
                "approval": None,
                "gate": None,
                "outcome": "incomplete",
                "is_error": None,
                "duration_ms": None,
                "started_at": ts,
                "ended_at": None,
            },
        )
        payload = payload if isinstance(payload, dict) else {}
        if row["tool_name"] is None and isinstance(tool_name, str):
            row["tool_name"] = tool_name
        if kind == "tool_execution_start":
            row["started_at"] = ts
        elif kind == "approval":
            row["approval"] = payload.get("decision", row["approval"])
            if row["args_hash"] is None or not row.get("_final"):
                row["args_hash"] = payload.get("args_hash", row["args_hash"])
        elif kind == "final_args" and payload.get("args_hash") is not None:
            row["args_hash"], row["_final"] = payload["args_hash"], True
        elif kind == "tool_call":
            decision = payload.get("decision")
            if decision is not None and (row["gate"] in (None, "seen")):
                row["gate"] = decision
        elif kind == "tool_execution_end":
            row["is_error"] = bool(payload.get("is_error"))
            row["outcome"] = "error" if row["is_error"] else "ok"
            row["duration_ms"] = payload.get("duration_ms")
            row["ended_at"] = ts
    out_rows = []
    for row in calls.values():
        row["decision"] = row["approval"] if row["approval"] is not None else row["gate"]
        out_rows.append({k: row[k] for k in CALL_COLUMNS})
    out = pd.DataFrame(out_rows, columns=CALL_COLUMNS)
    out["is_error"] = out["is_error"].astype("boolean")
    out["duration_ms"] = pd.Series(
        pd.to_numeric(out["duration_ms"], errors="coerce"), index=out.index
    ).astype("Float64")
    for col in ("started_at", "ended_at"):
        out[col] = pd.to_datetime(out[col], utc=True)
    return out
