"""D5: short SQLite reads run on the caller's thread, with the worker's guarantees.

A read of a SQLite file that finishes within ``inline.BUDGET_S`` skips the worker thread; a
longer one is stopped there by SQLite's progress handler and runs on the worker (and is
remembered); a locked file never makes the event loop wait; the read mode and the audit
hold on this path as on the worker's.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from pi_notebook.audit import AuditLog
from pi_notebook.sql.backend import DatabaseBackend, QueryError
from pi_notebook.sql.backend.inline import InlineReads

LONG = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 400000) "
    "SELECT count(*) AS n FROM c"
)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    path = tmp_path / "inline.sqlite"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE t (a INTEGER)")
        conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(10)])
    return path


@pytest.fixture
def backend(db_path: Path) -> Iterator[DatabaseBackend]:
    b = DatabaseBackend(f"sqlite:///{db_path}")
    try:
        yield b
    finally:
        b.dispose()


def _inline(b: DatabaseBackend) -> InlineReads:
    inline = b._inline  # pyright: ignore[reportPrivateUsage]
    assert inline is not None
    return inline


def _worker_started(b: DatabaseBackend) -> bool:
    return b._execution._thread is not None  # pyright: ignore[reportPrivateUsage]


async def test_d5_a_short_read_runs_without_the_worker_thread(backend: DatabaseBackend) -> None:
    out = await backend.run("r1", "SELECT sum(a) AS s, count(*) AS n FROM t")
    assert out.dataframe.to_dict("records") == [{"s": 45, "n": 10}]
    assert "45" in out.preview
    assert not _worker_started(backend)


async def test_d5_a_long_read_is_stopped_at_the_budget_and_runs_on_the_worker(
    backend: DatabaseBackend,
) -> None:
    inline = _inline(backend)
    out = await backend.run("r1", LONG)
    assert out.dataframe["n"].tolist() == [400_000]  # the worker ran it whole
    assert inline.stopped == 1 and _worker_started(backend)
    out = await backend.run("r2", LONG)  # remembered: straight to the worker
    assert out.dataframe["n"].tolist() == [400_000]
    assert inline.stopped == 1
    assert (await backend.run("r3", "SELECT 1 AS one")).dataframe["one"].tolist() == [1]


async def test_d5_a_locked_file_never_makes_the_loop_wait(
    backend: DatabaseBackend, db_path: Path
) -> None:
    await backend.run("warm", "SELECT 1")  # the inline connection exists
    # A writer holds the file's exclusive lock (rollback journal: readers must wait).
    writer = sqlite3.connect(db_path, check_same_thread=False, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    writer.execute("INSERT INTO t VALUES (100)")
    release = threading.Timer(0.3, lambda: writer.execute("COMMIT"))
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    release.start()
    try:
        out = await backend.run("r1", "SELECT count(*) AS n FROM t")
    finally:
        ticking.cancel()
        release.join()
        writer.close()
    assert out.dataframe["n"].tolist() == [11]  # the worker waited for the lock, then read
    assert ticks >= 5  # the loop ran meanwhile (blocked, it would not have ticked at all)


async def test_d5_the_read_mode_holds_on_the_inline_path(
    backend: DatabaseBackend, db_path: Path
) -> None:
    await backend.run("warm", "SELECT 1")
    for sql in ("INSERT INTO t VALUES (1)", "DELETE FROM t", "CREATE TABLE u (b INTEGER)"):
        with pytest.raises(QueryError):
            await backend._run_as("read", sql)  # pyright: ignore[reportPrivateUsage]
    with closing(sqlite3.connect(db_path)) as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (10,)
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'u'").fetchone() == (
            0,
        )
    out = await backend.run("r1", "SELECT count(*) AS n FROM t")
    assert out.dataframe["n"].tolist() == [10]


async def test_d5_an_approved_write_is_seen_by_the_next_inline_read(
    backend: DatabaseBackend,
) -> None:
    from pi_notebook.sql.backend import query_args_hash

    assert (await backend.run("r1", "SELECT count(*) AS n FROM t")).dataframe["n"].tolist() == [10]
    sql = "INSERT INTO t VALUES (10)"
    backend.capabilities.grant("w1", query_args_hash(sql, backend.dialect), 60)
    await backend.run("w1", sql)
    assert (await backend.run("r2", "SELECT count(*) AS n FROM t")).dataframe["n"].tolist() == [11]


async def test_d5_a_busy_inline_path_hands_the_read_to_the_worker(
    backend: DatabaseBackend,
) -> None:
    inline = _inline(backend)
    held = inline._lock  # pyright: ignore[reportPrivateUsage]
    assert held.acquire()  # another caller is on the inline path
    try:
        out = await backend.run("r1", "SELECT count(*) AS n FROM t")
    finally:
        held.release()
    assert out.dataframe["n"].tolist() == [10]
    assert _worker_started(backend)


async def test_d5_an_audited_inline_read_commits_its_final_args_before_its_result(
    backend: DatabaseBackend, tmp_path: Path
) -> None:
    log = AuditLog(f"sqlite:///{tmp_path / 'audit.sqlite'}")
    try:
        out = await backend.run("r1", "SELECT count(*) AS n FROM t", audit=log)
        log.flush()
        kinds = log.to_dataframe()["kind"].tolist()
    finally:
        log.close()
    assert out.dataframe["n"].tolist() == [10]
    assert not _worker_started(backend)
    assert kinds == ["final_args", "query_result"]


def test_d5_an_in_memory_database_has_no_inline_path() -> None:
    b = DatabaseBackend("sqlite://")
    try:
        assert b._inline is None  # pyright: ignore[reportPrivateUsage]
        assert asyncio.run(b.run("r1", "SELECT 1 AS one")).dataframe["one"].tolist() == [1]
    finally:
        b.dispose()


async def test_d5_a_full_pool_is_never_waited_for_on_the_loop(
    backend: DatabaseBackend,
) -> None:
    pool = backend.engine.pool
    held = [backend.engine.raw_connection() for _ in range(pool.size())]  # pyright: ignore[reportAttributeAccessIssue]
    try:
        out = await backend.run("r1", "SELECT count(*) AS n FROM t")
    finally:
        for raw in held:
            raw.close()
    assert out.dataframe["n"].tolist() == [10]
    assert _worker_started(backend)  # the worker took it (its checkout may wait; the loop not)


async def test_d6_a_read_aborted_while_its_record_commits_does_not_run(
    backend: DatabaseBackend,
) -> None:
    from pi_notebook.ai.abort import AbortController
    from pi_notebook.sql.backend import QueryAborted

    controller = AbortController()

    class AbortingAudit:
        """Commits the final arguments, and the person presses Stop meanwhile."""

        def __init__(self) -> None:
            self.kinds: list[str] = []

        def record(self, kind: str, payload: object = None, **_ids: object) -> None:
            self.kinds.append(kind)

        async def commit(self, record: object, payload: object = None, **_ids: object) -> str:
            self.kinds.append(getattr(record, "kind", str(record)))
            controller.abort()
            return "hash"

    sink = AbortingAudit()
    with pytest.raises(QueryAborted, match="nothing was run"):
        await backend.run("r1", "SELECT count(*) AS n FROM t", signal=controller.signal, audit=sink)
    assert sink.kinds[0] == "final_args"
    assert _inline(backend).stopped == 0
