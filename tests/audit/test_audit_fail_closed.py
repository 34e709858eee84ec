"""No write without its durable audit record, through a real session.

Each test approves a write through the database extension and a scripted UI, with the audit
store broken in one way (locked, read-only, full, unreachable). The write must not commit,
the tool result must say the audit store is unavailable, the refusal must come within the
durable timeout, and the event loop must keep running meanwhile (a ticker measures it).
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from audit_support import fresh_pg
from sqlalchemy import event as sa_event

from pi_notebook import create_agent_session
from pi_notebook.audit import AuditLog
from pi_notebook.audit.engine import sqlite_pragmas
from pi_notebook.database import database_extension
from pi_notebook.testing import ScriptedModel, text, tool_call

ROOT = Path(__file__).resolve().parents[2]
UNAVAILABLE = "the audit store is unavailable"
TIMEOUT = 1.0


class ApprovingUI:
    async def confirm(
        self, title: str, message: str, *, signal: Any = None, timeout: float | None = None
    ) -> bool:
        return True


def data_db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/data.sqlite"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS items (id INTEGER, name TEXT)")
    engine.dispose()
    return url


def rows(url: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.exec_driver_sql("SELECT count(*) FROM items").scalar_one())
    finally:
        engine.dispose()


async def approved_write(
    log: AuditLog,
    db_url: str,
    *,
    sql: str = "INSERT INTO items VALUES (1, 'a')",
    break_store: Callable[[], Any] | None = None,
    extra: tuple[Any, ...] = (),
) -> tuple[str, float, float]:
    """Run one approved write; returns (tool result text, seconds taken, longest loop gap)."""
    session = create_agent_session(
        model=ScriptedModel([tool_call("query_database", {"sql": sql}, id="w-1"), text("ok")]),
        extensions=[database_extension(url=db_url), *extra],
        audit=log,
        ui=ApprovingUI(),
        builtin_tools=False,
    )
    await session.start()
    if break_store is not None:
        break_store()
    gaps: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(ticker())
    started = time.monotonic()
    await session.prompt("write")
    took = time.monotonic() - started
    stop.set()
    await task
    (result,) = [m for m in session.messages if getattr(m, "role", None) == "toolResult"]
    text_out = " ".join(getattr(p, "text", "") for p in result.content)  # type: ignore[attr-defined]
    assert result.is_error  # type: ignore[attr-defined]
    await session.close()  # releases the database worker (its flush gives up on a dead store)
    return text_out, took, max(gaps, default=0.0)


def assert_refused(outcome: tuple[str, float, float], db_url: str) -> None:
    message, took, gap = outcome
    assert UNAVAILABLE in message and "not run" in message.lower(), message
    assert rows(db_url) == 0  # the approved write did not commit
    assert took < TIMEOUT + 3  # bounded by the durable timeout, not 30 or 60 s
    assert gap < 0.5  # the loop (the kernel) kept running


@contextmanager
def locked(path: Path) -> Iterator[None]:
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        yield
    finally:
        holder.close()


async def test_a_locked_store_refuses_the_approved_write(tmp_path: Path) -> None:
    db_url, audit_path = data_db(tmp_path), tmp_path / "audit.sqlite"
    log = AuditLog(f"sqlite:///{audit_path}", durable_timeout_s=TIMEOUT)
    holder = sqlite3.connect(audit_path, isolation_level=None)
    try:
        outcome = await approved_write(
            log, db_url, break_store=lambda: holder.execute("BEGIN EXCLUSIVE")
        )
        assert_refused(outcome, db_url)
    finally:
        holder.close()
    # Once the lock is gone the queued records are written, and the chain holds.
    assert log.flush(10)
    kinds = log.to_dataframe(tool_call_id="w-1")["kind"].tolist()
    assert "query_result" not in kinds
    assert log.verify().ok
    log.close()


async def test_a_read_only_store_refuses_the_approved_write(tmp_path: Path) -> None:
    db_url, audit_path = data_db(tmp_path), tmp_path / "audit.sqlite"
    creator = AuditLog(f"sqlite:///{audit_path}")  # creates the schema, keeps the WAL open
    creator.record("created", {}, durable=True)
    log = AuditLog(f"sqlite:///file:{audit_path}?mode=ro&uri=true", durable_timeout_s=TIMEOUT)
    try:
        assert_refused(await approved_write(log, db_url), db_url)
    finally:
        log.close()
        creator.close()


async def test_a_full_store_refuses_the_approved_write(tmp_path: Path) -> None:
    db_url, audit_path = data_db(tmp_path), tmp_path / "audit.sqlite"
    AuditLog(f"sqlite:///{audit_path}").close()  # the schema, and nothing else
    engine = sa.create_engine(f"sqlite:///{audit_path}")

    def full(dbapi_conn: Any, record: Any) -> None:
        sqlite_pragmas(dbapi_conn, record)
        cur = dbapi_conn.cursor()
        # No page may be added: SQLITE_FULL, exactly what a full disk gives.
        pages = cur.execute("PRAGMA page_count").fetchone()[0]
        cur.execute(f"PRAGMA max_page_count = {pages}")
        cur.close()

    sa_event.listen(engine, "connect", full)
    log = AuditLog(engine, durable_timeout_s=TIMEOUT)
    # A statement longer than a page: its approval record needs new pages.
    sql = f"INSERT INTO items VALUES (1, '{'x' * 6000}')"
    try:
        assert_refused(await approved_write(log, db_url, sql=sql), db_url)
    finally:
        log.close()
        engine.dispose()


FSIZE_CHILD = """
import os, resource, signal, sys, time
from pi_notebook.audit import AuditLog
from pi_notebook.errors import AuditUnavailableError
log = AuditLog(sys.argv[1], durable_timeout_s=1.0)
log.record("before", {"pad": "x" * 400}, durable=True)
with log.engine.connect() as conn:  # an empty WAL: the next commit must grow a file
    conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
started = time.monotonic()
try:
    log.record("approval", {"pad": "y" * 8000}, durable=True)
except AuditUnavailableError as exc:
    print("refused", round(time.monotonic() - started, 1), exc, flush=True)
else:
    print("committed", flush=True)
os._exit(0)  # the queued record cannot be written; do not wait for it at exit
"""


def test_a_file_size_limit_makes_a_durable_record_raise(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite"
    out = subprocess.run(
        [sys.executable, "-c", FSIZE_CHILD, f"sqlite:///{path}", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.stdout.startswith("refused"), out.stdout + out.stderr
    assert float(out.stdout.split()[1]) < 3


async def test_the_backend_refuses_when_the_store_breaks_after_the_approval(
    tmp_path: Path,
) -> None:
    db_url, audit_path = data_db(tmp_path), tmp_path / "audit.sqlite"
    log = AuditLog(f"sqlite:///{audit_path}", durable_timeout_s=TIMEOUT)
    holder = sqlite3.connect(audit_path, isolation_level=None)

    def lock_after_gate(pi: Any) -> None:  # a later tool_call handler: the approval is on disk
        pi.on("tool_call", lambda event, ctx: holder.execute("BEGIN EXCLUSIVE") and None)

    try:
        outcome = await approved_write(log, db_url, extra=(lock_after_gate,))
        assert_refused(outcome, db_url)
    finally:
        holder.close()
    assert log.flush(10)
    kinds = log.to_dataframe(tool_call_id="w-1")["kind"].tolist()
    assert "approval" in kinds and "query_result" not in kinds
    log.close()


@pytest.mark.postgres
async def test_an_unreachable_postgres_store_refuses_the_approved_write(
    tmp_path: Path, pg_url: str
) -> None:
    db_url = data_db(tmp_path)
    with fresh_pg(pg_url) as audit_url:
        log = AuditLog(audit_url, durable_timeout_s=TIMEOUT)
        log.record("before", {}, durable=True)
        name = sa.make_url(audit_url).database
        admin = sa.create_engine(
            sa.make_url(audit_url).set(database="postgres"), isolation_level="AUTOCOMMIT"
        )

        def drop() -> None:  # the store goes away mid-session
            with admin.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))

        try:
            assert_refused(await approved_write(log, db_url, break_store=drop), db_url)
        finally:
            admin.dispose()
            log.close()


@pytest.mark.postgres
async def test_a_postgres_store_that_drops_its_connections_recovers(
    tmp_path: Path, pg_url: str
) -> None:
    db_url = data_db(tmp_path)
    with fresh_pg(pg_url) as audit_url:
        log = AuditLog(audit_url, durable_timeout_s=5)
        log.record("before", {}, durable=True)
        name = sa.make_url(audit_url).database
        admin = sa.create_engine(
            sa.make_url(audit_url).set(database="postgres"), isolation_level="AUTOCOMMIT"
        )

        def terminate() -> None:
            with admin.connect() as conn:
                conn.execute(
                    sa.text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = :d AND pid <> pg_backend_pid()"
                    ),
                    {"d": name},
                )

        session = create_agent_session(
            model=ScriptedModel(
                [
                    tool_call(
                        "query_database", {"sql": "INSERT INTO items VALUES (1, 'a')"}, id="w-2"
                    ),
                    text("ok"),
                ]
            ),
            extensions=[database_extension(url=db_url)],
            audit=log,
            ui=ApprovingUI(),
            builtin_tools=False,
        )
        await session.start()
        terminate()
        await session.prompt("write")
        await session.close()
        admin.dispose()
        assert rows(db_url) == 1  # a fresh connection committed the records, then the write
        kinds = log.to_dataframe(tool_call_id="w-2")["kind"].tolist()
        assert {"approval", "final_args", "tool_execution_end"} <= set(
            kinds
        )  # no query_result in a session
        assert kinds[-1] == "tool_execution_end"
        assert log.verify().ok
        log.close()


class _BrokenSink:
    """An audit sink whose durable records never commit (queued: the wait raises later)."""

    def __init__(self, queued: bool) -> None:
        self.kinds: list[str] = []
        if queued:
            self.queue_durable = self._queue

    def _queue(self, kind: str, payload: Any = None, **_ids: Any) -> Callable[[], str]:
        self.kinds.append(kind)

        def wait() -> str:
            raise RuntimeError("the audit store is unavailable: it did not commit")

        return wait

    def record(self, kind: str, payload: Any = None, *, durable: bool = False, **_ids: Any) -> None:
        self.kinds.append(kind)
        if durable:
            raise RuntimeError("the audit store is unavailable: it did not commit")


@pytest.mark.parametrize("queued", [True, False], ids=["queued", "blocking-sink"])
async def test_a_read_whose_final_args_do_not_commit_returns_nothing(
    tmp_path: Path, queued: bool
) -> None:
    """A read runs while its final_args commit (it changes nothing), but neither its rows nor
    its error leave the worker until the record is committed: here it never is."""
    from pi_notebook.sql.backend import DatabaseBackend, QueryRefused
    from pi_notebook.sql.backend.backend import AUDIT_UNAVAILABLE

    db_url = data_db(tmp_path)
    backend = DatabaseBackend(db_url)
    sink = _BrokenSink(queued)
    try:
        for sql in ("SELECT count(*) FROM items", "SELECT * FROM missing_table"):
            with pytest.raises(QueryRefused) as refused:
                await backend.run("r-1", sql, audit=sink)
            assert str(refused.value) == AUDIT_UNAVAILABLE
        sink.kinds.clear()
        with pytest.raises(QueryRefused):  # a write: the statement never runs
            await backend.run("w-1", "INSERT INTO items VALUES (1, 'a')", audit=sink)
    finally:
        backend.dispose()
    assert rows(db_url) == 0
    assert "query_result" not in sink.kinds
