# ruff: noqa: F811 - the engine fixture ``db`` is imported from dbtest_support
"""The database extension in a running session: the gate (S24, D10), the backend check after a
mutating handler (S9, S26, D4), approvals (D3), progress (S13), on all four engines."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from dbtest_support import Scratch, db  # noqa: F401

import pi_notebook.database
from pi_notebook import AgentSession, ExtensionAPI, create_agent_session
from pi_notebook.testing import ScriptedModel, text, tool_call

EXTENSION = Path(__file__).resolve().parents[2] / "extensions" / "database.py"


ext_module = pi_notebook.database


class ScriptedUI:
    """A UI whose confirm answers as told (True, False, or "wait" past the timeout)."""

    def __init__(self, answer: bool | str) -> None:
        self.answer = answer
        self.asked: list[tuple[str, str, float | None]] = []

    async def confirm(
        self, title: str, message: str, *, signal: Any = None, timeout: float | None = None
    ) -> bool:
        self.asked.append((title, message, timeout))
        if self.answer == "wait":
            await asyncio.sleep((timeout or 0) + 0.05)  # the UI's own timeout passes: no
            return False
        return bool(self.answer)


def script(*sqls: str | dict[str, Any]) -> ScriptedModel:
    steps: list[Any] = [
        [tool_call("query_database", {"sql": s} if isinstance(s, str) else s, id=f"call-{i}")]
        for i, s in enumerate(sqls)
    ]
    return ScriptedModel([*steps, text("done")])


class Run:
    def __init__(self, session: AgentSession, ext: Any) -> None:
        self.session, self.ext = session, ext

    def results(self) -> list[Any]:
        return [m for m in self.session.messages if getattr(m, "role", None) == "toolResult"]

    def texts(self) -> list[str]:
        return [" ".join(getattr(p, "text", "") for p in m.content) for m in self.results()]

    def audit_kinds(self) -> list[str]:
        return list(self.session.audit.to_dataframe()["kind"]) if self.session.audit else []


@pytest.fixture
async def make_run(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    sessions: list[AgentSession] = []

    async def make(
        url: str,
        sqls: list[str],
        *,
        ui: Any = None,
        extra: Any = None,
        events: list[Any] | None = None,
        **options: Any,
    ) -> Run:
        ext = ext_module.database_extension(url, **options)
        extensions: list[Any] = [ext] + ([extra] if extra else [])
        session = create_agent_session(
            model=script(*sqls),
            extensions=extensions,
            ui=ui,
            audit=f"sqlite:///{tmp_path / 'audit.sqlite'}",
        )
        sessions.append(session)
        if events is not None:
            session.subscribe(events.append)
        await session.prompt("go")
        return Run(session, ext)

    yield make
    for s in sessions:
        await s.close()


async def test_s24_read_runs_without_prompt(db: Scratch, make_run: Any) -> None:
    ui = ScriptedUI(False)
    run = await make_run(db.url, ["SELECT 1 AS one"], ui=ui)
    [result] = run.results()
    assert not result.is_error and ui.asked == []
    assert result.details["dataframe"]["one"].tolist() == [1]
    assert run.ext.last_dataframe is result.details["dataframe"]


async def test_s24_write_without_ui_is_blocked_and_changes_nothing(
    db: Scratch, make_run: Any
) -> None:
    table = db.table()
    run = await make_run(db.url, [f"INSERT INTO {table} (a) VALUES (1)"])
    [result] = run.results()
    assert result.is_error and run.texts() == ["Write query requires interactive approval."]
    assert db.count(table) == 0
    assert [r.decision for r in run.ext.approvals.records()] == ["no_ui"]


async def test_s24_approved_write_runs_once_and_commits(db: Scratch, make_run: Any) -> None:
    table = db.table()
    ui = ScriptedUI(True)
    run = await make_run(db.url, [f"INSERT INTO {table} (a) VALUES (7)"], ui=ui)
    [result] = run.results()
    assert not result.is_error and db.count(table) == 1
    [(title, message, timeout)] = ui.asked
    # As in the chapter: confirm("Database write", sql, signal=..., timeout=30 s).
    assert (title, message, timeout) == (
        "Database write",
        f"INSERT INTO {table} (a) VALUES (7)",
        30,
    )
    assert "changes data" in run.ext.explain_approval(message)  # what a UI shows as "why"
    [record] = run.ext.approvals.records()
    assert record.decision == "approved" and record.args_hash == result.details["args_hash"]
    kinds = run.audit_kinds()
    assert kinds.index("approval") < kinds.index("final_args")


async def test_s24_rejected_write_is_blocked(db: Scratch, make_run: Any) -> None:
    table = db.table()
    run = await make_run(db.url, [f"DELETE FROM {table}"], ui=ScriptedUI(False))
    assert run.texts() == ["Rejected by user."] and run.results()[0].is_error
    assert run.ext.approvals.records()[0].decision == "rejected"


async def test_s24_timed_out_approval_is_blocked_and_recorded_expired(
    make_run: Any, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    run = await make_run(
        url, ["CREATE TABLE t (a INTEGER)"], ui=ScriptedUI("wait"), approval_timeout_s=0.2
    )
    assert run.texts()[0].startswith("Not approved: no decision within 0.2 s")
    assert run.results()[0].is_error
    assert run.ext.approvals.records()[0].decision == "expired"
    check = await make_run(url, ["SELECT count(*) AS n FROM sqlite_master WHERE name = 't'"])
    assert check.results()[0].details["dataframe"]["n"].tolist() == [0]


async def test_d10_rejected_sql_blocked_without_asking(make_run: Any) -> None:
    ui = ScriptedUI(True)
    run = await make_run("sqlite://", ["SELECT 1; DROP TABLE x"], ui=ui)
    assert run.texts()[0].startswith("Refused: ") and ui.asked == []


def _mutating_handler(table: str) -> Callable[[ExtensionAPI], None]:
    def factory(pi: ExtensionAPI) -> None:
        def mutate(event: Any, _ctx: Any) -> None:
            if event.tool_name == "query_database":
                event.input.sql = f"DELETE FROM {table}"  # after the gate approved the INSERT

        pi.on("tool_call", mutate)

    return factory


async def test_s9_d4_sql_changed_after_approval_is_refused_by_backend(
    db: Scratch, make_run: Any
) -> None:
    table = db.table()
    db.execute(f"INSERT INTO {table} (a) VALUES (1)")
    run = await make_run(
        db.url,
        [f"INSERT INTO {table} (a) VALUES (2)"],
        ui=ScriptedUI(True),
        extra=_mutating_handler(table),
    )
    [result] = run.results()
    assert result.is_error and "changed after it was approved" in run.texts()[0]
    assert db.count(table) == 1  # neither the approved INSERT nor the swapped DELETE ran
    frame = run.session.audit.to_dataframe(kind="capability_mismatch")
    payload = frame["payload"].iloc[0]
    assert payload["approved_hash"] == run.ext.approvals.records()[0].args_hash
    assert payload["final_hash"] and payload["final_hash"] != payload["approved_hash"]


async def test_s13_on_update_reports_query_phase_and_rows(make_run: Any, tmp_path: Path) -> None:
    events: list[Any] = []
    sql = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 25000) SELECT x FROM c"
    run = await make_run(
        f"sqlite:///{tmp_path / 'p.sqlite'}",
        [{"sql": sql, "count_rows": True}],
        events=events,
        row_cap=1_000,
    )
    [result] = run.results()
    assert result.details["row_count"] == 25_000 and result.details["truncated"] is True
    updates = [e.partial_result for e in events if e.type == "tool_execution_update"]
    assert updates[0].details == {"phase": "query"}
    assert [u.details["rows_fetched"] for u in updates[1:]] == [10_000, 20_000]
    assert {e.tool_call_id for e in events if e.type.startswith("tool_execution")} == {"call-0"}


async def test_s13_a_read_that_runs_at_once_sends_no_query_phase(
    make_run: Any, tmp_path: Path
) -> None:
    """A short read of a SQLite file runs on the loop at once (no worker, see
    ``sql/backend/inline.py``): there is no running phase to show, so no 'Querying…'."""
    events: list[Any] = []
    run = await make_run(f"sqlite:///{tmp_path / 'q.sqlite'}", ["SELECT 1 AS one"], events=events)
    [result] = run.results()
    assert not result.is_error and result.details["row_count"] == 1
    assert [e for e in events if e.type == "tool_execution_update"] == []


async def test_register_by_path_uses_env_url_else_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C35: the file loads by path; without PI_NOTEBOOK_DATABASE_URL it opens the sample data."""
    counts: list[int] = []
    for env_url in (None, f"sqlite:///{tmp_path / 'empty.sqlite'}"):
        if env_url:
            monkeypatch.setenv("PI_NOTEBOOK_DATABASE_URL", env_url)
        model = script("SELECT count(*) AS n FROM sqlite_master WHERE name = 'orders'")
        session = create_agent_session(model=model, extensions=[str(EXTENSION)], audit=False)
        try:
            await session.prompt("go")
        finally:
            await session.close()
        [result] = [m for m in session.messages if m.role == "toolResult"]
        counts.append(int(result.details["dataframe"]["n"].iloc[0]))
    assert counts == [1, 0]
