"""Whole event sequences (type, tool_call_id, order) of the agent core, pinned (C30, C27,
S34, C15, C25, S33)."""

from __future__ import annotations

import asyncio
from typing import Any

from agent_support import CountParams, make_agent, make_tool, result, result_text

from pi_notebook.agent.types import ToolResult, ToolUpdateCallback
from pi_notebook.ai.abort import AbortSignal
from pi_notebook.testing import text, tool_call

USER = ["agent_start", "turn_start", "message_start:user", "message_end:user"]
ASSISTANT = ["message_start:assistant", "message_end:assistant"]
FINAL_TEXT_TURN = ["turn_start", *ASSISTANT, "turn_end", "agent_end"]


def tool_result_msg(call_id: str) -> list[str]:
    return [f"message_start:toolResult:{call_id}", f"message_end:toolResult:{call_id}"]


async def test_c30_event_order_for_one_successful_call() -> None:
    async def echo(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        on_update(result("working"))
        on_update(result("almost"))
        return result(params.text)

    agent, model, rec = make_agent(
        [tool_call("echo", {"text": "hi"}, id="c1"), text("done")], [make_tool("echo", echo)]
    )

    await agent.prompt("say hi")

    assert rec.trace(updates=True) == [
        *USER,
        "message_start:assistant",
        "message_update:toolcall_start",
        "message_update:toolcall_delta",
        "message_update:toolcall_end",
        "message_end:assistant",
        "tool_execution_start:c1",
        "tool_execution_update:c1",
        "tool_execution_update:c1",
        "tool_execution_end:c1",
        *tool_result_msg("c1"),
        "turn_end",
        "turn_start",
        "message_start:assistant",
        "message_update:text_start",
        "message_update:text_delta",
        "message_update:text_end",
        "message_end:assistant",
        "turn_end",
        "agent_end",
    ]
    updates = rec.of("tool_execution_update")
    assert [u.partial_result.content[0].text for u in updates] == ["working", "almost"]
    (first_turn_end, _) = rec.of("turn_end")
    assert [m.tool_call_id for m in first_turn_end.tool_results] == ["c1"]
    assert rec.of("agent_end")[0].messages == agent.state.messages
    model.assert_complete()


async def test_c27_parallel_batch_ends_in_completion_order_results_in_source_order() -> None:
    fast_done = asyncio.Event()
    log: list[str] = []

    async def slow(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        log.append("slow runs")
        await fast_done.wait()
        await asyncio.sleep(0)
        return result("slow result")

    async def fast(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        log.append("fast runs")
        fast_done.set()
        return result("fast result")

    def before(ctx: Any, signal: AbortSignal) -> None:
        log.append(f"before {ctx.tool_call.id}")

    agent, _, rec = make_agent(
        [
            [tool_call("slow", {"text": "a"}, id="c1"), tool_call("fast", {"text": "b"}, id="c2")],
            text("ok"),
        ],
        [make_tool("slow", slow), make_tool("fast", fast)],
        before_tool_call=before,
    )

    await agent.prompt("go")

    assert rec.trace() == [
        *USER,
        *ASSISTANT,
        "tool_execution_start:c1",
        "tool_execution_start:c2",
        "tool_execution_end:c2",
        "tool_execution_end:c1",
        *tool_result_msg("c1"),
        *tool_result_msg("c2"),
        "turn_end",
        *FINAL_TEXT_TURN,
    ]
    # Every before-hook runs, in source order, before any execute starts.
    assert log == ["before c1", "before c2", "slow runs", "fast runs"]
    turn_end = rec.of("turn_end")[0]
    assert [m.tool_call_id for m in turn_end.tool_results] == ["c1", "c2"]
    assert [result_text(agent, c) for c in ("c1", "c2")] == ["slow result", "fast result"]


async def test_c27_parallel_invalid_call_ends_during_the_first_phase() -> None:
    started = asyncio.Event()

    async def wait(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        started.set()
        return result("waited")

    agent, _, rec = make_agent(
        [
            [
                tool_call("wait", {"text": "a"}, id="c1"),
                tool_call("count", {"n": "not a number"}, id="c2"),
                tool_call("missing", {}, id="c3"),
            ],
            text("ok"),
        ],
        [make_tool("wait", wait), make_tool("count", parameters=CountParams)],
    )

    await agent.prompt("go")

    assert rec.trace() == [
        *USER,
        *ASSISTANT,
        "tool_execution_start:c1",
        "tool_execution_start:c2",
        "tool_execution_end:c2",
        "tool_execution_start:c3",
        "tool_execution_end:c3",
        "tool_execution_end:c1",
        *tool_result_msg("c1"),
        *tool_result_msg("c2"),
        *tool_result_msg("c3"),
        "turn_end",
        *FINAL_TEXT_TURN,
    ]


async def test_s34_c27_sequential_batch_completes_each_call_before_the_next_starts() -> None:
    log: list[str] = []

    def tool(name: str, mode: Any = None) -> Any:
        async def execute(
            call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
        ) -> ToolResult:
            log.append(f"{call_id} begins")
            await asyncio.sleep(0.01 if call_id == "c1" else 0)
            log.append(f"{call_id} ends")
            return result(name)

        return make_tool(name, execute, execution_mode=mode)

    agent, _, rec = make_agent(
        [
            [tool_call("a", {"text": "1"}, id="c1"), tool_call("b", {"text": "2"}, id="c2")],
            text("ok"),
        ],
        [tool("a"), tool("b", "sequential")],
    )

    await agent.prompt("go")

    assert rec.trace() == [
        *USER,
        *ASSISTANT,
        "tool_execution_start:c1",
        "tool_execution_end:c1",
        *tool_result_msg("c1"),
        "tool_execution_start:c2",
        "tool_execution_end:c2",
        *tool_result_msg("c2"),
        "turn_end",
        *FINAL_TEXT_TURN,
    ]
    assert log == ["c1 begins", "c1 ends", "c2 begins", "c2 ends"]


async def test_c15_validation_failure_event_sequence_and_text() -> None:
    executed: list[str] = []
    hooked: list[str] = []

    async def count(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        executed.append(call_id)
        return result("counted")

    agent, _, rec = make_agent(
        [tool_call("count", {"n": "five", "extra": [1]}, id="c1"), text("ok")],
        [make_tool("count", count, parameters=CountParams)],
        before_tool_call=lambda ctx, signal: hooked.append(ctx.tool_call.id),
    )

    await agent.prompt("go")

    assert rec.trace() == [
        *USER,
        *ASSISTANT,
        "tool_execution_start:c1",
        "tool_execution_end:c1",
        *tool_result_msg("c1"),
        "turn_end",
        *FINAL_TEXT_TURN,
    ]
    assert result_text(agent, "c1") == (
        'Validation failed for tool "count":\n'
        "  - n: Input should be a valid integer, unable to parse string as an integer\n"
        "\n"
        "Received arguments:\n"
        "{\n"
        '  "n": "five",\n'
        '  "extra": [\n'
        "    1\n"
        "  ]\n"
        "}"
    )
    assert rec.end("c1").is_error is True
    assert executed == [] and hooked == []


async def test_c25_unknown_tool_event_sequence_and_text() -> None:
    agent, _, rec = make_agent(
        [tool_call("nope", {"text": "x"}, id="c1"), text("ok")], [make_tool("echo")]
    )

    await agent.prompt("go")

    assert rec.trace() == [
        *USER,
        *ASSISTANT,
        "tool_execution_start:c1",
        "tool_execution_end:c1",
        *tool_result_msg("c1"),
        "turn_end",
        *FINAL_TEXT_TURN,
    ]
    end = rec.end("c1")
    assert (end.tool_name, end.is_error) == ("nope", True)
    assert result_text(agent, "c1") == "Tool nope not found"


ABORT_SEQUENCE = [
    *USER,
    *ASSISTANT,
    "tool_execution_start:c1",
    "tool_execution_end:c1",
    *tool_result_msg("c1"),
    "turn_end",
    "agent_end",
]


async def test_s33_abort_during_execute_of_a_tool_that_honours_the_signal() -> None:
    started = asyncio.Event()

    async def honours(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        started.set()
        await signal  # the tool forwards the signal to what it waits on
        signal.throw_if_aborted()
        return result("never")

    agent, model, rec = make_agent(
        [tool_call("work", {"text": "x"}, id="c1")], [make_tool("work", honours)]
    )

    run = asyncio.ensure_future(agent.prompt("go"))
    await asyncio.wait_for(started.wait(), 1)
    agent.abort()
    await asyncio.wait_for(run, 1)

    assert rec.trace() == ABORT_SEQUENCE
    assert rec.end("c1").is_error is True
    assert result_text(agent, "c1") == "Operation aborted"
    assert len(model.calls) == 1  # no further model request after an abort
    model.assert_complete()


async def test_s33_abort_during_execute_of_a_tool_that_ignores_the_signal() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def ignores(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        started.set()
        await release.wait()  # does not look at the signal
        return result("finished anyway", {"rows": 3})

    agent, model, rec = make_agent(
        [tool_call("work", {"text": "x"}, id="c1")], [make_tool("work", ignores)]
    )

    run = asyncio.ensure_future(agent.prompt("go"))
    await asyncio.wait_for(started.wait(), 1)
    agent.abort()
    await asyncio.sleep(0.01)
    assert not run.done()  # the core does not pre-empt the tool
    release.set()
    await asyncio.wait_for(run, 1)

    assert rec.trace() == ABORT_SEQUENCE
    end = rec.end("c1")
    assert end.is_error is False
    assert end.result.details == {"rows": 3}
    assert result_text(agent, "c1") == "finished anyway"
    assert len(model.calls) == 1


async def test_s33_parallel_batch_abort_only_the_honouring_tool_errors() -> None:
    started = asyncio.Semaphore(0)

    async def honours(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        started.release()
        await signal
        signal.throw_if_aborted()
        return result("never")

    async def ignores(
        call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        started.release()
        await signal
        await asyncio.sleep(0.01)  # finishes after the honouring tool
        return result("ignored the abort")

    agent, _, rec = make_agent(
        [
            [
                tool_call("honours", {"text": "x"}, id="c1"),
                tool_call("ignores", {"text": "y"}, id="c2"),
            ]
        ],
        [make_tool("honours", honours), make_tool("ignores", ignores)],
    )
    run = asyncio.ensure_future(agent.prompt("go"))
    for _ in range(2):
        await asyncio.wait_for(started.acquire(), 1)
    agent.abort()
    await asyncio.wait_for(run, 1)

    assert rec.trace() == [
        *USER,
        *ASSISTANT,
        "tool_execution_start:c1",
        "tool_execution_start:c2",
        "tool_execution_end:c1",
        "tool_execution_end:c2",
        *tool_result_msg("c1"),
        *tool_result_msg("c2"),
        "turn_end",
        "agent_end",
    ]
    assert [(rec.end(c).is_error, result_text(agent, c)) for c in ("c1", "c2")] == [
        (True, "Operation aborted"),
        (False, "ignored the abort"),
    ]
