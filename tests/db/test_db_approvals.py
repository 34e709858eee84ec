"""One-shot capabilities (D4) and durable approval records (D3)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pi_notebook.approvals import ApprovalRecord, ApprovalStore, CapabilityStore


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_d4_capability_is_one_shot_and_bound_to_call_id() -> None:
    store = CapabilityStore()
    store.grant("call-1", "h1", 60)
    assert not store.consume("call-2", "h1").ok  # another call id
    check = store.consume("call-1", "h1")
    assert check.ok and check.approved_hash == "h1"
    again = store.consume("call-1", "h1")
    assert not again.ok and "already used" in again.reason
    with pytest.raises(ValueError):
        store.grant("call-1", "h1", 60)  # a used call id is never approved again


def test_d4_capability_expires() -> None:
    clock = Clock()
    store = CapabilityStore(clock=clock)
    store.grant("c", "h", 5)
    clock.now += 5
    check = store.consume("c", "h")
    assert not check.ok and "expired" in check.reason


def test_d4_mismatch_reports_both_hashes_and_burns_the_capability() -> None:
    store = CapabilityStore()
    store.grant("c", "approved", 60)
    check = store.consume("c", "final")
    assert (check.ok, check.approved_hash, check.final_hash) == (False, "approved", "final")
    assert not store.consume("c", "approved").ok


def test_d4_consume_is_atomic_under_contention() -> None:
    store = CapabilityStore()
    store.grant("c", "h", 60)
    results: list[bool] = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        results.append(store.consume("c", "h").ok)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1


def test_d3_approval_records_are_stored_durably(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'approvals.sqlite'}"
    store = ApprovalStore(url)
    store.record(ApprovalRecord(tool_call_id="c1", tool_name="query_database", args_hash="h" * 64,
                                decision="approved", policy_version="p1", sql="DELETE FROM t",
                                user="ana", session_id="s1"))  # fmt: skip
    store.close()
    reopened = ApprovalStore(url)  # a new engine sees the committed row
    try:
        [rec] = reopened.records(tool_call_id="c1")
        assert (rec.decision, rec.args_hash, rec.sql, rec.user) == (
            "approved",
            "h" * 64,
            "DELETE FROM t",
            "ana",
        )
        assert rec.timestamp.tzinfo is not None
        frame = reopened.to_dataframe()
        assert list(frame["decision"]) == ["approved"] and str(frame["timestamp"].dtype).startswith(
            "datetime64"
        )
    finally:
        reopened.close()


def test_d3_unknown_decision_is_refused() -> None:
    with pytest.raises(ValueError):
        ApprovalRecord(tool_call_id="c", tool_name="t", args_hash="h", decision="maybe",  # type: ignore[arg-type]
                       policy_version="p", sql="x")  # fmt: skip
