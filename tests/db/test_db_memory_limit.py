"""``memory_limit_bytes``: DuckDB runs in a worker process under an OS memory cap, so a
statement that passes it ends with an error naming the limit, the kernel's memory stays where
it was, the worker is replaced, and an approved write that dies with it leaves no row behind;
SQLite gets it as its heap limit."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from dbtest_support import FakeAudit, kernel_memory_probe

from pi_notebook import create_agent_session
from pi_notebook.database import database_extension
from pi_notebook.sql.backend import DatabaseBackend, QueryError, QueryTimeout
from pi_notebook.sql.backend.errors import MemoryLimitExceeded
from pi_notebook.testing import ScriptedModel, text, tool_call

MiB = 1 << 20
LIMIT = 512 * MiB
# Per-row values that double eight times: 1.2 KB of text becomes 300 KB per row, 600 MB per
# DuckDB vector of 2,048 rows, all of it allocated outside DuckDB's own memory_limit.
HEX8 = (
    "SELECT sum(length(hex(hex(hex(hex(hex(hex(hex(hex(repeat(CAST(range AS VARCHAR), "
    "300))))))))))) AS n FROM range(1000000)"
)
CONCAT128 = (
    "SELECT sum(length(concat("
    + ", ".join(["repeat(CAST(range AS VARCHAR), 2000)"] * 128)
    + "))) AS n FROM range(10000000)"
)


def test_amplifying_reads_stop_at_the_limit_and_the_kernel_stays_small(tmp_path: Path) -> None:
    url = f"duckdb:///{tmp_path / 'm.duckdb'}"
    out = kernel_memory_probe(url, LIMIT, [HEX8, CONCAT128])
    assert out["first"] == 42
    for error in out["errors"]:
        assert error is not None and error.startswith("MemoryLimitExceeded: ")
        assert "memory limit of 512 MiB (memory_limit_bytes)" in error
        assert "database_extension(memory_limit_bytes=...)" in error
    assert out["grown"] < 200 * MiB  # the statements' gigabytes never reached the kernel
    assert out["after"] == 42 and out["variables"] == 999  # the next read runs, state kept


async def test_the_worker_is_replaced_and_the_audit_has_the_failure(tmp_path: Path) -> None:
    audit = FakeAudit()
    backend = DatabaseBackend(
        f"duckdb:///{tmp_path / 'm.duckdb'}", memory_limit_bytes=LIMIT, audit=audit
    )
    try:
        await backend._run_as("read", "SELECT 1 AS one", audit=audit)  # pyright: ignore[reportPrivateUsage]
        first = backend.worker_pid
        assert first is not None and first != os.getpid()
        with pytest.raises(MemoryLimitExceeded, match=r"memory limit of 512 MiB"):
            await backend._run_as("read", HEX8, tool_call_id="big", audit=audit)  # pyright: ignore[reportPrivateUsage]
        [failure] = audit.of("query_error")
        assert failure["tool_call_id"] == "big"
        assert "memory limit of 512 MiB (memory_limit_bytes)" in failure["payload"]["error"]
        again = await backend._run_as("read", "SELECT 2 AS two")  # pyright: ignore[reportPrivateUsage]
        assert again.dataframe["two"].tolist() == [2]
        assert backend.worker_pid not in (None, first)
    finally:
        backend.dispose()


async def _worker(backend: DatabaseBackend, other_than: int | None) -> int:
    """The worker's pid once one other than ``other_than`` runs (workers start in the
    background, and a one-second statement timeout would count their start)."""
    for _ in range(600):
        pid = backend.worker_pid
        if pid is not None and pid != other_than:
            return pid
        await asyncio.sleep(0.1)
    raise AssertionError("no worker started")


async def _rows(backend: DatabaseBackend, table: str) -> int:
    out = await backend._run_as("read", f"SELECT count(*) AS n FROM {table}")  # pyright: ignore[reportPrivateUsage]
    return int(out.dataframe["n"].iloc[0])


async def test_an_approved_write_past_the_limit_is_rolled_back(tmp_path: Path) -> None:
    backend = DatabaseBackend(f"duckdb:///{tmp_path / 'm.duckdb'}", memory_limit_bytes=LIMIT)
    try:
        await backend._run_as("write", "CREATE TABLE t AS SELECT 'x' AS s FROM range(5)")  # pyright: ignore[reportPrivateUsage]
        grow = (
            "INSERT INTO t SELECT hex(hex(hex(hex(hex(hex(hex(hex(repeat(CAST(range AS "
            "VARCHAR), 300))))))))) FROM range(1000000)"
        )
        with pytest.raises(MemoryLimitExceeded):
            await backend._run_as("write", grow)  # pyright: ignore[reportPrivateUsage]
        assert await _rows(backend, "t") == 5
    finally:
        backend.dispose()


async def test_a_write_whose_worker_is_killed_leaves_no_row(tmp_path: Path) -> None:
    # The OS's own end for a process past its memory (SIGKILL) mid-write: the uncommitted
    # transaction dies with the worker.
    backend = DatabaseBackend(f"duckdb:///{tmp_path / 'm.duckdb'}", memory_limit_bytes=LIMIT)
    try:
        await backend._run_as("write", "CREATE TABLE t (a BIGINT)")  # pyright: ignore[reportPrivateUsage]
        await backend._run_as("write", "INSERT INTO t VALUES (1), (2), (3)")  # pyright: ignore[reportPrivateUsage]
        pid = backend.worker_pid
        assert pid is not None
        slow = (
            "INSERT INTO t SELECT count(*) FROM range(100000000000) AS a(x), "
            "range(10) AS b(y) WHERE x % 7 = y"
        )
        write = asyncio.ensure_future(backend._run_as("write", slow))  # pyright: ignore[reportPrivateUsage]
        await asyncio.sleep(1.0)
        assert not write.done()
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(QueryError, match=r"memory limit"):
            await write
        assert await _rows(backend, "t") == 3
    finally:
        backend.dispose()


async def test_duckdb_gets_a_share_of_the_cap_as_its_own_limit(tmp_path: Path) -> None:
    backend = DatabaseBackend(f"duckdb:///{tmp_path / 'm.duckdb'}", memory_limit_bytes=1 << 30)
    try:
        out = await backend._run_as("read", "SELECT current_setting('memory_limit') AS m")  # pyright: ignore[reportPrivateUsage]
    finally:
        backend.dispose()
    assert out.dataframe["m"].iloc[0].replace(" ", "") in {"585.5MiB", "614MB"}


async def test_the_duckdb_limit_can_still_be_set_by_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PI_NOTEBOOK_DUCKDB_MEMORY_LIMIT", "2GB")
    backend = DatabaseBackend(f"duckdb:///{tmp_path / 'm.duckdb'}")
    try:
        out = await backend._run_as("read", "SELECT current_setting('memory_limit') AS m")  # pyright: ignore[reportPrivateUsage]
    finally:
        backend.dispose()
    assert out.dataframe["m"].iloc[0].replace(" ", "") in {"1.8GiB", "1.9GiB", "2GB"}


_SQLITE = textwrap.dedent("""
    import asyncio, json, sys
    from pi_notebook.sql.backend import DatabaseBackend

    BIG = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 50) "
           "SELECT length(group_concat(printf('%.*c', 1000000, 'x'))) AS n FROM c")

    async def main(url, limit):
        backend = DatabaseBackend(url, memory_limit_bytes=limit)
        out = {}
        try:
            try:
                got = await backend._run_as("read", BIG)
                out["big"] = int(got.dataframe["n"].iloc[0])
            except Exception as exc:
                out["big"] = f"{type(exc).__name__}: {exc}"
            after = await backend._run_as("read", "SELECT 6 * 7 AS answer")
            out["after"] = int(after.dataframe["answer"].iloc[0])
        finally:
            backend.dispose()
        print(json.dumps(out))

    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
""")


@pytest.mark.parametrize("limit", [32 * MiB, 1 << 30])
def test_sqlite_allocations_past_the_limit_fail_cleanly(tmp_path: Path, limit: int) -> None:
    # SQLite's heap limit is its process's, and only ever lowered: a process of its own.
    url = f"sqlite:///{tmp_path / 'm.sqlite'}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, "-c", _SQLITE, url, str(limit)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if limit < 50 * MiB:  # a 50 MB value cannot be built under 32 MiB
        assert out["big"].startswith("MemoryLimitExceeded: ")
        assert "memory limit of 32 MiB (memory_limit_bytes)" in out["big"]
    else:
        assert out["big"] == 50_000_049
    assert out["after"] == 42


async def test_through_a_session_the_model_gets_the_limit_and_the_audit_the_failure(
    tmp_path: Path,
) -> None:
    # A read the classifier lets through: 128 copies of a 1 MB value per row.
    url = f"duckdb:///{tmp_path / 'm.duckdb'}"
    attack = "SELECT max(length(concat(" + ", ".join(["s"] * 128) + "))) AS n FROM big"
    model = ScriptedModel(
        [
            tool_call("query_database", {"sql": attack}, id="q1"),
            text("ok"),
            tool_call("query_database", {"sql": "SELECT count(*) AS n FROM big"}, id="q2"),
            text("ok"),
        ]
    )
    ext = database_extension(url, memory_limit_bytes=LIMIT)
    session = create_agent_session(
        model=model, extensions=[ext], audit=f"sqlite:///{tmp_path / 'audit.sqlite'}"
    )
    try:
        assert ext.backend is not None
        await ext.backend._run_as(
            "write",
            "CREATE TABLE big AS SELECT repeat('x', 1000000) "  # pyright: ignore[reportPrivateUsage]
            "|| range AS s FROM range(64)",
        )
        await session.prompt("go")
        first = next(m for m in session.messages if m.role == "toolResult")
        said = " ".join(getattr(p, "text", "") for p in first.content)
        assert first.is_error and "memory limit of 512 MiB (memory_limit_bytes)" in said
        await session.prompt("again")
        assert ext.last_dataframe is not None and ext.last_dataframe["n"].tolist() == [64]
        assert session.audit is not None
        records = session.audit.to_dataframe()
        failed = records[(records["kind"] == "query_error") & (records["tool_call_id"] == "q1")]
        assert "memory limit of 512 MiB" in str(failed.iloc[0]["payload"])
    finally:
        await session.close()


async def test_a_worker_that_ignores_a_cancel_is_killed_at_the_timeout(tmp_path: Path) -> None:
    # time.sleep in the worker answers no interrupt: only killing the worker ends it.
    backend = DatabaseBackend(f"duckdb:///{tmp_path / 'm.duckdb'}", statement_timeout_s=1)
    try:
        first = await _worker(backend, None)
        await backend._run_as("read", "SELECT 1 AS one")  # pyright: ignore[reportPrivateUsage]
        with pytest.raises(QueryTimeout):
            await backend.offload(time.sleep, 30)
        await _worker(backend, first)
        out = await backend._run_as("read", "SELECT 2 AS two")  # pyright: ignore[reportPrivateUsage]
        assert out.dataframe["two"].tolist() == [2]
        assert backend.worker_pid not in (None, first)
    finally:
        backend.dispose()


async def test_a_new_worker_opens_the_same_relative_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    backend = DatabaseBackend("duckdb:///rel.duckdb")
    try:
        await backend._run_as("write", "CREATE TABLE t AS SELECT 7 AS a")  # pyright: ignore[reportPrivateUsage]
        pid = await _worker(backend, None)
        monkeypatch.chdir(tmp_path / "b")  # the kernel moves; the database does not
        os.kill(pid, signal.SIGKILL)
        for _ in range(600):
            if backend.worker_pid != pid:
                break
            await asyncio.sleep(0.1)
        out = await backend._run_as("read", "SELECT a FROM t")  # pyright: ignore[reportPrivateUsage]
        assert out.dataframe["a"].tolist() == [7]
        assert not (tmp_path / "b" / "rel.duckdb").exists()
    finally:
        backend.dispose()
