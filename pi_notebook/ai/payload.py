"""The payload a request would carry, and the hook that may stop it before it is sent.

Real providers hand :data:`~pi_notebook.ai.model.RequestHook` their own JSON body. Models that
send nothing over the wire (scripted, offline, a user's own model) are described by
:func:`context_payload`, a neutral JSON form of the request: what such a model "receives".
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Sequence
from typing import Any

from .messages import AssistantMessage, Message, ToolResultMessage, UserMessage, content_text
from .model import Context, Model, RequestHook, ToolSchema

__all__ = [
    "BLOCKED_PREFIX",
    "accepts_before_request",
    "blocked_text",
    "check_request",
    "context_payload",
    "neutral_payload",
    "payload_text",
]

BLOCKED_PREFIX = "Request blocked before it was sent"


def blocked_text(reason: str) -> str:
    """The error text of a blocked request: the user sees it; nothing reached the model."""
    return f"{BLOCKED_PREFIX}: {reason}"


async def check_request(hook: RequestHook | None, payload: Any) -> str | None:
    """Run ``hook`` on ``payload``: ``None`` to send, else the reason it must not be sent.

    Never raises (other than cancellation): a hook that fails blocks, with its error as the
    reason, because a check that could not run is not a pass.
    """
    if hook is None:
        return None
    try:
        reason = await hook(payload)
    except Exception as exc:
        return f"the request check failed ({type(exc).__name__}: {exc})"
    if reason is None:
        return None
    return str(reason) or "blocked"


def accepts_before_request(model: Model) -> bool:
    """True when ``model.stream`` takes a ``before_request`` keyword (or ``**kwargs``)."""
    cached = _ACCEPTS.get(type(model))
    if cached is not None:
        return cached
    try:
        parameters = inspect.signature(model.stream).parameters.values()
    except (TypeError, ValueError):
        accepts = False
    else:
        accepts = any(
            p.name == "before_request" or p.kind is inspect.Parameter.VAR_KEYWORD
            for p in parameters
        )
    _ACCEPTS[type(model)] = accepts
    return accepts


_ACCEPTS: dict[type, bool] = {}


def _message(message: Message) -> dict[str, Any]:
    if isinstance(message, UserMessage):
        return {"role": "user", "content": content_text(message.content)}
    if isinstance(message, ToolResultMessage):
        return {
            "role": "toolResult",
            "tool_call_id": message.tool_call_id,
            "tool_name": message.tool_name,
            "content": content_text(message.content),
            "is_error": message.is_error,
        }
    assert isinstance(message, AssistantMessage)
    out: dict[str, Any] = {"role": "assistant", "content": message.text}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
        ]
    return out


def context_payload(model: Model, context: Context) -> dict[str, Any]:
    """A JSON-able description of one request to ``model``: what a model without a wire
    format receives. Holds what the model sees (never a result's ``details``)."""
    return neutral_payload(
        model.id, model.provider, context.system_prompt, context.messages, context.tools
    )


def neutral_payload(
    model_id: str,
    provider: str,
    system_prompt: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSchema],
) -> dict[str, Any]:
    """:func:`context_payload` from its parts."""
    return {
        "model": model_id,
        "provider": provider,
        "system": system_prompt,
        "messages": [_message(m) for m in messages],
        "tools": [
            {"name": t.name, "description": t.description, "parameters": t.parameters}
            for t in tools
        ],
    }


def payload_text(payload: Any) -> str:
    """The payload as the text that would travel: JSON (non-ASCII kept), else ``str``."""
    if isinstance(payload, str | bytes):
        return payload.decode("utf-8", "replace") if isinstance(payload, bytes) else payload
    try:
        return json.dumps(payload, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(payload)
