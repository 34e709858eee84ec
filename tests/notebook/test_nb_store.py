"""The event store on its own: a pure reducer keyed by tool_call_id (S14)."""

from __future__ import annotations

from pi_notebook import TextContent, ToolResult
from pi_notebook.agent.events import (
    AgentEndEvent,
    AgentStartEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
)
from pi_notebook.extensions.events import ToolCallEvent, ToolResultEvent
from pi_notebook.notebook.store import (
    ApprovalRequested,
    ApprovalResolved,
    RunFailed,
    RunState,
    StopRequested,
    reduce,
)


def _start(call_id: str, sql: str = "SELECT 1") -> ToolExecutionStartEvent:
    return ToolExecutionStartEvent(
        tool_call_id=call_id, tool_name="query_database", args={"sql": sql}
    )


def _update(call_id: str, text: str, n: int = 0) -> ToolExecutionUpdateEvent:
    return ToolExecutionUpdateEvent(
        tool_call_id=call_id,
        tool_name="query_database",
        args={},
        partial_result=ToolResult(content=[TextContent(text=text)], details={"rows": n}),
    )


def _end(call_id: str, text: str = "ok", *, is_error: bool = False) -> ToolExecutionEndEvent:
    return ToolExecutionEndEvent(
        tool_call_id=call_id,
        tool_name="query_database",
        result=ToolResult(content=[TextContent(text=text)], details={"n": 1}),
        is_error=is_error,
    )


def _fold(events: list[object], state: RunState | None = None) -> RunState:
    state = state or RunState()
    for i, event in enumerate(events):
        state = reduce(state, event, now=float(i))
    return state


def test_s14_updates_merge_into_one_card() -> None:
    state = _fold(
        [AgentStartEvent(), _start("a"), *[_update("a", f"step {i}", i) for i in range(50)]]
    )
    assert state.order == ("a",)
    card = state.cards["a"]
    assert card.updates == 50
    assert card.progress == "step 49"
    assert card.progress_details == {"rows": 49}
    assert card.status == "running"


def test_s14_update_for_unknown_call_never_creates_a_card() -> None:
    state = _fold([_start("a"), _update("zzz", "late"), _end("zzz")])
    assert state.order == ("a",)
    assert "zzz" not in state.cards


def test_s14_two_calls_keep_their_own_cards_in_start_order() -> None:
    state = _fold(
        [_start("a"), _start("b"), _update("b", "b1"), _update("a", "a1"), _end("b"), _end("a")]
    )
    assert state.order == ("a", "b")
    assert state.cards["a"].progress == "a1"
    assert state.cards["b"].progress == "b1"
    assert {c.status for c in state.card_list()} == {"done"}


def test_s14_repeated_start_merges() -> None:
    state = _fold([_start("a", "SELECT 1"), _start("a", "SELECT 2")])
    assert state.order == ("a",)
    assert state.cards["a"].args == {"sql": "SELECT 2"}


def test_s14_reducer_is_pure() -> None:
    before = _fold([_start("a")])
    after = reduce(before, _update("a", "x"), now=5.0)
    assert before.cards["a"].updates == 0
    assert after.cards["a"].updates == 1
    assert after is not before


def test_s14_end_sets_duration_content_and_details() -> None:
    state = _fold([_start("a"), _update("a", "q"), _end("a", "3 rows")])
    card = state.cards["a"]
    assert card.status == "done"
    assert card.duration == 2.0
    assert card.content == ("3 rows",)
    assert card.details == {"n": 1}
    assert card.error is None
    assert card.progress == "q"


def test_content_parts_as_objects_or_plain_dicts() -> None:
    end = ToolExecutionEndEvent(
        tool_call_id="a",
        tool_name="query_database",
        is_error=False,
        result=ToolResult(
            content=[{"type": "text", "text": "from a dict"}, TextContent(text="an object")],
            details=None,
        ),
    )
    assert _fold([_start("a"), end]).cards["a"].content == ("from a dict", "an object")


def test_s14_blocked_versus_error() -> None:
    call = ToolCallEvent(tool_call_id="a", tool_name="query_database", input=None)
    blocked = _fold([_start("a"), call, _end("a", "Rejected by user.", is_error=True)])
    assert blocked.cards["a"].status == "blocked"
    assert blocked.cards["a"].error == "Rejected by user."
    result = ToolResultEvent(
        tool_call_id="b",
        tool_name="query_database",
        input=None,
        content=[],
        details=None,
        is_error=True,
    )
    failed = _fold([_start("b"), call, result, _end("b", "boom", is_error=True)])
    assert failed.cards["b"].status == "error"
    invalid = _fold([_start("c"), _end("c", "Validation failed", is_error=True)])
    assert invalid.cards["c"].status == "error"


def test_s14_approval_states() -> None:
    state = _fold([_start("a"), ApprovalRequested(tool_call_id="a")])
    assert state.cards["a"].status == "awaiting approval"
    assert state.pending_card_id() == "a"
    approved = reduce(state, ApprovalResolved(tool_call_id="a", decision="approved"))
    assert approved.cards["a"].status == "running"
    expired = reduce(state, ApprovalResolved(tool_call_id="a", decision="expired"))
    assert expired.cards["a"].status == "blocked"
    assert expired.cards["a"].approval == "expired"


def test_run_status_stop_and_failure() -> None:
    assert _fold([AgentStartEvent(), AgentEndEvent()]).status == "done"
    assert _fold([AgentStartEvent(), StopRequested(), AgentEndEvent()]).status == "stopped"
    failed = _fold([AgentStartEvent(), RunFailed(error="RuntimeError: x"), AgentEndEvent()])
    assert failed.status == "error"
    assert failed.error == "RuntimeError: x"


def test_unknown_events_leave_state_unchanged() -> None:
    state = _fold([_start("a")])
    assert reduce(state, object()) is state
