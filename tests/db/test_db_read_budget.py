"""The read budget (third wave): the engine's estimate decides whether a read runs at once or
asks a person; every read's result carries ``details["estimate"]``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
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
    steps: list[Any] = [[tool_call("query_database", {"sql": s}, id=f"q{i}")]
                        for i, s in enumerate(sqls)]  # fmt: skip
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
        session = create_agent_session(model=_script(*sqls), ui=ui,
                                       audit=f"sqlite:///{tmp_path / 'audit.sqlite'}",
                                       extensions=[ext])  # fmt: skip
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
    assert request.reasons == ("the engine estimates this read scans about 200,000 rows, "
                               "over the read budget of 100,000 rows",)  # fmt: skip
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
