"""A session keeps the 20 most recent result DataFrames; older ones become a note."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pi_notebook import create_agent_session
from pi_notebook.database import database_extension
from pi_notebook.session.retention import DEFAULT_KEEP, DROPPED_NOTE, ResultRetention
from pi_notebook.testing import ScriptedModel, text, tool_call

TURNS = 60
ROWS = 5_000  # two numeric columns: ~80 KB of numpy data per result
SQL = (
    f"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {ROWS}) "
    "SELECT x, x * 0.5 AS half FROM c"
)


def _frames(messages: list[Any]) -> list[pd.DataFrame]:
    return [
        m.details["dataframe"]
        for m in messages
        if getattr(m, "role", None) == "toolResult"
        and isinstance(m.details.get("dataframe"), pd.DataFrame)
    ]


async def test_sixty_large_results_keep_memory_bounded(tmp_path: Path) -> None:
    steps: list[Any] = [
        [tool_call("query_database", {"sql": SQL}, id=f"q{i}")] for i in range(TURNS)
    ]
    ext = database_extension(f"sqlite:///{tmp_path / 'r.sqlite'}", row_cap=ROWS)
    session = create_agent_session(
        model=ScriptedModel([*steps, text("done")]), extensions=[ext], audit=False
    )
    try:
        await session.prompt("go")
        gc.collect()
        # Every result DataFrame still reachable anywhere in the process (messages, events,
        # the extension's own last results): the bound on what is retained.
        live = [o for o in gc.get_objects() if isinstance(o, pd.DataFrame) and len(o) == ROWS]
        results = [m for m in session.messages if m.role == "toolResult"]
        assert len(results) == TURNS and not any(m.is_error for m in results)
        kept = _frames(session.messages)
        assert len(kept) == DEFAULT_KEEP and all(len(f) == ROWS for f in kept)
        assert [
            m.tool_call_id for m in results if isinstance(m.details["dataframe"], pd.DataFrame)
        ] == [f"q{i}" for i in range(TURNS - DEFAULT_KEEP, TURNS)]
        old = results[0].details
        assert old["dataframe"] == DROPPED_NOTE and old["dataframe_dropped"] is True
        assert old["row_count"] == ROWS and "re-run the call" in DROPPED_NOTE
        assert len(live) == DEFAULT_KEEP and {id(f) for f in live} == {id(f) for f in kept}
        one = int(kept[0].memory_usage(deep=True).sum())
        assert sum(int(f.memory_usage(deep=True).sum()) for f in live) <= DEFAULT_KEEP * one
    finally:
        await session.close()


def test_keep_is_configurable_and_applies_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    class Msg:
        role = "toolResult"

        def __init__(self, i: int) -> None:
            self.details = {"dataframe": pd.DataFrame({"i": [i]}), "row_count": 1}

    class End:
        type = "message_end"

        def __init__(self, message: Msg) -> None:
            self.message = message

    retention = ResultRetention(keep=3)
    messages = [Msg(i) for i in range(5)]
    for m in messages:
        retention.on_event(End(m))
    assert [isinstance(m.details["dataframe"], pd.DataFrame) for m in messages] == [
        False,
        False,
        True,
        True,
        True,
    ]
    retention.keep = 1
    assert retention.holding == 1 and isinstance(messages[-1].details["dataframe"], pd.DataFrame)
    assert messages[2].details["dataframe"] == DROPPED_NOTE
    retention.keep = None
    for m in [Msg(i) for i in range(30)]:
        retention.on_event(End(m))
    assert retention.holding == 31
    with pytest.raises(ValueError):
        retention.keep = -1  # type: ignore[assignment]
    monkeypatch.setenv("PI_NOTEBOOK_KEEP_RESULTS", "5")
    assert ResultRetention().keep == 5
    monkeypatch.setenv("PI_NOTEBOOK_KEEP_RESULTS", "all")
    assert ResultRetention().keep is None


async def test_subscribers_see_the_dataframe_before_retention_drops_it(tmp_path: Path) -> None:
    """With ``keep=0`` a result's DataFrame is dropped at its ``message_end``, once every
    subscriber has seen it there (the notebook copies it into its record then)."""
    ext = database_extension(f"sqlite:///{tmp_path / 'k.sqlite'}")
    session = create_agent_session(
        model=ScriptedModel([tool_call("query_database", {"sql": "SELECT 1 AS one"}), text("ok")]),
        extensions=[ext],
        audit=False,
    )
    session.result_retention.keep = 0
    seen: list[Any] = []

    def listener(event: Any) -> None:
        if event.type == "message_end" and event.message.role == "toolResult":
            seen.append(event.message.details["dataframe"])

    session.subscribe(listener)
    try:
        await session.prompt("go")
        assert len(seen) == 1 and isinstance(seen[0], pd.DataFrame) and list(seen[0]) == ["one"]
        (result,) = [m for m in session.messages if m.role == "toolResult"]
        assert result.details["dataframe"] == DROPPED_NOTE
        assert result.details["dataframe_dropped"] is True
        assert session.result_retention.holding == 0
    finally:
        await session.close()
