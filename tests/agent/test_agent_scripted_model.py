"""ScriptedModel is strict, records frozen snapshots and streams real events; model
failures end a run with an error message (C33)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agent_support import CountParams, EchoParams, make_agent, make_tool

from pi_notebook.agent.agent import Agent
from pi_notebook.ai.abort import AbortSignal
from pi_notebook.ai.events import AssistantMessageEvent
from pi_notebook.ai.messages import AssistantMessage, ToolResultMessage, Usage, UserMessage
from pi_notebook.ai.model import Context
from pi_notebook.ai.stream import AssistantStream
from pi_notebook.testing import ScriptedModel, UnexpectedModelCall, text, tool_call, turn


async def _events(
    model: ScriptedModel, context: Context | None = None
) -> list[AssistantMessageEvent]:
    return [e async for e in model.stream(context or Context())]


# -- strictness ---------------------------------------------------------------------------


async def test_running_past_the_script_raises_a_clear_error() -> None:
    model = ScriptedModel([text("only answer")])
    await _events(model)

    with pytest.raises(UnexpectedModelCall, match="request 2 but the script has only 1 steps"):
        await _events(model)


async def test_assert_complete_catches_unused_steps() -> None:
    model = ScriptedModel([text("one"), text("two")])
    await _events(model)

    with pytest.raises(AssertionError, match="1 of 2 steps were never used"):
        model.assert_complete()
    await _events(model)
    model.assert_complete()


def test_steps_are_checked_when_the_model_is_built() -> None:
    with pytest.raises(TypeError, match="step 2: unsupported step"):
        ScriptedModel([text("fine"), 42])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="step 1: a list step holds"):
        ScriptedModel([[]])
    with pytest.raises(TypeError, match="step 1: a list step holds"):
        ScriptedModel([[text("a"), "not a part"]])  # type: ignore[list-item]


async def test_an_exception_step_is_raised_by_the_stream() -> None:
    model = ScriptedModel([ConnectionError("network down")])
    with pytest.raises(ConnectionError, match="network down"):
        await _events(model)


async def test_a_callable_step_receives_the_context_and_returns_a_step() -> None:
    seen: list[Context] = []

    def answer(context: Context) -> Any:
        seen.append(context)
        return text(f"{len(context.messages)} messages")

    model = ScriptedModel([answer])
    events = await _events(model, Context(messages=[UserMessage(content="hi")]))

    assert len(seen) == 1
    assert events[-1].type == "done"
    assert events[-1].message.text == "1 messages"  # type: ignore[union-attr]


# -- recording ----------------------------------------------------------------------------


async def test_recorded_calls_are_frozen_snapshots_of_prompt_tools_and_messages() -> None:
    agent, model, _ = make_agent(
        [tool_call("echo", {"text": "hi"}, id="c1"), text("done")],
        [make_tool("echo")],
        system_prompt="You are a test.",
    )

    await agent.prompt("say hi")

    first, second = model.calls
    assert first.system_prompt == "You are a test."
    assert first.tool_names == ["echo"]
    assert first.tools[0].description == "The echo tool."
    assert first.tools[0].parameters == EchoParams.model_json_schema()
    # The first request saw only the prompt, although the history has grown since.
    assert [m.role for m in first.messages] == ["user"]
    assert [m.role for m in second.messages] == ["user", "assistant", "toolResult"]
    assert len(agent.state.messages) == 4
    with pytest.raises(AttributeError):
        first.system_prompt = "changed"  # type: ignore[misc]
    assert isinstance(first.tools, tuple)


async def test_a_later_change_of_tools_or_prompt_does_not_change_a_recorded_call() -> None:
    agent, model, _ = make_agent([text("a"), text("b")], [make_tool("echo")], system_prompt="v1")
    await agent.prompt("one")
    agent.state.system_prompt = "v2"
    agent.state.tools = []
    await agent.prompt("two")

    assert [(c.system_prompt, c.tool_names) for c in model.calls] == [("v1", ["echo"]), ("v2", [])]
    assert [len(c.messages) for c in model.calls] == [1, 3]


# -- streaming ----------------------------------------------------------------------------


async def test_text_streams_in_chunks_of_chunk_size() -> None:
    model = ScriptedModel([text("abcdefghij")], chunk_size=4)
    events = await _events(model)

    assert [e.type for e in events] == [
        "start",
        "text_start",
        "text_delta",
        "text_delta",
        "text_delta",
        "text_end",
        "done",
    ]
    assert [e.delta for e in events if e.type == "text_delta"] == ["abcd", "efgh", "ij"]  # type: ignore[union-attr]
    # Every event carries the message as built so far.
    assert [e.partial.text for e in events if e.type == "text_delta"] == [
        "abcd",
        "abcdefgh",
        "abcdefghij",
    ]  # type: ignore[union-attr]
    assert events[-1].message.stop_reason == "stop"  # type: ignore[union-attr]


async def test_tool_call_arguments_stream_as_json_deltas() -> None:
    args = {"text": "x" * 20, "n": [1, 2, 3]}
    model = ScriptedModel([[text("calling"), tool_call("echo", args, id="c9")]], chunk_size=2)
    events = await _events(model)

    kinds = [e.type for e in events]
    assert kinds[:2] == ["start", "text_start"]
    start = kinds.index("toolcall_start")
    deltas = [e.delta for e in events if e.type == "toolcall_delta"]  # type: ignore[union-attr]
    assert len(deltas) > 1
    assert all(len(d) <= 8 for d in deltas)
    assert "".join(deltas) == json.dumps(args)
    assert kinds[start + 1 : start + 1 + len(deltas)] == ["toolcall_delta"] * len(deltas)
    assert kinds[-2:] == ["toolcall_end", "done"]
    final = events[-1].message  # type: ignore[union-attr]
    assert final.stop_reason == "toolUse"
    assert [(c.id, c.name, c.arguments) for c in final.tool_calls] == [("c9", "echo", args)]


async def test_turn_forces_stop_reason_and_usage() -> None:
    model = ScriptedModel([turn(text("cut"), stop_reason="length", usage=Usage(output_tokens=7))])
    events = await _events(model)

    assert events[-1].type == "done"
    assert events[-1].message.stop_reason == "length"  # type: ignore[union-attr]
    assert events[-1].message.usage.output_tokens == 7  # type: ignore[union-attr]


# -- C33: model failures end the run with an error message ----------------------------------


async def test_c33_running_past_the_script_ends_with_an_error_message() -> None:
    agent, model, rec = make_agent(
        [tool_call("echo", {"text": "hi"}, id="c1")], [make_tool("echo")]
    )

    await agent.prompt("go")  # does not raise

    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.stop_reason == "error"
    assert last.error_message == (
        "Model request failed: ScriptedModel: request 2 but the script has only 1 steps"
    )
    assert rec.trace()[-5:] == [
        "turn_start",
        "message_start:assistant",
        "message_end:assistant",
        "turn_end",
        "agent_end",
    ]
    assert len(model.calls) == 1
    assert agent.state.is_running is False


async def test_c33_an_exception_step_ends_with_an_error_message_naming_it() -> None:
    agent, _, rec = make_agent([ConnectionError("connection reset by peer")])

    await agent.prompt("go")

    (message,) = [m for m in agent.state.messages if isinstance(m, AssistantMessage)]
    assert message.stop_reason == "error"
    assert message.error_message == "Model request failed: connection reset by peer"
    assert rec.trace() == [
        "agent_start",
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        "message_end:assistant",
        "turn_end",
        "agent_end",
    ]


class _FailsMidStream:
    """A provider that raises after it started streaming."""

    id = "broken"
    provider = "test"

    async def stream(
        self, context: Context, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        out = AssistantStream(model=self.id, provider=self.provider)
        yield out.start()
        yield out.text_start()
        yield out.text_delta("partial answ")
        raise OSError("socket closed")


class _ErrorEventModel:
    """A provider that describes its failure with an error event, as it should."""

    id = "limited"
    provider = "test"

    async def stream(
        self, context: Context, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        out = AssistantStream(model=self.id, provider=self.provider)
        yield out.start()
        yield out.error("429 Too Many Requests: rate limit exceeded")


async def test_c33_a_provider_raising_mid_stream_ends_with_an_error_message() -> None:
    agent = Agent(model=_FailsMidStream())
    events: list[Any] = []
    agent.subscribe(events.append)

    await agent.prompt("go")

    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.stop_reason == "error"
    assert last.error_message == "Model request failed: socket closed"
    kinds = [e.type for e in events]
    assert kinds[-3:] == ["message_end", "turn_end", "agent_end"]
    assert kinds.count("message_start") == 2  # user, then the assistant once


async def test_c33_a_provider_error_event_ends_the_run_with_its_text() -> None:
    agent = Agent(model=_ErrorEventModel(), tools=[make_tool("echo")])
    events: list[Any] = []
    agent.subscribe(events.append)

    await agent.prompt("go")

    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert (last.stop_reason, last.error_message) == (
        "error",
        "429 Too Many Requests: rate limit exceeded",
    )
    assert events[-1].type == "agent_end"
    assert not [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]


async def test_c33_after_a_model_failure_the_agent_can_prompt_again() -> None:
    agent, model, _ = make_agent([RuntimeError("first fails"), text("second works")])

    await agent.prompt("one")
    await agent.prompt("two")

    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert (last.stop_reason, last.text) == ("stop", "second works")
    model.assert_complete()


async def test_a_tool_whose_parameter_model_changes_offers_the_new_schema() -> None:
    tool = make_tool("echo")
    agent, model, _ = make_agent([text("a"), text("b")], [tool])

    await agent.prompt("one")
    tool.parameters = CountParams
    await agent.prompt("two")

    assert [c.tools[0].parameters for c in model.calls] == [
        EchoParams.model_json_schema(),
        CountParams.model_json_schema(),
    ]
