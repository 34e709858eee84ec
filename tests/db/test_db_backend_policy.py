# ruff: noqa: F811 - the engine fixture ``db`` is imported from dbtest_support
"""The backend's final check (S9, S25, S26, D4, D5), on all four engines."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from dbtest_support import FakeAudit, Scratch, checked_out, db  # noqa: F401 - db is a fixture

from pi_notebook.approvals import CapabilityStore
from pi_notebook.sql.backend import DatabaseBackend, QueryError, QueryRefused, query_args_hash


@pytest.fixture
async def backend(db: Scratch) -> AsyncIterator[DatabaseBackend]:
    b = DatabaseBackend(db.url, approvals=CapabilityStore(), audit=FakeAudit())
    try:
        yield b
    finally:
        b.dispose()


def _audit(b: DatabaseBackend) -> FakeAudit:
    assert isinstance(b.audit, FakeAudit)
    return b.audit


async def test_s25_read_runs_with_implicit_capability(
    db: Scratch, backend: DatabaseBackend
) -> None:
    out = await backend.run("r1", "SELECT 1 AS one, 'x' AS two")
    assert out.statement_kind == "read"
    assert out.dataframe.to_dict("records") == [{"one": 1, "two": "x"}]
    final = _audit(backend).of("final_args")
    assert final and final[0]["durable"] and final[0]["payload"]["args_hash"] == out.args_hash


async def test_d4_write_without_capability_refused_and_nothing_changes(
    db: Scratch,
    backend: DatabaseBackend,
) -> None:
    table = db.table()
    with pytest.raises(QueryRefused, match="no approval"):
        await backend.run("w1", f"INSERT INTO {table} (a) VALUES (1)")
    assert db.count(table) == 0
    mismatch = _audit(backend).of("capability_mismatch")[0]
    assert mismatch["durable"] and mismatch["payload"]["approved_hash"] is None
    assert mismatch["payload"]["final_hash"] == query_args_hash(
        f"INSERT INTO {table} (a) VALUES (1)", backend.dialect
    )


async def test_d5_approved_write_commits_once_and_cannot_be_replayed(
    db: Scratch,
    backend: DatabaseBackend,
) -> None:
    table = db.table()
    sql = f"INSERT INTO {table} (a) VALUES (1), (2)"
    backend.capabilities.grant("w1", query_args_hash(sql, backend.dialect), 60)
    out = await backend.run("w1", sql)
    assert out.statement_kind == "write" and db.count(table) == 2
    with pytest.raises(QueryRefused, match="already used"):  # the same call id, a second use
        await backend.run("w1", sql)
    with pytest.raises(QueryRefused, match="no approval"):  # another call id
        await backend.run("w2", sql)
    assert db.count(table) == 2


async def test_s26_changed_sql_after_approval_refused_with_both_hashes(
    db: Scratch,
    backend: DatabaseBackend,
) -> None:
    table = db.table()
    approved = f"INSERT INTO {table} (a) VALUES (1)"
    final = f"DELETE FROM {table}"
    backend.capabilities.grant("w1", query_args_hash(approved, backend.dialect), 60)
    with pytest.raises(QueryRefused, match="changed after it was approved"):
        await backend.run("w1", final)
    payload = _audit(backend).of("capability_mismatch")[0]["payload"]
    assert payload["approved_hash"] == query_args_hash(approved, backend.dialect)
    assert payload["final_hash"] == query_args_hash(final, backend.dialect)
    assert db.count(table) == 0


async def test_d5_forced_read_is_stopped_by_engine_read_only_mode(
    db: Scratch,
    backend: DatabaseBackend,
) -> None:
    """A write that slipped past the classifier still fails inside the read-only mode."""
    table = db.table()
    with pytest.raises(QueryError):
        await backend._run_as("read", f"INSERT INTO {table} (a) VALUES (1)")  # pyright: ignore[reportPrivateUsage]
    assert db.count(table) == 0
    out = await backend.run("r1", f"SELECT count(*) AS n FROM {table}")  # the connection is fine
    assert out.dataframe["n"].tolist() == [0]


async def test_d5_failed_write_rolls_back(db: Scratch, backend: DatabaseBackend) -> None:
    table = db.table()
    sql = f"INSERT INTO {table} (a) VALUES (1), (NULL)"  # the second row violates NOT NULL
    backend.capabilities.grant("w1", query_args_hash(sql, backend.dialect), 60)
    with pytest.raises(QueryError):
        await backend.run("w1", sql)
    assert db.count(table) == 0
    assert "query_error" in _audit(backend).kinds()


async def test_d10_rejected_sql_refused_by_backend(backend: DatabaseBackend) -> None:
    with pytest.raises(QueryRefused, match=r"^Refused: "):
        await backend.run("x1", "SELECT 1; SELECT 2")
    assert _audit(backend).kinds() == ["query_refused"]


async def test_one_connection_is_kept_between_runs_and_released_on_dispose(db: Scratch) -> None:
    # A SQLite file has two paths, each keeping one connection: short reads on the caller's
    # thread (``sql/backend/inline.py``) and the worker, which re-runs a read that failed there.
    # DuckDB's pool lives in its worker process: counted there, and gone with it on dispose.
    paths = 2 if db.engine == "sqlite" else 1
    backend = DatabaseBackend(db.url)

    async def out() -> int:
        return await backend.offload(checked_out, backend.engine)

    try:
        await backend.run("r1", "SELECT 1 AS one")
        await backend.run("r2", "SELECT 2 AS two")
        assert await out() == 1  # kept for the next run, not leaked
        with pytest.raises(QueryError):
            await backend.run("r3", "SELECT * FROM no_such_table")
        assert await out() <= paths
        await backend.run("r4", "SELECT 4 AS four")
        assert await out() <= paths
    finally:
        backend.dispose()
    assert await out() == 0


_MEMORY_PROBE = """
import asyncio, resource, sys
from pi_notebook.sql.backend import DatabaseBackend

async def main():
    backend = DatabaseBackend(sys.argv[1])
    try:
        out = await backend.run("r", sys.argv[2])
        print("ran", out.statement_kind)
    except Exception as exc:
        print("refused", type(exc).__name__)
    finally:
        backend.dispose()

asyncio.run(main())
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def _peak_mb(url: str, sql: str) -> tuple[str, int]:
    """(what happened, peak RSS in MB) of one run in a fresh interpreter."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _MEMORY_PROBE, url, sql],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    outcome, peak = done.stdout.strip().splitlines()[-2:]
    return outcome, int(peak)


def test_duckdb_copied_aggregate_is_not_run_as_a_read(tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    url = f"duckdb:///{tmp_path / 'm.duckdb'}"
    copied = (  # the audit's statement: reached 3.6 GB as a read
        "SELECT length(concat(" + ", ".join(["s"] * 32) + ")) AS n FROM "
        "(SELECT string_agg('xxxxxxxxxx', '') AS s FROM range(10000000))"
    )
    baseline = _peak_mb(url, "SELECT 1 AS n")
    outcome, peak = _peak_mb(url, copied)
    assert outcome == "refused QueryRefused"
    assert peak < baseline[1] + 200
    # Handed to the result once, from at most a million generated rows: a plain read, and
    # the process stays far below the memory limit.
    outcome, peak = _peak_mb(
        url,
        "SELECT length(string_agg('xxxxxxxxxx', '')) AS n, list(i) AS l FROM range(999999) t(i)",
    )
    assert outcome == "ran read"
    assert peak < baseline[1] + 500


@pytest.mark.postgres
async def test_approving_a_create_with_begin_atomic_aliases_runs_nothing(
    pg_url: str,
) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE a15_victim (a int)")
        conn.exec_driver_sql("INSERT INTO a15_victim VALUES (1), (2)")
    sql = (
        "CREATE VIEW a15_v1 AS SELECT begin atomic FROM (SELECT 1 AS begin) s; "
        "DELETE FROM a15_victim; CREATE VIEW a15_v2 AS SELECT 1 AS end"
    )
    backend = DatabaseBackend(pg_url, approvals=CapabilityStore(), audit=FakeAudit())
    try:
        backend.capabilities.grant("c1", query_args_hash(sql, backend.dialect), 60)
        with pytest.raises(QueryRefused, match="more than one statement"):
            await backend.run("c1", sql)
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM a15_victim").scalar() == 2
            views = "SELECT count(*) FROM pg_views WHERE viewname IN ('a15_v1', 'a15_v2')"
            assert conn.exec_driver_sql(views).scalar() == 0
    finally:
        backend.dispose()
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP VIEW IF EXISTS a15_v1, a15_v2")
            conn.exec_driver_sql("DROP TABLE a15_victim")
        engine.dispose()
