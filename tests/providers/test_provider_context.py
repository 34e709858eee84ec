"""What the model sees, on the wire: the bodies sent to OpenAI-compatible and Anthropic
servers carry the schema context and never a protected value, ``before_provider_request``
sees the very body the server receives, and a refused payload never reaches the server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from pi_notebook import create_agent_session
from pi_notebook.ai.payload import BLOCKED_PREFIX
from pi_notebook.database import database_extension

SECRET = "sk-test-SECRET123"
EMAILS = ["ada.lovelace@example.org", "grace.hopper@example.net"]
PHONES = ["+44 20 7946 0001", "+1 212 555 0142"]
SQL = "SELECT name, email, phone FROM customers ORDER BY customer_id"


def make_shop(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'shop.sqlite'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, name TEXT, email TEXT, phone TEXT)"
        )
        for i, (email, phone) in enumerate(zip(EMAILS, PHONES, strict=True), 1):
            conn.exec_driver_sql(
                f"INSERT INTO customers VALUES ({i}, 'Person {i}', '{email}', '{phone}')"
            )
    engine.dispose()
    return url


# -- replies in each wire format ----------------------------------------------------------------
def openai_sse(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def openai_call() -> dict[str, Any]:
    call = {
        "index": 0,
        "id": "call_q",
        "type": "function",
        "function": {"name": "query_database", "arguments": json.dumps({"sql": SQL})},
    }
    return {
        "events": [
            openai_sse({"role": "assistant", "tool_calls": [call]}),
            openai_sse({}, "tool_calls"),
            b"data: [DONE]\n\n",
        ]
    }


def openai_text(words: str) -> dict[str, Any]:
    return {
        "events": [
            openai_sse({"role": "assistant", "content": words}),
            openai_sse({}, "stop"),
            b"data: [DONE]\n\n",
        ]
    }


def anthropic_sse(type_: str, **data: Any) -> bytes:
    return f"event: {type_}\ndata: {json.dumps({'type': type_, **data})}\n\n".encode()


_START = anthropic_sse(
    "message_start",
    message={
        "id": "m",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    },
)


def anthropic_call() -> dict[str, Any]:
    block = {"type": "tool_use", "id": "toolu_q", "name": "query_database", "input": {}}
    return {
        "events": [
            _START,
            anthropic_sse("content_block_start", index=0, content_block=block),
            anthropic_sse(
                "content_block_delta",
                index=0,
                delta={"type": "input_json_delta", "partial_json": json.dumps({"sql": SQL})},
            ),
            anthropic_sse("content_block_stop", index=0),
            anthropic_sse(
                "message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 5}
            ),
            anthropic_sse("message_stop"),
        ]
    }


def anthropic_text(words: str) -> dict[str, Any]:
    return {
        "events": [
            _START,
            anthropic_sse(
                "content_block_start", index=0, content_block={"type": "text", "text": ""}
            ),
            anthropic_sse(
                "content_block_delta", index=0, delta={"type": "text_delta", "text": words}
            ),
            anthropic_sse("content_block_stop", index=0),
            anthropic_sse(
                "message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 3}
            ),
            anthropic_sse("message_stop"),
        ]
    }


WIRE = {
    "openai": (openai_call, openai_text, "openai:gpt-test"),
    "anthropic": (anthropic_call, anthropic_text, "anthropic:claude-test"),
}


def system_text(kind: str, body: dict[str, Any]) -> str:
    if kind == "openai":
        return body["messages"][0]["content"]
    return "".join(block["text"] for block in body["system"])


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_wire_bodies_carry_the_schema_and_never_a_protected_value(
    kind, loopback, monkeypatch, tmp_path
):
    call, answer, model = WIRE[kind]
    server = await loopback(call(), answer("two people"), answer("refused?"), answer("fine"))
    prefix = "OPENAI" if kind == "openai" else "ANTHROPIC"
    monkeypatch.setenv(f"{prefix}_BASE_URL", server.url + ("/v1" if kind == "openai" else ""))
    monkeypatch.setenv(f"{prefix}_API_KEY", SECRET)
    seen: list[Any] = []

    def spy(pi: Any) -> None:
        pi.on("before_provider_request", lambda e, ctx: seen.append(json.loads(e.payload_text)))

    ext = database_extension(
        url=make_shop(tmp_path), data_policy={"customers.email": "mask", "customers.phone": "drop"}
    )
    session = create_agent_session(model=model, extensions=[ext, spy], audit=False)
    try:
        await session.prompt("Who are our customers?")
        assert len(server.requests) == 2
        first, second = (r.body for r in server.requests)
        system = system_text(kind, first)
        assert "customers(customer_id PK, name, email, phone)" in system
        assert "Call describe_database" in system and "customers.email (mask)" in system
        result = json.dumps(second)
        assert "Person 1" in result and "[masked]" in result
        # The hook saw exactly what went over the wire.
        assert seen == [first, second]
        # A prompt that carries a value this session has seen never leaves the kernel.
        await session.prompt(f"Is {EMAILS[0]} one of them?")
        assert len(server.requests) == 2
        assert session.messages[-1].error_message.startswith(BLOCKED_PREFIX)
        await session.prompt("Thanks.")
        assert len(server.requests) == 3
    finally:
        await session.close()
    for request in server.requests:
        body = json.dumps(request.body, ensure_ascii=False)
        assert not [v for v in [*EMAILS, *PHONES] if v in body]
