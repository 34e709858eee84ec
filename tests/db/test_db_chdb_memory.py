"""chDB in its worker process under ``memory_limit_bytes``: a statement that passes the cap
(ClickHouse's own tracker, at 60 % of it, or the OS cap behind it) ends with an error naming
the limit, the kernel's memory and variables stay where they were, the worker is replaced,
an approved write says what stays (ClickHouse has no rollback), the audit records the
failure, and Stop still cancels a long query without killing the worker (a worker that does
not answer a cancel is killed, as a last resort)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

pytest.importorskip("chdb")

from dbtest_support import FakeAudit, kernel_memory_probe

from pi_notebook import create_agent_session
from pi_notebook.ai.abort import AbortController
from pi_notebook.database import database_extension
from pi_notebook.sql.backend import QueryAborted, QueryError
from pi_notebook.sql.backend.cancel import Canceller
from pi_notebook.sql.backend.engine_shares import release_process, shared_process
from pi_notebook.sql.backend.errors import MemoryLimitExceeded
from pi_notebook.sql.backend.worker import Cancelled
from pi_notebook.sql.engines import ChdbBackend, create_backend
from pi_notebook.sql.engines.chdb import WORKER_HOST
from pi_notebook.testing import ScriptedModel, text, tool_call

MiB = 1 << 20
LIMIT = 512 * MiB
# 10 million 1 KB strings kept whole: 10 GB in one aggregate.
GROUP_ARRAY = "SELECT length(groupArray(repeat('x', 1000))) AS n FROM numbers(10000000)"
# 10,000 copies of a 100 KB string per row: about 1 GB per row.
ARRAY_MAP = (
    "SELECT max(length(arrayStringConcat(arrayMap(i -> repeat('x', 100000), range(10000))))) "
    "AS n FROM numbers(100)"
)


@pytest.mark.parametrize("tracker", [True, False], ids=["clickhouse-tracker", "os-cap"])
def test_memory_bombs_stop_at_the_limit_and_the_kernel_stays_small(
    tmp_path: Path, tracker: bool
) -> None:
    # Without ClickHouse's own limit (set far above the cap), the OS cap stops the worker.
    env = {} if tracker else {"PI_NOTEBOOK_CHDB_MEMORY_LIMIT": str(64 << 30)}
    out = kernel_memory_probe(
        f"chdb:///{tmp_path / 'ch'}", LIMIT, [GROUP_ARRAY, ARRAY_MAP], env=env
    )
    assert out["first"] == 42
    for error in out["errors"]:
        assert error is not None and error.startswith("MemoryLimitExceeded: ")
        assert "memory limit of 512 MiB (memory_limit_bytes)" in error
        assert "database_extension(memory_limit_bytes=...)" in error
        assert "worker process was restarted" in error
    assert out["grown"] < 100 * MiB  # the statements' gigabytes never reached the kernel
    assert out["after"] == 42 and out["variables"] == 999  # the next read runs, state kept
    assert not out["chdb_in_kernel"]  # the kernel never even loads chDB's library
    first, second, last = out["pids"]
    assert len({first, second, last}) == 3  # a new worker after each one that ran out


async def _worker(backend: ChdbBackend, other_than: int | None) -> int:
    """The worker's pid once one other than ``other_than`` runs (workers start in the
    background)."""
    for _ in range(600):
        pid = backend.worker_pid
        if pid is not None and pid != other_than:
            return pid
        await asyncio.sleep(0.1)
    raise AssertionError("no worker started")


async def _count(backend: ChdbBackend, sql: str) -> int:
    return int((await backend._run_as("read", sql)).dataframe.iloc[0, 0])  # pyright: ignore[reportPrivateUsage]


async def test_an_approved_write_past_the_limit_says_what_stays_and_is_audited(
    tmp_path: Path,
) -> None:
    audit = FakeAudit()
    backend = create_backend(f"chdb:///{tmp_path / 'ch'}", memory_limit_bytes=LIMIT, audit=audit)
    assert isinstance(backend, ChdbBackend)
    try:
        await backend._run_as("write", "CREATE TABLE sink (n UInt64) ENGINE = MergeTree ORDER BY n")  # pyright: ignore[reportPrivateUsage]
        await backend._run_as("write", "INSERT INTO sink VALUES (1), (2)")  # pyright: ignore[reportPrivateUsage]
        first = await _worker(backend, None)
        grow = f"INSERT INTO sink {GROUP_ARRAY}"
        with pytest.raises(MemoryLimitExceeded) as stopped:
            await backend._run_as("write", grow, tool_call_id="w", audit=audit)  # pyright: ignore[reportPrivateUsage]
        said = str(stopped.value)
        assert "memory limit of 512 MiB (memory_limit_bytes)" in said
        assert "ClickHouse has no transactions" in said and "nothing was written" not in said
        [failure] = audit.of("query_error")
        assert failure["tool_call_id"] == "w" and "no transactions" in failure["payload"]["error"]
        assert await _count(backend, "SELECT count() FROM sink") == 2  # the data on disk stays
        assert backend.worker_pid not in (None, first)
    finally:
        backend.dispose()


async def test_through_a_session_the_model_gets_the_limit_and_the_audit_the_failure(
    tmp_path: Path,
) -> None:
    # A read the classifier lets through: 128 copies of a 4 MB value per row (512 MB).
    url = f"chdb:///{tmp_path / 'ch'}"
    attack = "SELECT max(length(concat(" + ", ".join(["s"] * 128) + "))) AS n FROM big"
    model = ScriptedModel(
        [
            tool_call("query_database", {"sql": attack}, id="q1"),
            text("ok"),
            tool_call("query_database", {"sql": "SELECT count() AS n FROM big"}, id="q2"),
            text("ok"),
        ]
    )
    ext = database_extension(url, memory_limit_bytes=LIMIT)
    session = create_agent_session(
        model=model, extensions=[ext], audit=f"sqlite:///{tmp_path / 'audit.sqlite'}"
    )
    try:
        assert isinstance(ext.backend, ChdbBackend)
        for sql in (
            "CREATE TABLE big (s String) ENGINE = MergeTree ORDER BY tuple()",
            "INSERT INTO big SELECT concat(repeat('xxxx', 1000000), toString(number)) "
            "FROM numbers(16)",
        ):
            await ext.backend._run_as("write", sql)  # pyright: ignore[reportPrivateUsage]
        await session.prompt("go")
        first = next(m for m in session.messages if m.role == "toolResult")
        said = " ".join(getattr(p, "text", "") for p in first.content)
        assert first.is_error and "memory limit of 512 MiB (memory_limit_bytes)" in said
        await session.prompt("again")
        assert ext.last_dataframe is not None and ext.last_dataframe["n"].tolist() == [16]
        assert session.audit is not None
        records = session.audit.to_dataframe()
        failed = records[(records["kind"] == "query_error") & (records["tool_call_id"] == "q1")]
        assert "memory limit of 512 MiB" in str(failed.iloc[0]["payload"])
    finally:
        await session.close()


async def test_stop_cancels_a_long_query_and_the_worker_keeps_its_database() -> None:
    backend = create_backend("chdb://", statement_timeout_s=60)
    assert isinstance(backend, ChdbBackend)
    try:
        await backend._run_as("write", "CREATE TABLE kept (a UInt8) ENGINE = Memory")  # pyright: ignore[reportPrivateUsage]
        await backend._run_as("write", "INSERT INTO kept VALUES (7)")  # pyright: ignore[reportPrivateUsage]
        pid = backend.worker_pid
        controller = AbortController()
        asyncio.get_running_loop().call_later(1.0, controller.abort)
        started = time.monotonic()
        with pytest.raises(QueryAborted):
            await backend._run_as(  # pyright: ignore[reportPrivateUsage]
                "read", "SELECT count() FROM numbers(1000000000000)", signal=controller.signal
            )
        assert time.monotonic() - started < 5
        # KILL QUERY in the worker stopped it: the same worker, its in-memory table kept.
        assert backend.worker_pid == pid
        assert await _count(backend, "SELECT sum(a) FROM kept") == 7
    finally:
        backend.dispose()


async def test_a_chdb_worker_that_ignores_a_cancel_is_killed_as_a_last_resort() -> None:
    # time.sleep in the worker answers no KILL QUERY: only killing the worker ends the call.
    process = shared_process(
        make_url("chdb://"),
        memory_limit_bytes=LIMIT,
        connect_timeout_s=10,
        statement_timeout_s=30,
        host=WORKER_HOST,
    )
    try:
        assert await process.call_async("offload", (int, ("7",)), canceller=Canceller()) == 7
        first = process.pid
        canceller = Canceller()
        asyncio.get_running_loop().call_later(0.5, canceller.request, "timeout")
        started = time.monotonic()
        with pytest.raises(Cancelled):
            await process.call_async("offload", (time.sleep, (30,)), canceller=canceller)
        assert time.monotonic() - started < 10
        assert await process.call_async("offload", (int, ("8",)), canceller=Canceller()) == 8
        assert process.pid not in (None, first)
    finally:
        release_process(process)


async def test_a_cancelled_task_stops_its_statement_and_the_next_call_runs() -> None:
    backend = create_backend("chdb://", statement_timeout_s=60)
    try:
        await backend.run("w", "SELECT 1")
        pid = backend.worker_pid
        task = asyncio.create_task(
            backend._run_as("read", "SELECT count() FROM numbers(1000000000000)")  # pyright: ignore[reportPrivateUsage]
        )
        await asyncio.sleep(1.0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        started = time.monotonic()
        after = await backend.run("after", "SELECT 2 AS two")
        assert after.dataframe["two"].tolist() == [2] and time.monotonic() - started < 5
        assert backend.worker_pid == pid  # the statement was cancelled, not the worker killed
    finally:
        backend.dispose()


async def test_dispose_during_a_running_query_ends_it_without_blocking_the_loop() -> None:
    backend = create_backend("chdb://", statement_timeout_s=60)
    try:
        await backend.run("w", "SELECT 1")
        task = asyncio.create_task(
            backend._run_as("read", "SELECT count() FROM numbers(1000000000000)")  # pyright: ignore[reportPrivateUsage]
        )
        await asyncio.sleep(1.0)
        started = time.monotonic()
        backend.dispose()  # on the loop, while the loop itself awaits the query's answer
        with pytest.raises(QueryError):
            await asyncio.wait_for(task, 10)
        assert time.monotonic() - started < 8
        again = await backend.run("again", "SELECT 3 AS three")  # a new worker serves
        assert again.dataframe["three"].tolist() == [3]
    finally:
        backend.dispose()
