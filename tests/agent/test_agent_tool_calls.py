"""One tool call through the core: argument pipeline, execute, results, hooks, errors
(S7, S10–S13, S30, S32, S35, C13–C15, C21, C22, C24–C26, C28)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agent_support import (
    CountParams,
    EchoParams,
    make_agent,
    make_tool,
    result,
    result_text,
    tool_results,
)
from pydantic import BaseModel

from pi_notebook.agent.agent import Agent
from pi_notebook.agent.types import (
    AfterToolCallContext,
    AfterToolCallResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
    ToolResult,
    ToolUpdateCallback,
)
from pi_notebook.ai.abort import AbortSignal
from pi_notebook.ai.events import AssistantMessageEvent
from pi_notebook.ai.messages import AssistantMessage, TextContent, Usage
from pi_notebook.ai.model import Context
from pi_notebook.ai.providers.openai_chat import OpenAIChatModel
from pi_notebook.ai.stream import AssistantStream
from pi_notebook.testing import text, tool_call, turn


class Item(BaseModel):
    name: str
    qty: int


class OrderParams(BaseModel):
    items: list[Item]
    note: str | None = None


# -- S7, C13, C14, C15: the argument pipeline ------------------------------------------------


async def test_s7_pipeline_order_prepare_validate_before_hook_execute() -> None:
    log: list[tuple[str, Any]] = []

    def prepare(raw: Any) -> Any:
        log.append(("prepare", dict(raw)))
        return {"n": raw["count"]}

    def before(ctx: BeforeToolCallContext, signal: AbortSignal) -> None:
        log.append(("before", ctx.args))
        ctx.args.n += 100  # type: ignore[attr-defined]  # changed in place, not re-validated

    async def execute(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        log.append(("execute", params))
        return result(str(params.n))

    agent, _, _ = make_agent(
        [tool_call("count", {"count": "5"}, id="c1"), text("ok")],
        [make_tool("count", execute, parameters=CountParams, prepare_arguments=prepare)],
        before_tool_call=before,
    )

    await agent.prompt("go")

    assert [step for step, _ in log] == ["prepare", "before", "execute"]
    assert log[0][1] == {"count": "5"}
    # Validation ran between prepare and the hook: the hook gets the validated, coerced object,
    # and execute receives that same object with the hook's change.
    assert isinstance(log[1][1], CountParams)
    assert log[1][1] is log[2][1]
    assert result_text(agent, "c1") == "105"


async def test_c13_start_and_update_args_are_raw_even_when_prepared_or_invalid() -> None:
    async def execute(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        on_update(result("half"))
        return result("done")

    raw_ok = {"count": "7", "junk": True}
    raw_bad = {"n": "seven"}
    agent, _, rec = make_agent(
        [[tool_call("prep", raw_ok, id="c1"), tool_call("count", raw_bad, id="c2")], text("ok")],
        [
            make_tool(
                "prep",
                execute,
                parameters=CountParams,
                prepare_arguments=lambda a: {"n": a["count"]},
            ),
            make_tool("count", execute, parameters=CountParams),
        ],
    )

    await agent.prompt("go")

    starts = {e.tool_call_id: e.args for e in rec.of("tool_execution_start")}
    assert starts == {"c1": {"count": "7", "junk": True}, "c2": {"n": "seven"}}
    (update,) = rec.of("tool_execution_update")
    assert (update.tool_call_id, update.args) == ("c1", {"count": "7", "junk": True})
    assert rec.end("c2").is_error is True


async def test_c14_prepare_is_called_once_with_a_copy_and_its_return_is_validated() -> None:
    calls: list[Any] = []

    def prepare(raw: Any) -> Any:
        calls.append(raw)
        raw["text"] = raw.pop("legacy_text")  # mutating the copy must not touch the message
        return raw

    raw = {"legacy_text": "old field"}
    agent, _, _ = make_agent(
        [tool_call("echo", raw, id="c1"), text("ok")],
        [make_tool("echo", prepare_arguments=prepare)],
    )

    await agent.prompt("go")

    assert len(calls) == 1
    assert result_text(agent, "c1") == "old field"
    (assistant,) = [
        m for m in agent.state.messages if isinstance(m, AssistantMessage) and m.tool_calls
    ]
    assert assistant.tool_calls[0].arguments == {"legacy_text": "old field"}


async def test_c14_received_arguments_show_the_prepared_value_on_failure() -> None:
    agent, _, _ = make_agent(
        [tool_call("count", {"n": 1}, id="c1"), text("ok")],
        [make_tool("count", parameters=CountParams, prepare_arguments=lambda a: {"n": [a["n"]]})],
    )

    await agent.prompt("go")

    assert result_text(agent, "c1") == (
        'Validation failed for tool "count":\n'
        "  - n: Input should be a valid integer\n"
        "\n"
        "Received arguments:\n"
        '{\n  "n": [\n    1\n  ]\n}'
    )


async def test_c14_prepare_raising_gives_its_message_as_the_error_text() -> None:
    executed: list[str] = []

    def prepare(raw: Any) -> Any:
        raise ValueError("cannot migrate arguments of version 0")

    async def execute(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        executed.append(call_id)
        return result("ran")

    agent, _, rec = make_agent(
        [tool_call("echo", {"text": "x"}, id="c1"), text("ok")],
        [make_tool("echo", execute, prepare_arguments=prepare)],
    )

    await agent.prompt("go")

    assert result_text(agent, "c1") == "cannot migrate arguments of version 0"
    assert rec.end("c1").is_error is True
    assert executed == []


async def test_c15_coercion_happens_on_a_copy_the_message_keeps_the_raw_arguments() -> None:
    seen: list[Any] = []

    async def execute(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        seen.append(params)
        return result(str(params.n * 2))

    agent, model, _ = make_agent(
        [tool_call("count", {"n": "5"}, id="c1"), text("ok")],
        [make_tool("count", execute, parameters=CountParams)],
    )

    await agent.prompt("go")

    assert seen == [CountParams(n=5)]
    assert result_text(agent, "c1") == "10"
    assistant = agent.state.messages[1]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.tool_calls[0].arguments == {"n": "5"}
    # The model's next request shows the call exactly as it was made.
    second = model.calls[1].messages[1]
    assert isinstance(second, AssistantMessage) and second.tool_calls[0].arguments == {"n": "5"}


async def test_c15_one_line_per_problem_with_nested_paths() -> None:
    args = {"items": [{"name": "a", "qty": "x"}, {"qty": 2}], "note": 3}
    agent, _, _ = make_agent(
        [tool_call("order", args, id="c1"), text("ok")],
        [make_tool("order", parameters=OrderParams)],
    )

    await agent.prompt("go")

    text_ = result_text(agent, "c1")
    head, received = text_.split("\n\nReceived arguments:\n")
    assert head.splitlines() == [
        'Validation failed for tool "order":',
        "  - items.0.qty: Input should be a valid integer, unable to parse string as an integer",
        "  - items.1.name: Field required",
        "  - note: Input should be a valid string",
    ]
    import json

    assert json.loads(received) == args
    assert received == json.dumps(args, indent=2)


# -- Bad input: never a crash -------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ([1, 2], "  - root: Input should be a valid dictionary or instance of EchoParams"),
        ("just text", "  - root: Input should be a valid dictionary or instance of EchoParams"),
        (42, "  - root: Input should be a valid dictionary or instance of EchoParams"),
        (None, "  - text: Field required"),  # tool_call() sends None as {}
    ],
)
async def test_s30_arguments_that_are_not_an_object_give_an_error_result(
    arguments: Any, problem: str
) -> None:
    agent, model, rec = make_agent(
        [tool_call("echo", arguments, id="c1"), text("ok")], [make_tool("echo")]
    )

    await agent.prompt("go")

    message = result_text(agent, "c1")
    assert message.startswith(
        'Validation failed for tool "echo":\n' + problem + "\n\nReceived arguments:\n"
    )
    assert rec.end("c1").is_error is True
    model.assert_complete()  # the run went on: the model read the error and answered


class _MalformedJsonModel:
    """A streaming provider whose tool-call JSON arrives broken, then answers in text."""

    id = "malformed"
    provider = "test"

    def __init__(self) -> None:
        self.requests: list[Context] = []

    async def stream(
        self, context: Context, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        self.requests.append(context)
        out = AssistantStream(model=self.id, provider=self.provider)
        yield out.start()
        if len(self.requests) == 1:
            index, event = out.tool_call_start(id="c1", name="echo")
            yield event
            yield out.tool_call_delta(index, '{"text": "unterminated')
            yield out.tool_call_delta(index, ", }")
            yield out.tool_call_end(index)
        else:
            yield out.text_start()
            yield out.text_delta("sorry, retrying later")
            yield out.text_end()
        yield out.done()


async def test_s30_invalid_json_from_a_streaming_provider_gives_an_error_result() -> None:
    executed: list[str] = []

    async def execute(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        executed.append(call_id)
        return result("ran")

    model = _MalformedJsonModel()
    agent = Agent(model=model, tools=[make_tool("echo", execute)])
    events: list[Any] = []
    agent.subscribe(events.append)

    await agent.prompt("go")

    (message,) = tool_results(agent)
    assert message.is_error is True
    assert message.content[0].text.startswith(
        'Tool "echo" was not executed: Invalid JSON in tool arguments:'
    )
    assert executed == []
    assert [e.type for e in events if e.type.startswith("tool_execution")] == [
        "tool_execution_start",
        "tool_execution_end",
    ]
    assert len(model.requests) == 2  # the model was told and answered
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage) and last.text == "sorry, retrying later"


# -- S10, S11, S12: execute and its result ----------------------------------------------------


async def test_s10_execute_receives_call_id_validated_params_run_signal_and_on_update() -> None:
    received: list[Any] = []
    agent_ref: list[Agent] = []

    async def execute(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        received.append((call_id, params, signal is agent_ref[0].signal, signal.aborted))
        on_update(result("partial"))
        return result("done")

    agent, _, rec = make_agent(
        [tool_call("count", {"n": "3"}, id="call-xyz"), text("ok")],
        [make_tool("count", execute, parameters=CountParams)],
    )
    agent_ref.append(agent)

    await agent.prompt("go")

    assert received == [("call-xyz", CountParams(n=3), True, False)]
    ids = {e.tool_call_id for e in rec.events if e.type.startswith("tool_execution")}
    assert ids == {"call-xyz"}
    assert tool_results(agent)[0].tool_call_id == "call-xyz"


async def test_s11_a_tool_that_forwards_the_signal_stops_its_work_one_that_does_not_cannot() -> (
    None
):
    """The "driver" is a worker thread that polls a cancel flag, like a DB-API cancel."""
    started = threading.Barrier(3)
    finished: dict[str, bool] = {}

    def driver(name: str, cancel: threading.Event) -> str:
        started.wait(timeout=1)
        for _ in range(40):  # up to ~0.4 s of work
            if cancel.wait(0.01):
                finished[name] = False
                raise RuntimeError("query cancelled")
        finished[name] = True
        return "all rows"

    async def forwards(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        cancel = threading.Event()
        remove = signal.add_listener(cancel.set)
        try:
            return result(await asyncio.to_thread(driver, "forwards", cancel))
        finally:
            remove()

    async def keeps(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        return result(await asyncio.to_thread(driver, "keeps", threading.Event()))

    agent, _, _ = make_agent(
        [
            [
                tool_call("forwards", {"text": "q"}, id="c1"),
                tool_call("keeps", {"text": "q"}, id="c2"),
            ]
        ],
        [make_tool("forwards", forwards), make_tool("keeps", keeps)],
    )
    run = asyncio.ensure_future(agent.prompt("go"))
    await asyncio.to_thread(started.wait, 1)
    agent.abort()
    await asyncio.wait_for(run, 2)

    assert finished == {"forwards": False, "keeps": True}
    assert [(m.tool_call_id, m.is_error, m.content[0].text) for m in tool_results(agent)] == [
        ("c1", True, "query cancelled"),
        ("c2", False, "all rows"),
    ]


async def test_s12_content_goes_to_the_model_details_stay_with_the_application() -> None:
    async def execute(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        return ToolResult(
            content=[TextContent(text="3 rows")],
            details={"rows": [1, 2, 3], "dsn": "postgres://user:SECRET@db"},
        )

    agent, model, rec = make_agent(
        [tool_call("echo", {"text": "q"}, id="c1"), text("ok")], [make_tool("echo", execute)]
    )

    await agent.prompt("go")

    assert rec.end("c1").result.details["rows"] == [1, 2, 3]
    message = tool_results(agent)[0]
    assert message.details["rows"] == [1, 2, 3]
    # What a real provider sends for the next request: the content, never the details.
    request = OpenAIChatModel("m", api_key="k", base_url="http://localhost:1/v1").build_request(
        Context(messages=list(model.calls[1].messages))
    )
    (wire,) = [m for m in request["messages"] if m["role"] == "tool"]
    assert wire == {"role": "tool", "tool_call_id": "c1", "content": "3 rows"}
    assert "SECRET" not in repr(request)


# -- S13: updates ---------------------------------------------------------------------------


async def test_s13_late_updates_are_dropped_and_pending_updates_arrive_before_the_end() -> None:
    keep: list[ToolUpdateCallback] = []

    async def execute(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        keep.append(on_update)
        for i in range(3):
            on_update(result(f"step {i}"))
        return result("done")  # the three updates are still queued when execute returns

    slow_seen: list[str] = []

    async def slow_listener(event: Any) -> None:
        if event.type == "tool_execution_update":
            await asyncio.sleep(0.005)  # an async subscriber that takes its time
            slow_seen.append(event.partial_result.content[0].text)

    def late_update(event: Any) -> None:
        if event.type == "tool_execution_end":
            keep[0](result("too late"))

    agent, _, rec = make_agent(
        [tool_call("echo", {"text": "x"}, id="c1"), text("ok")], [make_tool("echo", execute)]
    )
    agent.subscribe(slow_listener)
    agent.subscribe(late_update)

    await agent.prompt("go")
    keep[0](result("after the run"))
    await asyncio.sleep(0.01)

    tool_events = [e for e in rec.events if e.type.startswith("tool_execution")]
    assert [
        (e.type, getattr(e, "partial_result", None) and e.partial_result.content[0].text)
        for e in tool_events
    ] == [
        ("tool_execution_start", None),
        ("tool_execution_update", "step 0"),
        ("tool_execution_update", "step 1"),
        ("tool_execution_update", "step 2"),
        ("tool_execution_end", None),
    ]
    assert slow_seen == ["step 0", "step 1", "step 2"]


async def test_s13_updates_from_a_worker_thread_arrive_in_order_before_the_end() -> None:
    leaked: list[ToolUpdateCallback] = []

    def work(on_update: ToolUpdateCallback) -> str:
        for i in range(5):
            on_update(result(f"chunk {i}"))
        leaked.append(on_update)
        return "finished"

    async def execute(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        return result(await asyncio.to_thread(work, on_update))

    agent, _, rec = make_agent(
        [tool_call("echo", {"text": "x"}, id="c1"), text("ok")], [make_tool("echo", execute)]
    )

    await agent.prompt("go")
    late = threading.Thread(target=leaked[0], args=(result("late from thread"),))
    late.start()
    late.join()
    await asyncio.sleep(0.01)

    kinds = [e.type for e in rec.events if e.type.startswith("tool_execution")]
    assert kinds == ["tool_execution_start", *["tool_execution_update"] * 5, "tool_execution_end"]
    texts = [e.partial_result.content[0].text for e in rec.of("tool_execution_update")]
    assert texts == [f"chunk {i}" for i in range(5)]


# -- S30: every failure is an error result ----------------------------------------------------


async def _raise_boom(
    call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
) -> ToolResult:
    raise RuntimeError("boom in execute")


def _block(ctx: BeforeToolCallContext, signal: AbortSignal) -> BeforeToolCallResult:
    return BeforeToolCallResult(block=True, reason="not allowed here")


async def _raise_in_before(ctx: BeforeToolCallContext, signal: AbortSignal) -> None:
    raise PermissionError("gate crashed")


def _raise_in_after(ctx: AfterToolCallContext, signal: AbortSignal) -> None:
    raise RuntimeError("after hook crashed")


def _prepare_fails(raw: Any) -> Any:
    raise KeyError("missing")


@pytest.mark.parametrize(
    ("case", "name", "tool_kwargs", "agent_kwargs", "expected"),
    [
        ("unknown tool", "ghost", {}, {}, "Tool ghost not found"),
        ("prepare fails", "echo", {"prepare_arguments": _prepare_fails}, {}, "'missing'"),
        ("before hook blocks", "echo", {}, {"before_tool_call": _block}, "not allowed here"),
        (
            "before hook blocks without a reason",
            "echo",
            {},
            {"before_tool_call": lambda c, s: BeforeToolCallResult(block=True)},
            "Tool execution was blocked",
        ),
        ("before hook raises", "echo", {}, {"before_tool_call": _raise_in_before}, "gate crashed"),
        ("execute raises", "echo", {"execute": _raise_boom}, {}, "boom in execute"),
        (
            "after hook raises",
            "echo",
            {},
            {"after_tool_call": _raise_in_after},
            "after hook crashed",
        ),
    ],
)
async def test_s30_each_failure_ends_as_an_error_tool_result(
    case: str, name: str, tool_kwargs: dict[str, Any], agent_kwargs: dict[str, Any], expected: str
) -> None:
    agent, model, rec = make_agent(
        [tool_call(name, {"text": "x"}, id="c1"), text("ok")],
        [make_tool("echo", **tool_kwargs)],
        **agent_kwargs,
    )

    await agent.prompt("go")

    message = tool_results(agent)[0]
    assert (message.is_error, message.content[0].text) == (True, expected), case
    assert rec.end("c1").is_error is True
    model.assert_complete()  # the run continued after the error


async def test_s30_abort_detected_before_execution_is_an_error_result() -> None:
    executed: list[str] = []
    agent_ref: list[Agent] = []

    def before(ctx: BeforeToolCallContext, signal: AbortSignal) -> None:
        agent_ref[0].abort()  # e.g. the user stops while the approval prompt is up

    async def execute(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        executed.append(call_id)
        return result("ran")

    agent, model, rec = make_agent(
        [tool_call("echo", {"text": "x"}, id="c1")],
        [make_tool("echo", execute)],
        before_tool_call=before,
    )
    agent_ref.append(agent)

    await agent.prompt("go")

    assert executed == []
    assert (rec.end("c1").is_error, result_text(agent, "c1")) == (True, "Operation aborted")
    assert len(model.calls) == 1


async def test_s30_c22_execute_raising_boom_gives_text_boom_empty_details_and_the_run_goes_on() -> (
    None
):
    async def boom(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        raise Exception("boom")

    agent, model, rec = make_agent(
        [tool_call("echo", {"text": "x"}, id="c1"), text("recovered")], [make_tool("echo", boom)]
    )

    await agent.prompt("go")

    message = tool_results(agent)[0]
    assert (message.content, message.details, message.is_error) == (
        [TextContent(text="boom")],
        {},
        True,
    )
    end = rec.end("c1")
    assert (end.result.content, end.result.details, end.is_error) == (
        [TextContent(text="boom")],
        {},
        True,
    )
    assert len(model.calls) == 2
    assert [m.role for m in model.calls[1].messages] == ["user", "assistant", "toolResult"]
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage) and last.text == "recovered"


async def test_s30_exception_without_message_is_named_by_its_type() -> None:
    async def bare(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        raise LookupError

    agent, _, _ = make_agent(
        [tool_call("echo", {"text": "x"}, id="c1"), text("ok")], [make_tool("echo", bare)]
    )

    await agent.prompt("go")

    assert result_text(agent, "c1") == "LookupError"


async def test_s30_execute_returning_something_else_than_a_tool_result_is_an_error() -> None:
    async def wrong(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> Any:
        return "a bare string"

    agent, _, rec = make_agent(
        [tool_call("echo", {"text": "x"}, id="c1"), text("ok")], [make_tool("echo", wrong)]
    )

    await agent.prompt("go")

    assert rec.end("c1").is_error is True
    assert result_text(agent, "c1") == "Tool echo returned str, not a ToolResult"


# -- S32, C21, C22, C24: results ---------------------------------------------------------------


async def test_s32_details_with_an_error_key_is_not_an_error() -> None:
    async def soft(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        return result("no rows matched", {"error": "empty result"})

    agent, _, rec = make_agent(
        [tool_call("echo", {"text": "x"}, id="c1"), text("ok")], [make_tool("echo", soft)]
    )

    await agent.prompt("go")

    assert rec.end("c1").is_error is False
    assert tool_results(agent)[0].is_error is False
    assert tool_results(agent)[0].details == {"error": "empty result"}


async def test_s32_an_after_hook_may_mark_a_successful_result_as_an_error() -> None:
    def after(ctx: AfterToolCallContext, signal: AbortSignal) -> AfterToolCallResult:
        return AfterToolCallResult(is_error=True)

    agent, _, rec = make_agent(
        [tool_call("echo", {"text": "x"}, id="c1"), text("ok")],
        [make_tool("echo")],
        after_tool_call=after,
    )

    await agent.prompt("go")

    assert rec.end("c1").is_error is True
    assert tool_results(agent)[0].is_error is True
    assert result_text(agent, "c1") == "x"


async def test_c21_successful_result_becomes_a_tool_result_message() -> None:
    usage = Usage(input_tokens=3, output_tokens=4)

    async def full(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        return ToolResult(
            content=[TextContent(text="hi")], details={"k": 1}, usage=usage, added_tool_names=["x"]
        )

    async def empty(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        return ToolResult(content=None, added_tool_names=[])  # type: ignore[arg-type]

    agent, _, _ = make_agent(
        [
            [tool_call("full", {"text": "a"}, id="c1"), tool_call("empty", {"text": "b"}, id="c2")],
            text("ok"),
        ],
        [make_tool("full", full), make_tool("empty", empty)],
    )

    await agent.prompt("go")

    first, second = tool_results(agent)
    assert (first.role, first.tool_call_id, first.tool_name) == ("toolResult", "c1", "full")
    assert (first.content, first.details, first.is_error) == (
        [TextContent(text="hi")],
        {"k": 1},
        False,
    )
    assert first.usage == usage
    assert first.added_tool_names == ["x"]
    assert isinstance(first.timestamp, int) and first.timestamp > 0
    assert (second.content, second.details, second.is_error) == ([], None, False)
    assert second.added_tool_names is None
    assert second.usage is None


async def test_c24_end_event_carries_the_final_patched_result_equal_to_the_message() -> None:
    def after(ctx: AfterToolCallContext, signal: AbortSignal) -> AfterToolCallResult:
        assert ctx.is_error is True and ctx.result.content[0].text == "boom in execute"
        return AfterToolCallResult(
            content=[TextContent(text="[redacted]")], details={"redacted": True}, is_error=False
        )

    agent, _, rec = make_agent(
        [tool_call("echo", {"text": "x"}, id="c1"), text("ok")],
        [make_tool("echo", _raise_boom)],
        after_tool_call=after,
    )

    await agent.prompt("go")

    end = rec.end("c1")
    message = tool_results(agent)[0]
    assert (end.result.content, end.result.details, end.is_error) == (
        [TextContent(text="[redacted]")],
        {"redacted": True},
        False,
    )
    assert (message.content, message.details, message.is_error) == (
        end.result.content,
        end.result.details,
        end.is_error,
    )


async def test_c24_after_hook_patch_keeps_fields_it_leaves_out() -> None:
    async def execute(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        return result("original", {"keep": "me"})

    async def after(ctx: AfterToolCallContext, signal: AbortSignal) -> AfterToolCallResult:
        return AfterToolCallResult(content=[TextContent(text="patched")])

    agent, _, rec = make_agent(
        [tool_call("echo", {"text": "x"}, id="c1"), text("ok")],
        [make_tool("echo", execute)],
        after_tool_call=after,
    )

    await agent.prompt("go")

    end = rec.end("c1")
    assert (end.result.content[0].text, end.result.details, end.is_error) == (
        "patched",
        {"keep": "me"},
        False,
    )
    assert tool_results(agent)[0].details == {"keep": "me"}


# -- C25: unknown and deactivated tools -----------------------------------------------------


async def test_c25_a_tool_deactivated_after_the_request_still_runs_for_that_turn() -> None:
    agent_ref: list[Agent] = []

    async def disable_b(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        agent_ref[0].state.tools = [t for t in agent_ref[0].state.tools if t.name != "b"]
        return result("disabled b")

    agent, model, _ = make_agent(
        [
            [tool_call("a", {"text": "1"}, id="c1"), tool_call("b", {"text": "2"}, id="c2")],
            tool_call("b", {"text": "3"}, id="c3"),
            text("ok"),
        ],
        [make_tool("a", disable_b), make_tool("b")],
        tool_execution="sequential",
    )
    agent_ref.append(agent)

    await agent.prompt("go")

    assert [(m.tool_call_id, m.is_error, m.content[0].text) for m in tool_results(agent)] == [
        ("c1", False, "disabled b"),
        ("c2", False, "2"),
        ("c3", True, "Tool b not found"),  # not offered in the second request
    ]
    assert [c.tool_names for c in model.calls] == [["a", "b"], ["a"], ["a"]]


# -- C26: calls cut off by the output-token limit ------------------------------------------------


async def test_c26_calls_of_a_length_stopped_message_are_not_executed() -> None:
    executed: list[str] = []

    async def execute(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        executed.append(call_id)
        return result(params.text)

    agent, model, rec = make_agent(
        [
            turn(
                [
                    tool_call("echo", {"text": "complete"}, id="c1"),
                    tool_call("echo", {"text": "trunc"}, id="c2"),
                ],
                stop_reason="length",
            ),
            tool_call("echo", {"text": "again"}, id="c3"),
            text("ok"),
        ],
        [make_tool("echo", execute)],
    )

    await agent.prompt("go")

    assert executed == ["c3"]
    first, second, third = tool_results(agent)
    for message in (first, second):
        assert message.is_error is True
        assert message.content[0].text == (
            'Tool call "echo" was not executed: the response hit the output token limit, so its '
            "arguments may be truncated. Re-issue the tool call with complete arguments."
        )
    assert (third.is_error, third.content[0].text) == (False, "again")
    assert rec.trace()[4:12] == [
        "message_start:assistant",
        "message_end:assistant",
        "tool_execution_start:c1",
        "tool_execution_end:c1",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "tool_execution_start:c2",
        "tool_execution_end:c2",
    ]
    model.assert_complete()


# -- C28: terminate --------------------------------------------------------------------------


def _terminating(flag: bool) -> Any:
    async def execute(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        return result(params.text, terminate=flag)

    return execute


async def test_c28_the_loop_stops_when_every_result_of_the_batch_terminates() -> None:
    agent, model, rec = make_agent(
        [[tool_call("stop", {"text": "a"}, id="c1"), tool_call("stop", {"text": "b"}, id="c2")]],
        [make_tool("stop", _terminating(True))],
    )

    await agent.prompt("go")

    assert len(model.calls) == 1
    assert rec.trace()[-2:] == ["turn_end", "agent_end"]
    model.assert_complete()


async def test_c28_the_loop_goes_on_when_one_result_does_not_terminate() -> None:
    agent, model, _ = make_agent(
        [
            [tool_call("stop", {"text": "a"}, id="c1"), tool_call("go", {"text": "b"}, id="c2")],
            text("next turn"),
        ],
        [make_tool("stop", _terminating(True)), make_tool("go", _terminating(False))],
    )

    await agent.prompt("go")

    assert len(model.calls) == 2
    model.assert_complete()


async def test_c28_a_block_with_terminate_can_end_the_run() -> None:
    def before(ctx: BeforeToolCallContext, signal: AbortSignal) -> BeforeToolCallResult:
        return BeforeToolCallResult(block=True, reason="stop here", terminate=True)

    agent, model, _ = make_agent(
        [tool_call("echo", {"text": "a"}, id="c1")], [make_tool("echo")], before_tool_call=before
    )

    await agent.prompt("go")

    assert (tool_results(agent)[0].is_error, result_text(agent, "c1")) == (True, "stop here")
    assert len(model.calls) == 1


# -- S34, S35: batch modes --------------------------------------------------------------------


def _timed(log: list[str], *, mode: Any = None, name: str = "t") -> Any:
    async def execute(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        log.append(f"+{call_id}")
        await asyncio.sleep(0.01 if call_id == "c1" else 0)
        log.append(f"-{call_id}")
        return result(call_id)

    return make_tool(name, execute, execution_mode=mode)


@pytest.mark.parametrize(
    ("tool_mode", "agent_mode", "expected"),
    [
        (None, "parallel", ["+c1", "+c2", "-c2", "-c1"]),
        ("parallel", "parallel", ["+c1", "+c2", "-c2", "-c1"]),
        ("sequential", "parallel", ["+c1", "-c1", "+c2", "-c2"]),
        (None, "sequential", ["+c1", "-c1", "+c2", "-c2"]),
    ],
)
async def test_s34_batch_mode_from_any_sequential_tool_or_the_global_setting(
    tool_mode: Any, agent_mode: Any, expected: list[str]
) -> None:
    log: list[str] = []
    agent, _, _ = make_agent(
        [
            [tool_call("t", {"text": "a"}, id="c1"), tool_call("s", {"text": "b"}, id="c2")],
            text("ok"),
        ],
        [_timed(log, name="t"), _timed(log, mode=tool_mode, name="s")],
        tool_execution=agent_mode,
    )

    await agent.prompt("go")

    assert log == expected


async def test_s35_sequential_is_not_a_transaction_nothing_is_rolled_back() -> None:
    store: list[str] = []

    async def write(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        if params.text == "bad":
            raise ValueError("constraint violated")
        store.append(params.text)
        return result(f"wrote {params.text}")

    agent, _, _ = make_agent(
        [
            [
                tool_call("write", {"text": "first"}, id="c1"),
                tool_call("write", {"text": "bad"}, id="c2"),
                tool_call("write", {"text": "third"}, id="c3"),
            ],
            text("ok"),
        ],
        [make_tool("write", write, execution_mode="sequential")],
    )

    await agent.prompt("go")

    assert store == ["first", "third"]
    assert [(m.tool_call_id, m.is_error) for m in tool_results(agent)] == [
        ("c1", False),
        ("c2", True),
        ("c3", False),
    ]


# -- hooks and listeners, sync and async -------------------------------------------------------


async def test_sync_and_async_hooks_and_listeners_are_accepted() -> None:
    log: list[str] = []

    async def before(
        ctx: BeforeToolCallContext, signal: AbortSignal
    ) -> BeforeToolCallResult | None:
        await asyncio.sleep(0)
        log.append("async before")
        return None

    def after(ctx: AfterToolCallContext, signal: AbortSignal) -> None:
        log.append("sync after")

    async def async_listener(event: Any) -> None:
        if event.type == "agent_end":
            await asyncio.sleep(0)
            log.append("async listener")

    def broken_listener(event: Any) -> None:
        raise RuntimeError("listener bug")  # logged and skipped: cannot break the run

    agent, model, rec = make_agent(
        [tool_call("echo", {"text": "x"}, id="c1"), text("ok")],
        [make_tool("echo")],
        before_tool_call=before,
        after_tool_call=after,
    )
    agent.subscribe(broken_listener)
    agent.subscribe(async_listener)

    await agent.prompt("go")

    assert log == ["async before", "sync after", "async listener"]
    assert rec.trace()[-1] == "agent_end"
    model.assert_complete()


async def test_unsubscribe_stops_events_and_busy_agent_refuses_a_second_prompt() -> None:
    from pi_notebook.agent.agent import AgentBusyError

    release = asyncio.Event()

    async def wait(
        call_id: str, params: EchoParams, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        await release.wait()
        return result("ok")

    agent, _, rec = make_agent(
        [tool_call("wait", {"text": "x"}, id="c1"), text("ok")], [make_tool("wait", wait)]
    )
    other: list[Any] = []
    unsubscribe = agent.subscribe(other.append)
    unsubscribe()
    run = asyncio.ensure_future(agent.prompt("one"))
    await asyncio.sleep(0.01)
    with pytest.raises(AgentBusyError):
        await agent.prompt("two")
    release.set()
    await run

    assert other == []
    assert rec.trace()[-1] == "agent_end"
    assert agent.state.is_running is False and agent.signal is None


class PayloadParams(BaseModel):
    payload: Any
    tags: list[str]


async def test_c15_hook_mutation_of_nested_arguments_never_reaches_the_assistant_message() -> None:
    def before(ctx: BeforeToolCallContext, signal: AbortSignal) -> None:
        ctx.args.payload["sql"] = "DROP TABLE t"  # type: ignore[attr-defined]
        ctx.args.tags.append("added")  # type: ignore[attr-defined]

    async def execute(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        return result(params.payload["sql"])

    raw = {"payload": {"sql": "SELECT 1"}, "tags": ["a"]}
    agent, _, rec = make_agent(
        [tool_call("q", raw, id="c1"), text("ok")],
        [make_tool("q", execute, parameters=PayloadParams)],
        before_tool_call=before,
    )

    await agent.prompt("go")

    assert result_text(agent, "c1") == "DROP TABLE t"  # execute sees the hook's change (S8)
    assistant = agent.state.messages[1]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.tool_calls[0].arguments == {"payload": {"sql": "SELECT 1"}, "tags": ["a"]}
    assert rec.of("tool_execution_start")[0].args == {"payload": {"sql": "SELECT 1"}, "tags": ["a"]}
