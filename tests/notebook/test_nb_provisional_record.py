"""The provisional record in the kernel's own shell: what it says, and when it is sent.

What the file keeps if the kernel stops must be true at every moment: the provisional record
names a call as possibly run before the call can run, and it is emptied only after the final
record is shown.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from IPython.core.interactiveshell import InteractiveShell

from pi_notebook import TextContent, ToolResult
from pi_notebook.agent.events import AgentStartEvent, ToolExecutionEndEvent, ToolExecutionStartEvent
from pi_notebook.database import call_views
from pi_notebook.notebook import current
from pi_notebook.notebook.prompts import ApprovalPrompt
from pi_notebook.notebook.provisional import (
    BLANK,
    INTERRUPTED,
    MAX_CARDS,
    OUTCOME_UNKNOWN,
    provisional_bundle,
    provisional_calls,
    stale_note,
)
from pi_notebook.notebook.record import RunInfo
from pi_notebook.notebook.store import ApprovalRequested, RunState, reduce


def _fold(events: list[Any]) -> RunState:
    state = RunState()
    for i, event in enumerate(events):
        state = reduce(state, event, now=float(i))
    return state


def _start(call_id: str, sql: str = "SELECT 1") -> ToolExecutionStartEvent:
    return ToolExecutionStartEvent(
        tool_call_id=call_id, tool_name="query_database", args={"sql": sql}
    )


def _end(call_id: str) -> ToolExecutionEndEvent:
    return ToolExecutionEndEvent(
        tool_call_id=call_id,
        tool_name="query_database",
        is_error=False,
        result=ToolResult(content=[TextContent(text="1 row")], details={"row_count": 1}),
    )


INFO = RunInfo(run_id="r1", model="offline", view_of=call_views)


def test_a_started_call_reads_outcome_unknown_and_a_waiting_one_awaiting_approval() -> None:
    state = _fold(
        [
            AgentStartEvent(),
            _start("c1", "SELECT 1"),
            _end("c1"),
            _start("c2", "SELECT 2"),
            _start("c3", "UPDATE t SET a = 1"),
            ApprovalRequested(tool_call_id="c3"),
        ]
    )
    data = provisional_bundle(state, INFO, "count things")
    plain = data["text/plain"]
    assert plain.startswith("◌ interrupted · 3 calls · model offline")
    assert "[query_database · query_database] allowed" in plain  # ended: its word stands
    assert f"] {OUTCOME_UNKNOWN}\n    SELECT 2" in plain
    assert "] awaiting approval\n    UPDATE t SET a = 1" in plain
    assert plain.endswith(
        f"{INTERRUPTED} (a call marked 'outcome unknown' may have run: check the audit)"
    )
    assert "pi-provisional" in data["text/html"] and "data-run='r1'" in data["text/html"]
    assert "outcome is unknown" in stale_note(state)
    calls = provisional_calls(state, {"c3": "h3"}.get)
    assert [(c["tool_call_id"], c["state"], c["rows"], c["args_hash"]) for c in calls] == [
        ("c1", "done", 1, None),
        ("c2", "queued", None, None),
        ("c3", "awaiting approval", None, "h3"),
    ]


def test_only_the_latest_calls_are_shown_in_full() -> None:
    state = _fold(
        [
            AgentStartEvent(),
            *(e for i in range(MAX_CARDS + 5) for e in (_start(f"c{i}"), _end(f"c{i}"))),
        ]
    )
    data = provisional_bundle(state, INFO, "many")
    assert "5 earlier call(s) not shown here" in data["text/plain"]
    assert "data-call='c4'" not in data["text/html"] and "data-call='c5'" in data["text/html"]
    assert len(provisional_calls(state, {}.get)) == MAX_CARDS == 20
    assert data["text/plain"].endswith(INTERRUPTED)
    assert stale_note(state) == "■ This run's kernel stopped: nothing ran after this point."


class _Recorder:
    """Stands for a display handle: keeps each update, with the city of customer 42 then."""

    def __init__(self, name: str, log: list[tuple[str, dict[str, str], Any, str]], db: Path):
        self.name, self.log, self.db = name, log, db

    def update(self, data: dict[str, str], raw: bool = False, metadata: Any = None) -> None:
        with sqlite3.connect(self.db) as conn:
            (city,) = conn.execute("SELECT city FROM customers WHERE customer_id = 42").fetchone()
        self.log.append((self.name, data, metadata, city))


async def test_the_provisional_record_goes_out_before_the_write_and_is_emptied_after_the_record(
    loaded: InteractiveShell, shared_data_dir: Path
) -> None:
    loaded.run_cell_magic("pi", "", "UPDATE customers SET city = 'Prov' WHERE customer_id = 42")
    run = current().last_run
    assert run is not None and run.provisional_handle is None  # a terminal keeps no file
    log: list[tuple[str, dict[str, str], Any, str]] = []
    db = shared_data_dir / "sample.sqlite"
    run.provisional_handle = _Recorder("provisional", log, db)
    run.handle = _Recorder("record", log, db)
    prompt = await run.next_prompt(timeout=30)
    assert isinstance(prompt, ApprovalPrompt) and prompt.request is not None
    (_name, waiting, meta, _city) = log[-1]
    assert "awaiting approval" in waiting["text/plain"] and INTERRUPTED in waiting["text/plain"]
    assert meta["pi_notebook"]["provisional"] is True
    assert [c["state"] for c in meta["pi_notebook"]["calls"]] == ["awaiting approval"]
    assert meta["pi_notebook"]["calls"][0]["args_hash"] == prompt.request.args_hash
    assert "kernel stopped: nothing ran after this point" in run.view.stale.value
    prompt.approve()
    await run.wait(timeout=30)
    unknown = [entry for entry in log if OUTCOME_UNKNOWN in entry[1].get("text/plain", "")]
    assert unknown and unknown[0][3] != "Prov"  # sent before the statement ran
    assert [name for name, *_ in log[-2:]] == ["record", "provisional"]
    assert "record_hash" in log[-2][2]["pi_notebook"] and log[-1][1] == BLANK
    assert log[-2][3] == "Prov" and run.view.stale.value == ""
