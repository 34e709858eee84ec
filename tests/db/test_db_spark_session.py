"""Spark SQL through Spark Connect end to end, through a session (scripted model, scripted
approval UI) on ``database_extension(url="sc://...")``: a read runs at once with the
frame and the schema, a write asks and runs only when approved, dangerous statements change
nothing, Stop interrupts a long job whose progress showed, and the read budget asks for a
big scan only."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import pi_notebook.database
from pi_notebook import AgentSession, create_agent_session
from pi_notebook.sql.engines import create_backend
from pi_notebook.testing import ScriptedApprovalUI, ScriptedModel, text, tool_call

pytestmark = pytest.mark.spark

LONG_READ = "SELECT count(*) AS n FROM range(0, 100000000000, 1, 100000)"
"""100,000 short tasks: a cancelled job stops at the next task (a task itself may not look
at the cancel), so the server is free again at once."""


def _script(*sqls: str) -> ScriptedModel:
    steps: list[Any] = [
        [tool_call("query_database", {"sql": s}, id=f"q{i}")] for i, s in enumerate(sqls)
    ]
    return ScriptedModel([*steps, text("done")])


def _results(session: AgentSession) -> list[Any]:
    return [m for m in session.messages if m.role == "toolResult"]


def _text(message: Any) -> str:
    return " ".join(getattr(p, "text", "") for p in message.content)


@pytest.fixture
async def session_on(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """``await session_on(url, sqls, ui=..., events=...)``: a session whose model sends
    ``sqls``, not yet prompted; closed (its Spark session released) after the test."""
    sessions: list[AgentSession] = []
    audit = f"sqlite:///{tmp_path / 'audit.sqlite'}"

    async def make(
        url: str,
        sqls: list[str],
        *,
        ui: Any = None,
        events: list[Any] | None = None,
        **options: Any,
    ) -> Any:
        ext = pi_notebook.database.database_extension(url, **options)
        session = create_agent_session(model=_script(*sqls), ui=ui, audit=audit, extensions=[ext])
        if events is not None:
            session.subscribe(events.append)
        sessions.append(session)
        return session, ext

    yield make
    for session in sessions:
        await session.close()


async def _scalar(url: str, sql: str) -> Any:
    backend = create_backend(url)
    try:
        return (await backend._run_as("read", sql)).dataframe.iloc[0, 0]
    finally:
        backend.dispose()


async def _write(url: str, sql: str) -> None:
    backend = create_backend(url)
    try:
        await backend._run_as("write", sql)
    finally:
        backend.dispose()


async def test_a_spark_read_runs_at_once_with_the_frame_and_the_schema(
    spark_url: str, session_on: Any
) -> None:
    ui = ScriptedApprovalUI("rejected")
    sql = "SELECT kind, count(*) AS n, min(ts) AS first FROM events GROUP BY kind ORDER BY kind"
    session, ext = await session_on(spark_url, [sql], ui=ui)
    await session.prompt("go")
    [result] = _results(session)
    assert not result.is_error, _text(result)
    frame = result.details["dataframe"]
    assert list(frame["kind"]) == ["buy", "view"] and list(frame["n"]) == [25, 75]
    assert str(frame["first"].iloc[0]) == "2024-01-01 00:00:00+00:00"
    assert "2 row(s), 3 column(s)" in _text(result) and result.details["dialect"] == "spark"
    assert ui.requests == [] and ext.last_dataframe is frame
    assert "final_args" in list(session.audit.to_dataframe()["kind"])
    schema = await ext.schema.get()
    events = schema.table("events")
    assert events is not None
    assert [(c.name, c.type) for c in events.columns] == [
        ("id", "bigint"),
        ("user_id", "bigint"),
        ("kind", "string"),
        ("ts", "timestamp"),
    ]


async def test_an_approved_spark_write_runs_after_a_measured_preview(
    spark_url: str, session_on: Any
) -> None:
    await _write(spark_url, "CREATE TABLE approved_w USING parquet AS SELECT * FROM events")
    try:
        ui = ScriptedApprovalUI("approved")
        sql = (
            "INSERT INTO approved_w SELECT id, user_id, 'refund', ts FROM events WHERE kind = 'buy'"
        )
        session, _ = await session_on(spark_url, [sql], ui=ui)
        await session.prompt("go")
        [request] = ui.requests
        assert request.preview is not None and request.preview.affected_rows == 25
        [result] = _results(session)
        assert not result.is_error, _text(result)
        assert "Spark does not report" in _text(result) or "row(s) affected" in _text(result)
        await session.close()
        assert await _scalar(spark_url, "SELECT count(*) FROM approved_w") == 125
    finally:
        await _write(spark_url, "DROP TABLE IF EXISTS approved_w")


async def test_a_rejected_spark_write_never_runs(spark_url: str, session_on: Any) -> None:
    ui = ScriptedApprovalUI("rejected")
    sql = "INSERT INTO events SELECT * FROM events WHERE kind = 'view'"
    session, _ = await session_on(spark_url, [sql], ui=ui)
    await session.prompt("go")
    [request] = ui.requests
    assert request.preview is not None and request.preview.affected_rows == 75
    [result] = _results(session)
    assert result.is_error
    await session.close()
    assert await _scalar(spark_url, "SELECT count(*) FROM events") == 100


async def test_dangerous_statements_sent_as_reads_change_nothing(
    spark_url: str, session_on: Any, tmp_path: Path
) -> None:
    """Refused without asking (Java calls, jars, files written, stacked statements), or asked
    and rejected (tables made, settings, caches, temporary views, path reads); nothing
    changes."""
    out = tmp_path / "out"
    refused = [
        "SELECT reflect('java.lang.System', 'exit', 0)",
        "ADD JAR '/tmp/evil.jar'",
        f"INSERT OVERWRITE DIRECTORY '{out}' USING parquet SELECT * FROM events",
        "SELECT count(*) FROM events; DROP TABLE events",
        "SELECT '${env:HOME}'",
    ]
    asked = [
        "CREATE TABLE pwn AS SELECT * FROM events",
        "SET spark.sql.ansi.enabled = false",
        "CACHE TABLE events",
        "CREATE TEMPORARY VIEW tv AS SELECT * FROM events",
        f"SELECT * FROM parquet.`{tmp_path}`",
    ]
    ui = ScriptedApprovalUI("rejected")
    session, ext = await session_on(spark_url, [*refused, *asked], ui=ui)
    await session.prompt("go")
    results = _results(session)
    assert len(results) == len(refused) + len(asked) and all(r.is_error for r in results)
    assert [r.args["sql"] for r in ui.requests] == asked
    assert all("Refused" in _text(r) for r in results[: len(refused)])
    spark = ext.backend._cluster.session()
    assert spark.conf.get("spark.sql.ansi.enabled") == "true"
    assert not spark.catalog.isCached("events")
    assert {"pwn", "tv"}.isdisjoint(t.name for t in spark.catalog.listTables())
    await session.close()
    assert await _scalar(spark_url, "SELECT count(*) FROM events") == 100
    assert not out.exists()


async def test_stop_interrupts_a_long_spark_job_after_its_progress_shows(
    spark_url: str, session_on: Any
) -> None:
    events: list[Any] = []
    session, _ = await session_on(spark_url, [LONG_READ], events=events, statement_timeout_s=600)
    run = asyncio.create_task(session.prompt("go"))

    def job_updates() -> list[Any]:
        return [
            e.partial_result
            for e in events
            if e.type == "tool_execution_update" and e.partial_result.details.get("phase") == "job"
        ]

    for _ in range(600):  # the job's first progress report, within a minute
        if job_updates():
            break
        await asyncio.sleep(0.1)
    [first, *_] = job_updates()
    assert _text(first).startswith("Running: ") and first.details["tasks"] > 0
    session.abort()
    await asyncio.wait_for(run, 120)  # a guard against a hang, not a timing
    [result] = _results(session)
    assert result.is_error and "abort" in _text(result).lower()


async def test_the_read_budget_asks_for_a_big_scan_only(spark_url: str, session_on: Any) -> None:
    ui = ScriptedApprovalUI("rejected")
    big, small = "SELECT count(*) AS n FROM range(100000000)", "SELECT * FROM events"
    session, _ = await session_on(spark_url, [big, small], ui=ui, read_budget={"bytes": 10_000_000})
    await session.prompt("go")
    [request] = ui.requests
    assert request.title == "Large database read" and request.args == {"sql": big}
    [reason] = request.reasons
    assert "scans about 800.0 MB, over the read budget of 10.0 MB" in reason
    big_result, small_result = _results(session)
    assert big_result.is_error and not small_result.is_error
    assert len(small_result.details["dataframe"]) == 100
    assert "EXPLAIN COST" in small_result.details["estimate"]["source"]
