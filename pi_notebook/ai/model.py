"""What a model is to the agent: something that streams an answer to a context.

Providers (scripted, offline, OpenAI-compatible, Anthropic) implement :class:`Model`.
``stream`` yields :mod:`pi_notebook.ai.events` and ends with a done or error event;
it should not raise for failures it can describe (the agent loop still turns a raised
exception into an error message, so a broken provider cannot crash a run).

The payload hook: a model whose ``stream`` also takes a keyword ``before_request`` (a
:data:`RequestHook`) calls it with the exact payload it is about to send (for the real
providers, the JSON body of the HTTP request) and sends nothing when the hook returns a
reason to block; the stream then ends with an error event saying so (see
:func:`pi_notebook.ai.payload.blocked_text`). For a model without that keyword, the agent
loop calls the hook itself with :func:`pi_notebook.ai.payload.context_payload`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .abort import AbortSignal
from .events import AssistantMessageEvent, DoneEvent, ErrorEvent
from .messages import AssistantMessage, Message

__all__ = ["Context", "Model", "RequestHook", "ToolSchema", "complete"]

RequestHook = Callable[[Any], Awaitable[str | None]]
"""``await hook(payload)`` right before a request is sent: ``None`` sends it, a string is the
reason to block it (nothing is sent). A hook that raises blocks too (fail closed)."""


@dataclass(frozen=True, kw_only=True)
class ToolSchema:
    """A tool as offered to a model: name, description and JSON Schema of its parameters."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(kw_only=True)
class Context:
    """Everything one model request carries."""

    system_prompt: str = ""
    messages: Sequence[Message] = field(default_factory=list[Message])
    tools: Sequence[ToolSchema] = field(default_factory=list[ToolSchema])


@runtime_checkable
class Model(Protocol):
    """A model provider. ``id`` names the model, ``provider`` its family."""

    @property
    def id(self) -> str: ...

    @property
    def provider(self) -> str: ...

    def stream(
        self, context: Context, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[AssistantMessageEvent]: ...


async def complete(
    model: Model, context: Context, *, signal: AbortSignal | None = None
) -> AssistantMessage:
    """Run a model to the end and return its final message."""
    final: AssistantMessage | None = None
    async for event in model.stream(context, signal=signal):
        if isinstance(event, DoneEvent):
            final = event.message
        elif isinstance(event, ErrorEvent):
            final = event.error
    if final is None:
        return AssistantMessage(
            stop_reason="error",
            model=model.id,
            provider=model.provider,
            error_message="The model stream ended without a final message.",
        )
    return final
