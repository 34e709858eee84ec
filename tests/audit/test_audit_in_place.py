"""Durable records committed in place (``Writer.commit_here``): on a SQLite file in WAL mode
the caller commits its durable record itself instead of waking the writer thread; anything
that stands in the way (a busy chain, a locked store, another journal mode, a refused record)
leaves it to the writer, and the chain stays one intact chain either way."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.pool import Pool

import pi_notebook.audit.writer as writer_module
from pi_notebook.audit import AuditLog
from pi_notebook.audit.store import RowStore
from pi_notebook.errors import AuditUnavailableError


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, list[str]]]]:
    """Every batch written: (the writing thread's name, the kinds in it)."""
    seen: list[tuple[str, list[str]]] = []
    original = RowStore.write

    def spy(self: RowStore, session_id: str, rows: Any, head_exists: bool, **kw: Any) -> None:
        original(self, session_id, rows, head_exists, **kw)
        seen.append((threading.current_thread().name, [r[3] for r in rows]))

    monkeypatch.setattr(RowStore, "write", spy)
    yield seen


def stored_kinds(url: str, session_id: str) -> list[str]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return list(
                conn.execute(
                    sa.text("SELECT kind FROM pi_audit_records WHERE session_id = :s ORDER BY seq"),
                    {"s": session_id},
                ).scalars()
            )
    finally:
        engine.dispose()


def eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 20
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def in_place_ready(log: AuditLog) -> None:
    """Wait until the writer thread has opened the in-place connection (callers never open
    it themselves)."""
    here = log._writer._here  # pyright: ignore[reportPrivateUsage]
    chain = log._writer._chain  # pyright: ignore[reportPrivateUsage]
    assert here is not None
    eventually(lambda: here.ready and not chain.locked(), "the in-place connection")


def test_a_durable_record_on_a_sqlite_file_is_committed_by_its_caller(
    tmp_path: Path, writes: list[tuple[str, list[str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``await commit`` and ``record(durable=True)`` write the queued records and their own in
    the calling thread, in one transaction, committed (visible to another connection) when
    they return; the hash returned is the stored one and the chain verifies. The connection
    they use was opened by the writer thread."""
    opened: list[str] = []
    original = RowStore._in_place_settings  # pyright: ignore[reportPrivateUsage]

    def spy(self: RowStore, driver: Any) -> None:
        opened.append(threading.current_thread().name)
        original(self, driver)

    monkeypatch.setattr(RowStore, "_in_place_settings", spy)
    url = f"sqlite:///{tmp_path / 'audit.sqlite'}"
    with AuditLog(url, session_id="here", linger_s=5.0) as log:
        in_place_ready(log)
        log.record("start", {"n": 1})
        log.record("decision", {"n": 2})
        digest = asyncio.run(log.commit("final_args", {"sql": "SELECT 1"}))
        me = threading.current_thread().name
        assert writes == [(me, ["start", "decision", "final_args"])]
        assert stored_kinds(url, "here") == ["start", "decision", "final_args"]
        log.record("end", {"n": 3})
        again = log.record("final_args", {"sql": "SELECT 2"}, durable=True)
        assert writes[-1] == (me, ["end", "final_args"])
        assert opened == ["pi-audit-here"]
        frame = log.to_dataframe()
        assert frame["hash"].tolist()[2] == digest
        assert frame["hash"].tolist()[-1] == again
        assert frame["seq"].tolist() == [1, 2, 3, 4, 5]
        report = log.verify()
        assert report.ok, report.problems


def test_a_locked_store_leaves_the_durable_record_to_the_writer(
    tmp_path: Path, writes: list[tuple[str, list[str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another connection holds the write lock: the caller does not wait for it (its
    connection has no busy timeout); the writer thread commits the record once the lock is
    gone, and after the pause the caller commits in place again."""
    monkeypatch.setattr(writer_module, "_HERE_PAUSE", 0.0)
    url = f"sqlite:///{tmp_path / 'audit.sqlite'}"
    with AuditLog(url, session_id="locked", durable_timeout_s=10) as log:
        in_place_ready(log)
        log.record("first", {}, durable=True)  # creates the head; in place
        other = sa.create_engine(url).raw_connection()
        other.driver_connection.isolation_level = None  # pyright: ignore[reportOptionalMemberAccess]
        cursor = other.driver_connection.cursor()  # pyright: ignore[reportOptionalMemberAccess]
        cursor.execute("BEGIN IMMEDIATE")
        threading.Timer(0.3, lambda: cursor.execute("COMMIT")).start()
        digest = log.record("while locked", {}, durable=True)
        other.close()
        assert writes[-1] == (f"pi-audit-{'locked'[:8]}", ["while locked"])
        in_place_ready(log)  # the failed attempt dropped its connection; the writer reopened it
        log.record("after", {}, durable=True)
        assert writes[-1] == (threading.current_thread().name, ["after"])
        frame = log.to_dataframe()
        assert frame["kind"].tolist() == ["first", "while locked", "after"]
        assert frame["hash"].tolist()[1] == digest
        report = log.verify()
        assert report.ok, report.problems


def test_a_busy_chain_leaves_the_durable_record_to_the_writer(
    tmp_path: Path, writes: list[tuple[str, list[str]]]
) -> None:
    """While someone else writes the chain, a durable caller waits for the writer thread
    instead of writing beside it."""
    url = f"sqlite:///{tmp_path / 'audit.sqlite'}"
    with AuditLog(url, session_id="busy") as log:
        in_place_ready(log)
        chain: threading.Lock = log._writer._chain  # pyright: ignore[reportPrivateUsage]
        chain.acquire()
        threading.Timer(0.3, chain.release).start()
        digest = log.record("durable", {}, durable=True)
        assert writes == [("pi-audit-busy", ["durable"])]
        assert log.to_dataframe()["hash"].tolist() == [digest]


def test_a_store_not_in_wal_mode_is_never_written_in_place(
    tmp_path: Path, writes: list[tuple[str, list[str]]]
) -> None:
    """An engine of the caller's own, in the default rollback-journal mode: a commit there
    waits for the disk, so every record goes through the writer thread."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'audit.sqlite'}")
    with AuditLog(engine, session_id="journal") as log:
        here = log._writer._here  # pyright: ignore[reportPrivateUsage]
        assert here is not None
        eventually(lambda: not here.usable, "the writer finds the journal mode")
        assert not here.ready
        for i in range(3):
            log.record("durable", {"i": i}, durable=True)
        assert [thread for thread, _ in writes] == ["pi-audit-journal"] * 3
        report = log.verify()
        assert report.ok, report.problems
    engine.dispose()


def test_an_in_memory_store_has_no_in_place_path() -> None:
    with AuditLog("sqlite://", session_id="memory") as log:
        assert log._writer._here is None  # pyright: ignore[reportPrivateUsage]
        assert isinstance(log.record("durable", {}, durable=True), str)
        assert log.to_dataframe()["kind"].tolist() == ["durable"]


def test_a_refused_record_in_place_is_isolated_by_the_writer(tmp_path: Path) -> None:
    """A batch the store refuses fails in place; the writer then isolates the bad record
    (a stub takes its place) and the durable caller is told it was not stored."""
    url = f"sqlite:///{tmp_path / 'audit.sqlite'}"
    with AuditLog(url, session_id="refuse", durable_timeout_s=10) as log:
        with log.engine.begin() as conn:
            conn.exec_driver_sql(
                "CREATE TRIGGER refuse BEFORE INSERT ON pi_audit_records "
                "WHEN NEW.kind = 'bad' BEGIN SELECT RAISE(ABORT, 'bad record'); END"
            )
        log.record("fine", {})
        with pytest.raises(AuditUnavailableError, match="refused"):
            log.record("bad", {}, durable=True)
        frame = log.to_dataframe()
        assert frame["kind"].tolist() == ["fine", "audit_record_rejected"]
        report = log.verify()
        assert report.ok, report.problems


def test_the_writer_checkpoints_what_commits_in_place_leave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commits in place run no checkpoint; every so many of them the writer thread runs
    one (so the log file does not grow without end)."""
    monkeypatch.setattr(writer_module, "_CHECKPOINT_EVERY", 3)
    calls: list[str] = []
    original = RowStore.checkpoint

    def spy(self: RowStore) -> None:
        original(self)
        calls.append(threading.current_thread().name)  # once it is done

    monkeypatch.setattr(RowStore, "checkpoint", spy)
    url = f"sqlite:///{tmp_path / 'audit.sqlite'}"
    with AuditLog(url, session_id="ckpt") as log:
        in_place_ready(log)
        for i in range(2000):
            log.record("durable", {"i": i, "pad": "x" * 5000}, durable=True)
            if len(calls) >= 2:
                break
            time.sleep(0.001)
        assert len(calls) >= 2
        assert set(calls) == {"pi-audit-ckpt"}
        log.flush()
        raw = log.engine.raw_connection()
        try:
            # The writer may be checkpointing again (commits in place went on while it ran
            # one): then ours is busy for a moment, never for good.
            busy, logged, done = 1, -1, -2
            for _ in range(100):
                busy, logged, done = raw.driver_connection.execute(  # pyright: ignore[reportOptionalMemberAccess]
                    "PRAGMA wal_checkpoint(PASSIVE)"
                ).fetchone()
                if busy == 0 and logged == done:
                    break
                time.sleep(0.01)
        finally:
            raw.close()
        assert busy == 0 and logged == done


def test_ordinary_records_are_written_without_a_flush_or_a_wake(
    tmp_path: Path, writes: list[tuple[str, list[str]]]
) -> None:
    """An ordinary record queued right after a commit does not wake the writer; it is still
    written within the linger, as is one queued to an idle writer."""
    url = f"sqlite:///{tmp_path / 'audit.sqlite'}"
    with AuditLog(url, session_id="nowake", linger_s=0.05) as log:
        in_place_ready(log)
        log.record("first", {})  # the writer is idle: woken, lingers, commits
        eventually(lambda: stored_kinds(url, "nowake") == ["first"], "the first record")
        log.record("durable", {}, durable=True)
        log.record("second", {})  # right after a commit: not woken for
        eventually(
            lambda: stored_kinds(url, "nowake") == ["first", "durable", "second"],
            "the record after the commit",
        )
        # Each written once, in order. (When the durable record's commit in place meets the
        # writer still settling "first", the writer commits it, and may take "second" along.)
        # (The spy notes a batch after its commit returns: the stored rows can be seen first.)
        eventually(
            lambda: (
                [kind for _, kinds in writes for kind in kinds] == ["first", "durable", "second"]
            ),
            "each record written once, in order",
        )
        assert writes[0][1] == ["first"]


def test_durable_records_from_threads_and_a_loop_form_one_chain(tmp_path: Path) -> None:
    """Callers in several threads and on an event loop commit durable records in place and
    through the writer at once: every record is stored once, in one gapless chain, and each
    caller's hash is its record's."""
    url = f"sqlite:///{tmp_path / 'audit.sqlite'}"
    hashes: dict[str, str] = {}
    with AuditLog(url, session_id="mixed", linger_s=0.002) as log:

        def thread_writer(name: str) -> None:
            for i in range(60):
                log.record("ordinary", {"who": name, "i": i}, tool_call_id=f"{name}-o{i}")
                if i % 3 == 0:
                    key = f"{name}-d{i}"
                    hashes[key] = str(log.record("durable", {}, tool_call_id=key, durable=True))

        async def loop_writer() -> None:
            for i in range(60):
                log.record("ordinary", {"who": "loop", "i": i}, tool_call_id=f"loop-o{i}")
                key = f"loop-d{i}"
                hashes[key] = await log.commit("durable", {}, tool_call_id=key)
                await asyncio.sleep(0)

        threads = [threading.Thread(target=thread_writer, args=(f"t{n}",)) for n in range(3)]
        for thread in threads:
            thread.start()
        asyncio.run(loop_writer())
        for thread in threads:
            thread.join()
        frame = log.to_dataframe()
        report = log.verify()
    assert report.ok, report.problems
    assert frame["seq"].tolist() == list(range(1, len(frame) + 1))
    assert len(frame) == 4 * 60 + 3 * 20 + 60
    stored = dict(zip(frame["tool_call_id"], frame["hash"], strict=True))
    assert len(stored) == len(frame)
    for key, digest in hashes.items():
        assert stored[key] == digest


def test_a_short_batch_is_one_insert_statement(tmp_path: Path) -> None:
    """A call's few records, committed together, go in as one multi-row INSERT (not one
    statement step per row), in order, in one chain."""
    statements: list[str] = []

    def trace(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.set_trace_callback(statements.append)

    event.listen(Pool, "connect", trace)
    try:
        url = f"sqlite:///{tmp_path / 'audit.sqlite'}"
        with AuditLog(url, session_id="short", linger_s=5.0) as log:
            in_place_ready(log)
            for i in range(3):
                log.record("ordinary", {"i": i})
            log.record("durable", {}, durable=True)  # commits the four together
            inserts = [s for s in statements if s.startswith("INSERT INTO pi_audit_records")]
            assert len(inserts) == 1 and inserts[0].count("'ordinary'") == 3
            assert stored_kinds(url, "short") == ["ordinary"] * 3 + ["durable"]
            assert log.verify().ok
    finally:
        event.remove(Pool, "connect", trace)
