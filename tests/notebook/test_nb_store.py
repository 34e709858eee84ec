"""The event store on its own: a pure reducer keyed by tool_call_id (S14)."""

from __future__ import annotations

from pi_notebook import ImageContent, TextContent, ToolResult
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
    Decided,
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


def test_an_image_shows_as_a_note_with_its_type_and_size_never_its_data() -> None:
    data = "A" * 16384  # base64 of 12 KB
    end = ToolExecutionEndEvent(
        tool_call_id="a",
        tool_name="shot",
        is_error=False,
        result=ToolResult(
            content=[
                TextContent(text="a chart"),
                ImageContent(data=data, mime_type="image/png"),
                {"type": "image", "data": "AAAA", "mime_type": "image/gif"},
            ],
            details=None,
        ),
    )
    card = _fold([_start("a"), end]).cards["a"]
    assert card.content == ("a chart", "[image: image/png, 12 KB]", "[image: image/gif, 3 B]")


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
    approved = reduce(state, ApprovalResolved(tool_call_id="a", decision="approved"))
    assert approved.cards["a"].status == "running"
    expired = reduce(state, ApprovalResolved(tool_call_id="a", decision="expired"))
    assert expired.cards["a"].status == "blocked"
    assert expired.cards["a"].approval == "expired"


def test_run_status_stop_and_failure() -> None:
    assert _fold([AgentStartEvent(), AgentEndEvent()]).status == "done"
    assert _fold([AgentStartEvent(), StopRequested(), AgentEndEvent()]).status == "stopped"
    failed = _fold([AgentStartEvent(), RunFailed(error="RuntimeError: x"), AgentEndEvent()])
    assert failed.status == "failed"
    assert failed.error == "RuntimeError: x"


def test_unknown_events_leave_state_unchanged() -> None:
    state = _fold([_start("a")])
    assert reduce(state, object()) is state


def _assistant(text_: str, *, stop_reason: str = "stop", error: str | None = None) -> list[object]:
    from pi_notebook.agent.events import MessageEndEvent, MessageStartEvent
    from pi_notebook.ai.messages import AssistantMessage, TextContent

    message = AssistantMessage(
        content=[TextContent(text=text_)], stop_reason=stop_reason, error_message=error
    )
    return [MessageStartEvent(message=message), MessageEndEvent(message=message)]


def test_timeline_keeps_text_and_cards_in_the_order_they_happened() -> None:
    state = _fold(
        [
            AgentStartEvent(),
            *_assistant("Let me look."),
            _start("a"),
            _end("a"),
            *_assistant("Now the second."),
            _start("b"),
            _end("b"),
            *_assistant("Both done."),
            AgentEndEvent(),
        ]
    )
    assert state.timeline == (("text", 0), ("card", "a"), ("text", 1), ("card", "b"), ("text", 2))
    assert state.assistant == ("Let me look.", "Now the second.", "Both done.")


def test_truthful_run_words() -> None:
    call = ToolCallEvent(tool_call_id="a", tool_name="query_database", input=None)
    rejected = [
        _start("a"),
        call,
        ApprovalRequested(tool_call_id="a"),
        ApprovalResolved(tool_call_id="a", decision="rejected"),
        _end("a", "Rejected by user.", is_error=True),
    ]
    assert _fold([AgentStartEvent(), *rejected, AgentEndEvent()]).status == "blocked"
    provider = _fold(
        [AgentStartEvent(), *_assistant("", stop_reason="error", error="HTTP 500"), AgentEndEvent()]
    )
    assert provider.status == "failed" and provider.error == "HTTP 500"
    # A stop is a stop, not a failure, even though the model's message ends with an error.
    stopped = _fold(
        [
            AgentStartEvent(),
            StopRequested(reason="interrupted"),
            *_assistant("", stop_reason="error", error="Operation aborted"),
            AgentEndEvent(),
        ]
    )
    assert (stopped.status, stopped.stop_reason, stopped.error) == ("stopped", "interrupted", None)


def test_truthful_call_words() -> None:
    call = ToolCallEvent(tool_call_id="x", tool_name="query_database", input=None)
    ran = ToolResultEvent(
        tool_call_id="x",
        tool_name="query_database",
        input=None,
        content=[],
        details=None,
        is_error=False,
    )

    def word(*events: object, stop: bool = False) -> str:
        prefix: list[object] = [StopRequested()] if stop else []
        return _fold([*prefix, _start("x"), *events]).cards["x"].word

    assert word(call, ran, _end("x")) == "allowed"
    approve = [
        ApprovalRequested(tool_call_id="x"),
        ApprovalResolved(tool_call_id="x", decision="approved"),
    ]
    assert word(call, *approve, ran, _end("x")) == "approved"
    for decision in ("rejected", "expired", "aborted"):
        resolved = ApprovalResolved(tool_call_id="x", decision=decision)
        assert word(call, resolved, _end("x", "no", is_error=True)) == decision
    assert word(call, _end("x", "Refused: two statements", is_error=True)) == "refused"
    assert word(call, ran, _end("x", "boom", is_error=True)) == "error"
    assert word(call, ran, _end("x", "cancelled", is_error=True), stop=True) == "aborted"
    granted = _fold(
        [_start("x"), call, Decided(tool_call_id="x", decision="granted"), ran, _end("x")]
    )
    assert granted.cards["x"].word == "granted"


def test_reducer_shares_all_but_one_chunk_of_cards() -> None:
    """An event touches one card; the next state must not copy the others."""
    state = _fold([_start(f"c{i}") for i in range(1000)])
    after = reduce(state, _update("c500", "half way"))
    before_chunks = state.cards._chunks  # pyright: ignore[reportPrivateUsage]
    after_chunks = after.cards._chunks  # pyright: ignore[reportPrivateUsage]
    shared = sum(a is b for a, b in zip(before_chunks, after_chunks, strict=True))
    assert shared == len(before_chunks) - 1
    assert after.cards["c500"].progress == "half way"
    assert state.cards["c500"].progress is None  # the old state is untouched
    assert after.order[:3] == ("c0", "c1", "c2") and len(after.order) == 1000
    # Two states forked from one keep their own cards.
    left, right = reduce(state, _start("left")), reduce(state, _start("right"))
    assert "left" in left.cards and "left" not in right.cards
    assert right.cards["right"].tool_call_id == "right" and left.order[-1] == "left"
