"""The event store: a pure reducer from session events to the state the widgets render.

``reduce(state, event)`` returns a new :class:`RunState`; it never mutates its input and
has no side effects, so it can be tested on its own. Tool cards are keyed by
``tool_call_id`` (S14): a start creates a card, everything later for the same id merges into
it, and an update or end for an id never seen creates nothing.

Besides the session's events it understands a few of the notebook's own (approval requested
and resolved, stop requested, run failed, notice), defined here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias

from ..ai.messages import part_text

__all__ = [
    "ApprovalRequested",
    "ApprovalResolved",
    "CardState",
    "CardStatus",
    "Notice",
    "RunFailed",
    "RunState",
    "StopRequested",
    "reduce",
]

CardStatus: TypeAlias = Literal[
    "queued", "awaiting approval", "running", "done", "error", "blocked"
]
RunStatus: TypeAlias = Literal["idle", "running", "done", "stopped", "error"]
TERMINAL: frozenset[str] = frozenset({"done", "error", "blocked"})


@dataclass(frozen=True, kw_only=True)
class ApprovalRequested:
    tool_call_id: str
    type: Literal["approval_requested"] = "approval_requested"


@dataclass(frozen=True, kw_only=True)
class ApprovalResolved:
    tool_call_id: str
    decision: str  # approved, rejected, expired, aborted
    type: Literal["approval_resolved"] = "approval_resolved"


@dataclass(frozen=True, kw_only=True)
class StopRequested:
    type: Literal["stop_requested"] = "stop_requested"


@dataclass(frozen=True, kw_only=True)
class RunFailed:
    error: str
    type: Literal["run_failed"] = "run_failed"


@dataclass(frozen=True, kw_only=True)
class Notice:
    message: str
    level: str = "info"
    type: Literal["notice"] = "notice"


@dataclass(frozen=True, kw_only=True)
class CardState:
    """One tool call as the UI shows it."""

    tool_call_id: str
    tool_name: str
    args: Any = None
    status: CardStatus = "queued"
    progress: str | None = None
    progress_details: Any = None
    updates: int = 0
    started_at: float | None = None
    ended_at: float | None = None
    content: tuple[str, ...] = ()
    details: Any = None
    error: str | None = None
    gated: bool = False  # reached the tool_call handlers (so validation passed)
    executed: bool = False  # execute ran (a tool_result event was seen)
    approval: str | None = None  # pending, approved, rejected, expired, aborted

    @property
    def duration(self) -> float | None:
        """Seconds from start to end, once ended."""
        if self.started_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.started_at


@dataclass(frozen=True, kw_only=True)
class RunState:
    """One ``%%pi`` run: status, assistant text and the tool cards in start order."""

    status: RunStatus = "idle"
    order: tuple[str, ...] = ()
    cards: dict[str, CardState] = field(default_factory=dict[str, CardState])
    assistant: tuple[str, ...] = ()
    error: str | None = None
    notices: tuple[str, ...] = ()
    stop_requested: bool = False

    @property
    def assistant_text(self) -> str:
        """The assistant's messages so far, one paragraph each."""
        return "\n\n".join(p for p in self.assistant if p)

    def card_list(self) -> list[CardState]:
        return [self.cards[i] for i in self.order]

    def pending_card_id(self) -> str | None:
        """The latest started card that has not ended: the one a gate is asking about."""
        for call_id in reversed(self.order):
            if self.cards[call_id].status not in TERMINAL:
                return call_id
        return None


def _text_of(parts: Any) -> tuple[str, ...]:
    return tuple(text for text in map(part_text, parts or ()) if text)


def _with_card(state: RunState, card: CardState) -> RunState:
    cards = dict(state.cards)
    cards[card.tool_call_id] = card
    order = state.order if card.tool_call_id in state.cards else (*state.order, card.tool_call_id)
    return replace(state, cards=cards, order=order)


def _end_status(card: CardState, is_error: bool) -> CardStatus:
    if not is_error:
        return "done"
    # A call stopped by a tool_call handler never executes; one that failed validation never
    # reaches the handlers, and one that ran and raised is an error, not a block.
    return "blocked" if card.gated and not card.executed else "error"


def _reduce_card(state: RunState, event: Any, now: float | None) -> RunState:
    kind = event.type
    call_id = getattr(event, "tool_call_id", None)
    if not isinstance(call_id, str):
        return state
    card = state.cards.get(call_id)
    if kind == "tool_execution_start":
        if card is not None:
            return _with_card(state, replace(card, args=event.args))
        new = CardState(tool_call_id=call_id, tool_name=event.tool_name, args=event.args,
                        started_at=now)  # fmt: skip
        return _with_card(state, new)
    if card is None:
        return state  # S14: only a start creates a card
    if kind == "tool_execution_update":
        result = event.partial_result
        status = card.status if card.status in TERMINAL else "running"
        texts = _text_of(getattr(result, "content", None))
        return _with_card(state, replace(
            card, status=status, updates=card.updates + 1,
            progress=" ".join(texts) if texts else card.progress,
            progress_details=getattr(result, "details", None)))  # fmt: skip
    if kind == "tool_call":
        return _with_card(state, replace(card, gated=True))
    if kind == "tool_result":
        return _with_card(state, replace(card, executed=True))
    if kind == "approval_requested":
        return _with_card(state, replace(card, status="awaiting approval", approval="pending"))
    if kind == "approval_resolved":
        status: CardStatus = "running" if event.decision == "approved" else "blocked"
        return _with_card(state, replace(card, approval=event.decision, status=status))
    if kind == "tool_execution_end":
        result = event.result
        content = _text_of(getattr(result, "content", None))
        is_error = bool(event.is_error)
        return _with_card(state, replace(
            card, status=_end_status(card, is_error), ended_at=now, content=content,
            details=getattr(result, "details", None),
            error=("\n".join(content) or "error") if is_error else None))  # fmt: skip
    return state


def reduce(state: RunState, event: Any, *, now: float | None = None) -> RunState:
    """The state after ``event``. Pure: ``now`` (seconds) stamps card start and end times.

    Unknown event types leave the state unchanged.
    """
    kind = getattr(event, "type", None)
    if kind in ("tool_execution_start", "tool_execution_update", "tool_execution_end",
                "tool_call", "tool_result", "approval_requested", "approval_resolved"):  # fmt: skip
        return _reduce_card(state, event, now)
    if kind == "agent_start":
        return replace(state, status="running")
    if kind == "message_start" and getattr(event.message, "role", None) == "assistant":
        return replace(state, assistant=(*state.assistant, ""))
    if kind == "message_update":
        delta_event = event.assistant_message_event
        if getattr(delta_event, "type", None) != "text_delta":
            return state
        paragraphs = state.assistant or ("",)
        return replace(state, assistant=(*paragraphs[:-1], paragraphs[-1] + delta_event.delta))
    if kind == "message_end" and getattr(event.message, "role", None) == "assistant":
        message = event.message
        paragraphs = state.assistant or ("",)
        # The final text wins over the deltas (a provider may send none).
        paragraphs = (*paragraphs[:-1], message.text or paragraphs[-1])
        if message.stop_reason == "error" and message.error_message:
            return replace(state, assistant=paragraphs, error=message.error_message)
        return replace(state, assistant=paragraphs)
    if kind == "agent_end":
        if state.status == "error":
            return state
        return replace(state, status="stopped" if state.stop_requested else "done")
    if kind == "stop_requested":
        return replace(state, stop_requested=True)
    if kind == "run_failed":
        return replace(state, status="error", error=event.error)
    if kind == "notice":
        return replace(state, notices=(*state.notices, f"{event.level}: {event.message}"))
    return state
