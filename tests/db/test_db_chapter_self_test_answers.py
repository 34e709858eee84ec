"""The chapter's self-test questions 4, 8 and 10, answered on the running system (S36)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from test_db_extension import ScriptedUI, ext_module

from pi_notebook import ExtensionAPI, create_agent_session
from pi_notebook.testing import ScriptedModel, text, tool_call


async def _session(
    tmp_path: Path, url: str, steps: list[Any], *, ui: Any = None, extra: Any = None
) -> Any:
    ext = ext_module.database_extension(url, row_cap=100)
    return create_agent_session(
        model=ScriptedModel([*steps, text("done")]),
        extensions=[ext] + ([extra] if extra else []),
        ui=ui,
        audit=f"sqlite:///{tmp_path / 'audit.sqlite'}",
    )


def _count(url: str, table: str = "t") -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar_one())
    finally:
        engine.dispose()


async def test_selftest_q4_on_update_becomes_events_merged_by_call_id(tmp_path: Path) -> None:
    """Q4: each on_update is a tool_execution_update; a UI store merges them by tool_call_id
    into the one card that tool_execution_start opened."""
    sql = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000) SELECT x FROM c"
    session = await _session(
        tmp_path,
        "sqlite://",
        [[tool_call("query_database", {"sql": sql, "count_rows": True}, id="q4")]],
    )
    cards: dict[str, dict[str, Any]] = {}

    def store(event: Any) -> None:  # the reducer of a desktop/notebook store
        if event.type == "tool_execution_start":
            cards[event.tool_call_id] = {"phase": "start", "updates": 0}
        elif event.type == "tool_execution_update":
            card = cards[event.tool_call_id]  # an update never creates a card
            card.update(event.partial_result.details, updates=card["updates"] + 1)
        elif event.type == "tool_execution_end":
            cards[event.tool_call_id]["phase"] = "done"

    session.subscribe(store)
    try:
        await session.prompt("count")
    finally:
        await session.close()
    assert list(cards) == ["q4"]
    assert cards["q4"] == {"phase": "done", "updates": 3, "rows_fetched": 20_000}


async def test_selftest_q8_approval_is_bound_to_canonical_argument_hash(tmp_path: Path) -> None:
    """Q8: the user approves a statement, but a later handler may still change the arguments.
    Binding the approval to the canonical hash lets a harmless re-formatting through and makes the
    backend refuse a different statement."""
    url = f"sqlite:///{tmp_path / 'q8.sqlite'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (a INTEGER)")
    engine.dispose()

    def rewriting(new_sql: str) -> Any:
        def factory(pi: ExtensionAPI) -> None:
            def handler(event: Any, _ctx: Any) -> None:
                event.input.sql = new_sql

            pi.on("tool_call", handler)

        return factory

    approved = "INSERT INTO t (a) VALUES (1)"
    for new_sql, runs in [
        ("insert   into t (a)\n values (1)", True),
        ("INSERT INTO t (a) VALUES (2)", False),
    ]:
        session = await _session(
            tmp_path,
            url,
            [[tool_call("query_database", {"sql": approved})]],
            ui=ScriptedUI(True),
            extra=rewriting(new_sql),
        )
        try:
            await session.prompt("write")
        finally:
            await session.close()
        [result] = [m for m in session.messages if m.role == "toolResult"]
        assert result.is_error is (not runs)
    assert _count(url) == 1  # only the re-formatted (same canonical) statement ran


async def test_selftest_q10_sequential_does_not_roll_back_earlier_side_effects(
    tmp_path: Path,
) -> None:
    """Q10: query_database is sequential, yet when the second call of a batch fails, the first
    call's committed write stays: sequential fixes order, it is not a transaction."""
    url = f"sqlite:///{tmp_path / 'q10.sqlite'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (a INTEGER NOT NULL)")
    engine.dispose()
    batch = [
        tool_call("query_database", {"sql": "INSERT INTO t (a) VALUES (1)"}, id="first"),
        tool_call("query_database", {"sql": "INSERT INTO t (a) VALUES (NULL)"}, id="second"),
    ]
    session = await _session(tmp_path, url, [batch], ui=ScriptedUI(True))
    try:
        await session.prompt("two writes")
    finally:
        await session.close()
    results = {m.tool_call_id: m.is_error for m in session.messages if m.role == "toolResult"}
    assert results == {"first": False, "second": True}
    assert _count(url) == 1
