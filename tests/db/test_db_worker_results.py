"""DuckDB's worker process: a small result leaves DuckDB's worker process as its rows and is built into its DataFrame
in the kernel (a pickled DataFrame costs several times more to send and load): the frames,
previews and counts are those the same backend code gives on an engine in the kernel; an
abort or the statement timeout interrupts the statement in the worker, which serves on."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pandas as pd
import pytest
from dbtest_support import LONG_READ

from pi_notebook.ai.abort import AbortController
from pi_notebook.sql.backend import (
    DatabaseBackend,
    QueryAborted,
    QueryError,
    QueryTimeout,
    create_backend_engine,
)
from pi_notebook.sql.backend.cancel import Canceller
from pi_notebook.sql.backend.engine_shares import release_process
from pi_notebook.sql.backend.worker import SEND_ROWS_AT_MOST, ConnectionSlot, run_statement

READS = [
    "SELECT 1",
    "SELECT 1 AS a, 2.5 AS b, NULL AS c, 'x' AS d, TRUE AS e",
    "SELECT * FROM (VALUES (1, 'a'), (NULL, 'b'), (3, NULL)) AS t(n, s)",
    "SELECT 1 AS n WHERE 1 = 0",
    f"SELECT range AS n, CAST(range AS VARCHAR) AS s FROM range({SEND_ROWS_AT_MOST + 1})",
    "SELECT range AS n FROM range(5000)",
]


def test_run_statement_leaves_only_a_small_result_unbuilt(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    backend = DatabaseBackend(url, row_cap=10_000)
    settings = backend.settings
    backend.dispose()
    engine = create_backend_engine(url)
    slot = ConnectionSlot()
    try:
        for sql in [
            "SELECT 1 AS n, 'a' AS s, NULL AS z",
            "SELECT 1 AS n WHERE 1 = 0",
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300) "
            "SELECT x FROM c",
        ]:
            built = run_statement(
                engine, "sqlite", "read", sql, settings, canceller=Canceller(), slot=slot
            )
            sent = run_statement(
                engine,
                "sqlite",
                "read",
                sql,
                settings,
                canceller=Canceller(),
                slot=slot,
                build_small=False,
            )
            assert built.frame is not None
            small = built.row_count <= SEND_ROWS_AT_MOST
            assert (sent.frame is None) == small
            assert sent.preview == built.preview
            assert sent.rows_kept() == built.rows_kept() == len(built.frame)
            pd.testing.assert_frame_equal(sent.build(), built.frame)
    finally:
        slot.release()
        engine.dispose()


@pytest.mark.parametrize("sql", READS)
async def test_duckdb_worker_reads_give_the_kernels_frames(tmp_path: Path, sql: str) -> None:
    worker = DatabaseBackend(f"duckdb:///{tmp_path / 'w.duckdb'}", row_cap=1_000)
    kernel_url = f"duckdb:///{tmp_path / 'k.duckdb'}"
    kernel = DatabaseBackend(kernel_url, row_cap=1_000)
    # Without its worker, the same backend code runs on an engine in the kernel.
    process, kernel._process = kernel._process, None  # pyright: ignore[reportPrivateUsage]
    assert process is not None
    release_process(process)
    kernel.engine = create_backend_engine(kernel_url)
    try:
        there, here = await worker.run("w", sql), await kernel.run("k", sql)
        assert worker.worker_pid is not None and kernel.worker_pid is None
        pd.testing.assert_frame_equal(there.dataframe, here.dataframe)
        assert there.preview == here.preview
        assert (there.row_count, there.truncated) == (here.row_count, here.truncated)
    finally:
        worker.dispose()
        kernel.dispose()


async def test_duckdb_worker_write_gives_an_empty_frame_and_its_count(tmp_path: Path) -> None:
    worker = DatabaseBackend(f"duckdb:///{tmp_path / 'w.duckdb'}")
    try:
        await worker._run_as("write", "CREATE TABLE t (n INTEGER)")  # pyright: ignore[reportPrivateUsage]
        out = await worker._run_as("write", "INSERT INTO t VALUES (1), (2), (3)")  # pyright: ignore[reportPrivateUsage]
        assert out.row_count == 3 and not out.has_rows
        assert out.dataframe.empty
    finally:
        worker.dispose()


async def test_duckdb_worker_stops_a_statement_on_abort_and_timeout_and_lives_on(
    tmp_path: Path,
) -> None:
    # The cancel reaches DuckDB's interrupt in the worker (on its own socket, while the
    # worker's main thread runs the statement): the worker is not killed, and serves on.
    backend = DatabaseBackend(f"duckdb:///{tmp_path / 'c.duckdb'}", statement_timeout_s=1.0)
    try:
        await backend.run("w", "SELECT 1")
        pid = backend.worker_pid
        assert pid is not None
        controller = AbortController()
        asyncio.get_running_loop().call_later(0.3, controller.abort)
        with pytest.raises(QueryAborted):
            await backend._run_as("read", LONG_READ["duckdb"], signal=controller.signal)  # pyright: ignore[reportPrivateUsage]
        with pytest.raises(QueryTimeout):
            await backend._run_as("read", LONG_READ["duckdb"])  # pyright: ignore[reportPrivateUsage]
        assert (await backend.run("after", "SELECT 1 AS one")).dataframe["one"].tolist() == [1]
        assert backend.worker_pid == pid
    finally:
        backend.dispose()


def _slow_worker_start(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, seconds: float) -> None:
    """Every worker process started from now on takes ``seconds`` longer to start: the
    kernel's import path, which a worker inherits, gets a ``sitecustomize`` that sleeps."""
    slow = tmp_path / "slow_start"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(f"import time\ntime.sleep({seconds})\n")
    monkeypatch.syspath_prepend(str(slow))


async def test_duckdb_statement_timeout_counts_from_the_statement_not_the_worker_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker takes longer to start than the statement timeout: the statement still runs
    # (its time starts when the worker receives it), and a long one still times out.
    _slow_worker_start(monkeypatch, tmp_path, 1.5)
    backend = DatabaseBackend(f"duckdb:///{tmp_path / 's.duckdb'}", statement_timeout_s=0.5)
    try:
        out = await backend.run("slow start", "SELECT 1 AS one")
        assert out.dataframe["one"].tolist() == [1]
        with pytest.raises(QueryTimeout):
            await backend._run_as("read", LONG_READ["duckdb"])  # pyright: ignore[reportPrivateUsage]
    finally:
        backend.dispose()


async def test_duckdb_worker_start_is_bounded_by_the_connect_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _slow_worker_start(monkeypatch, tmp_path, 3.0)
    backend = DatabaseBackend(
        f"duckdb:///{tmp_path / 'l.duckdb'}", connect_timeout_s=0.5, statement_timeout_s=30
    )
    try:
        with pytest.raises(
            QueryError, match=r"did not start within 0\.5 s \(the connect timeout\)"
        ):
            await backend.run("late", "SELECT 1")
        assert backend.worker_pid is None
    finally:
        backend.dispose()


async def test_duckdb_reads_are_awaited_on_the_loop_without_a_worker_thread(
    tmp_path: Path,
) -> None:
    # A read is sent to the worker process and its answer read on the event loop: no
    # backend worker thread starts for it (a write still goes through one), and its
    # progress reaches the listener on the loop's own thread.
    def db_threads() -> set[int | None]:
        return {t.ident for t in threading.enumerate() if t.name == "pi-db-worker"}

    before = db_threads()
    backend = DatabaseBackend(f"duckdb:///{tmp_path / 'r.duckdb'}", row_cap=100)
    seen: list[int] = []
    try:
        out = await backend._run_as(  # pyright: ignore[reportPrivateUsage]
            "read",
            "SELECT range AS n FROM range(5000)",
            on_progress=lambda n: seen.append(threading.get_ident()),
        )
        assert len(out.dataframe) == 100
        assert db_threads() == before
        assert set(seen) <= {threading.get_ident()}
        await backend._run_as("write", "CREATE TABLE t AS SELECT 1 AS n")  # pyright: ignore[reportPrivateUsage]
        assert db_threads() - before
        assert (await backend.run("r", "SELECT n FROM t")).dataframe["n"].tolist() == [1]
    finally:
        backend.dispose()


async def test_duckdb_stop_while_the_worker_starts_ends_the_read_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Stop during a slow worker start ends the read without waiting for the start (the
    # worker is not running yet when the error comes), and the next read runs on it: both
    # while the backend's own early start runs, and during a start the read itself began.
    _slow_worker_start(monkeypatch, tmp_path, 3.0)
    backend = DatabaseBackend(f"duckdb:///{tmp_path / 'a.duckdb'}", statement_timeout_s=30)
    try:
        for _ in range(2):
            controller = AbortController()
            asyncio.get_running_loop().call_later(0.3, controller.abort)
            with pytest.raises(QueryAborted):
                await backend.run("stopped", "SELECT 1", signal=controller.signal)
            assert backend.worker_pid is None
            assert (await backend.run("after", "SELECT 1")).row_count == 1
            backend.dispose()  # the worker stops; the next read starts one itself
    finally:
        backend.dispose()
