"""OpenAIChatModel against a loopback server speaking the chat-completions SSE format."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest

from pi_notebook.ai.abort import AbortController
from pi_notebook.ai.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from pi_notebook.ai.model import Context, ToolSchema, complete
from pi_notebook.ai.providers.openai_chat import OpenAIChatModel

SECRET = "sk-test-SECRET123"
QUERY_TOOL = ToolSchema(
    name="query_database",
    description="Run SQL.",
    parameters={"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]},
)


# -- the wire format, as api.openai.com sends it -------------------------------------
def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> bytes:
    body = {
        "id": "chatcmpl-AbC123",
        "object": "chat.completion.chunk",
        "created": 1727000000,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_0ba0d124f1",
        "choices": []
        if delta is None
        else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        "usage": None,
        **extra,
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


ROLE = chunk({"role": "assistant", "content": "", "refusal": None})
DONE = b"data: [DONE]\n\n"
USAGE = chunk(
    None,
    usage={
        "prompt_tokens": 20,
        "completion_tokens": 2,
        "total_tokens": 22,
        "prompt_tokens_details": {"cached_tokens": 4, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    },
)


def call_start(index: int, id: str, name: str) -> dict[str, Any]:
    return {
        "index": index,
        "id": id,
        "type": "function",
        "function": {"name": name, "arguments": ""},
    }


def call_args(index: int, args: str) -> dict[str, Any]:
    return {"index": index, "function": {"arguments": args}}


def error_body(message: str, type_: str, code: str | None = None) -> bytes:
    return json.dumps(
        {"error": {"message": message, "type": type_, "param": None, "code": code}}
    ).encode()


TEXT_REPLY = {
    "events": [
        ROLE,
        chunk({"content": "Hello"}),
        chunk({"content": " world"}),
        chunk({}, "stop"),
        USAGE,
        DONE,
    ]
}


# -- helpers ---------------------------------------------------------------------------
def model_for(url: str, **kw: Any) -> OpenAIChatModel:
    kw.setdefault("api_key", SECRET)
    return OpenAIChatModel(
        "gpt-test", base_url=url + "/v1", retry_base_delay_s=0.01, retry_max_delay_s=0.2, **kw
    )


async def collect(
    model: OpenAIChatModel, context: Context | None = None, signal: Any = None
) -> list[Any]:
    context = context or Context(messages=[UserMessage(content="hi")])
    events = [e async for e in model.stream(context, signal=signal)]
    assert SECRET not in repr(events) and "SECRET123" not in repr(events)
    assert [e.type for e in events].count("start") == 1 and events[0].type == "start"
    assert (
        events[-1].type in ("done", "error")
        and sum(e.type in ("done", "error") for e in events) == 1
    )
    return events


def final(events: list[Any]) -> AssistantMessage:
    last = events[-1]
    return last.message if last.type == "done" else last.error


# -- streaming -------------------------------------------------------------------------
async def test_plain_text(loopback):
    server = await loopback(TEXT_REPLY)
    events = await collect(model_for(server.url))
    assert [e.type for e in events] == [
        "start",
        "text_start",
        "text_delta",
        "text_delta",
        "text_end",
        "done",
    ]
    message = final(events)
    assert message.text == "Hello world" and message.stop_reason == "stop"
    assert (
        message.usage.input_tokens,
        message.usage.output_tokens,
        message.usage.cache_read_tokens,
    ) == (16, 2, 4)
    assert message.provider == "openai" and message.model == "gpt-test"
    request = server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert request.body["stream"] is True and request.body["stream_options"] == {
        "include_usage": True
    }


async def test_one_tool_call_after_text(loopback):
    server = await loopback(
        {
            "events": [
                ROLE,
                chunk({"content": "Let me look."}),
                chunk({"tool_calls": [call_start(0, "call_q1", "query_database")]}),
                chunk({"tool_calls": [call_args(0, '{"sql"')]}),
                chunk({"tool_calls": [call_args(0, ': "SELECT 1"}')]}),
                chunk({}, "tool_calls"),
                USAGE,
                DONE,
            ]
        }
    )
    events = await collect(model_for(server.url))
    types = [e.type for e in events]
    assert types.index("text_end") < types.index("toolcall_start")
    assert [e.delta for e in events if e.type == "toolcall_delta"] == ['{"sql"', ': "SELECT 1"}']
    message = final(events)
    assert message.stop_reason == "toolUse" and message.text == "Let me look."
    assert message.tool_calls == [
        ToolCall(id="call_q1", name="query_database", arguments={"sql": "SELECT 1"})
    ]


async def test_parallel_tool_calls_interleaved(loopback):
    server = await loopback(
        {
            "events": [
                ROLE,
                chunk({"tool_calls": [call_start(0, "call_a", "get_weather")]}),
                chunk({"tool_calls": [call_start(1, "call_b", "get_time")]}),
                chunk({"tool_calls": [call_args(0, '{"city": ')]}),
                chunk({"tool_calls": [call_args(1, '{"tz": ')]}),
                chunk({"tool_calls": [call_args(0, '"Paris"}'), call_args(1, '"UTC"}')]}),
                chunk({}, "tool_calls"),
                USAGE,
                DONE,
            ]
        }
    )
    message = final(await collect(model_for(server.url)))
    assert message.stop_reason == "toolUse"
    assert message.tool_calls == [
        ToolCall(id="call_a", name="get_weather", arguments={"city": "Paris"}),
        ToolCall(id="call_b", name="get_time", arguments={"tz": "UTC"}),
    ]


async def test_malformed_tool_arguments_become_parse_error(loopback):
    server = await loopback(
        {
            "events": [
                ROLE,
                chunk({"tool_calls": [call_start(0, "call_bad", "query_database")]}),
                chunk({"tool_calls": [call_args(0, '{"sql": "SELECT')]}),
                chunk({}, "tool_calls"),
                DONE,
            ]
        }
    )
    events = await collect(model_for(server.url))
    message = final(events)
    assert events[-1].type == "done" and message.stop_reason == "toolUse"
    (call,) = message.tool_calls
    assert call.id == "call_bad" and call.arguments == {} and call.parse_error


async def test_length_and_content_filter(loopback):
    server = await loopback(
        {"events": [ROLE, chunk({"content": "Trunc"}), chunk({}, "length"), DONE]},
        {"events": [ROLE, chunk({}, "content_filter"), DONE]},
    )
    assert final(await collect(model_for(server.url))).stop_reason == "length"
    filtered = final(await collect(model_for(server.url)))
    assert filtered.stop_reason == "error" and "content filter" in (filtered.error_message or "")


# -- what the server receives ------------------------------------------------------------
async def test_request_converts_messages_and_tools(loopback):
    server = await loopback(TEXT_REPLY)
    context = Context(
        system_prompt="You are terse.",
        tools=[QUERY_TOOL],
        messages=[
            UserMessage(content="How many users?"),
            AssistantMessage(stop_reason="aborted", content=[TextContent(text="half")]),
            AssistantMessage(
                stop_reason="toolUse",
                content=[
                    TextContent(text="Checking."),
                    ToolCall(
                        id="call_1",
                        name="query_database",
                        arguments={"sql": "SELECT count(*) FROM users"},
                    ),
                ],
            ),
            ToolResultMessage(
                tool_call_id="call_1", tool_name="query_database", content=[TextContent(text="42")]
            ),
            UserMessage(content=[TextContent(text="Thanks")]),
        ],
    )
    await collect(model_for(server.url, max_output_tokens=77), context)
    body = server.requests[0].body
    assert body["model"] == "gpt-test" and body["max_tokens"] == 77
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "How many users?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "query_database",
                        "arguments": '{"sql": "SELECT count(*) FROM users"}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "42"},
        {"role": "user", "content": "Thanks"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "query_database",
                "description": "Run SQL.",
                "parameters": QUERY_TOOL.parameters,
            },
        }
    ]


async def test_tool_result_images_follow_the_tool_messages_in_a_user_message(loopback):
    server = await loopback(TEXT_REPLY)
    calls = [ToolCall(id=f"call_{i}", name="shot", arguments={}) for i in (1, 2)]
    context = Context(
        messages=[
            UserMessage(content="Look"),
            AssistantMessage(stop_reason="toolUse", content=list(calls)),
            ToolResultMessage(
                tool_call_id="call_1",
                tool_name="shot",
                content=[
                    TextContent(text="a chart"),
                    ImageContent(data="AAA=", mime_type="image/png"),
                ],
            ),
            ToolResultMessage(
                tool_call_id="call_2",
                tool_name="shot",
                content=[ImageContent(data="BBB=", mime_type="image/jpeg")],
            ),
            UserMessage(content="Thanks"),
        ],
    )
    await collect(model_for(server.url), context)
    messages = server.requests[0].body["messages"]
    assert messages[2:] == [
        {"role": "tool", "tool_call_id": "call_1", "content": "a chart"},
        {"role": "tool", "tool_call_id": "call_2", "content": "(see attached image)"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Attached image(s) from tool result:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA="}},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,BBB="}},
            ],
        },
        {"role": "user", "content": "Thanks"},
    ]


async def test_a_text_only_model_gets_a_note_in_place_of_each_tool_image(loopback):
    """``images=False`` (Pi's text-only input): no image is sent, each becomes a note the model
    can read, the text stays; the session's history keeps the images."""
    server = await loopback(TEXT_REPLY)
    result = ToolResultMessage(
        tool_call_id="call_1",
        tool_name="shot",
        content=[TextContent(text="a chart"), ImageContent(data="AAA=", mime_type="image/png")],
    )
    context = Context(
        messages=[
            UserMessage(content="Look"),
            AssistantMessage(
                stop_reason="toolUse", content=[ToolCall(id="call_1", name="shot", arguments={})]
            ),
            result,
        ],
    )
    model = model_for(server.url, images=False)
    assert not model.accepts_images and model_for(server.url).accepts_images
    await collect(model, context)
    body = server.requests[0].body
    assert body["messages"][2:] == [
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "a chart\n(tool image omitted: model does not support images)",
        },
    ]
    assert "image_url" not in json.dumps(body)
    assert isinstance(result.content[1], ImageContent)  # the history is not changed


# -- retries ---------------------------------------------------------------------------------
async def test_429_with_retry_after_then_500_then_success(loopback):
    server = await loopback(
        {
            "status": 429,
            "headers": {"Retry-After": "1"},
            "body": error_body("Rate limit reached", "requests", "rate_limit_exceeded"),
        },
        {"status": 500, "body": error_body("The server had an error", "server_error")},
        TEXT_REPLY,
    )
    events = await collect(model_for(server.url))
    retries = [e for e in events if e.type == "retry"]
    assert [r.attempt for r in retries] == [1, 2] and retries[0].max_attempts == 4
    assert retries[0].delay_s == pytest.approx(0.2)  # Retry-After: 1, capped by retry_max_delay_s
    assert "429" in retries[0].error and "500" in retries[1].error
    assert events.index(retries[0]) > 0  # after start
    assert final(events).text == "Hello world" and len(server.requests) == 3


async def test_500_mid_stream_is_not_retried(loopback):
    server = await loopback(
        {
            "events": [
                ROLE,
                chunk({"content": "Partial"}),
                b"data: " + error_body("The server had an error", "server_error") + b"\n\n",
            ]
        },
        {"events": [ROLE, chunk({"content": "Cut"})], "drop": True},
        TEXT_REPLY,
    )
    first = final(await collect(model_for(server.url)))
    assert (
        first.stop_reason == "error"
        and first.text == "Partial"
        and "500" in (first.error_message or "")
    )
    dropped = final(await collect(model_for(server.url)))
    assert dropped.stop_reason == "error" and dropped.text == "Cut"
    assert len(server.requests) == 2


# -- abort -------------------------------------------------------------------------------------
async def test_abort_mid_stream_closes_connection(loopback):
    server = await loopback({"events": [ROLE, chunk({"content": "Hel"})], "hold_open": True})
    controller = AbortController()
    events: list[Any] = []
    started = 0.0
    async for event in model_for(server.url).stream(
        Context(messages=[UserMessage(content="hi")]), signal=controller.signal
    ):
        events.append(event)
        if event.type == "text_delta":
            started = time.monotonic()
            controller.abort()
    assert time.monotonic() - started < 5.0
    assert events[-1].type == "error" and events[-1].reason == "aborted"
    assert final(events).stop_reason == "aborted" and final(events).text == "Hel"
    for _ in range(100):
        if server.client_closed_at is not None:
            break
        await asyncio.sleep(0.01)
    assert server.client_closed_at is not None and server.client_closed_at - started < 5.0


async def test_already_aborted_signal_sends_nothing(loopback):
    server = await loopback(TEXT_REPLY)
    controller = AbortController()
    controller.abort()
    events = await collect(model_for(server.url), signal=controller.signal)
    assert final(events).stop_reason == "aborted" and server.requests == []


# -- clear errors, never the key ---------------------------------------------------------------------
async def test_missing_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    message = final(await collect(OpenAIChatModel("gpt-4o-mini")))
    assert message.stop_reason == "error" and "OPENAI_API_KEY is not set" in (
        message.error_message or ""
    )


async def test_local_server_needs_no_key(loopback, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = await loopback(TEXT_REPLY)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    assert final(await collect(OpenAIChatModel("llama3.1"))).text == "Hello world"


async def test_c33_provider_error_is_a_message(loopback):
    """C33: a provider failure (here a 401) ends as an assistant message, never a raise."""
    body = error_body(
        f"Incorrect API key provided: {SECRET}.", "invalid_request_error", "invalid_api_key"
    )
    server = await loopback({"status": 401, "body": body})
    message = await complete(model_for(server.url), Context(messages=[UserMessage(content="hi")]))
    assert message.stop_reason == "error" and message.role == "assistant"
    assert "401" in (message.error_message or "") and "OPENAI_API_KEY" in (
        message.error_message or ""
    )
    assert "SECRET123" not in repr(message) and len(server.requests) == 1


async def test_unknown_model_and_echoed_key_are_scrubbed(loopback):
    server = await loopback(
        {
            "status": 404,
            "body": error_body(
                "The model `gpt-test` does not exist", "invalid_request_error", "model_not_found"
            ),
        },
        {"status": 400, "body": error_body(f"Bad header value {SECRET}", "invalid_request_error")},
    )
    missing = final(await collect(model_for(server.url)))
    assert "gpt-test" in (missing.error_message or "") and "404" in (missing.error_message or "")
    echoed = final(await collect(model_for(server.url)))
    assert echoed.stop_reason == "error" and "400" in (echoed.error_message or "")


async def test_unreachable_server_names_host_not_key(closed_port):
    events = await collect(model_for(f"http://127.0.0.1:{closed_port}", max_retries=1))
    message = final(events)
    assert [e.type for e in events].count("retry") == 1
    assert f"127.0.0.1:{closed_port}" in (message.error_message or "")
    assert "refused" in (message.error_message or "")


async def test_abort_from_another_thread(loopback):
    server = await loopback({"events": [ROLE, chunk({"content": "Hel"})], "hold_open": True})
    controller = AbortController()
    timer = threading.Timer(0.2, controller.abort)  # a widget callback runs off the loop
    timer.start()
    try:
        events = await asyncio.wait_for(collect(model_for(server.url), signal=controller.signal), 2)
    finally:
        timer.cancel()
    assert final(events).stop_reason == "aborted" and final(events).text == "Hel"


async def test_consumer_leaving_early_closes_connection(loopback):
    server = await loopback({"events": [ROLE, chunk({"content": "Hel"})], "hold_open": True})
    stream = model_for(server.url).stream(Context(messages=[UserMessage(content="hi")]))
    async for event in stream:
        if event.type == "text_delta":
            break
    await stream.aclose()  # type: ignore[attr-defined]
    for _ in range(100):
        if server.client_closed_at is not None:
            break
        await asyncio.sleep(0.01)
    assert server.client_closed_at is not None
