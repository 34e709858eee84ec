"""The payload hook of the real providers: ``before_request`` sees the very JSON body the server
receives, and a block means no request reaches the server (loopback wire tests)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pi_notebook.ai.messages import UserMessage
from pi_notebook.ai.model import Context, ToolSchema
from pi_notebook.ai.payload import BLOCKED_PREFIX
from pi_notebook.ai.providers.anthropic_messages import AnthropicModel
from pi_notebook.ai.providers.openai_chat import OpenAIChatModel

SECRET = "sk-test-SECRET123"
TOOL = ToolSchema(
    name="query_database",
    description="Run SQL.",
    parameters={"type": "object", "properties": {"sql": {"type": "string"}}},
)
CONTEXT = Context(
    system_prompt="You know the schema: customers(id, name).",
    messages=[UserMessage(content="How many customers?")],
    tools=[TOOL],
)


def openai_reply() -> dict[str, Any]:
    def sse(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-test",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    return {
        "events": [
            sse({"role": "assistant", "content": "42"}),
            sse({}, "stop"),
            b"data: [DONE]\n\n",
        ]
    }


def anthropic_reply() -> dict[str, Any]:
    def sse(type_: str, **data: Any) -> bytes:
        return f"event: {type_}\ndata: {json.dumps({'type': type_, **data})}\n\n".encode()

    message = {
        "id": "m1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    return {
        "events": [
            sse("message_start", message=message),
            sse("content_block_start", index=0, content_block={"type": "text", "text": ""}),
            sse("content_block_delta", index=0, delta={"type": "text_delta", "text": "42"}),
            sse("content_block_stop", index=0),
            sse("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 2}),
            sse("message_stop"),
        ]
    }


def make_model(kind: str, url: str) -> Any:
    if kind == "openai":
        return OpenAIChatModel("gpt-test", api_key=SECRET, base_url=url + "/v1", max_retries=0)
    return AnthropicModel("claude-test", api_key=SECRET, base_url=url, max_retries=0)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_before_request_sees_the_exact_body_the_server_receives(loopback, kind):
    server = await loopback(openai_reply() if kind == "openai" else anthropic_reply())
    seen: list[Any] = []

    async def hook(payload: Any) -> None:
        seen.append(json.loads(json.dumps(payload)))

    events = [e async for e in make_model(kind, server.url).stream(CONTEXT, before_request=hook)]
    assert events[-1].type == "done" and events[-1].message.text == "42"
    [payload] = seen
    [request] = server.requests
    assert payload == request.body
    assert "customers(id, name)" in json.dumps(payload)  # the system prompt is in the body


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("answer", ["the payload holds a protected value", RuntimeError("down")])
async def test_before_request_block_sends_nothing(loopback, kind, answer):
    server = await loopback(openai_reply() if kind == "openai" else anthropic_reply())

    async def hook(payload: Any) -> str | None:
        if isinstance(answer, Exception):
            raise answer
        return answer

    events = [e async for e in make_model(kind, server.url).stream(CONTEXT, before_request=hook)]
    assert [e.type for e in events] == ["start", "error"]
    assert events[-1].error.error_message.startswith(BLOCKED_PREFIX)
    assert server.requests == []  # not a byte left the process
