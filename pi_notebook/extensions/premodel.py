"""Dispatch of the pre-model events (Pi's ``emitInput``, ``emitBeforeAgentStart``,
``emitContext``, ``emitBeforeProviderRequest``): chaining, and what each handler may return.

Handlers run in extension load order, then registration order, each with a fresh ``ctx``.
For ``input``, ``before_agent_start`` and ``context``, a handler that raises or returns a shape
we cannot read is reported (``{extension_path, event, error}``) and skipped: the others still
run and the prompt goes on (C32). For ``before_provider_request`` the same faults block the
request, because a check that could not be read is not a pass (fail closed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from ..agent.common import maybe_await
from ..ai.messages import AssistantMessage, Message, ToolResultMessage, UserMessage, to_text_parts
from .events import (
    BeforeAgentStartEvent,
    BeforeAgentStartEventResult,
    BeforeProviderRequestEvent,
    BeforeProviderRequestEventResult,
    ContextEvent,
    ContextEventResult,
    InputEvent,
    InputEventResult,
)

if TYPE_CHECKING:
    from .runner import ExtensionRunner

__all__ = [
    "AgentStartOutcome",
    "InputOutcome",
    "ProviderRequestBlock",
    "emit_before_agent_start",
    "emit_before_provider_request",
    "emit_context",
    "emit_input",
]

_MESSAGE_TYPES = (UserMessage, AssistantMessage, ToolResultMessage)


class _Garbled(ValueError):
    """A handler answered in a shape the runner cannot read."""


def _keys(raw: Mapping[Any, Any], allowed: set[str], event: str) -> dict[str, Any]:
    unknown = {str(k) for k in raw} - allowed
    if unknown:
        raise _Garbled(
            f"{event} handler returned unknown keys {sorted(unknown)} "
            f"(allowed: {', '.join(sorted(allowed))})"
        )
    return {str(k): v for k, v in raw.items()}


def _shape_error(event: str, raw: Any, expected: str) -> _Garbled:
    return _Garbled(f"{event} handler returned {type(raw).__name__} (expected None, {expected})")


# -- input ---------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class InputOutcome:
    """The prompt text after every ``input`` handler; ``handled`` means: stop here."""

    text: str
    handled: bool = False


def _input_result(raw: Any) -> InputEventResult | None:
    if raw is None or isinstance(raw, InputEventResult):
        result = raw
    elif isinstance(raw, Mapping):
        values = _keys(raw, {"text", "handled", "action"}, "input")  # pyright: ignore[reportUnknownArgumentType]
        action = values.get("action")  # Pi's spelling: continue | transform | handled
        if action not in (None, "continue", "transform", "handled"):
            raise _Garbled(f"input handler returned unknown action {action!r}")
        result = InputEventResult(
            text=values.get("text"), handled=bool(values.get("handled")) or action == "handled"
        )
    else:
        raise _shape_error("input", raw, 'a dict {"text": ...} or {"handled": True}')
    if result is not None and result.text is not None and not isinstance(result.text, str):  # pyright: ignore[reportUnnecessaryIsInstance] - checked at run time: callers may be untyped
        raise _Garbled(f"input handler returned text of type {type(result.text).__name__}")
    return result


async def emit_input(runner: ExtensionRunner, text: str) -> InputOutcome:
    """Transforms chain; the first ``handled`` stops the chain and the prompt."""
    current = text
    for extension in runner.extensions:
        for handler in extension.handlers.get("input", ()):
            try:
                raw = await maybe_await(
                    handler(InputEvent(text=current), runner.create_context(extension.path))
                )
                result = _input_result(raw)
            except Exception as exc:
                await runner.report(extension.path, "input", exc)
                continue
            if result is None:
                continue
            if result.handled:
                return InputOutcome(text=current, handled=True)
            if result.text is not None:
                current = result.text
    return InputOutcome(text=current)


# -- before_agent_start --------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class AgentStartOutcome:
    """``system_prompt`` is set only when a handler replaced it; ``messages`` are injected."""

    system_prompt: str | None = None
    messages: list[UserMessage] = field(default_factory=list[UserMessage])


def _agent_start_result(raw: Any) -> BeforeAgentStartEventResult | None:
    if raw is None or isinstance(raw, BeforeAgentStartEventResult):
        result = raw
    elif isinstance(raw, Mapping):
        values = _keys(raw, {"system_prompt", "message", "custom_type"}, "before_agent_start")  # pyright: ignore[reportUnknownArgumentType]
        result = BeforeAgentStartEventResult(**values)
    else:
        raise _shape_error(
            "before_agent_start", raw, 'a dict {"system_prompt": ...} and/or {"message": ...}'
        )
    if result is not None and result.system_prompt is not None:
        if not isinstance(result.system_prompt, str):  # pyright: ignore[reportUnnecessaryIsInstance] - checked at run time: callers may be untyped
            raise _Garbled(
                "before_agent_start handler returned a system_prompt of type "
                f"{type(result.system_prompt).__name__}"
            )
    return result


def _injected(result: BeforeAgentStartEventResult, path: str) -> UserMessage | None:
    message = result.message
    if message is None:
        return None
    custom_type = result.custom_type or path
    if isinstance(message, UserMessage):
        return UserMessage(content=message.content, custom_type=message.custom_type or custom_type)
    if isinstance(message, Mapping):
        values = _keys(message, {"content", "custom_type"}, "before_agent_start message")  # pyright: ignore[reportUnknownArgumentType]
        custom_type = values.get("custom_type") or custom_type
        message = values.get("content")
    items: list[Any] = list(cast(Any, message)) if isinstance(message, list | tuple) else []
    if isinstance(message, str) or (
        isinstance(message, list | tuple)
        and all(isinstance(p, Mapping) or hasattr(p, "text") for p in items)
    ):
        parts = to_text_parts(message if isinstance(message, str) else items)
        if not any(p.text for p in parts):
            return None
        return UserMessage(content=parts, custom_type=str(custom_type))
    raise _Garbled(
        f"before_agent_start handler returned a message of type {type(cast(object, message)).__name__} "
        "(expected text, content parts or a UserMessage)"
    )


async def emit_before_agent_start(
    runner: ExtensionRunner, prompt: str, system_prompt: str
) -> AgentStartOutcome:
    """System prompts chain through the handlers; each handler may inject one message."""
    current = system_prompt
    replaced = False
    messages: list[UserMessage] = []
    for extension in runner.extensions:
        for handler in extension.handlers.get("before_agent_start", ()):
            event = BeforeAgentStartEvent(prompt=prompt, system_prompt=current)
            try:
                raw = await maybe_await(handler(event, runner.create_context(extension.path)))
                result = _agent_start_result(raw)
                injected = _injected(result, extension.path) if result is not None else None
            except Exception as exc:
                await runner.report(extension.path, "before_agent_start", exc)
                continue
            if result is None:
                continue
            if result.system_prompt is not None:
                current, replaced = result.system_prompt, True
            if injected is not None:
                messages.append(injected)
    return AgentStartOutcome(system_prompt=current if replaced else None, messages=messages)


# -- context -------------------------------------------------------------------------------
def _context_result(raw: Any) -> list[Message] | None:
    if raw is None:
        return None
    if isinstance(raw, ContextEventResult):
        messages = raw.messages
    elif isinstance(raw, Mapping):
        messages = _keys(raw, {"messages"}, "context").get("messages")  # pyright: ignore[reportUnknownArgumentType]
    else:
        raise _shape_error("context", raw, 'a dict {"messages": [...]}')
    if messages is None:
        return None
    if not isinstance(messages, list) or not all(isinstance(m, _MESSAGE_TYPES) for m in messages):  # pyright: ignore[reportUnknownVariableType]
        raise _Garbled(
            "context handler returned messages that are not a list of UserMessage, "
            "AssistantMessage and ToolResultMessage objects"
        )
    return list(messages)  # pyright: ignore[reportUnknownArgumentType]


async def emit_context(runner: ExtensionRunner, messages: list[Message]) -> list[Message]:
    """Each handler sees the messages the previous one returned (a copy of the history)."""
    current = messages
    for extension in runner.extensions:
        for handler in extension.handlers.get("context", ()):
            try:
                raw = await maybe_await(
                    handler(ContextEvent(messages=current), runner.create_context(extension.path))
                )
                result = _context_result(raw)
            except Exception as exc:
                await runner.report(extension.path, "context", exc)
                continue
            if result is not None:
                current = result
    return current


# -- before_provider_request ---------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class ProviderRequestBlock:
    """Who stopped a request, and why."""

    extension_path: str
    reason: str


def _provider_result(raw: Any) -> BeforeProviderRequestEventResult | None:
    if raw is None or isinstance(raw, BeforeProviderRequestEventResult):
        return raw
    if isinstance(raw, Mapping):
        values = _keys(raw, {"block", "reason"}, "before_provider_request")  # pyright: ignore[reportUnknownArgumentType]
        reason = values.get("reason")
        return BeforeProviderRequestEventResult(
            block=bool(values.get("block", False)),
            reason=None if reason is None else str(reason),
        )
    raise _shape_error(
        "before_provider_request",
        raw,
        'a dict {"block": True, "reason": ...}; a payload cannot be replaced',
    )


async def emit_before_provider_request(
    runner: ExtensionRunner, payload: Any, payload_text: str, model: str
) -> ProviderRequestBlock | None:
    """The first block stops the chain. A raising or garbled handler blocks (fail closed)."""
    for extension in runner.extensions:
        for handler in extension.handlers.get("before_provider_request", ()):
            event = BeforeProviderRequestEvent(
                payload=payload, payload_text=payload_text, model=model
            )
            try:
                raw = await maybe_await(handler(event, runner.create_context(extension.path)))
                result = _provider_result(raw)
            except Exception as exc:
                detail = str(exc) or type(exc).__name__
                return ProviderRequestBlock(
                    extension_path=extension.path,
                    reason=f"the check of {extension.path} failed ({detail})",
                )
            if result is not None and result.block:
                return ProviderRequestBlock(
                    extension_path=extension.path,
                    reason=result.reason or "Provider request was blocked",
                )
    return None
