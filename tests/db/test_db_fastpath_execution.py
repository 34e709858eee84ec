"""The statement timeout with one shared loop timer: a timer left armed by earlier
calls never lets a later statement run past its own timeout."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from pi_notebook.sql.backend import DatabaseBackend, QueryTimeout
from pi_notebook.sql.backend.cancel import Canceller
from pi_notebook.sql.backend.execution import Execution

LONG = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
TIMEOUT_S = 0.4


def _backend(tmp_path: Path) -> DatabaseBackend:
    return DatabaseBackend(f"sqlite:///{tmp_path / 'fast.sqlite'}", statement_timeout_s=TIMEOUT_S)


async def test_a_statement_after_quick_ones_still_stops_at_its_timeout(tmp_path: Path) -> None:
    backend = _backend(tmp_path)
    try:
        for _ in range(5):  # each leaves the shared timer armed for its own (earlier) deadline
            assert (await backend.run("q", "SELECT 1")).row_count == 1
        await asyncio.sleep(TIMEOUT_S / 2)
        started = time.perf_counter()
        with pytest.raises(QueryTimeout, match="statement timeout"):
            await backend.run("slow", LONG)
        took = time.perf_counter() - started
        assert TIMEOUT_S * 0.9 <= took < TIMEOUT_S + 2.0  # its own deadline, not the earlier one
        assert (await backend.run("after", "SELECT 2")).row_count == 1
    finally:
        backend.dispose()


def test_each_event_loop_gets_its_own_timer(tmp_path: Path) -> None:
    backend = _backend(tmp_path)
    try:
        for _ in range(3):  # asyncio.run: a fresh loop each time; the old loop's timer is gone
            assert asyncio.run(backend.run("q", "SELECT 1")).row_count == 1
            with pytest.raises(QueryTimeout):
                asyncio.run(backend.run("slow", LONG))
        watchdogs = backend._execution._watchdogs  # pyright: ignore[reportPrivateUsage]
        assert len(watchdogs) <= 1  # closed loops are dropped
    finally:
        backend.dispose()


async def test_a_shorter_timeout_rearms_the_timer_earlier(tmp_path: Path) -> None:
    backend = _backend(tmp_path)
    execution: Execution = backend._execution  # pyright: ignore[reportPrivateUsage]
    try:
        execution.timeout_s = 30
        assert (await backend.run("q", "SELECT 1")).row_count == 1  # timer armed for 30 s
        execution.timeout_s = TIMEOUT_S
        started = time.perf_counter()
        with pytest.raises(QueryTimeout):
            await backend.run("slow", LONG)
        assert time.perf_counter() - started < TIMEOUT_S + 2.0
    finally:
        backend.dispose()


async def test_a_job_queued_past_its_timeout_is_released_without_running(tmp_path: Path) -> None:
    execution = Execution(DatabaseBackend(f"sqlite:///{tmp_path / 'x.sqlite'}").url, TIMEOUT_S)
    ran: list[str] = []

    def deaf(*, canceller: Canceller, progress: object) -> str:
        canceller.started(lambda: None)  # a statement whose driver ignores the cancel
        time.sleep(TIMEOUT_S * 3)
        canceller.stopped()
        return "done"

    def queued(*, canceller: Canceller, progress: object) -> None:
        ran.append("queued")

    try:
        first = asyncio.create_task(execution.call(deaf))
        await asyncio.sleep(0.05)
        started = time.perf_counter()
        with pytest.raises(QueryTimeout, match="nothing was run"):
            await execution.call(queued)
        assert time.perf_counter() - started < TIMEOUT_S + 1.0  # at its deadline, not later
        assert await first == "done"  # the running one was waited for, never abandoned
        assert ran == []
    finally:
        execution.close()
