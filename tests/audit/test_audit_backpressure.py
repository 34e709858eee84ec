"""The audit queue is bounded while the store works ("its queue has no upper
bound"): a caller that queues records faster than the writer commits them waits for it to
catch up, at most ``_PRESSURE_WAIT_S`` at a time, and never behind a stuck or failing store."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pi_notebook.audit.writer as writer_module
from pi_notebook.audit import AuditLog
from pi_notebook.audit.store import RowStore

HIGH, LOW = 60, 40


@pytest.fixture(autouse=True)
def small_queue(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(writer_module, "_HIGH_WATER", HIGH)
    monkeypatch.setattr(writer_module, "_LOW_WATER", LOW)
    monkeypatch.setattr(writer_module, "_PRESSURE_WAIT_S", 0.2)
    yield


def _waits(log: AuditLog) -> list[float | None]:
    """Records the timeout of every wait a caller makes for the writer to catch up."""
    writer: Any = log._writer  # pyright: ignore[reportPrivateUsage]
    seen: list[float | None] = []
    original = writer._done.wait

    def wait(timeout: float | None = None) -> bool:
        seen.append(timeout)
        return original(timeout)

    writer._done.wait = wait
    return seen


def _slow_writes(monkeypatch: pytest.MonkeyPatch, pause: threading.Event) -> None:
    """Each commit of the writer thread waits ``pause`` (a store slower than the caller)."""
    original = RowStore.write

    def write(self: RowStore, *args: Any, **kwargs: Any) -> None:
        if threading.current_thread().name.startswith("pi-audit-"):
            pause.wait(0.01)
        original(self, *args, **kwargs)

    monkeypatch.setattr(RowStore, "write", write)


def test_a_caller_faster_than_the_store_waits_and_the_queue_stays_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _slow_writes(monkeypatch, threading.Event())
    log = AuditLog(f"sqlite:///{tmp_path / 'a.sqlite'}", session_id="pressure")
    writer: Any = log._writer  # pyright: ignore[reportPrivateUsage]
    waits = _waits(log)
    deepest = 0
    for i in range(400):
        log.record("tool_call", {"i": i}, tool_call_id=f"c{i}")
        deepest = max(deepest, writer.pending())
    assert log.flush(timeout=30)
    assert deepest <= HIGH  # without the waits the caller would have queued hundreds
    assert waits  # it did wait for the writer
    frame = log.to_dataframe(session="pressure")
    assert frame["tool_call_id"].tolist() == [f"c{i}" for i in range(400)]  # nothing lost
    assert log.verify("pressure").ok
    log.close()


def test_a_stuck_writer_holds_a_caller_once_then_no_more(tmp_path: Path) -> None:
    log = AuditLog(f"sqlite:///{tmp_path / 'a.sqlite'}", session_id="stuck")
    writer: Any = log._writer  # pyright: ignore[reportPrivateUsage]
    waits = _waits(log)
    with writer._chain:  # a writer stuck inside a long commit holds the chain
        for i in range(HIGH + 200):
            log.record("tool_call", {"i": i}, tool_call_id=f"c{i}")
        timed_waits = [w for w in waits if w is not None]
        # One bounded wait at the high-water mark; after it timed out with no progress, the
        # following 199 records were queued without waiting again.
        assert 1 <= len(timed_waits) <= 3
        assert all(w <= 0.2 for w in timed_waits)
        assert writer.pending() == HIGH + 200  # everything kept
    assert log.flush(timeout=30)
    assert len(log.to_dataframe(session="stuck")) == HIGH + 200
    log.close()


def test_a_failing_store_never_holds_a_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = AuditLog(f"sqlite:///{tmp_path / 'a.sqlite'}", session_id="failing")
    writer: Any = log._writer  # pyright: ignore[reportPrivateUsage]
    broken = threading.Event()
    broken.set()
    original = RowStore.write

    def write(self: RowStore, *args: Any, **kwargs: Any) -> None:
        if broken.is_set():
            raise OSError("disk I/O error")
        original(self, *args, **kwargs)

    monkeypatch.setattr(RowStore, "write", write)
    log.record("tool_call", {"first": True}, tool_call_id="c-first")
    for _ in range(200):  # the writer meets the failure and says so
        if writer._failing:
            break
        threading.Event().wait(0.02)
    assert writer._failing
    waits = _waits(log)
    for i in range(HIGH + 50):
        log.record("tool_call", {"i": i}, tool_call_id=f"c{i}")
    assert waits == []  # queued at once, kept for the retries
    broken.clear()  # the store recovers: everything is written, in order
    assert log.flush(timeout=30)
    frame = log.to_dataframe(session="failing")
    assert frame["tool_call_id"].tolist() == ["c-first", *[f"c{i}" for i in range(HIGH + 50)]]
    assert log.verify("failing").ok
    log.close()
