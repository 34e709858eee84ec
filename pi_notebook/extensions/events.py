"""Extension-only events and what their handlers may return.

Handlers of every other event (``tool_execution_*``, ``turn_*``, ``agent_*``,
``message_*``) receive the agent core's event objects unchanged.

The pre-model events, in the order a prompt meets them (Pi's semantics):

* ``input``: the user's text, before anything else. Return ``{"text": ...}`` to rewrite it
  (handlers chain, each sees the text so far) or ``{"handled": True}`` to stop: no model
  call, no agent events.
* ``before_agent_start``: once per prompt. ``{"system_prompt": ...}`` replaces the system
  prompt for this prompt only (handlers chain); ``{"message": ...}`` injects a message
  (each handler may add one), sent just before the user's message and kept in the history.
* ``context``: before each model request, with a copy of the messages; ``{"messages":
  [...]}`` is what that request sends (the history is unchanged). Handlers chain.
* ``before_provider_request``: the exact payload about to leave the kernel (after
  ``context``): ``{"block": True, "reason": ...}`` stops it; nothing is sent, the run ends
  with an error the user sees, and the block is audited.

A handler of the first three that raises or answers in a shape the runner cannot read is
reported to the error listener and ignored (C32). A ``before_provider_request`` handler that
raises or answers in an unreadable shape blocks the request (fail closed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from ..ai.messages import Message, ResultContent, TextContent, UserMessage

__all__ = [
    "EXTENSION_EVENT_TYPES",
    "PRE_MODEL_EVENT_TYPES",
    "BeforeAgentStartEvent",
    "BeforeAgentStartEventResult",
    "BeforeProviderRequestEvent",
    "BeforeProviderRequestEventResult",
    "ContextEvent",
    "ContextEventResult",
    "ExtensionErrorEvent",
    "InputEvent",
    "InputEventResult",
    "SessionShutdownEvent",
    "SessionStartEvent",
    "ToolCallEvent",
    "ToolCallEventResult",
    "ToolResultEvent",
    "ToolResultEventResult",
]

PRE_MODEL_EVENT_TYPES = frozenset(
    {"input", "before_agent_start", "context", "before_provider_request"}
)

EXTENSION_EVENT_TYPES = PRE_MODEL_EVENT_TYPES | frozenset(
    {
        "session_start",
        "session_shutdown",
        "agent_start",
        "agent_end",
        "turn_start",
        "turn_end",
        "message_start",
        "message_update",
        "message_end",
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_end",
        "tool_call",
        "tool_result",
    }
)


@dataclass(kw_only=True)
class ToolCallEvent:
    """Before ``execute``. ``input`` is the validated parameters object that ``execute``
    will receive: changing it in place changes what runs, with no re-validation (S8,
    C16). Rebinding ``event.input`` is seen by later handlers only."""

    tool_call_id: str
    tool_name: str
    input: BaseModel
    type: Literal["tool_call"] = "tool_call"


@dataclass(kw_only=True)
class ToolCallEventResult:
    """Return ``block=True`` to stop the call; ``reason`` becomes its error text."""

    block: bool = False
    reason: str | None = None
    terminate: bool = False


@dataclass(kw_only=True)
class ToolResultEvent:
    """After ``execute`` ran (success or raise). Fields hold the latest patched values."""

    tool_call_id: str
    tool_name: str
    input: BaseModel
    content: list[ResultContent]
    details: Any
    is_error: bool
    type: Literal["tool_result"] = "tool_result"


@dataclass(kw_only=True)
class ToolResultEventResult:
    """A patch: fields left ``None`` keep their current value. No ``terminate``."""

    content: list[ResultContent] | None = None
    details: Any = None
    is_error: bool | None = None


@dataclass(kw_only=True)
class SessionStartEvent:
    model: str
    active_tools: list[str] = field(default_factory=list[str])
    type: Literal["session_start"] = "session_start"


@dataclass(kw_only=True)
class SessionShutdownEvent:
    type: Literal["session_shutdown"] = "session_shutdown"


@dataclass(kw_only=True)
class ExtensionErrorEvent:
    """What the error listener receives (C32)."""

    extension_path: str
    event: str
    error: str
    type: Literal["extension_error"] = "extension_error"


@dataclass(kw_only=True)
class InputEvent:
    """The user's text, before anything else happens to it (Pi's ``input``)."""

    text: str
    type: Literal["input"] = "input"


@dataclass(kw_only=True)
class InputEventResult:
    """``text`` rewrites the prompt (later handlers see it); ``handled=True`` ends the prompt
    here: no model call."""

    text: str | None = None
    handled: bool = False


@dataclass(kw_only=True)
class BeforeAgentStartEvent:
    """Once per prompt, after ``input``. ``system_prompt`` is the prompt so far: the session's
    base prompt, or what an earlier handler made of it."""

    prompt: str
    system_prompt: str
    type: Literal["before_agent_start"] = "before_agent_start"


@dataclass(kw_only=True)
class BeforeAgentStartEventResult:
    """``system_prompt`` replaces the system prompt for this prompt only (chained).
    ``message`` (text, content parts or a ``UserMessage``) is injected for this prompt;
    ``custom_type`` names its kind (default: the extension's path)."""

    system_prompt: str | None = None
    message: str | list[TextContent] | UserMessage | None = None
    custom_type: str | None = None


@dataclass(kw_only=True)
class ContextEvent:
    """Before each model request: a copy of the messages about to be sent. Changing the copy
    changes nothing; return ``{"messages": [...]}`` to send other messages. ``details`` of
    tool results are shared with the history (they never reach the model)."""

    messages: list[Message]
    type: Literal["context"] = "context"


@dataclass(kw_only=True)
class ContextEventResult:
    messages: list[Message] | None = None


@dataclass(kw_only=True)
class BeforeProviderRequestEvent:
    """The exact payload about to be sent: the provider's JSON body (OpenAI chat
    completions, Anthropic Messages) or, for a model without a wire format, the neutral form
    of :func:`pi_notebook.ai.payload.context_payload`. ``payload_text`` is it serialised.
    Read it; do not change it (a block is the only answer that has an effect)."""

    payload: Any
    payload_text: str
    model: str
    type: Literal["before_provider_request"] = "before_provider_request"


@dataclass(kw_only=True)
class BeforeProviderRequestEventResult:
    """``block=True`` stops the request; ``reason`` is shown to the user and audited."""

    block: bool = False
    reason: str | None = None
