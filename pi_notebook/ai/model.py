"""What a model is to the agent: something that streams an answer to a context.

Providers (scripted, offline, OpenAI-compatible, Anthropic) implement :class:`Model`.
``stream`` yields :mod:`pi_notebook.ai.events` and ends with a done or error event;
it should not raise for failures it can describe (the agent loop still turns a raised
exception into an error message, so a broken provider cannot crash a run).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .abort import AbortSignal
from .events import AssistantMessageEvent, DoneEvent, ErrorEvent
from .messages import AssistantMessage, Message

__all__ = ["Context", "Model", "ToolSchema", "complete"]


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
