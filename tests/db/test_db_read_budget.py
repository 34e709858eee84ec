"""The read budget: the engine's estimate decides whether a read runs at once or
asks a person; every read's result carries ``details["estimate"]``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import pi_notebook.database
from pi_notebook import AgentSession, create_agent_session
from pi_notebook.database.budget import ReadBudget, size
from pi_notebook.testing import ScriptedApprovalUI, ScriptedModel, text, tool_call

BIG = "SELECT * FROM big"
SMALL = "SELECT * FROM big WHERE id < 100"


def _script(*sqls: str) -> ScriptedModel:
    steps: list[Any] = [
        [tool_call("query_database", {"sql": s}, id=f"q{i}")] for i, s in enumerate(sqls)
    ]
    return ScriptedModel([*steps, text("done")])


def _results(session: AgentSession) -> list[Any]:
    return [m for m in session.messages if m.role == "toolResult"]


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    """A chDB directory with ``big``: 200,000 rows in a MergeTree ordered by ``id``."""
    pytest.importorskip("chdb")
    from pi_notebook.sql.engines import create_backend

    url = f"chdb:///{tmp_path / 'ch'}"
    backend = create_backend(url)
    try:
        for sql in (
            "CREATE TABLE big (id UInt64, note String) ENGINE = MergeTree ORDER BY id",
            "INSERT INTO big SELECT number, repeat('x', 20) FROM numbers(200000)",
        ):
            asyncio.run(backend._run_as("write", sql))
    finally:
        backend.dispose()
    return url


@pytest.fixture
async def run(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    sessions: list[AgentSession] = []

    async def go(url: str, sqls: list[str], ui: Any, budget: Any) -> AgentSession:
        ext = pi_notebook.database.database_extension(url, read_budget=budget)
        session = create_agent_session(
            model=_script(*sqls),
            ui=ui,
            audit=f"sqlite:///{tmp_path / 'audit.sqlite'}",
            extensions=[ext],
        )
        sessions.append(session)
        await session.prompt("go")
        return session

    yield go
    for session in sessions:
        await session.close()


async def test_a_scan_over_the_row_budget_asks_and_a_pruned_one_does_not(
    warehouse: str, run: Any
) -> None:
    ui = ScriptedApprovalUI("rejected")
    session = await run(warehouse, [BIG, SMALL], ui, {"rows": 100_000})
    [request] = ui.requests
    assert request.title == "Large database read" and request.args == {"sql": BIG}
    assert request.reasons == (
        "the engine estimates this read scans about 200,000 rows, "
        "over the read budget of 100,000 rows",
    )
    big, small = _results(session)
    assert big.is_error and "Rejected" in " ".join(getattr(p, "text", "") for p in big.content)
    assert not small.is_error and len(small.details["dataframe"]) == 100
    estimate = small.details["estimate"]
    assert 100 <= estimate["rows"] <= 8192 and estimate["bytes"] > 0  # one granule at most
    assert "EXPLAIN ESTIMATE" in estimate["source"]
    records = session.audit.to_dataframe()
    approvals = records[records["kind"] == "approval"]
    assert len(approvals) == 1 and "200,000 rows" in str(approvals.iloc[0]["payload"])


async def test_an_approved_read_over_the_byte_budget_runs(warehouse: str, run: Any) -> None:
    ui = ScriptedApprovalUI("approved")
    sql = "SELECT sum(length(note)) AS n FROM big"
    session = await run(warehouse, [sql], ui, {"bytes": 1_000_000})
    [request] = ui.requests
    [reason] = request.reasons
    assert "scans about" in reason and "MB, over the read budget of 1.0 MB" in reason
    [result] = _results(session)
    assert not result.is_error and int(result.details["dataframe"]["n"].iloc[0]) == 4_000_000
    assert result.details["estimate"]["bytes"] > 1_000_000


async def test_a_read_without_an_estimate_runs_and_says_so(tmp_path: Path, run: Any) -> None:
    url = f"sqlite:///{tmp_path / 'data.sqlite'}"
    ui = ScriptedApprovalUI("rejected")
    session = await run(url, ["SELECT 1 AS x"], ui, {"rows": 1})
    [result] = _results(session)
    assert not result.is_error and ui.requests == []
    assert result.details["estimate"]["rows"] is None
    assert result.details["estimate"]["source"].startswith("no estimate on sqlite")


def test_a_read_budget_is_checked_when_given() -> None:
    assert ReadBudget.of({"rows": 10}) == ReadBudget(rows=10)
    for bad in ({"rows": 0}, {"rows": "10"}, {"cost": 1}, {}):
        with pytest.raises(ValueError):
            ReadBudget.of(bad)
    with pytest.raises(ValueError):
        pi_notebook.database.database_extension("sqlite://", read_budget={"bytes": -1})
    assert size(999) == "999 bytes" and size(1_234_567) == "1.2 MB"
    assert size(1_200_000_000_000) == "1.2 TB"


# -- PostgreSQL and DuckDB: EXPLAIN (FORMAT JSON) in the read's own read-only transaction --

PG_BIG = "SELECT * FROM budget_big"
PG_SMALL = "SELECT * FROM budget_big WHERE id < 100"


@pytest.fixture
def pg_big(pg_url: str) -> Iterator[str]:
    """``budget_big`` on PostgreSQL: 200,000 rows of (id, 20 characters), indexed on ``id``
    and analyzed (so the planner knows its size)."""
    from pi_notebook.sql.engines import create_backend

    backend = create_backend(pg_url)
    setup = (
        "DROP TABLE IF EXISTS budget_big",
        "CREATE TABLE budget_big AS SELECT g AS id, repeat('x', 20) AS note "
        "FROM generate_series(1, 200000) AS g",
        "CREATE INDEX budget_big_id ON budget_big (id)",
        "ANALYZE budget_big",
    )
    try:
        for sql in setup:
            asyncio.run(backend._run_as("write", sql))
        yield pg_url
    finally:
        asyncio.run(backend._run_as("write", "DROP TABLE IF EXISTS budget_big"))
        backend.dispose()


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement text a psycopg cursor sends (one entry per round trip)."""
    import psycopg

    texts: list[str] = []
    original = psycopg.Cursor.execute

    def spy(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        texts.append(str(query))
        return original(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", spy)
    return texts


@pytest.fixture
def duck_big(tmp_path: Path) -> str:
    """A DuckDB file with ``big``: 200,000 rows of (id, 20 characters)."""
    from pi_notebook.sql.engines import create_backend

    url = f"duckdb:///{tmp_path / 'data.duckdb'}"
    backend = create_backend(url)
    try:
        asyncio.run(
            backend._run_as(
                "write",
                "CREATE TABLE big AS SELECT range AS id, "
                "repeat('x', 20) AS note FROM range(200000)",
            )
        )
    finally:
        backend.dispose()
    return url


def _explains(texts: list[str]) -> list[str]:
    return [t for t in texts if "EXPLAIN" in t]


@pytest.mark.postgres
async def test_a_postgres_scan_over_the_row_budget_asks_and_an_index_read_does_not(
    pg_big: str, run: Any, sent: list[str]
) -> None:
    ui = ScriptedApprovalUI("rejected")
    session = await run(pg_big, [PG_BIG, PG_SMALL], ui, {"rows": 100_000})
    [request] = ui.requests
    assert request.title == "Large database read" and request.args == {"sql": PG_BIG}
    [reason] = request.reasons
    assert reason.startswith("the engine estimates this read scans about ")
    assert reason.endswith(" rows, over the read budget of 100,000 rows")
    big, small = _results(session)
    assert big.is_error and "Rejected" in " ".join(getattr(p, "text", "") for p in big.content)
    assert not small.is_error and len(small.details["dataframe"]) == 99
    estimate = small.details["estimate"]
    assert 1 <= estimate["rows"] < 1_000 and 0 < estimate["bytes"] < 100_000
    assert estimate["source"].startswith("PostgreSQL EXPLAIN")
    # One round trip per estimate, inside the read's own read-only transaction, never ANALYZE.
    explains = _explains(sent)
    assert len(explains) == 2 and not any("ANALYZE" in t for t in explains)
    for message in explains:
        assert message.startswith("BEGIN READ ONLY; SET LOCAL statement_timeout")
        assert "; EXPLAIN (FORMAT JSON) SELECT" in message and message.endswith("; ROLLBACK")
    records = session.audit.to_dataframe()
    approvals = records[records["kind"] == "approval"]
    assert len(approvals) == 1 and "rows, over the read budget" in str(approvals.iloc[0]["payload"])


@pytest.mark.postgres
async def test_an_approved_postgres_read_over_the_byte_budget_runs(pg_big: str, run: Any) -> None:
    ui = ScriptedApprovalUI("approved")
    session = await run(pg_big, [PG_BIG], ui, {"bytes": 1_000_000})
    [request] = ui.requests
    [reason] = request.reasons
    assert "scans about" in reason and "MB, over the read budget of 1.0 MB" in reason
    [result] = _results(session)
    assert not result.is_error and len(result.details["dataframe"]) > 0
    assert result.details["estimate"]["bytes"] > 1_000_000


@pytest.mark.postgres
async def test_without_a_read_budget_no_estimate_query_is_sent(
    pg_big: str, run: Any, sent: list[str]
) -> None:
    ui = ScriptedApprovalUI("rejected")
    session = await run(pg_big, [PG_BIG], ui, None)
    [result] = _results(session)
    assert not result.is_error and ui.requests == [] and "estimate" not in result.details
    assert any("budget_big" in t for t in sent)  # the read itself went through the spy
    assert _explains(sent) == []


async def test_a_duckdb_scan_over_the_row_budget_asks_and_a_filtered_one_does_not(
    duck_big: str, run: Any
) -> None:
    ui = ScriptedApprovalUI("rejected")
    commented = "/* the whole table */ -- please\n" + BIG
    session = await run(duck_big, [BIG, SMALL, commented], ui, {"rows": 100_000})
    request, again = ui.requests  # a comment in front does not take a read out of the budget
    assert request.args == {"sql": BIG} and again.reasons == request.reasons
    assert request.reasons == (
        "the engine estimates this read scans about 200,000 rows, "
        "over the read budget of 100,000 rows",
    )
    big, small, _commented = _results(session)
    assert big.is_error and not small.is_error and len(small.details["dataframe"]) == 100
    estimate = small.details["estimate"]
    assert estimate["rows"] < 100_000 and estimate["bytes"] is None
    assert estimate["source"].startswith("DuckDB EXPLAIN")


async def test_a_duckdb_read_under_a_byte_budget_alone_runs_and_says_why(
    duck_big: str, run: Any
) -> None:
    ui = ScriptedApprovalUI("rejected")
    session = await run(duck_big, [BIG, "SELECT * FROM missing"], ui, {"bytes": 1})
    assert ui.requests == []  # no byte estimate: the engine's default holds (it runs)
    read, failed = _results(session)
    assert not read.is_error and read.details["estimate"]["rows"] == 200_000
    assert read.details["estimate"]["bytes"] is None
    assert "no byte estimate" in read.details["estimate"]["source"]
    assert failed.is_error  # the read's own error (its estimate failed first: see below)
    source = (failed.details or {}).get("estimate", {}).get("source", "")
    assert source.startswith("duckdb EXPLAIN failed, so the read runs as without a budget")


async def test_without_a_read_budget_duckdb_reads_carry_no_estimate(
    duck_big: str, run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pi_notebook.sql import engines

    calls: list[str] = []
    monkeypatch.setitem(engines._ESTIMATES, "duckdb", lambda raw, sql: calls.append(sql))
    session = await run(duck_big, [BIG], ScriptedApprovalUI("rejected"), None)
    [result] = _results(session)
    assert not result.is_error and "estimate" not in result.details and calls == []
