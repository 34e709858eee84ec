"""Reading the audit (D9): typed record frames with filters, and the per-call summary."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from pandas.api import types as ptypes

from pi_notebook.audit import AuditLog


@pytest.fixture
def log(tmp_path: Path) -> Iterator[AuditLog]:
    audit = AuditLog(f"sqlite:///{tmp_path / 'audit.sqlite'}", session_id="s1")
    yield audit
    audit.close()


COLUMNS = [
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


def test_d9_columns_are_typed(log: AuditLog) -> None:
    before = pd.Timestamp.now(tz="UTC")
    log.record("tool_call", {"a": 1}, tool_call_id="c1", tool_name="t", policy_version="p1")
    frame = log.to_dataframe()
    assert list(frame.columns) == COLUMNS
    assert isinstance(frame["timestamp"].dtype, pd.DatetimeTZDtype)
    assert str(frame["timestamp"].dt.tz) == "UTC"
    assert frame["timestamp"].iloc[0] >= before.floor("us")
    assert ptypes.is_integer_dtype(frame["id"]) and ptypes.is_integer_dtype(frame["seq"])
    assert frame["payload"].iloc[0] == {"a": 1}
    assert frame.iloc[0][
        ["session_id", "seq", "kind", "tool_call_id", "tool_name", "policy_version"]
    ].tolist() == ["s1", 1, "tool_call", "c1", "t", "p1"]
    assert len(frame["hash"].iloc[0]) == 64 and frame["prev_hash"].iloc[0] == "0" * 64


def test_d9_empty_store_has_the_same_columns(log: AuditLog) -> None:
    frame = log.to_dataframe()
    assert list(frame.columns) == COLUMNS and len(frame) == 0
    assert isinstance(frame["timestamp"].dtype, pd.DatetimeTZDtype)
    assert ptypes.is_integer_dtype(frame["seq"])
    assert len(log.calls_dataframe()) == 0


def test_d9_filters(log: AuditLog, tmp_path: Path) -> None:
    log.record("tool_execution_start", {}, tool_call_id="c1", tool_name="read")
    log.record("tool_execution_start", {}, tool_call_id="c2", tool_name="query_database")
    log.record("tool_execution_end", {}, tool_call_id="c2", tool_name="query_database")
    log.flush()
    cut = pd.Timestamp.now(tz="UTC")
    log.record("session_shutdown", {})
    with AuditLog(log.engine, session_id="s2") as other:
        other.record("tool_call", {}, tool_call_id="c3", tool_name="read")

    def seqs(**filters: object) -> list[tuple[str, int]]:
        frame = log.to_dataframe(**filters)  # type: ignore[arg-type]
        return list(zip(frame["session_id"], frame["seq"], strict=True))

    assert seqs() == [("s1", 1), ("s1", 2), ("s1", 3), ("s1", 4), ("s2", 1)]
    assert seqs(session="s2") == [("s2", 1)]
    assert seqs(tool="read") == [("s1", 1), ("s2", 1)]
    assert seqs(tool_call_id="c2") == [("s1", 2), ("s1", 3)]
    assert seqs(kind="tool_execution_start") == [("s1", 1), ("s1", 2)]
    assert seqs(kind=["tool_call", "session_shutdown"]) == [("s1", 4), ("s2", 1)]
    assert seqs(since=cut) == [("s1", 4), ("s2", 1)]
    assert seqs(since=cut.to_pydatetime().astimezone(dt.timezone(dt.timedelta(hours=5)))) == [
        ("s1", 4),
        ("s2", 1),
    ]
    assert seqs(since=cut.tz_localize(None).isoformat()) == [("s1", 4), ("s2", 1)]
    assert seqs(session="s1", tool="query_database", kind="tool_execution_end") == [("s1", 3)]
    assert log.verify().ok


def test_d9_calls_dataframe(log: AuditLog) -> None:
    # A read: no approval.
    log.record("tool_execution_start", {"args": {}}, tool_call_id="r1", tool_name="query_database")
    log.record("tool_call", {"decision": "seen"}, tool_call_id="r1", tool_name="query_database")
    log.record("final_args", {"args_hash": "hr"}, tool_call_id="r1", tool_name="query_database")
    log.record(
        "tool_execution_end",
        {"is_error": False, "duration_ms": 12.5},
        tool_call_id="r1",
        tool_name="query_database",
    )
    # An approved write whose backend hash is the one that counts.
    log.record("tool_execution_start", {}, tool_call_id="w1", tool_name="query_database")
    log.record("tool_call", {"decision": "seen"}, tool_call_id="w1", tool_name="query_database")
    log.record(
        "approval",
        {"decision": "approved", "args_hash": "ha"},
        tool_call_id="w1",
        tool_name="query_database",
        policy_version="p1",
        durable=True,
    )
    log.record(
        "final_args",
        {"args_hash": "hf"},
        tool_call_id="w1",
        tool_name="query_database",
        durable=True,
    )
    log.record(
        "tool_execution_end",
        {"is_error": False, "duration_ms": 30},
        tool_call_id="w1",
        tool_name="query_database",
    )
    # A write blocked without UI, and a call still running.
    log.record("tool_execution_start", {}, tool_call_id="b1", tool_name="query_database")
    log.record(
        "approval",
        {"decision": "no_ui", "args_hash": "hb"},
        tool_call_id="b1",
        tool_name="query_database",
        durable=True,
    )
    log.record(
        "tool_execution_end",
        {"is_error": True, "duration_ms": 1},
        tool_call_id="b1",
        tool_name="query_database",
    )
    log.record("tool_execution_start", {}, tool_call_id="p1", tool_name="slow")
    log.record("session_shutdown", {})

    calls = log.calls_dataframe()
    assert calls.drop(columns=["started_at", "ended_at"]).astype(object).where(
        calls.notna().drop(columns=["started_at", "ended_at"]), None
    ).to_dict("records") == [
        {
            "tool_call_id": "r1",
            "tool_name": "query_database",
            "args_hash": "hr",
            "decision": "seen",
            "outcome": "ok",
            "is_error": False,
            "duration_ms": 12.5,
        },
        {
            "tool_call_id": "w1",
            "tool_name": "query_database",
            "args_hash": "hf",
            "decision": "approved",
            "outcome": "ok",
            "is_error": False,
            "duration_ms": 30.0,
        },
        {
            "tool_call_id": "b1",
            "tool_name": "query_database",
            "args_hash": "hb",
            "decision": "no_ui",
            "outcome": "error",
            "is_error": True,
            "duration_ms": 1.0,
        },
        {
            "tool_call_id": "p1",
            "tool_name": "slow",
            "args_hash": None,
            "decision": None,
            "outcome": "incomplete",
            "is_error": None,
            "duration_ms": None,
        },
    ]
    assert isinstance(calls["started_at"].dtype, pd.DatetimeTZDtype)
    assert calls["ended_at"].isna().tolist() == [False, False, False, True]
    assert (calls["ended_at"].iloc[:3] >= calls["started_at"].iloc[:3]).all()
    assert list(log.calls_dataframe(session="other").columns) == list(calls.columns)
