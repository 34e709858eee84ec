"""AnthropicModel against a loopback server speaking the Messages API's SSE format."""

from __future__ import annotations

import asyncio
import json
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
from pi_notebook.ai.providers.anthropic_messages import AnthropicModel

SECRET = "sk-test-SECRET123"
QUERY_TOOL = ToolSchema(
    name="query_database",
    description="Run SQL.",
    parameters={"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]},
)


# -- the wire format, as api.anthropic.com sends it ------------------------------------
def sse(type_: str, **data: Any) -> bytes:
    return f"event: {type_}\ndata: {json.dumps({'type': type_, **data})}\n\n".encode()


MESSAGE_START = sse(
    "message_start",
    message={
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 25,
            "cache_creation_input_tokens": 10,
            "cache_read_input_tokens": 5,
            "output_tokens": 1,
        },
    },
)
PING = sse("ping")
MESSAGE_STOP = sse("message_stop")


def text_block(index: int) -> bytes:
    return sse("content_block_start", index=index, content_block={"type": "text", "text": ""})


def text_delta(index: int, text: str) -> bytes:
    return sse("content_block_delta", index=index, delta={"type": "text_delta", "text": text})


def tool_block(index: int, id: str, name: str) -> bytes:
    block = {"type": "tool_use", "id": id, "name": name, "input": {}}
    return sse("content_block_start", index=index, content_block=block)


def json_delta(index: int, partial: str) -> bytes:
    return sse(
        "content_block_delta",
        index=index,
        delta={"type": "input_json_delta", "partial_json": partial},
    )


def block_stop(index: int) -> bytes:
    return sse("content_block_stop", index=index)


def message_delta(stop_reason: str, output_tokens: int = 15) -> bytes:
    return sse(
        "message_delta",
        delta={"stop_reason": stop_reason, "stop_sequence": None},
        usage={"output_tokens": output_tokens},
    )


def error_body(type_: str, message: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": type_, "message": message}}).encode()


TEXT_REPLY = {
    "events": [
        MESSAGE_START,
        text_block(0),
        PING,
        text_delta(0, "Hello"),
        text_delta(0, " world"),
        block_stop(0),
        message_delta("end_turn"),
        MESSAGE_STOP,
    ]
}


# -- helpers ---------------------------------------------------------------------------
def model_for(url: str, **kw: Any) -> AnthropicModel:
    kw.setdefault("api_key", SECRET)
    return AnthropicModel(
        "claude-test", base_url=url, retry_base_delay_s=0.01, retry_max_delay_s=0.15, **kw
    )


async def collect(
    model: AnthropicModel, context: Context | None = None, signal: Any = None
) -> list[Any]:
    context = context or Context(messages=[UserMessage(content="hi")])
    events = [e async for e in model.stream(context, signal=signal)]
    assert SECRET not in repr(events) and "SECRET123" not in repr(events)
    assert events[0].type == "start" and [e.type for e in events].count("start") == 1
    assert (
        events[-1].type in ("done", "error")
        and sum(e.type in ("done", "error") for e in events) == 1
    )
    return events


def final(events: list[Any]) -> AssistantMessage:
    last = events[-1]
    return last.message if last.type == "done" else last.error


# -- streaming -------------------------------------------------------------------------
async def test_plain_text_with_cache_usage(loopback):
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
    assert (
        message.text == "Hello world"
        and message.stop_reason == "stop"
        and message.provider == "anthropic"
    )
    usage = message.usage
    assert (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    ) == (25, 15, 5, 10)
    request = server.requests[0]
    assert request.path == "/v1/messages"
    # The SDK sends the key as x-api-key or (newer releases) as a bearer token.
    assert SECRET in request.headers.get("x-api-key", "") + request.headers.get("authorization", "")
    assert request.body["stream"] is True and request.body["max_tokens"] == 4096


async def test_one_tool_call_after_text(loopback):
    server = await loopback(
        {
            "events": [
                MESSAGE_START,
                text_block(0),
                text_delta(0, "Let me look."),
                block_stop(0),
                tool_block(1, "toolu_01A", "query_database"),
                json_delta(1, ""),
                json_delta(1, '{"sql": "SEL'),
                json_delta(1, 'ECT 1"}'),
                block_stop(1),
                message_delta("tool_use"),
                MESSAGE_STOP,
            ]
        }
    )
    message = final(await collect(model_for(server.url)))
    assert message.stop_reason == "toolUse" and message.text == "Let me look."
    assert message.tool_calls == [
        ToolCall(id="toolu_01A", name="query_database", arguments={"sql": "SELECT 1"})
    ]


async def test_parallel_tool_calls_interleaved(loopback):
    server = await loopback(
        {
            "events": [
                MESSAGE_START,
                tool_block(0, "toolu_A", "get_weather"),
                tool_block(1, "toolu_B", "get_time"),
                json_delta(0, '{"city": '),
                json_delta(1, '{"tz": '),
                json_delta(0, '"Paris"}'),
                block_stop(0),
                json_delta(1, '"UTC"}'),
                block_stop(1),
                message_delta("tool_use"),
                MESSAGE_STOP,
            ]
        }
    )
    message = final(await collect(model_for(server.url)))
    assert message.tool_calls == [
        ToolCall(id="toolu_A", name="get_weather", arguments={"city": "Paris"}),
        ToolCall(id="toolu_B", name="get_time", arguments={"tz": "UTC"}),
    ]


async def test_malformed_tool_arguments_become_parse_error(loopback):
    server = await loopback(
        {
            "events": [
                MESSAGE_START,
                tool_block(0, "toolu_bad", "query_database"),
                json_delta(0, '{"sql": '),
                block_stop(0),
                message_delta("tool_use"),
                MESSAGE_STOP,
            ]
        }
    )
    events = await collect(model_for(server.url))
    (call,) = final(events).tool_calls
    assert events[-1].type == "done" and call.arguments == {} and call.parse_error


async def test_max_tokens_is_length(loopback):
    server = await loopback(
        {
            "events": [
                MESSAGE_START,
                text_block(0),
                text_delta(0, "Cut"),
                block_stop(0),
                message_delta("max_tokens"),
                MESSAGE_STOP,
            ]
        }
    )
    assert final(await collect(model_for(server.url))).stop_reason == "length"


# -- what the server receives ------------------------------------------------------------
async def test_request_converts_messages_and_merges_tool_results(loopback):
    server = await loopback(TEXT_REPLY)
    context = Context(
        system_prompt="You are terse.",
        tools=[QUERY_TOOL],
        messages=[
            UserMessage(content="Users and orders?"),
            AssistantMessage(
                stop_reason="toolUse",
                content=[
                    TextContent(text="Checking."),
                    ToolCall(id="toolu_1", name="query_database", arguments={"sql": "SELECT 1"}),
                    ToolCall(id="toolu_2", name="query_database", arguments={"sql": "SELECT 2"}),
                ],
            ),
            ToolResultMessage(
                tool_call_id="toolu_1", tool_name="query_database", content=[TextContent(text="1")]
            ),
            ToolResultMessage(
                tool_call_id="toolu_2",
                tool_name="query_database",
                content=[TextContent(text="boom")],
                is_error=True,
            ),
            UserMessage(content="Thanks"),
        ],
    )
    await collect(model_for(server.url, max_output_tokens=99), context)
    body = server.requests[0].body
    assert body["model"] == "claude-test" and body["max_tokens"] == 99
    assert body["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["tools"] == [
        {"name": "query_database", "description": "Run SQL.", "input_schema": QUERY_TOOL.parameters}
    ]
    assert body["messages"] == [
        {"role": "user", "content": "Users and orders?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "query_database",
                    "input": {"sql": "SELECT 1"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "query_database",
                    "input": {"sql": "SELECT 2"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "1",
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "boom",
                    "is_error": True,
                },
            ],
        },
        {"role": "user", "content": "Thanks"},
    ]


async def test_tool_result_images_go_inside_the_tool_result_block(loopback):
    server = await loopback(TEXT_REPLY)
    calls = [ToolCall(id=f"toolu_{i}", name="shot", arguments={}) for i in (1, 2)]
    context = Context(
        messages=[
            UserMessage(content="Look"),
            AssistantMessage(stop_reason="toolUse", content=list(calls)),
            ToolResultMessage(
                tool_call_id="toolu_1",
                tool_name="shot",
                content=[
                    TextContent(text="a chart"),
                    ImageContent(data="AAA=", mime_type="image/png"),
                ],
            ),
            ToolResultMessage(
                tool_call_id="toolu_2",
                tool_name="shot",
                content=[ImageContent(data="BBB=", mime_type="image/jpeg")],
            ),
        ],
    )
    await collect(model_for(server.url), context)
    assert server.requests[0].body["messages"][2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "is_error": False,
                "content": [
                    {"type": "text", "text": "a chart"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "AAA="},
                    },
                ],
            },
            {
                "type": "tool_result",
                "tool_use_id": "toolu_2",
                "is_error": False,
                "content": [
                    {"type": "text", "text": "(see attached image)"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/jpeg", "data": "BBB="},
                    },
                ],
            },
        ],
    }


async def test_a_text_only_model_gets_a_note_in_place_of_each_tool_image(loopback):
    server = await loopback(TEXT_REPLY)
    context = Context(
        messages=[
            UserMessage(content="Look"),
            AssistantMessage(
                stop_reason="toolUse", content=[ToolCall(id="toolu_1", name="shot", arguments={})]
            ),
            ToolResultMessage(
                tool_call_id="toolu_1",
                tool_name="shot",
                content=[ImageContent(data="AAA=", mime_type="image/png")],
            ),
        ],
    )
    await collect(model_for(server.url, images=False), context)
    assert server.requests[0].body["messages"][2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "is_error": False,
                "content": "(tool image omitted: model does not support images)",
            },
        ],
    }


# -- retries ---------------------------------------------------------------------------------
async def test_429_then_overloaded_then_success(loopback):
    server = await loopback(
        {
            "status": 429,
            "headers": {"retry-after": "1"},
            "body": error_body("rate_limit_error", "Rate limited"),
        },
        {
            "events": [
                MESSAGE_START,
                sse("error", error={"type": "overloaded_error", "message": "Overloaded"}),
            ]
        },
        TEXT_REPLY,
    )
    events = await collect(model_for(server.url))
    retries = [e for e in events if e.type == "retry"]
    assert [r.attempt for r in retries] == [1, 2]
    assert retries[0].delay_s == pytest.approx(0.15)  # retry-after: 1, capped
    assert "429" in retries[0].error and "529" in retries[1].error
    assert final(events).text == "Hello world" and len(server.requests) == 3


async def test_500_mid_stream_is_not_retried(loopback):
    server = await loopback(
        {
            "events": [
                MESSAGE_START,
                text_block(0),
                text_delta(0, "Partial"),
                sse("error", error={"type": "api_error", "message": "Internal server error"}),
            ]
        },
        {"events": [MESSAGE_START, text_block(0), text_delta(0, "Cut")], "drop": True},
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
    server = await loopback(
        {"events": [MESSAGE_START, text_block(0), text_delta(0, "Hel")], "hold_open": True}
    )
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
    assert (
        events[-1].reason == "aborted"
        and final(events).stop_reason == "aborted"
        and final(events).text == "Hel"
    )
    for _ in range(100):
        if server.client_closed_at is not None:
            break
        await asyncio.sleep(0.01)
    assert server.client_closed_at is not None and server.client_closed_at - started < 5.0


# -- clear errors, never the key ---------------------------------------------------------------------
async def test_missing_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    message = final(await collect(AnthropicModel("claude-test")))
    assert message.stop_reason == "error" and "ANTHROPIC_API_KEY is not set" in (
        message.error_message or ""
    )


async def test_c33_provider_error_is_a_message_anthropic(loopback):
    """C33: a 401 ends as an assistant message with stop_reason error; nothing raises."""
    server = await loopback(
        {"status": 401, "body": error_body("authentication_error", f"invalid x-api-key {SECRET}")}
    )
    message = await complete(model_for(server.url), Context(messages=[UserMessage(content="hi")]))
    assert message.stop_reason == "error" and "ANTHROPIC_API_KEY" in (message.error_message or "")
    assert "401" in (message.error_message or "") and "SECRET123" not in repr(message)


async def test_unknown_model(loopback):
    server = await loopback(
        {"status": 404, "body": error_body("not_found_error", "model: claude-test")}
    )
    message = final(await collect(model_for(server.url)))
    assert "404" in (message.error_message or "") and "claude-test" in (message.error_message or "")
    assert len(server.requests) == 1


async def test_unreachable_server_names_host(closed_port):
    events = await collect(model_for(f"http://127.0.0.1:{closed_port}", max_retries=0))
    message = final(events)
    assert f"127.0.0.1:{closed_port}" in (message.error_message or "") and "refused" in (
        message.error_message or ""
    )


async def test_abort_before_the_server_answers(loopback):
    server = await loopback({"silent": True})
    controller = AbortController()
    task = asyncio.ensure_future(collect(model_for(server.url), signal=controller.signal))
    for _ in range(200):
        if server.requests:
            break
        await asyncio.sleep(0.01)
    started = time.monotonic()
    controller.abort()
    events = await asyncio.wait_for(task, 1.0)
    assert time.monotonic() - started < 5.0 and final(events).stop_reason == "aborted"


async def test_abort_during_retry_backoff(loopback):
    server = await loopback({"status": 529, "body": error_body("overloaded_error", "Overloaded")})
    controller = AbortController()
    events: list[Any] = []
    model = AnthropicModel(
        "claude-test", api_key=SECRET, base_url=server.url, retry_base_delay_s=30
    )
    async for event in model.stream(
        Context(messages=[UserMessage(content="hi")]), signal=controller.signal
    ):
        events.append(event)
        if event.type == "retry":
            controller.abort()  # a 30 s backoff must not hold the abort
    assert [e.type for e in events] == ["start", "retry", "error"] and events[
        -1
    ].reason == "aborted"


async def test_read_timeout_is_a_clear_error(loopback):
    server = await loopback({"silent": True})
    message = final(await collect(model_for(server.url, timeout_s=0.2, max_retries=0)))
    assert message.stop_reason == "error" and "timeout" in (message.error_message or "")
