"""DuckDB under an OS memory cap: the backend, the gate and the read budget agree.

``EngineInfo.memory_capped`` (set where DuckDB runs in a worker process under a memory cap)
reaches the backend through ``create_backend``; the backend's :meth:`classify` is what the
gate, the budget and ``run`` ask, so a read the kernel-memory rules asked for runs without a
question there, and asks (or is refused without a capability) everywhere else.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import pi_notebook.database
import pi_notebook.sql.engines as engines
from pi_notebook import create_agent_session
from pi_notebook.sql.backend import QueryRefused
from pi_notebook.sql.engines import create_backend
from pi_notebook.sql.engines.duckdb import ENGINE
from pi_notebook.testing import ScriptedApprovalUI, ScriptedModel, text, tool_call

pytest.importorskip("duckdb_engine")

LISTS = (
    "SELECT customer_id, totals FROM (SELECT customer_id, list(total) AS totals "
    "FROM orders GROUP BY customer_id) ORDER BY customer_id"
)
FILE = "SELECT count(*) AS n FROM read_csv('/etc/passwd')"


def _database(tmp_path: Path) -> str:
    import duckdb

    path = tmp_path / "shop.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute(
        "CREATE TABLE orders AS SELECT i % 3 AS customer_id, i * 1.5 AS total FROM range(9) t(i)"
    )
    conn.close()
    return f"duckdb:///{path}"


def test_duckdb_runs_under_its_cap_and_an_uncapped_backend_still_asks(tmp_path: Path) -> None:
    """DuckDB's engine runs in its capped worker, so its backend is capped by default; a
    backend told otherwise keeps the memory rules."""
    assert ENGINE.memory_capped is True
    url = _database(tmp_path)
    backend, plain = create_backend(url), create_backend(url, memory_capped=False)
    try:
        assert backend.memory_capped is True and backend.classify(LISTS).kind == "read"
        assert plain.memory_capped is False and plain.classify(LISTS).kind == "write"
    finally:
        backend.dispose()
        plain.dispose()


async def test_a_capped_backend_runs_lists_in_subqueries_as_reads(tmp_path: Path) -> None:
    url = _database(tmp_path)
    capped = create_backend(url, memory_capped=True)
    plain = create_backend(url, memory_capped=False)
    try:
        out = await capped.run("c1", LISTS)
        assert out.statement_kind == "read" and out.row_count == 3
        with pytest.raises(QueryRefused):  # no capability: without the cap it is no read
            await plain.run("c2", LISTS)
        with pytest.raises(QueryRefused):  # a file read asks under the cap too
            await capped.run("c3", FILE)
    finally:
        capped.dispose()
        plain.dispose()


def _script(*sqls: str) -> ScriptedModel:
    steps = [[tool_call("query_database", {"sql": s}, id=f"q{i}")] for i, s in enumerate(sqls)]
    return ScriptedModel([*steps, text("done")])


async def _asked(tmp_path: Path, url: str, sql: str) -> int:
    ui = ScriptedApprovalUI("rejected")
    session = create_agent_session(
        model=_script(sql),
        ui=ui,
        audit=f"sqlite:///{tmp_path / 'audit.sqlite'}",
        extensions=[pi_notebook.database.database_extension(url)],
    )
    try:
        await session.prompt("go")
    finally:
        await session.close()
    return len(ui.requests)


async def test_the_gate_asks_only_where_the_engine_is_not_capped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _database(tmp_path)
    assert await _asked(tmp_path, url, LISTS) == 0  # DuckDB runs in its capped worker
    assert await _asked(tmp_path, url, FILE) == 1
    uncapped = tuple(
        replace(info, memory_capped=False) if info is ENGINE else info for info in engines.ENGINES
    )
    monkeypatch.setattr(engines, "ENGINES", uncapped)
    assert await _asked(tmp_path, url, LISTS) == 1
