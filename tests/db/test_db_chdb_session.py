"""ClickHouse through chDB end to end, through a session (scripted model, scripted approval
UI): a read runs at once, a write asks and runs only when approved, dangerous statements
dressed as reads change nothing, Stop cancels a long query."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("chdb")

import pi_notebook.database
from pi_notebook import AgentSession, create_agent_session
from pi_notebook.sql.engines import create_backend
from pi_notebook.testing import ScriptedApprovalUI, ScriptedModel, text, tool_call

LONG_READ = "SELECT count() FROM numbers(10000000) AS a, numbers(10000000) AS b"


def _script(*sqls: str) -> ScriptedModel:
    steps: list[Any] = [
        [tool_call("query_database", {"sql": s}, id=f"q{i}")] for i, s in enumerate(sqls)
    ]
    return ScriptedModel([*steps, text("done")])


def _results(session: AgentSession) -> list[Any]:
    return [m for m in session.messages if m.role == "toolResult"]


def _existing(*paths: str | Path) -> list[str]:
    return [str(path) for path in paths if os.path.exists(path)]


def _text(message: Any) -> str:
    return " ".join(getattr(p, "text", "") for p in message.content)


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    """``chdb:///`` URL of a directory holding ``events`` (100 rows), made and closed again."""
    url = f"chdb:///{tmp_path / 'ch'}"
    backend = create_backend(url)
    try:
        for sql in (
            "CREATE TABLE events (ts DateTime, user_id UInt64, kind String) "
            "ENGINE = MergeTree ORDER BY ts",
            "INSERT INTO events SELECT toDateTime('2024-01-01') + number * 60, number % 10, "
            "if(number % 4 = 0, 'buy', 'view') FROM numbers(100)",
        ):
            asyncio.run(backend._run_as("write", sql))
    finally:
        backend.dispose()
    return url


@pytest.fixture
async def session_on(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """``await session_on(url, sqls, ui=...)``: a session whose model sends ``sqls``, not yet
    prompted; closed (its chDB sessions with it) after the test."""
    sessions: list[AgentSession] = []
    audit = f"sqlite:///{tmp_path / 'audit.sqlite'}"

    async def make(url: str, sqls: list[str], *, ui: Any = None, **options: Any) -> Any:
        ext = pi_notebook.database.database_extension(url, **options)
        session = create_agent_session(model=_script(*sqls), ui=ui, audit=audit, extensions=[ext])
        sessions.append(session)
        return session, ext

    yield make
    for session in sessions:
        await session.close()


async def _count(url: str, sql: str = "SELECT count() FROM events") -> int:
    backend = create_backend(url)
    try:
        return int((await backend._run_as("read", sql)).dataframe.iloc[0, 0])
    finally:
        backend.dispose()


async def test_s1_a_chdb_read_runs_at_once_with_the_frame_in_details(
    warehouse: str, session_on: Any
) -> None:
    ui = ScriptedApprovalUI("rejected")
    sql = "SELECT kind, count() AS n, min(ts) AS first FROM events GROUP BY kind ORDER BY kind"
    session, ext = await session_on(warehouse, [sql], ui=ui)
    await session.prompt("go")
    [result] = _results(session)
    assert not result.is_error, _text(result)
    frame = result.details["dataframe"]
    assert list(frame["kind"]) == ["buy", "view"] and list(frame["n"]) == [25, 75]
    assert str(frame["first"].iloc[0]) == "2024-01-01 00:00:00"
    assert "2 row(s), 3 column(s)" in _text(result) and result.details["dialect"] == "clickhouse"
    assert ui.requests == [] and ext.last_dataframe is frame
    kinds = list(session.audit.to_dataframe()["kind"])
    assert "final_args" in kinds
    schema = await ext.schema.get()
    assert [t.name for t in schema.tables] == ["events"]
    assert [c.type for c in schema.tables[0].columns] == ["DateTime", "UInt64", "String"]


async def test_s24_an_approved_chdb_write_runs_after_a_measured_preview(
    warehouse: str, session_on: Any
) -> None:
    ui = ScriptedApprovalUI("approved")
    sql = "INSERT INTO events SELECT ts, user_id, 'refund' FROM events WHERE kind = 'buy'"
    session, _ = await session_on(warehouse, [sql], ui=ui)
    await session.prompt("go")
    [request] = ui.requests
    assert request.preview is not None and request.preview.affected_rows == 25
    assert any("changes data" in reason for reason in request.reasons)
    [result] = _results(session)
    assert not result.is_error, _text(result)
    await session.close()
    assert await _count(warehouse) == 125
    assert await _count(warehouse, "SELECT count() FROM events WHERE kind = 'refund'") == 25


async def test_s24_a_rejected_chdb_write_never_runs(warehouse: str, session_on: Any) -> None:
    ui = ScriptedApprovalUI("rejected")
    sql = "ALTER TABLE events DELETE WHERE kind = 'view'"
    session, _ = await session_on(warehouse, [sql], ui=ui)
    await session.prompt("go")
    [request] = ui.requests
    assert request.preview is not None and request.preview.affected_rows == 75
    [result] = _results(session)
    assert result.is_error
    await session.close()
    assert await _count(warehouse) == 100


async def test_d1_d5_dangerous_statements_dressed_as_reads_change_nothing(
    warehouse: str, session_on: Any, tmp_path: Path
) -> None:
    """Refused without asking (programs, files written, server control), or asked and
    rejected (host files, settings that lift limits, mutations); nothing changes."""
    written = tmp_path / "out.csv"
    refused = [
        "SELECT * FROM executable('touch /tmp/pi_nb_pwned', 'TSV', 'a String')",
        f"INSERT INTO FUNCTION file('{written}', 'CSV', 'a UInt8') SELECT 1",
        f"SELECT * FROM events INTO OUTFILE '{written}'",
        "SYSTEM SHUTDOWN",
        "KILL QUERY WHERE 1",
        "SELECT count() FROM events; DROP TABLE events",
    ]
    asked = [
        "SELECT * FROM file('/etc/hostname', 'LineAsString')",
        "SELECT count() FROM events SETTINGS readonly = 0, max_execution_time = 0",
        "SELECT * FROM system.users",
        "ALTER TABLE events UPDATE kind = 'x' WHERE 1",
        "SELECT groupArray(kind) FROM events",
    ]
    ui = ScriptedApprovalUI("rejected")
    session, _ = await session_on(warehouse, [*refused, *asked], ui=ui)
    await session.prompt("go")
    results = _results(session)
    assert len(results) == len(refused) + len(asked) and all(r.is_error for r in results)
    assert [r.args["sql"] for r in ui.requests] == asked
    assert all("Refused" in _text(r) for r in results[: len(refused)])
    await session.close()
    assert await _count(warehouse) == 100
    assert await _count(warehouse, "SELECT count() FROM events WHERE kind = 'x'") == 0
    assert _existing(written, "/tmp/pi_nb_pwned") == []


async def test_s11_stop_cancels_a_long_chdb_query(warehouse: str, session_on: Any) -> None:
    session, ext = await session_on(warehouse, [LONG_READ], statement_timeout_s=120)
    run = asyncio.create_task(session.prompt("go"))
    for _ in range(600):  # chDB's worker process starts first (its library takes a while)
        if ext.backend is not None and ext.backend.worker_pid is not None:
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.5)
    started = time.monotonic()
    session.abort()
    await asyncio.wait_for(run, 10)
    assert time.monotonic() - started < 5
    [result] = _results(session)
    assert result.is_error and "abort" in _text(result).lower()
