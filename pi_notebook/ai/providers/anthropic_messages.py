"""Anthropic's Messages API, streamed through the official ``anthropic`` SDK.

Raw stream events (``message_start``, ``content_block_*``, ``message_delta``,
``message_stop``) become protocol events. As for OpenAI, the SDK's retries are off and
:mod:`.retry` does bounded, visible retries before any output.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

import anthropic

from ..abort import AbortSignal
from ..events import AssistantMessageEvent
from ..messages import (
    AssistantMessage,
    ImageContent,
    Message,
    StopReason,
    ToolResultMessage,
    Usage,
    UserMessage,
    content_text,
)
from ..model import Context, RequestHook
from ..stream import AssistantStream
from .errors import Failure, describe_sdk_error, host_port, missing_key_failure
from .history import replayable
from .retry import Closable, RetryPolicy, SdkStream, run_request

__all__ = ["AnthropicModel"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
_SERVICE = "the Anthropic API"
KEY_ENV = "ANTHROPIC_API_KEY"
_EPHEMERAL = {"type": "ephemeral"}


class AnthropicModel:
    """A Claude model through the Messages API.

    Args:
        model_id: e.g. ``"claude-sonnet-4-5"``.
        api_key: defaults to ``ANTHROPIC_API_KEY`` (or a bearer ``ANTHROPIC_AUTH_TOKEN``).
        base_url: defaults to ``ANTHROPIC_BASE_URL``, then ``https://api.anthropic.com``.
        max_retries: retries for rate limits, overload, 5xx and connection errors before
            any output.
        max_output_tokens: the request's ``max_tokens`` (the API requires one).
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
        max_output_tokens: int = 4096,
        timeout_s: float = 120.0,
        retry_base_delay_s: float = 1.0,
        retry_max_delay_s: float = 30.0,
        images: bool = True,
    ) -> None:
        self._id = model_id
        self._images = images
        self._base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        self._api_key = api_key or os.environ.get("ANTHROPIC_API_KEY") or None
        self._auth_token = None if self._api_key else os.environ.get("ANTHROPIC_AUTH_TOKEN") or None
        self._max_output_tokens = max_output_tokens
        self._timeout_s = timeout_s
        self._policy = RetryPolicy(
            max_retries=max_retries, base_delay_s=retry_base_delay_s, max_delay_s=retry_max_delay_s
        )
        self._host = host_port(self._base_url)

    @property
    def id(self) -> str:
        """The model name sent to the API."""
        return self._id

    @property
    def provider(self) -> str:
        """The provider family, as recorded on every message."""
        return "anthropic"

    @property
    def accepts_images(self) -> bool:
        """Whether tool results' images are sent (``images=False``: a note stands in)."""
        return self._images

    def __repr__(self) -> str:  # never shows the key
        return f"AnthropicModel({self._id!r}, base_url={self._host!r})"

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
        has_key = self._api_key is not None or self._auth_token is not None
        return run_request(
            builder,
            missing_key=None if has_key else missing_key_failure("Anthropic", KEY_ENV).message,
            build_request=lambda: self.build_request(context),
            connect=self._connect,
            new_translator=lambda: _EventTranslator(builder),
            describe=self._describe,
            policy=self._policy,
            signal=signal,
            secrets=[self._api_key, self._auth_token],
            service=_SERVICE,
            before_request=before_request,
        )

    def _connect(
        self, request: dict[str, Any]
    ) -> tuple[Closable, Callable[[], Awaitable[SdkStream]]]:
        # An explicit credential stops the SDK from looking for profiles on disk.
        client = anthropic.AsyncAnthropic(
            api_key=self._api_key,
            auth_token=self._auth_token,
            base_url=self._base_url,
            max_retries=0,
            timeout=self._timeout_s,
        )

        async def open_stream() -> SdkStream:
            return cast(SdkStream, await client.messages.create(stream=True, **request))

        return client, open_stream

    # -- request ------------------------------------------------------------
    def build_request(self, context: Context) -> dict[str, Any]:
        """The JSON body (without ``stream``): system, messages, tools, ``max_tokens``."""
        request: dict[str, Any] = {
            "model": self._id,
            "max_tokens": self._max_output_tokens,
            "messages": _convert(replayable(context.messages, images=self._images)),
        }
        if context.system_prompt:
            # Marking the stable prefix lets the API cache it across turns.
            request["system"] = [
                {"type": "text", "text": context.system_prompt, "cache_control": _EPHEMERAL}
            ]
        if context.tools:
            request["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in context.tools
            ]
        return request

    # -- errors -------------------------------------------------------------
    def _describe(self, exc: BaseException) -> Failure:
        return describe_sdk_error(
            exc,
            anthropic,
            service=_SERVICE,
            host=self._host,
            key_env=KEY_ENV,
            model_id=self._id,
            timeout_s=self._timeout_s,
        )


def _convert(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, UserMessage):
            out.append({"role": "user", "content": content_text(message.content) or "(empty)"})
        elif isinstance(message, ToolResultMessage):
            block = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": _result_content(message),
                "is_error": message.is_error,
            }
            previous = out[-1] if out else None
            # The API wants all results of one assistant turn in a single user message.
            if previous and previous["role"] == "user" and isinstance(previous["content"], list):
                cast(list[dict[str, Any]], previous["content"]).append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif isinstance(message, AssistantMessage):  # pyright: ignore[reportUnnecessaryIsInstance] - unknown roles are dropped
            blocks: list[dict[str, Any]] = []
            for part in message.content:
                if part.type == "text":
                    if part.text:
                        blocks.append({"type": "text", "text": part.text})
                else:
                    raw: Any = part.arguments
                    args = cast(dict[str, Any], raw) if isinstance(raw, dict) else {}
                    blocks.append(
                        {"type": "tool_use", "id": part.id, "name": part.name, "input": args}
                    )
            if blocks:  # the API rejects an empty assistant turn
                out.append({"role": "assistant", "content": blocks})
    return out


def _result_content(message: ToolResultMessage) -> str | list[dict[str, Any]]:
    """A tool_result's content: its text, or text and image blocks when it holds images."""
    text = content_text(message.content)
    images = [p for p in message.content if isinstance(p, ImageContent)]
    if not images:
        return text or "(no output)"
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text or "(see attached image)"}]
    for image in images:
        source = {"type": "base64", "media_type": image.mime_type, "data": image.data}
        blocks.append({"type": "image", "source": source})
    return blocks


_STOP: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "toolUse",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
}


class _EventTranslator:
    """Raw Messages stream events -> protocol events, for one attempt."""

    def __init__(self, builder: AssistantStream) -> None:
        self._b = builder
        self._blocks: dict[int, tuple[str, int]] = {}  # wire block index -> (kind, content index)
        self._initial_input: dict[int, Any] = {}
        self._stop_reason: str | None = None
        self._stopped = False
        self._usage = Usage()

    def feed(self, chunk: Any) -> list[AssistantMessageEvent]:
        event = chunk  # one raw SSE event of the Messages API
        kind = getattr(event, "type", None)
        index: int = getattr(event, "index", -1)
        if kind == "message_start":
            self._add_usage(getattr(getattr(event, "message", None), "usage", None))
        elif kind == "content_block_start":
            return self._block_start(index, event.content_block)
        elif kind == "content_block_delta":
            return self._block_delta(index, event.delta)
        elif kind == "content_block_stop":
            return self._block_stop(index)
        elif kind == "message_delta":
            self._stop_reason = getattr(event.delta, "stop_reason", None) or self._stop_reason
            self._add_usage(getattr(event, "usage", None))
        elif kind == "message_stop":
            self._stopped = True
        return []  # ping, thinking blocks and future event types carry nothing we keep

    def _block_start(self, index: int, block: Any) -> list[AssistantMessageEvent]:
        events: list[AssistantMessageEvent] = []
        if block.type == "text":
            if self._b.text_open:
                events.append(self._b.text_end())
            events.append(self._b.text_start())
            self._blocks[index] = ("text", len(self._b.message.content) - 1)
            if getattr(block, "text", ""):
                events.append(self._b.text_delta(block.text))
        elif block.type == "tool_use":
            if self._b.text_open:
                events.append(self._b.text_end())
            content_index, start = self._b.tool_call_start(id=block.id, name=block.name)
            self._blocks[index] = ("tool", content_index)
            if getattr(block, "input", None):  # some proxies send the whole input here
                self._initial_input[index] = block.input
            events.append(start)
        return events

    def _block_delta(self, index: int, delta: Any) -> list[AssistantMessageEvent]:
        kind, content_index = self._blocks.get(index, ("", -1))
        if kind == "text" and delta.type == "text_delta" and self._b.text_open:
            return [self._b.text_delta(delta.text)]
        if kind == "tool" and delta.type == "input_json_delta" and delta.partial_json:
            self._initial_input.pop(index, None)
            return [self._b.tool_call_delta(content_index, delta.partial_json)]
        return []

    def _block_stop(self, index: int) -> list[AssistantMessageEvent]:
        kind, content_index = self._blocks.pop(index, ("", -1))
        if kind == "text" and self._b.text_open:
            return [self._b.text_end()]
        if kind == "tool":
            events: list[AssistantMessageEvent] = []
            if index in self._initial_input:
                initial = json.dumps(self._initial_input.pop(index))
                events.append(self._b.tool_call_delta(content_index, initial))
            events.append(self._b.tool_call_end(content_index))
            return events
        return []

    def _add_usage(self, usage: Any) -> None:
        if usage is None:
            return
        # message_delta repeats totals so far; a field it leaves out keeps its value.
        for ours, theirs in (
            ("input_tokens", "input_tokens"),
            ("output_tokens", "output_tokens"),
            ("cache_read_tokens", "cache_read_input_tokens"),
            ("cache_write_tokens", "cache_creation_input_tokens"),
        ):
            value = getattr(usage, theirs, None)
            if isinstance(value, int):
                setattr(self._usage, ours, value)
        self._b.set_usage(Usage(**vars(self._usage)))

    def finish(self) -> list[AssistantMessageEvent]:
        events = self._b.close_open_parts()
        reason = self._stop_reason
        if not self._stopped or reason is None:
            events.append(
                self._b.error("The server ended the stream before the answer was complete.")
            )
        elif reason == "refusal":
            events.append(self._b.error("The model declined to answer (stop reason: refusal)."))
        else:
            mapped = _STOP.get(reason, "stop")
            if mapped == "stop" and self._b.message.tool_calls:
                mapped = "toolUse"
            events.append(self._b.done(mapped))
        return events
