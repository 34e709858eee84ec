"""Full sessions on real providers: the model calls query_database, reads the result, answers.

The provider's server is the loopback replay server; the session, the database extension
and the agent loop are the real ones, reached through the public entry points.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from pi_notebook import create_agent_session
from pi_notebook.ai.messages import content_text

EXTENSION = Path(__file__).resolve().parents[2] / "extensions" / "database.py"
SECRET = "sk-test-SECRET123"
SQL = "SELECT name FROM animals ORDER BY name"


def make_database(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'zoo.sqlite'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE animals (name TEXT)"))
        conn.execute(sa.text("INSERT INTO animals VALUES ('okapi-417'), ('zebra-42')"))
    engine.dispose()
    return url


def tool_result_text(messages: list[dict[str, Any]], call_id: str) -> str | None:
    """The tool result for ``call_id`` as the provider's wire format carries it."""
    for message in messages:
        if message.get("role") == "tool" and message.get("tool_call_id") == call_id:
            return message["content"]
        if message.get("role") == "user" and isinstance(message.get("content"), list):
            for block in message["content"]:
                if block.get("type") == "tool_result" and block.get("tool_use_id") == call_id:
                    content = block["content"]
                    return content if isinstance(content, str) else json.dumps(content)
    return None


async def run_session(model: str) -> Any:
    session = create_agent_session(model=model, extensions=[str(EXTENSION)])
    try:
        await session.prompt("Which animals are in the zoo?")
    finally:
        await session.close()
    return session


def check_session(session: Any, server: Any, call_id: str) -> None:
    roles = [m.role for m in session.messages]
    assert roles == ["user", "assistant", "toolResult", "assistant"], session.messages
    result = session.messages[2]
    assert result.tool_call_id == call_id and not result.is_error
    assert "zebra-42" in content_text(result.content)
    final = session.messages[3]
    assert final.stop_reason == "stop" and "zebra-42" in final.text and "okapi-417" in final.text
    assert len(server.requests) == 2
    assert "SECRET123" not in repr(session.messages)


# -- OpenAI ----------------------------------------------------------------------------------
def openai_sse(delta: dict[str, Any], finish: str | None = None) -> bytes:
    chunk = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1727000000,
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def openai_tool_call(request: Any) -> dict[str, Any]:
    assert "query_database" in [t["function"]["name"] for t in request.body.get("tools", [])]
    call = {"index": 0, "id": "call_db1", "type": "function"}
    return {
        "events": [
            openai_sse(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {**call, "function": {"name": "query_database", "arguments": ""}}
                    ],
                }
            ),
            openai_sse(
                {
                    "tool_calls": [
                        {"index": 0, "function": {"arguments": json.dumps({"sql": SQL})[:12]}}
                    ]
                }
            ),
            openai_sse(
                {
                    "tool_calls": [
                        {"index": 0, "function": {"arguments": json.dumps({"sql": SQL})[12:]}}
                    ]
                }
            ),
            openai_sse({}, "tool_calls"),
            b"data: [DONE]\n\n",
        ]
    }


def openai_answer(request: Any) -> dict[str, Any]:
    # Answer from the tool result the request carries, so a lost result shows in the answer.
    result = tool_result_text(request.body["messages"], "call_db1") or "NO TOOL RESULT"
    return {
        "events": [
            openai_sse({"role": "assistant", "content": ""}),
            openai_sse({"content": f"The zoo has: {result}"}),
            openai_sse({}, "stop"),
            b"data: [DONE]\n\n",
        ]
    }


async def test_openai_full_session_with_database(loopback, monkeypatch, tmp_path):
    server = await loopback(openai_tool_call, openai_answer)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("PI_NOTEBOOK_DATABASE_URL", make_database(tmp_path))
    session = await run_session("openai:gpt-test")
    check_session(session, server, "call_db1")
    second = server.requests[1].body["messages"]
    assert [m["role"] for m in second][-3:] == ["user", "assistant", "tool"]
    assert second[-2]["tool_calls"][0]["function"]["arguments"] == json.dumps({"sql": SQL})


# -- Anthropic -------------------------------------------------------------------------------
def anthropic_sse(type_: str, **data: Any) -> bytes:
    return f"event: {type_}\ndata: {json.dumps({'type': type_, **data})}\n\n".encode()


START = anthropic_sse(
    "message_start",
    message={
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 50, "output_tokens": 1},
    },
)


def anthropic_tool_call(request: Any) -> dict[str, Any]:
    assert "query_database" in [t["name"] for t in request.body.get("tools", [])]
    block = {"type": "tool_use", "id": "toolu_db1", "name": "query_database", "input": {}}
    args = json.dumps({"sql": SQL})
    return {
        "events": [
            START,
            anthropic_sse("content_block_start", index=0, content_block=block),
            anthropic_sse(
                "content_block_delta",
                index=0,
                delta={"type": "input_json_delta", "partial_json": args[:10]},
            ),
            anthropic_sse(
                "content_block_delta",
                index=0,
                delta={"type": "input_json_delta", "partial_json": args[10:]},
            ),
            anthropic_sse("content_block_stop", index=0),
            anthropic_sse(
                "message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 20}
            ),
            anthropic_sse("message_stop"),
        ]
    }


def anthropic_answer(request: Any) -> dict[str, Any]:
    result = tool_result_text(request.body["messages"], "toolu_db1") or "NO TOOL RESULT"
    return {
        "events": [
            START,
            anthropic_sse(
                "content_block_start", index=0, content_block={"type": "text", "text": ""}
            ),
            anthropic_sse(
                "content_block_delta",
                index=0,
                delta={"type": "text_delta", "text": f"The zoo has: {result}"},
            ),
            anthropic_sse("content_block_stop", index=0),
            anthropic_sse(
                "message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 9}
            ),
            anthropic_sse("message_stop"),
        ]
    }


async def test_anthropic_full_session_with_database(loopback, monkeypatch, tmp_path):
    server = await loopback(anthropic_tool_call, anthropic_answer)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("PI_NOTEBOOK_DATABASE_URL", make_database(tmp_path))
    session = await run_session("anthropic:claude-test")
    check_session(session, server, "toolu_db1")
    second = server.requests[1].body["messages"]
    assert [m["role"] for m in second][-3:] == ["user", "assistant", "user"]
    assert second[-2]["content"][-1] == {
        "type": "tool_use",
        "id": "toolu_db1",
        "name": "query_database",
        "input": {"sql": SQL},
    }
