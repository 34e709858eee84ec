"""Who hears a session's events, and in what order.

Every agent event reaches, in this order: the session's own bookkeeping (a call's approval dies
when the call ends; the usage meter reads ``agent_start`` and ``message_end``), the extensions'
handlers, then the session's subscribers (C30: a subscriber sees an event only after every
handler for it has finished), and last the result retention, once everyone has seen a
message's DataFrames. A failing subscriber is logged and the others still hear the event.

Events nobody wants (no subscriber, no extension handler, not the session's own) are not even
built (:meth:`SessionListeners.wants`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..agent.common import maybe_await
from ..agent.events import AgentEvent
from ..ai.usage import UsageMeter
from ..approvals.tools import ToolApprovals
from ..extensions.runner import ExtensionRunner
from .retention import ResultRetention

__all__ = ["SessionListener", "SessionListeners"]

log = logging.getLogger(__name__)

SessionListener = Callable[[Any], Awaitable[None] | None]
"""A session subscriber: called with every event; it may be async."""

# The events the session itself reads whoever else listens: the usage meter's and the end of
# a call (its approval dies with it).
_OWN_EVENTS = frozenset({"agent_start", "message_end", "tool_execution_end"})


class SessionListeners:
    """The subscribers of one session, and the dispatch of each agent event to everyone."""

    __slots__ = ("_approvals", "_retention", "_runner", "_usage", "subscribers")

    def __init__(
        self,
        runner: ExtensionRunner,
        approvals: ToolApprovals,
        usage: UsageMeter,
        retention: ResultRetention,
    ) -> None:
        self._runner = runner
        self._approvals = approvals
        self._usage = usage
        self._retention = retention
        self.subscribers: list[SessionListener] = []

    def subscribe(self, listener: SessionListener) -> Callable[[], None]:
        """Add ``listener``; returns the callable that removes it."""
        self.subscribers.append(listener)

        def unsubscribe() -> None:
            if listener in self.subscribers:
                self.subscribers.remove(listener)

        return unsubscribe

    def wants(self, event_type: str) -> bool:
        """Whether the session has a use for events of ``event_type`` now."""
        return (
            event_type in _OWN_EVENTS
            or bool(self.subscribers)
            or self._runner.has_handlers(event_type)
        )

    async def dispatch(self, event: AgentEvent) -> None:
        """Hand ``event`` to the session's bookkeeping, the handlers, then the subscribers."""
        kind = event.type
        if event.type == "tool_execution_end":
            # However the call ended, an approval it earned dies with it.
            self._approvals.end(event.tool_call_id)
        elif kind == "message_end" or kind == "agent_start":
            self._usage.observe(event)
        if self._runner.has_handlers(kind):
            await self._runner.emit(event)
        for listener in list(self.subscribers):
            try:
                returned = listener(event)
                if returned is not None:
                    await maybe_await(returned)
            except Exception:
                log.exception("session subscriber failed on %s", kind)
        if kind == "message_end":  # once everyone has seen its DataFrames
            self._retention.on_event(event)
