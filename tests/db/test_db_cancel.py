# ruff: noqa: F811 - the engine fixture ``db`` is imported from dbtest_support
"""Abort reaches the database (S11, D6): the driver cancels, the call raises, nothing is written."""

from __future__ import annotations

import asyncio
import time

import pytest
from dbtest_support import LONG_READ, FakeAudit, Scratch, db, long_insert  # noqa: F401

from pi_notebook.ai.abort import AbortController, AbortError
from pi_notebook.sql.backend import DatabaseBackend, QueryAborted, QueryError, query_args_hash


async def _abort_after(controller: AbortController, seconds: float) -> None:
    await asyncio.sleep(seconds)
    controller.abort()


async def test_s11_d6_abort_cancels_long_read_at_driver(db: Scratch) -> None:
    backend = DatabaseBackend(db.url)
    try:
        controller = AbortController()
        task = asyncio.create_task(_abort_after(controller, 0.3))
        started = time.perf_counter()
        # Forced read: the classifier may (rightly) call pg_sleep/SLEEP a side effect.
        with pytest.raises(QueryAborted) as info:
            await backend._run_as("read", LONG_READ[db.engine], signal=controller.signal)  # pyright: ignore[reportPrivateUsage]
        # cancelled: the statement itself runs 30 s or more
        assert time.perf_counter() - started < 10
        assert isinstance(info.value, AbortError)
        await task
        out = await backend.run("after", "SELECT 1 AS one")  # the pool is still usable
        assert out.row_count == 1
    finally:
        backend.dispose()


async def test_d6_abort_of_approved_write_leaves_nothing_written(db: Scratch) -> None:
    table = db.table()
    audit = FakeAudit()
    backend = DatabaseBackend(db.url, audit=audit)
    try:
        sql = long_insert(db.engine, table)
        controller = AbortController()
        backend.capabilities.grant("w1", query_args_hash(sql, backend.dialect), 60)
        task = asyncio.create_task(_abort_after(controller, 0.4))
        started = time.perf_counter()
        with pytest.raises(QueryAborted, match="nothing was written"):
            await backend.run("w1", sql, signal=controller.signal)
        assert time.perf_counter() - started < 10  # cancelled, not run to its 30 s end
        await task
        assert db.count(table) == 0
        assert "query_aborted" in audit.kinds()
    finally:
        backend.dispose()


async def test_d6_already_aborted_signal_never_reaches_database() -> None:
    backend = DatabaseBackend("sqlite://")
    try:
        controller = AbortController()
        controller.abort()
        with pytest.raises(QueryAborted):
            await backend.run("x", "SELECT 1", signal=controller.signal)
    finally:
        backend.dispose()


async def test_d6_statement_timeout_cancels_at_driver(tmp_path: object) -> None:
    backend = DatabaseBackend("sqlite://", statement_timeout_s=0.2)
    try:
        started = time.perf_counter()
        with pytest.raises(QueryError, match="statement timeout") as caught:
            await backend.run("t", LONG_READ["sqlite"])
        assert time.perf_counter() - started < 10  # the recursive read never ends by itself
        # The error says how to allow longer statements, in a notebook and in code.
        assert "%config PiNotebook.statement_timeout" in str(caught.value)
        assert "statement_timeout_s=" in str(caught.value)
    finally:
        backend.dispose()


async def test_d6_task_cancellation_also_cancels_the_statement() -> None:
    backend = DatabaseBackend("sqlite://")
    try:
        task = asyncio.create_task(backend.run("c", LONG_READ["sqlite"]))
        await asyncio.sleep(0.2)
        task.cancel()
        started = time.perf_counter()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.perf_counter() - started < 10  # the recursive read never ends by itself
    finally:
        backend.dispose()
