"""OpenAI-compatible chat completions (OpenAI, Ollama, vLLM, llama.cpp, LM Studio).

Uses the official ``openai`` SDK's streaming chat-completions API. The SDK's own
retries are off: :mod:`.retry` retries instead, so that every wait is bounded and shows
up as a ``retry`` event, and so that nothing is retried once output has streamed.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

import openai

from ..abort import AbortSignal
from ..events import AssistantMessageEvent
from ..messages import (
    AssistantMessage,
    ImageContent,
    Message,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    content_text,
)
from ..model import Context, RequestHook, ToolSchema
from ..stream import AssistantStream
from .errors import (
    Failure,
    describe_sdk_error,
    host_port,
    missing_key_failure,
)
from .history import replayable
from .retry import Closable, RetryPolicy, SdkStream, run_request

__all__ = ["OpenAIChatModel"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
VENDOR = "OpenAI"
# Local servers ignore the key, but the SDK insists on one.
_PLACEHOLDER_KEY = "no-key-needed"


def _is_openai_host(base_url: str) -> bool:
    host = host_port(base_url).rsplit(":", 1)[0]
    return host == "openai.com" or host.endswith(".openai.com")


class OpenAIChatModel:
    """A model behind any OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        model_id: the server's model name, e.g. ``"gpt-4o-mini"`` or ``"llama3.1"``.
        api_key: defaults to ``OPENAI_API_KEY``. May be omitted for a server that is not
            on ``openai.com`` (Ollama, vLLM, ...); a placeholder is sent instead.
        base_url: defaults to ``OPENAI_BASE_URL``, then ``https://api.openai.com/v1``.
        max_retries: retries for rate limits, 5xx and connection errors before any output.
        max_output_tokens: cap on the answer's length; ``None`` leaves it to the server.
        timeout_s: connect/read timeout for each request, in seconds.
        retry_base_delay_s: first backoff delay; doubles on each retry (with jitter).
        retry_max_delay_s: cap on any wait, including the server's ``Retry-After``.
        images: whether the model takes images. ``False`` (a text-only model) sends each
            image of a tool result as a note saying it was left out, as Pi does.

    A missing key is reported when the model is first streamed, as an error event.
    """

    def __init__(
        self,
        model_id: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 3,
        max_output_tokens: int | None = None,
        timeout_s: float = 120.0,
        retry_base_delay_s: float = 1.0,
        retry_max_delay_s: float = 30.0,
        images: bool = True,
    ) -> None:
        self._id = model_id
        self._images = images
        self._base_url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        self._secret = api_key or os.environ.get("OPENAI_API_KEY") or None
        self._official = _is_openai_host(self._base_url)
        self._api_key = self._secret
        if self._api_key is None and not self._official:
            self._api_key = _PLACEHOLDER_KEY
        self._max_output_tokens = max_output_tokens
        self._timeout_s = timeout_s
        self._policy = RetryPolicy(
            max_retries=max_retries, base_delay_s=retry_base_delay_s, max_delay_s=retry_max_delay_s
        )
        self._host = host_port(self._base_url)
        self._service = "the OpenAI API" if self._official else "the OpenAI-compatible server"

    @property
    def id(self) -> str:
        """The model name sent to the server."""
        return self._id

    @property
    def provider(self) -> str:
        """The provider family, as recorded on every message."""
        return "openai"

    @property
    def accepts_images(self) -> bool:
        """Whether tool results' images are sent (``images=False``: a note stands in)."""
        return self._images

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIChatModel({self._id!r}, base_url={self._host!r})"

    def stream(
        self,
        context: Context,
        *,
        signal: AbortSignal | None = None,
        before_request: RequestHook | None = None,
    ) -> AsyncIterator[AssistantMessageEvent]:
        """Stream one answer; ends with a done or error event and never raises for failures.

        ``before_request`` sees the JSON body right before it is sent and may block it.
        """
        builder = AssistantStream(model=self._id, provider=self.provider)
        return run_request(
            builder,
            missing_key=None
            if self._api_key
            else missing_key_failure(VENDOR, "OPENAI_API_KEY", "OPENAI_BASE_URL").message,
            build_request=lambda: self.build_request(context),
            connect=self._connect,
            new_translator=lambda: _ChunkTranslator(builder),
            describe=self._describe,
            policy=self._policy,
            signal=signal,
            secrets=[self._secret],
            service=self._service,
            before_request=before_request,
        )

    def _connect(
        self, request: dict[str, Any]
    ) -> tuple[Closable, Callable[[], Awaitable[SdkStream]]]:
        client = openai.AsyncOpenAI(
            api_key=self._api_key, base_url=self._base_url, max_retries=0, timeout=self._timeout_s
        )

        async def open_stream() -> SdkStream:
            return cast(SdkStream, await client.chat.completions.create(stream=True, **request))

        return client, open_stream

    # -- request ------------------------------------------------------------
    def build_request(self, context: Context) -> dict[str, Any]:
        """The JSON body (without ``stream``) for a context: messages, tools, limits."""
        messages: list[dict[str, Any]] = []
        if context.system_prompt:
            messages.append({"role": "system", "content": context.system_prompt})
        messages.extend(_convert_all(replayable(context.messages, images=self._images)))
        request: dict[str, Any] = {
            "model": self._id,
            "messages": messages,
            "stream_options": {"include_usage": True},
        }
        if context.tools:
            request["tools"] = [_tool(t) for t in context.tools]
        if self._max_output_tokens is not None:
            # openai.com rejects max_tokens for reasoning models; older local servers
            # know only max_tokens.
            field = "max_completion_tokens" if self._official else "max_tokens"
            request[field] = self._max_output_tokens
        return request

    # -- errors -------------------------------------------------------------
    def _describe(self, exc: BaseException) -> Failure:
        return describe_sdk_error(
            exc,
            openai,
            service=self._service,
            host=self._host,
            key_env="OPENAI_API_KEY",
            model_id=self._id,
            timeout_s=self._timeout_s,
        )


def _tool(tool: ToolSchema) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def _convert_all(messages: list[Message]) -> list[dict[str, Any]]:
    """The wire messages. A tool message carries text only, so the images of a run of tool
    results follow it in one user message (as Pi does)."""
    out: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, ToolResultMessage) and images:
            out.append(_attached(images))
            images = []
        out.append(_convert(message))
        if isinstance(message, ToolResultMessage):
            images += [
                {"type": "image_url", "image_url": {"url": f"data:{p.mime_type};base64,{p.data}"}}
                for p in message.content
                if isinstance(p, ImageContent)
            ]
    if images:
        out.append(_attached(images))
    return out


def _attached(images: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "text", "text": "Attached image(s) from tool result:"}, *images],
    }


def _convert(message: Message) -> dict[str, Any]:
    if isinstance(message, UserMessage):
        return {"role": "user", "content": content_text(message.content)}
    if isinstance(message, ToolResultMessage):
        has_image = any(isinstance(p, ImageContent) for p in message.content)
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "content": content_text(message.content)
            or ("(see attached image)" if has_image else "(no output)"),
        }
    assert isinstance(message, AssistantMessage)
    out: dict[str, Any] = {"role": "assistant", "content": message.text or None}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in message.tool_calls
        ]
    elif out["content"] is None:
        out["content"] = ""
    return out


class _ChunkTranslator:
    """``chat.completion.chunk`` objects -> protocol events, for one attempt.

    Tool-call deltas are keyed by their ``index``: arguments arrive in pieces, and the
    pieces of parallel calls may interleave.
    """

    def __init__(self, builder: AssistantStream) -> None:
        self._b = builder
        self._calls: dict[int, int] = {}  # the wire's tool-call index -> content index
        self._ids: dict[str, int] = {}
        self._finish_reason: str | None = None

    def feed(self, chunk: Any) -> list[AssistantMessageEvent]:
        events: list[AssistantMessageEvent] = []
        if (usage := getattr(chunk, "usage", None)) is not None:
            self._b.set_usage(_usage(usage))
        choices: list[Any] = getattr(chunk, "choices", None) or []
        for choice in choices:
            if getattr(choice, "index", 0) not in (0, None):
                continue  # we ask for one choice; ignore any others
            delta = getattr(choice, "delta", None)
            text = getattr(delta, "content", None)
            if text:
                if not self._b.text_open:
                    events.append(self._b.text_start())
                events.append(self._b.text_delta(text))
            calls: list[Any] = getattr(delta, "tool_calls", None) or []
            for call in calls:
                events.extend(self._tool_delta(call))
            if reason := getattr(choice, "finish_reason", None):
                self._finish_reason = reason
        return events

    def _tool_delta(self, call: Any) -> list[AssistantMessageEvent]:
        events: list[AssistantMessageEvent] = []
        call_id: str | None = getattr(call, "id", None) or None
        function = getattr(call, "function", None)
        name: str | None = getattr(function, "name", None) or None
        arguments: str | None = getattr(function, "arguments", None)
        key = getattr(call, "index", None)
        if key is None:  # some servers omit the index: a new id means a new call
            new = call_id is not None and call_id not in self._ids
            key = len(self._calls) if new or not self._calls else max(self._calls)
        if key not in self._calls:
            if self._b.text_open:
                events.append(self._b.text_end())
            index, start = self._b.tool_call_start(id=call_id or "", name=name or "")
            self._calls[key] = index
            events.append(start)
        else:
            self._b.tool_call_set(self._calls[key], id=call_id, name=name)
        if call_id:
            self._ids[call_id] = key
        if arguments:
            events.append(self._b.tool_call_delta(self._calls[key], arguments))
        return events

    def finish(self) -> list[AssistantMessageEvent]:
        for index in self._calls.values():
            call = self._b.message.content[index]
            if isinstance(call, ToolCall) and not call.id:  # llama.cpp may send no id
                self._b.tool_call_set(index, id=f"call_{uuid.uuid4().hex[:24]}")
        events = self._b.close_open_parts()
        reason = self._finish_reason
        has_calls = bool(self._b.message.tool_calls)
        if reason is None:
            events.append(
                self._b.error("The server ended the stream before the answer was complete.")
            )
        elif reason == "content_filter":
            events.append(self._b.error("The provider's content filter stopped the answer."))
        elif reason == "length":
            events.append(self._b.done("length"))
        else:
            # Some servers (Ollama) say "stop" even when the answer is a tool call.
            events.append(self._b.done("toolUse" if has_calls else "stop"))
        return events


def _usage(usage: Any) -> Usage:
    prompt = getattr(usage, "prompt_tokens", 0) or 0
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", 0) or 0
    return Usage(
        input_tokens=max(0, prompt - cached),
        output_tokens=getattr(usage, "completion_tokens", 0) or 0,
        cache_read_tokens=cached,
    )
