"""``Agent``: state, subscription, prompt and abort around the agent loop."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from types import CoroutineType
from typing import Any

from ..ai.abort import AbortController, AbortSignal
from ..ai.messages import Message, TextContent, UserMessage
from ..ai.model import Model, RequestHook
from ..errors import AgentBusyError
from .common import LoopConfig, TransformContext, maybe_await
from .events import AgentEvent
from .loop import run_agent_loop
from .types import AfterToolCallHook, AgentTool, BeforeToolCallHook, ExecutionMode

__all__ = ["Agent", "AgentBusyError", "AgentState", "Listener", "Wants"]

log = logging.getLogger(__name__)

Listener = Callable[[AgentEvent], Awaitable[None] | None]
Wants = Callable[[str], bool]
"""``wants(event_type)``: whether a listener wants events of that type now (asked per event)."""


@dataclass(kw_only=True)
class AgentState:
    """What the agent holds between runs. ``tools`` and ``system_prompt`` are read
    before every model request, so changes reach the next request of a running run."""

    model: Model
    system_prompt: str = ""
    tools: list[AgentTool[Any]] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    is_running: bool = False


class Agent:
    """Runs prompts through the loop and fans events out to subscribers.

    Subscribers may be sync or async; they run one after another, in subscription
    order, for every event (or, when they said which they want, for those). A subscriber
    that raises is logged and skipped: it cannot break the run.

    An event that no subscriber wants is not built at all where building it costs something
    (``message_update``, ``tool_execution_update``): see :meth:`wants`.
    """

    def __init__(
        self,
        *,
        model: Model,
        system_prompt: str = "",
        tools: Sequence[AgentTool[Any]] = (),
        before_tool_call: BeforeToolCallHook | None = None,
        after_tool_call: AfterToolCallHook | None = None,
        tool_execution: ExecutionMode = "parallel",
        transform_context: TransformContext | None = None,
        before_request: RequestHook | None = None,
    ) -> None:
        self.state = AgentState(model=model, system_prompt=system_prompt, tools=list(tools))
        self.before_tool_call = before_tool_call
        self.after_tool_call = after_tool_call
        self.tool_execution: ExecutionMode = tool_execution
        self.transform_context = transform_context
        self.before_request = before_request
        self._listeners: list[tuple[Listener, Wants | None]] = []
        self._controller: AbortController | None = None

    def subscribe(
        self, listener: Listener, *, events: Collection[str] | Wants | None = None
    ) -> Callable[[], None]:
        """Receive every event, or only those ``events`` names (a collection of event types,
        or a ``wants(event_type)`` function asked at each event); returns a function that
        unsubscribes."""
        wants: Wants | None
        if events is None or callable(events):
            wants = events
        elif isinstance(events, str):
            wants = frozenset((events,)).__contains__
        else:
            wants = frozenset(events).__contains__
        entry = (listener, wants)
        self._listeners.append(entry)

        def unsubscribe() -> None:
            if entry in self._listeners:
                self._listeners.remove(entry)

        return unsubscribe

    def wants(self, event_type: str) -> bool:
        """Whether any subscriber wants events of ``event_type`` now."""
        for _, wants in self._listeners:
            if wants is None or wants(event_type):
                return True
        return False

    @property
    def signal(self) -> AbortSignal | None:
        """The running run's abort signal, or None when idle."""
        return self._controller.signal if self._controller else None

    def abort(self, reason: str | None = None) -> None:
        """Abort the running run, if any."""
        if self._controller is not None:
            self._controller.abort(reason)

    async def prompt(
        self,
        prompt: str | Message | Sequence[Message],
        *,
        controller: AbortController | None = None,
    ) -> None:
        """Run the agent on a prompt until the model stops calling tools.

        ``controller`` lets a host that did work before the run (and could be aborted
        during it) hand over its abort: an already-aborted controller ends the run at once."""
        if self.state.is_running:
            raise AgentBusyError("The agent is already running; wait for it or abort it first.")
        if isinstance(prompt, str):
            prompts: list[Message] = [UserMessage(content=[TextContent(text=prompt)])]
        elif isinstance(prompt, Sequence):
            prompts = list(prompt)
        else:
            prompts = [prompt]
        controller = self._controller = controller or AbortController()
        self.state.is_running = True
        config = LoopConfig(
            model=self.state.model,
            get_turn_state=lambda: (self.state.system_prompt, self.state.tools),
            before_tool_call=self.before_tool_call,
            after_tool_call=self.after_tool_call,
            tool_execution=self.tool_execution,
            transform_context=self.transform_context,
            before_request=self.before_request,
            wants=self.wants,
        )
        try:
            await run_agent_loop(
                prompts, self.state.messages, config, controller.signal, self._emit
            )
        finally:
            self.state.is_running = False
            self._controller = None

    async def _emit(self, event: AgentEvent) -> None:
        kind = event.type
        for listener, wants in tuple(self._listeners):
            if wants is not None and not wants(kind):
                continue
            try:
                returned = listener(event)
                if returned is not None:
                    await (returned if type(returned) is CoroutineType else maybe_await(returned))
            except Exception:
                log.exception("agent event listener failed on %s", kind)
