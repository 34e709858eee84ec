"""One-shot capabilities (D4) and the typed approval record (D3)."""

from __future__ import annotations

import threading

import pytest

from pi_notebook.approvals import ApprovalEntry, CapabilityStore


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


def test_15_4_revoke_burns_the_id_of_an_ended_call() -> None:
    """Issue 15.4: a capability dies with its call; the id can never be approved again."""
    store = CapabilityStore()
    store.grant("c", "h", 60)
    assert store.used("c") and store.revoke("c")
    assert not store.consume("c", "h").ok
    with pytest.raises(ValueError):
        store.grant("c", "h", 60)
    assert not store.revoke("never-granted") and not store.used("never-granted")


def test_d3_unknown_decision_is_refused() -> None:
    with pytest.raises(ValueError):
        ApprovalEntry(decision="maybe", args_hash="h", args={})  # type: ignore[arg-type]
