"""The tool_call and tool_result chains, event wrapping and the error listener
(S5, S8, S22, S23, S31, C16-C20, C23, C32)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel, Field

from pi_notebook import (
    ExtensionAPI,
    TextContent,
    ToolCallEventResult,
    ToolResult,
    ToolResultEventResult,
    create_agent_session,
)
from pi_notebook.ai.abort import AbortController
from pi_notebook.testing import ScriptedModel, text, tool_call


class Limited(BaseModel):
    text: str = Field(max_length=5)
    n: int = 1


def run_once(*steps: Any) -> ScriptedModel:
    return ScriptedModel([*steps, text("done")])


async def test_s5_interception_lives_in_session_hooks_not_in_the_wrapper(make_tool: Any) -> None:
    gate_calls: list[str] = []

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo"))
        pi.on(
            "tool_call", lambda event, ctx: gate_calls.append(event.tool_call_id) or {"block": True}
        )

    model = run_once(tool_call("echo", {}, id="via_loop"))
    session = create_agent_session(model=model, extensions=[ext], audit=False)
    # The wrapped AgentTool, called directly, runs execute without any gate...
    [wrapped] = [t for t in session.agent.state.tools if t.name == "echo"]
    direct = await wrapped.execute(
        "direct", wrapped.parameters(), AbortController().signal, lambda _: None
    )
    assert direct.content[0].text == "echo:{'text': 'hi'}"
    assert gate_calls == []
    # ...while the agent core calls the session's before-hook, which runs the chain.
    await session.prompt("go")
    assert gate_calls == ["via_loop"]
    assert session.messages[2].is_error is True


async def test_s8_c16_in_place_mutation_reaches_execute_without_revalidation(
    make_tool: Any,
) -> None:
    ran: list[tuple[str, Any]] = []
    later_saw: list[str] = []

    def mutate(event: Any, ctx: Any) -> None:
        event.input.text = "far too long for max_length"

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo", parameters=Limited, log=ran))
        pi.on("tool_call", mutate)

    def observer(pi: ExtensionAPI) -> None:
        pi.on("tool_call", lambda event, ctx: later_saw.append(event.input.text))

    session = create_agent_session(
        model=run_once(tool_call("echo", {"text": "ok", "n": "7"})),
        extensions=[ext, observer],
        audit=False,
    )
    await session.prompt("go")
    [(_, params)] = ran
    assert params.text == "far too long for max_length"  # not validated again
    assert params.n == 7  # validated (coerced) before the handlers
    assert later_saw == ["far too long for max_length"]
    assert session.messages[1].content[0].arguments == {
        "text": "ok",
        "n": "7",
    }  # as the model sent it


async def test_c16_rebinding_input_is_seen_by_later_handlers_not_by_execute(make_tool: Any) -> None:
    ran: list[tuple[str, Any]] = []
    later_saw: list[Any] = []
    first_input: list[Any] = []

    def rebind(event: Any, ctx: Any) -> None:
        first_input.append(event.input)
        event.input = Limited(text="other")

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo", parameters=Limited, log=ran))
        pi.on("tool_call", rebind)
        pi.on("tool_call", lambda event, ctx: later_saw.append(event.input))

    session = create_agent_session(
        model=run_once(tool_call("echo", {"text": "orig"})), extensions=[ext], audit=False
    )
    await session.prompt("go")
    assert later_saw == [Limited(text="other")]
    [(_, params)] = ran
    assert params is first_input[0]  # execute gets the validated object itself
    assert params.text == "orig"


async def test_s22_event_wrapping_order_around_execute(make_tool: Any) -> None:
    order: list[str] = []

    async def execute(
        tool_call_id: str, params: Any, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        order.append(f"execute:{params.text}")
        return ToolResult(content=[TextContent(text="raw")])

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo", execute=execute))

    def wrapping(pi: ExtensionAPI) -> None:
        def before(event: Any, ctx: Any) -> None:
            order.append("tool_call")
            event.input.text = "checked"

        def after(event: Any, ctx: Any) -> dict[str, Any]:
            order.append("tool_result")
            return {"content": [{"type": "text", "text": event.content[0].text + " (annotated)"}]}

        pi.on("tool_call", before)
        pi.on("tool_result", after)

    session = create_agent_session(
        model=run_once(tool_call("echo", {})), extensions=[ext, wrapping], audit=False
    )
    await session.prompt("go")
    assert order == ["tool_call", "execute:checked", "tool_result"]
    assert session.messages[2].content == [TextContent(text="raw (annotated)")]


@pytest.mark.parametrize(
    "answer",
    [
        {"block": True, "reason": "Not on Fridays."},
        ToolCallEventResult(block=True, reason="Not on Fridays."),
    ],
    ids=["dict", "object"],
)
async def test_s23_block_with_reason_is_error_result_and_execute_never_runs(
    answer: Any, make_tool: Any, results_of: Any
) -> None:
    ran: list[Any] = []
    result_handler: list[Any] = []

    async def gate(event: Any, ctx: Any) -> Any:
        await asyncio.sleep(0)
        return answer

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo", log=ran))
        pi.on("tool_call", gate)
        pi.on("tool_result", lambda event, ctx: result_handler.append(event))

    session = create_agent_session(
        model=run_once(tool_call("echo", {})), extensions=[ext], audit=False
    )
    await session.prompt("go")
    [result] = results_of(session)
    assert (result.is_error, result.content[0].text) == (True, "Not on Fridays.")
    assert ran == [] and result_handler == []


async def test_c17_chain_order_first_block_stops_default_reason(
    make_tool: Any, results_of: Any
) -> None:
    order: list[str] = []

    def first(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo"))
        pi.on("tool_call", lambda e, c: order.append("first.1"))
        pi.on(
            "tool_call",
            lambda e, c: order.append("first.2") or {"block": False, "reason": "ignored"},
        )

    def second(pi: ExtensionAPI) -> None:
        pi.on("tool_call", lambda e, c: order.append("second.1") or {"block": True})
        pi.on("tool_call", lambda e, c: order.append("second.2"))

    def third(pi: ExtensionAPI) -> None:
        pi.on("tool_call", lambda e, c: order.append("third.1"))

    shared: list[Any] = []

    def spy(pi: ExtensionAPI) -> None:
        pi.on("tool_call", lambda e, c: shared.append(e))

    session = create_agent_session(
        model=run_once(tool_call("echo", {})), extensions=[spy, first, second, third], audit=False
    )
    await session.prompt("go")
    assert order == ["first.1", "first.2", "second.1"]
    [result] = results_of(session)
    assert (result.is_error, result.content[0].text) == (True, "Tool execution was blocked")
    assert len(shared) == 1


async def test_c17_non_blocking_return_has_no_effect(make_tool: Any, results_of: Any) -> None:
    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo"))
        pi.on("tool_call", lambda e, c: {"block": False, "reason": "fine"})
        pi.on("tool_call", lambda e, c: ToolCallEventResult(reason="still fine"))

    session = create_agent_session(
        model=run_once(tool_call("echo", {})), extensions=[ext], audit=False
    )
    await session.prompt("go")
    assert results_of(session)[0].is_error is False


async def test_c17_block_with_terminate_ends_the_run(make_tool: Any) -> None:
    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo"))
        pi.on("tool_call", lambda e, c: {"block": True, "reason": "stop here", "terminate": True})

    model = ScriptedModel([tool_call("echo", {})])  # no second step: the run must not ask again
    session = create_agent_session(model=model, extensions=[ext], audit=False)
    await session.prompt("go")
    model.assert_complete()
    assert session.messages[-1].role == "toolResult"


async def test_c18_s31_raising_tool_call_handler_blocks_and_is_not_reported(
    make_tool: Any, results_of: Any
) -> None:
    ran: list[Any] = []
    reports: list[Any] = []
    later: list[str] = []

    def gate(event: Any, ctx: Any) -> None:
        raise PermissionError("policy engine is down")

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo", log=ran))
        pi.on("tool_call", gate)
        pi.on("tool_call", lambda e, c: later.append("later"))
        pi.on_error(reports.append)

    session = create_agent_session(
        model=run_once(tool_call("echo", {})), extensions=[ext], audit=False
    )
    await session.prompt("go")
    [result] = results_of(session)
    assert (result.is_error, result.content[0].text) == (True, "policy engine is down")
    assert ran == [] and later == []
    assert reports == [] and session.extension_errors() == []


async def test_unknown_shape_from_tool_call_handler_blocks_naming_extension_and_tool(
    make_tool: Any, results_of: Any
) -> None:
    ran: list[Any] = []

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo", log=ran))
        pi.on("tool_call", lambda e, c: "yes please")

    def ext_keys(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("other", log=ran))
        pi.on("tool_call", lambda e, c: {"allow": True} if e.tool_name == "other" else None)

    model = run_once([tool_call("echo", {}), tool_call("other", {})])
    session = create_agent_session(model=model, extensions=[ext_keys, ext], audit=False)
    await session.prompt("go")
    other, echo = sorted(results_of(session), key=lambda m: m.tool_name, reverse=True)
    assert ran == []
    assert (
        echo.is_error and "<inline:2>" in echo.content[0].text and '"echo"' in echo.content[0].text
    )
    assert "str" in echo.content[0].text
    assert (
        other.is_error
        and "<inline:1>" in other.content[0].text
        and "'allow'" in other.content[0].text
    )
    # the session keeps working
    assert session.messages[-1].content[0].text == "done"


async def test_c19_no_tool_call_handler_means_ungated(make_tool: Any, results_of: Any) -> None:
    ran: list[Any] = []

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo", log=ran))
        pi.on("tool_result", lambda e, c: None)

    session = create_agent_session(
        model=run_once(tool_call("echo", {})), extensions=[ext], audit=False
    )
    await session.prompt("go")
    assert len(ran) == 1 and results_of(session)[0].is_error is False


async def test_c20_tool_call_runs_after_every_start_listener_finished(make_tool: Any) -> None:
    order: list[str] = []

    async def slow_start(event: Any, ctx: Any) -> None:
        order.append("ext start begins")
        await asyncio.sleep(0.01)
        order.append("ext start ends")

    async def slow_subscriber(event: Any) -> None:
        if event.type == "tool_execution_start":
            await asyncio.sleep(0.01)
            order.append("subscriber start ends")

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo"))
        pi.on("tool_execution_start", slow_start)
        pi.on("tool_call", lambda e, c: order.append("tool_call"))

    session = create_agent_session(
        model=run_once(tool_call("echo", {})), extensions=[ext], audit=False
    )
    session.subscribe(slow_subscriber)
    await session.prompt("go")
    assert order == ["ext start begins", "ext start ends", "subscriber start ends", "tool_call"]


async def test_c23_result_handlers_chain_patches(make_tool: Any, results_of: Any) -> None:
    seen: list[tuple[str, Any, Any, bool]] = []
    original_details = {"rows": 3}

    async def execute(
        tool_call_id: str, params: Any, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        return ToolResult(content=[TextContent(text="raw")], details=original_details)

    def record(tag: str) -> Any:
        return lambda e, c: seen.append(
            (
                tag,
                [p.text if hasattr(p, "text") else p["text"] for p in e.content],
                e.details,
                e.is_error,
            )
        )

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo", execute=execute))
        pi.on("tool_result", record("h1"))
        pi.on("tool_result", lambda e, c: {"content": [TextContent(text="patched")]})
        pi.on("tool_result", record("h3"))
        pi.on(
            "tool_result",
            lambda e, c: ToolResultEventResult(details={"rows": 3, "note": "x"}, is_error=True),
        )
        pi.on("tool_result", record("h5"))

    session = create_agent_session(
        model=run_once(tool_call("echo", {})), extensions=[ext], audit=False
    )
    await session.prompt("go")
    assert seen == [
        ("h1", ["raw"], {"rows": 3}, False),
        ("h3", ["patched"], {"rows": 3}, False),  # details left out: latest value kept
        ("h5", ["patched"], {"rows": 3, "note": "x"}, True),
    ]
    [result] = results_of(session)
    assert result.content == [TextContent(text="patched")]
    assert (result.details, result.is_error) == ({"rows": 3, "note": "x"}, True)


async def test_c23_patch_flips_error_to_success_and_cannot_terminate(
    make_tool: Any, results_of: Any
) -> None:
    async def boom(
        tool_call_id: str, params: Any, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        raise RuntimeError("boom")

    seen: list[tuple[str, bool]] = []

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo", execute=boom))
        pi.on("tool_result", lambda e, c: seen.append((e.content[0].text, e.is_error)))
        pi.on("tool_result", lambda e, c: {"terminate": True, "is_error": False})  # rejected whole
        pi.on(
            "tool_result",
            lambda e, c: {"is_error": False, "content": [{"type": "text", "text": "recovered"}]},
        )

    model = ScriptedModel([tool_call("echo", {}), text("done")])  # not terminated: asks again
    session = create_agent_session(model=model, extensions=[ext], audit=False)
    await session.prompt("go")
    assert seen == [("boom", True)]  # handlers run for an execute error too
    [result] = results_of(session)
    assert (result.is_error, result.content[0].text) == (False, "recovered")
    assert [e["event"] for e in session.extension_errors()] == ["tool_result"]
    assert "terminate" in session.extension_errors()[0]["error"]
    model.assert_complete()


async def test_c23_without_patch_result_is_exactly_what_execute_returned(make_tool: Any) -> None:
    returned = ToolResult(content=[TextContent(text="raw")], details={"rows": [1, 2]})
    ends: list[Any] = []

    async def execute(
        tool_call_id: str, params: Any, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        return returned

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo", execute=execute))
        pi.on("tool_result", lambda e, c: None)
        pi.on("tool_execution_end", lambda e, c: ends.append(e.result))

    session = create_agent_session(
        model=run_once(tool_call("echo", {})), extensions=[ext], audit=False
    )
    await session.prompt("go")
    assert ends == [returned]
    assert session.messages[2].details is returned.details
    assert session.messages[2].content == returned.content


async def test_c23_result_handlers_skip_unknown_invalid_prepare_failed_blocked_aborted(
    make_tool: Any, results_of: Any
) -> None:
    handled: list[str] = []

    class Strict(BaseModel):
        n: int

    def failing_prepare(raw: Any) -> Any:
        raise ValueError("cannot prepare")

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("strict", parameters=Strict))
        prepared = make_tool("prep")
        prepared.prepare_arguments = failing_prepare
        pi.register_tool(prepared)
        pi.register_tool(make_tool("blocked"))
        pi.register_tool(make_tool("ok"))
        pi.on("tool_call", lambda e, c: {"block": True} if e.tool_name == "blocked" else None)
        pi.on("tool_result", lambda e, c: handled.append(e.tool_name))

    model = ScriptedModel(
        [
            [
                tool_call("ghost", {}),
                tool_call("strict", {"n": "x"}),
                tool_call("prep", {}),
                tool_call("blocked", {}),
                tool_call("ok", {}),
            ],
            text("done"),
        ]
    )
    session = create_agent_session(model=model, extensions=[ext], audit=False)
    await session.prompt("go")
    assert handled == ["ok"]
    errors = {m.tool_name: m.content[0].text for m in results_of(session) if m.is_error}
    assert errors["ghost"] == "Tool ghost not found"
    assert errors["strict"].startswith('Validation failed for tool "strict":')
    assert errors["prep"] == "cannot prepare"
    assert errors["blocked"] == "Tool execution was blocked"


async def test_c23_no_result_handler_after_abort_before_execution(
    make_tool: Any, results_of: Any
) -> None:
    handled: list[str] = []
    ran: list[Any] = []

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo", log=ran))
        pi.on("tool_call", lambda e, c: c.abort())
        pi.on("tool_result", lambda e, c: handled.append(e.tool_name))

    model = ScriptedModel([tool_call("echo", {})])
    session = create_agent_session(model=model, extensions=[ext], audit=False)
    await session.prompt("go")
    assert handled == [] and ran == []
    [result] = results_of(session)
    assert (result.is_error, result.content[0].text) == (True, "Operation aborted")


async def test_s31_raising_result_handler_is_isolated_and_reported(
    make_tool: Any, results_of: Any
) -> None:
    reports: list[Any] = []
    later: list[str] = []

    def bad(event: Any, ctx: Any) -> None:
        raise RuntimeError("redactor crashed")

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo"))
        pi.on("tool_result", bad)
        pi.on_error(reports.append)

    def other(pi: ExtensionAPI) -> None:
        pi.on("tool_result", lambda e, c: later.append(e.content[0].text))

    session = create_agent_session(
        model=run_once(tool_call("echo", {})), extensions=[ext, other], audit=False
    )
    await session.prompt("go")
    [result] = results_of(session)
    assert (result.is_error, result.content[0].text) == (False, "echo:{'text': 'hi'}")
    assert later == ["echo:{'text': 'hi'}"]
    assert [(r.extension_path, r.event, r.error) for r in reports] == [
        ("<inline:1>", "tool_result", "redactor crashed")
    ]


async def test_unknown_shape_from_tool_result_handler_is_reported_and_ignored(
    make_tool: Any, results_of: Any
) -> None:
    reports: list[Any] = []

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo"))
        pi.on("tool_result", lambda e, c: 42)
        pi.on_error(reports.append)

    session = create_agent_session(
        model=run_once(tool_call("echo", {})), extensions=[ext], audit=False
    )
    await session.prompt("go")
    assert results_of(session)[0].content[0].text == "echo:{'text': 'hi'}"
    [report] = reports
    assert (
        report.extension_path == "<inline:1>" and '"echo"' in report.error and "int" in report.error
    )


async def test_c32_errors_of_other_events_reach_listener_and_do_not_stop_others(
    make_tool: Any,
) -> None:
    reports: list[Any] = []
    host_reports: list[Any] = []
    survivors: list[str] = []

    def broken(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo"))
        for event in ("turn_start", "tool_execution_start", "tool_execution_end", "agent_end"):
            pi.on(event, lambda e, c: 1 / 0)

    def listener(pi: ExtensionAPI) -> None:
        pi.on("agent_end", lambda e, c: survivors.append(e.type))
        pi.on("tool_execution_end", lambda e, c: survivors.append(e.type))
        pi.on_error(reports.append)

    session = create_agent_session(
        model=run_once(tool_call("echo", {})), extensions=[broken, listener], audit=False
    )
    session.runner.on_error(host_reports.append)
    await session.prompt("go")
    assert [(r.extension_path, r.event, r.error) for r in reports] == [
        ("<inline:1>", "turn_start", "division by zero"),
        ("<inline:1>", "tool_execution_start", "division by zero"),
        ("<inline:1>", "tool_execution_end", "division by zero"),
        ("<inline:1>", "turn_start", "division by zero"),
        ("<inline:1>", "agent_end", "division by zero"),
    ]
    assert host_reports == reports
    assert survivors == ["tool_execution_end", "agent_end"]
    assert session.messages[-1].content[0].text == "done"
    assert session.extension_errors()[0] == {
        "extension_path": "<inline:1>",
        "event": "turn_start",
        "error": "division by zero",
    }


async def test_c23_patch_content_as_string_or_dicts_is_normalised(
    make_tool: Any, results_of: Any
) -> None:
    later_saw: list[Any] = []

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo"))
        pi.on("tool_result", lambda e, c: {"content": "as a plain string"})
        pi.on("tool_result", lambda e, c: later_saw.append(list(e.content)))
        pi.on(
            "tool_result",
            lambda e, c: {"content": [*e.content, {"type": "text", "text": "a dict part"}]},
        )
        pi.on("tool_result", lambda e, c: later_saw.append(list(e.content)))

    session = create_agent_session(
        model=run_once(tool_call("echo", {})), extensions=[ext], audit=False
    )
    await session.prompt("go")
    assert later_saw == [
        [TextContent(text="as a plain string")],
        [TextContent(text="as a plain string"), TextContent(text="a dict part")],
    ]
    assert results_of(session)[0].content == later_saw[-1]
