"""Notebook memory: the notebook keeps the result DataFrames of the latest calls
only, as the session does (20 by default); older cards keep their preview, and
``%pi_result`` for a dropped one says how to get the rows again."""

from __future__ import annotations

import gc
import weakref

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from pi_notebook.notebook import current
from pi_notebook.session.retention import DEFAULT_KEEP


async def test_thirty_runs_keep_twenty_frames(loaded: InteractiveShell) -> None:
    state = current()
    refs: list[weakref.ref[object]] = []
    ids: list[str] = []
    for i in range(30):
        loaded.run_cell_magic("pi", "", f"SELECT customer_id, name FROM customers LIMIT {i + 1}")
        run = state.last_run
        assert run is not None
        await run.wait(timeout=30)
        (card,) = run.view.cards
        assert card.dataframe is not None and len(card.dataframe) == i + 1
        refs.append(weakref.ref(card.dataframe))
        ids.append(card.tool_call_id)
    gc.collect()
    alive = [ref() is not None for ref in refs]
    assert state.keep_results == DEFAULT_KEEP == 20
    assert alive == [False] * 10 + [True] * 20  # nothing else holds the old frames
    old = state.runs[-30]
    assert old.view.cards[0].dataframe is None and old.results() == {}
    assert "<table" in old.record["text/html"]  # the record still shows the preview
    assert "SELECT customer_id, name FROM customers LIMIT 1" in old.record["text/html"]
    # %pi_result: the latest still works; a dropped one says why and how to re-run.
    assert len(loaded.run_line_magic("pi_result", "")) == 30
    assert len(loaded.run_line_magic("pi_result", ids[10])) == 11
    with pytest.raises(UsageError, match="dropped to bound memory") as raised:
        loaded.run_line_magic("pi_result", ids[0])
    assert "re-run its %%pi cell" in str(raised.value)
    assert "latest 20 calls" in str(raised.value)


async def test_the_bound_follows_the_session_and_survives_a_rebuild(
    loaded: InteractiveShell,
) -> None:
    state = current()
    first = []
    for i in range(3):
        loaded.run_cell_magic("pi", "", f"SELECT {i} AS n")
        run = state.last_run
        assert run is not None
        await run.wait(timeout=30)
        first.append(run)
    state.build()  # a new session (as %pi_model or %config do): the old runs stay bounded
    assert state.session is not None
    state.session.result_retention.keep = 1
    loaded.run_cell_magic("pi", "", "SELECT 9 AS n")
    run = state.last_run
    assert run is not None
    await run.wait(timeout=30)
    assert [bool(r.results()) for r in (*first, run)] == [False, False, False, True]
