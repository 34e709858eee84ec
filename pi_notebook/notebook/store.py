"""The event store: a pure reducer from session events to the state the widgets render.

``reduce(state, event)`` returns a new :class:`RunState`; it never mutates its input and
has no side effects, so it can be tested on its own. Tool cards are keyed by
``tool_call_id`` (S14): a start creates a card, everything later for the same id merges into
it, and an update or end for an id never seen creates nothing.

The state keeps a *timeline*: the assistant's messages and the tool cards in the order they
happened, so text written before a call sits above its card and text after it below.

Cost per event does not grow with the number of cards: cards live in a
:class:`~.cardmap.CardMap` that shares all but one small chunk with the previous state.

Besides the session's events it understands a few of the notebook's own (approval requested
and resolved, stop requested, run failed, notice, decision), defined in :mod:`.run_events`
and re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias

from ..ai.messages import ImageContent, part_text, to_result_parts
from ..approvals.protocol import Decision
from .cardmap import CardMap
from .run_events import (
    ApprovalRequested,
    ApprovalResolved,
    Decided,
    Notice,
    RunFailed,
    StopRequested,
)

__all__ = [
    "ApprovalRequested",
    "ApprovalResolved",
    "CardDecision",
    "CardState",
    "CardStatus",
    "Decided",
    "Notice",
    "RunFailed",
    "RunState",
    "RunStatus",
    "StopRequested",
    "reduce",
]

CardStatus: TypeAlias = Literal[
    "queued", "awaiting approval", "running", "done", "error", "blocked"
]
RunStatus: TypeAlias = Literal["idle", "running", "done", "failed", "stopped", "blocked"]
TERMINAL: frozenset[str] = frozenset({"done", "error", "blocked"})
SETTLED: frozenset[str] = frozenset({"done", "failed", "stopped", "blocked"})
# Decisions that mean "the call did not run because someone or something said no".
DENIED: frozenset[str] = frozenset({"rejected", "expired", "aborted", "refused"})
CardDecision: TypeAlias = Decision | Literal["allowed"]
"""Who let a call run or stopped it: a :data:`~pi_notebook.approvals.Decision`, or
``allowed`` (it passed every ``tool_call`` handler without asking)."""


@dataclass(frozen=True, kw_only=True)
class CardState:
    """One tool call as the UI shows it.

    ``status`` is the phase (queued, awaiting approval, running, then done / error /
    blocked); ``decision`` says who let it run or stopped it (allowed, approved, granted,
    rejected, expired, aborted, refused); :attr:`word` is the one word a card shows.
    """

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
    approval: Decision | Literal["pending"] | None = None  # pending, approved, rejected, ...
    decision: CardDecision | None = None
    aborted: bool = False  # ended while the run was being stopped
    reasons: tuple[str, ...] = ()  # why it needed approval, when it did
    original_args: Any = None  # what the model asked for, when the person edited it (args ran)
    approver: str | None = None  # who decided, from the audit
    grant: str | None = None  # the grant this call created or ran inside, in words
    waited_s: float | None = None  # how long the person took to decide, from the audit

    @property
    def duration(self) -> float | None:
        """Seconds from start to end, once ended (the person's wait included)."""
        if self.started_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.started_at

    @property
    def run_time(self) -> float | None:
        """Seconds the call took without the person's wait, once ended."""
        if self.duration is None:
            return None
        return max(0.0, self.duration - (self.waited_s or 0.0))

    @property
    def outcome(self) -> str:
        """``ok``, ``error``, ``aborted``, ``blocked`` once ended; ``pending`` before."""
        if self.status == "done":
            return "ok"
        if self.status == "blocked":
            return "blocked"
        if self.status == "error":
            return "aborted" if self.aborted else "error"
        return "pending"

    @property
    def word(self) -> str:
        """The status word a card shows: truthful about who decided and how it ended."""
        if self.status not in TERMINAL:
            return self.status
        if self.status == "error":
            return "aborted" if self.aborted else "error"
        if self.status == "blocked":
            decision = self.decision
            return decision if decision is not None and decision in DENIED else "refused"
        return self.decision or "allowed"


@dataclass(frozen=True, kw_only=True)
class RunState:
    """One ``%%pi`` run: status, the timeline of messages and cards, and the cards by id.

    Attributes:
        timeline: ``("text", i)`` for the i-th assistant message and ``("card", call_id)``
            for a tool card, in the order they appeared.
        assistant: the assistant messages' text, one entry each.
    """

    status: RunStatus = "idle"
    cards: CardMap[CardState] = field(default_factory=CardMap)
    timeline: tuple[tuple[str, Any], ...] = ()
    assistant: tuple[str, ...] = ()
    error: str | None = None
    notices: tuple[str, ...] = ()
    stop_requested: bool = False
    stop_reason: str | None = None

    @property
    def order(self) -> tuple[str, ...]:
        """Call ids in start order."""
        return self.cards.ids()

    @property
    def assistant_text(self) -> str:
        """The assistant's messages so far, one paragraph each."""
        return "\n\n".join(p for p in self.assistant if p)

    @property
    def settled(self) -> bool:
        """Whether the run has ended (done, failed, stopped or blocked)."""
        return self.status in SETTLED

    def card_list(self) -> list[CardState]:
        return list(self.cards.values())


def _text_of(parts: Any) -> tuple[str, ...]:
    return tuple(text for text in map(_shown, parts or ()) if text)


def _shown(part: Any) -> str:
    """A part as a card shows it: its text, or a note for an image (never its data)."""
    image = part if isinstance(part, ImageContent) else to_result_parts([part])[0]
    if isinstance(image, ImageContent):
        size = image.size
        shown = f"{size} B" if size < 1024 else f"{round(size / 1024)} KB"
        return f"[image: {image.mime_type}, {shown}]"
    return part_text(part)


def _with_card(state: RunState, card: CardState) -> RunState:
    if card.tool_call_id in state.cards:
        return replace(state, cards=state.cards.set(card))
    return replace(
        state, cards=state.cards.set(card), timeline=(*state.timeline, ("card", card.tool_call_id))
    )


def _end_status(card: CardState, is_error: bool) -> CardStatus:
    if not is_error:
        return "done"
    # A call stopped by a tool_call handler never executes; one that failed validation never
    # reaches the handlers, and one that ran and raised is an error, not a block.
    if card.approval in DENIED and not card.executed:
        return "blocked"  # a person (or the deadline) said no
    return "blocked" if card.gated and not card.executed else "error"


def _end(state: RunState, card: CardState, event: Any, now: float | None) -> CardState:
    result = event.result
    content = _text_of(getattr(result, "content", None))
    is_error = bool(event.is_error)
    status = _end_status(card, is_error)
    decision = card.decision
    if status == "blocked" and decision not in DENIED:
        decision = "aborted" if state.stop_requested else "refused"
    elif status in ("done", "error") and decision is None and card.gated:
        decision = "allowed"  # it passed every tool_call handler without asking
    elif status == "done" and decision is None:
        decision = "allowed"
    return replace(
        card,
        status=status,
        ended_at=now,
        content=content,
        decision=decision,
        details=getattr(result, "details", None),
        aborted=status == "error" and state.stop_requested,
        error=("\n".join(content) or "error") if is_error else None,
    )


def _reduce_card(state: RunState, event: Any, now: float | None) -> RunState:
    call_id = getattr(event, "tool_call_id", None)
    if not isinstance(call_id, str):
        return state
    card = state.cards.get(call_id)
    kind = event.type
    if kind == "tool_execution_start":
        if card is not None:
            return _with_card(state, replace(card, args=event.args))
        new = CardState(
            tool_call_id=call_id, tool_name=event.tool_name, args=event.args, started_at=now
        )
        return _with_card(state, new)
    if card is None:
        return state  # S14: only a start creates a card
    step = _CARD_STEPS.get(kind)
    return state if step is None else _with_card(state, step(state, card, event, now))


def _updated(state: RunState, card: CardState, event: Any, now: float | None) -> CardState:
    result = event.partial_result
    status = card.status if card.status in TERMINAL else "running"
    texts = _text_of(getattr(result, "content", None))
    return replace(
        card,
        status=status,
        updates=card.updates + 1,
        progress=" ".join(texts) if texts else card.progress,
        progress_details=getattr(result, "details", None),
    )


def _gated(state: RunState, card: CardState, event: Any, now: float | None) -> CardState:
    return replace(card, gated=True)


def _executed(state: RunState, card: CardState, event: Any, now: float | None) -> CardState:
    return replace(card, executed=True)


def _awaiting(state: RunState, card: CardState, event: Any, now: float | None) -> CardState:
    return replace(
        card,
        status="awaiting approval",
        approval="pending",
        reasons=tuple(event.reasons) or card.reasons,
    )


def _resolved(state: RunState, card: CardState, event: Any, now: float | None) -> CardState:
    status: CardStatus = "running" if event.decision in ("approved", "granted") else "blocked"
    if card.status in TERMINAL:
        status = card.status
    card = replace(card, approval=event.decision, decision=event.decision, status=status)
    edited = getattr(event, "edited_args", None)
    if edited is not None and edited != card.args:
        original = card.original_args if card.original_args is not None else card.args
        card = replace(card, args=edited, original_args=original)
    return card


def _decided(state: RunState, card: CardState, event: Any, now: float | None) -> CardState:
    return replace(
        card,
        decision=event.decision,
        approver=event.approver,
        grant=event.grant,
        waited_s=event.waited_s,
    )


_CARD_STEPS: dict[str, Callable[[RunState, CardState, Any, float | None], CardState]] = {
    "tool_execution_update": _updated,
    "tool_call": _gated,
    "tool_result": _executed,
    "approval_requested": _awaiting,
    "approval_resolved": _resolved,
    "decided": _decided,
    "tool_execution_end": _end,
}
"""What each later event of a call does to its card (a start is :func:`_reduce_card`'s)."""


def _settle(state: RunState) -> RunStatus:
    if state.status == "failed":
        return "failed"
    if state.stop_requested:
        return "stopped"
    if state.error:
        return "failed"
    if any(card.status == "blocked" for card in state.cards.values()):
        return "blocked"
    return "done"


def reduce(state: RunState, event: Any, *, now: float | None = None) -> RunState:
    """The state after ``event``. Pure: ``now`` (seconds) stamps card start and end times.

    Unknown event types leave the state unchanged. A run settles on ``agent_end`` as
    ``failed`` (the model or the run raised), ``stopped`` (Stop or an interrupt),
    ``blocked`` (a call was rejected, expired or refused) or ``done``.
    """
    kind = getattr(event, "type", None)
    if kind in (
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_end",
        "tool_call",
        "tool_result",
        "approval_requested",
        "approval_resolved",
        "decided",
    ):
        return _reduce_card(state, event, now)
    if kind == "agent_start":
        return replace(state, status="running")
    if kind == "message_start" and getattr(event.message, "role", None) == "assistant":
        index = len(state.assistant)
        return replace(
            state, assistant=(*state.assistant, ""), timeline=(*state.timeline, ("text", index))
        )
    if kind == "message_update":
        delta_event = event.assistant_message_event
        if getattr(delta_event, "type", None) != "text_delta" or not state.assistant:
            return state
        paragraphs = state.assistant
        return replace(state, assistant=(*paragraphs[:-1], paragraphs[-1] + delta_event.delta))
    if kind == "message_end" and getattr(event.message, "role", None) == "assistant":
        message = event.message
        if not state.assistant:
            state = replace(state, assistant=("",), timeline=(*state.timeline, ("text", 0)))
        paragraphs = state.assistant
        # The final text wins over the deltas (a provider may send none).
        paragraphs = (*paragraphs[:-1], message.text or paragraphs[-1])
        if message.stop_reason == "error" and message.error_message and not state.stop_requested:
            return replace(state, assistant=paragraphs, error=message.error_message)
        return replace(state, assistant=paragraphs)
    if kind == "agent_end":
        if state.settled:
            return state
        return replace(state, status=_settle(state))
    if kind == "stop_requested":
        if state.settled:
            return state
        return replace(state, stop_requested=True, stop_reason=event.reason)
    if kind == "run_failed":
        return replace(state, status="failed", error=event.error)
    if kind == "notice":
        return replace(state, notices=(*state.notices, f"{event.level}: {event.message}"))
    return state
