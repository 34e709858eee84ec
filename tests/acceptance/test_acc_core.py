"""Acceptance: agent core and extension tool system (spec S/C/B ids), black-box."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from pi_notebook import (
    ExtensionAPI,
    TextContent,
    ToolDefinition,
    ToolResult,
    create_agent_session,
    define_tool,
)
from pi_notebook.testing import ScriptedModel, text, tool_call


def _text(parts: Any) -> str:
    out = []
    for p in parts or []:
        out.append(p["text"] if isinstance(p, dict) else p.text)
    return "".join(out)


def _tool_results(session) -> list:
    return [m for m in session.messages if m.role == "toolResult"]


class EchoParams(BaseModel):
    text: str


class NumParams(BaseModel):
    n: int


def make_echo(name: str = "echo", log: list | None = None, **kw: Any) -> ToolDefinition:
    async def echo(tool_call_id, params, signal, on_update, ctx):
        if log is not None:
            log.append((name, tool_call_id, params.text))
        on_update(ToolResult(content=[TextContent(text="working")], details={"phase": 1}))
        return ToolResult(content=[TextContent(text=params.text)], details={"n": 1})

    return define_tool(
        ToolDefinition(
            name=name,
            label=name.title(),
            description=f"{name} text.",
            parameters=EchoParams,
            execute=echo,
            **kw,
        )
    )


_OPEN: list = []


@pytest.fixture(autouse=True)
async def _close_sessions():
    yield
    while _OPEN:
        s = _OPEN.pop()
        try:
            await s.close()
        except Exception:
            pass


async def run(model_steps: list, **session_kw: Any):
    model = ScriptedModel(model_steps)
    session = create_agent_session(model=model, **session_kw)
    _OPEN.append(session)
    events: list = []
    session.subscribe(events.append)
    await session.prompt("go")
    return session, events, model


def test_c1_s2_define_tool_is_identity():
    d = ToolDefinition(
        name="x", label="X", description="d", parameters=EchoParams, execute=lambda *a: None
    )
    assert define_tool(d) is d


async def test_s10_s13_echo_tool_example_updates_and_result():
    echo_tool = make_echo()

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(echo_tool)

    session, events, model = await run(
        [[tool_call("echo", {"text": "hi"}, id="c1")], text("done")], extensions=[ext]
    )
    model.assert_complete()
    types = [e.type for e in events]
    assert (
        types.index("tool_execution_start")
        < types.index("tool_execution_update")
        < types.index("tool_execution_end")
    )
    upd = next(e for e in events if e.type == "tool_execution_update")
    assert upd.tool_call_id == "c1"
    assert _text(upd.partial_result.content) == "working"
    start = next(e for e in events if e.type == "tool_execution_start")
    assert start.tool_name == "echo" and start.args == {"text": "hi"}
    (msg,) = _tool_results(session)
    assert msg.tool_call_id == "c1" and msg.tool_name == "echo"
    assert _text(msg.content) == "hi"
    assert msg.details == {"n": 1}
    assert msg.is_error is False
    end = next(e for e in events if e.type == "tool_execution_end")
    assert end.is_error is False  # C24
    assert _text(end.result.content) == "hi"
    await session.close()


async def test_s8_c16_tool_call_mutation_seen_by_execute_without_revalidation():
    seen: list = []

    async def exe(tool_call_id, params, signal, on_update, ctx):
        seen.append(("execute", params.n))
        return ToolResult(content=[TextContent(text=str(params.n))], details={})

    tool = ToolDefinition(
        name="num", label="Num", description="n", parameters=NumParams, execute=exe
    )

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(tool)

        def first(event, ctx):
            if event.tool_name == "num":
                seen.append(("first", type(event.input).__name__))
                event.input.n = "not-an-int"  # invalid per schema; no re-validation

        async def second(event, ctx):
            seen.append(("second", event.input.n))

        pi.on("tool_call", first)
        pi.on("tool_call", second)

    session, _, _ = await run(
        [[tool_call("num", {"n": "5"}, id="c1")], text("ok")], extensions=[ext]
    )
    assert seen == [("first", "NumParams"), ("second", "not-an-int"), ("execute", "not-an-int")]
    (msg,) = _tool_results(session)
    assert msg.is_error is False
    assert _text(msg.content) == "not-an-int"


@pytest.mark.parametrize(
    ("ret", "expected"),
    [
        ({"block": True, "reason": "policy says no"}, "policy says no"),
        ({"block": True}, "Tool execution was blocked"),
    ],
)
async def test_s23_c17_block_with_and_without_reason(ret, expected):
    ran: list = []
    tool = make_echo(log=ran)
    after: list = []

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(tool)
        pi.on("tool_call", lambda event, ctx: ret)
        pi.on("tool_call", lambda event, ctx: after.append(1))  # first block stops the chain
        pi.on("tool_result", lambda event, ctx: after.append("result"))

    session, _, _ = await run(
        [[tool_call("echo", {"text": "x"}, id="c1")], text("ok")], extensions=[ext]
    )
    assert ran == [] and after == []
    (msg,) = _tool_results(session)
    assert msg.is_error is True
    assert _text(msg.content) == expected


async def test_c18_s30_raising_tool_call_handler_blocks_fail_closed():
    ran: list = []

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_echo(log=ran))

        def boom(event, ctx):
            raise RuntimeError("gate exploded")

        pi.on("tool_call", boom)

    session, _, _ = await run(
        [[tool_call("echo", {"text": "x"}, id="c1")], text("ok")], extensions=[ext]
    )
    assert ran == []
    (msg,) = _tool_results(session)
    assert msg.is_error is True
    assert "gate exploded" in _text(msg.content)


async def test_c23_c24_tool_result_patches_chain():
    seen: list = []

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_echo())

        def p1(event, ctx):
            seen.append(("p1", _text(event.content), event.input.text))
            return {"content": [TextContent(text="patched")]}

        def p2(event, ctx):
            seen.append(("p2", _text(event.content), event.details))
            return {"details": {"redacted": True}}

        pi.on("tool_result", p1)
        pi.on("tool_result", p2)

    session, events, _ = await run(
        [[tool_call("echo", {"text": "secret"}, id="c1")], text("ok")], extensions=[ext]
    )
    assert seen == [("p1", "secret", "secret"), ("p2", "patched", {"n": 1})]
    (msg,) = _tool_results(session)
    assert _text(msg.content) == "patched"
    assert msg.details == {"redacted": True}
    assert msg.is_error is False
    end = next(e for e in events if e.type == "tool_execution_end")
    assert _text(end.result.content) == "patched" and end.is_error is False


async def test_s31_raising_tool_result_handler_is_isolated():
    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_echo())

        def bad(event, ctx):
            raise ValueError("result handler broke")

        pi.on("tool_result", bad)

    session, _, _ = await run(
        [[tool_call("echo", {"text": "kept"}, id="c1")], text("ok")], extensions=[ext]
    )
    (msg,) = _tool_results(session)
    assert msg.is_error is False
    assert _text(msg.content) == "kept"


async def test_s32_c22_details_error_is_not_error_but_raise_is():
    async def soft(tool_call_id, params, signal, on_update, ctx):
        return ToolResult(content=[TextContent(text="meh")], details={"error": "soft"})

    async def hard(tool_call_id, params, signal, on_update, ctx):
        raise Exception("boom")

    tools = [
        ToolDefinition(
            name="soft", label="S", description="s", parameters=EchoParams, execute=soft
        ),
        ToolDefinition(
            name="hard", label="H", description="h", parameters=EchoParams, execute=hard
        ),
    ]
    session, _, model = await run(
        [
            [tool_call("soft", {"text": "a"}, id="c1"), tool_call("hard", {"text": "b"}, id="c2")],
            text("ok"),
        ],
        custom_tools=tools,
    )
    model.assert_complete()  # C22: the run goes on with another model request
    soft_msg, hard_msg = _tool_results(session)
    assert soft_msg.is_error is False and soft_msg.details == {"error": "soft"}
    assert (
        hard_msg.is_error is True and _text(hard_msg.content) == "boom" and hard_msg.details == {}
    )


async def test_c15_c13_validation_error_text():
    ran: list = []

    async def exe(tool_call_id, params, signal, on_update, ctx):
        ran.append(params)
        return ToolResult(content=[TextContent(text="x")], details={})

    tool = ToolDefinition(
        name="num", label="Num", description="n", parameters=NumParams, execute=exe
    )

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(tool)
        pi.on("tool_call", lambda e, c: ran.append("gate"))

    session, events, _ = await run(
        [[tool_call("num", {"n": "abc"}, id="c1")], text("ok")], extensions=[ext]
    )
    assert ran == []
    (msg,) = _tool_results(session)
    assert msg.is_error is True
    body = _text(msg.content)
    assert body.startswith('Validation failed for tool "num":')
    assert "\n  - n: " in body
    assert "Received arguments:" in body and '"abc"' in body
    start = next(e for e in events if e.type == "tool_execution_start")
    assert start.args == {"n": "abc"}


async def test_c25_s30_unknown_tool_not_found():
    session, events, _ = await run([[tool_call("nope", {}, id="c1")], text("ok")])
    (msg,) = _tool_results(session)
    assert msg.is_error is True
    assert _text(msg.content) == "Tool nope not found"
    assert [e.type for e in events if e.type.startswith("tool_execution")] == [
        "tool_execution_start",
        "tool_execution_end",
    ]


def _tagged_read(tag: str) -> ToolDefinition:
    async def exe(tool_call_id, params, signal, on_update, ctx):
        return ToolResult(content=[TextContent(text=tag)], details={})

    return ToolDefinition(
        name="read", label="Read", description=tag, parameters=EchoParams, execute=exe
    )


async def test_b1_s19_s20_precedence_sdk_over_extension_over_builtin(tmp_path):
    (tmp_path / "f.txt").write_text("builtin content")
    # built-in only
    s0 = create_agent_session(model=ScriptedModel([text("hi")]), cwd=str(tmp_path))
    assert {"read", "ls", "inspect_variable"} <= set(s0.active_tool_names)
    await s0.close()

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(_tagged_read("extension"))

    s1, _, _ = await run(
        [[tool_call("read", {"text": "f.txt"}, id="c1")], text("ok")],
        extensions=[ext],
        cwd=str(tmp_path),
    )
    assert _text(_tool_results(s1)[0].content) == "extension"

    s2, _, _ = await run(
        [[tool_call("read", {"text": "f.txt"}, id="c1")], text("ok")],
        extensions=[ext],
        custom_tools=[_tagged_read("sdk")],
        cwd=str(tmp_path),
    )
    assert _text(_tool_results(s2)[0].content) == "sdk"
    assert s2.active_tool_names.count("read") == 1


async def test_s19_first_extension_wins_between_extensions():
    def ext_a(pi: ExtensionAPI) -> None:
        pi.register_tool(_tagged_read("first"))

    def ext_b(pi: ExtensionAPI) -> None:
        pi.register_tool(_tagged_read("second"))

    s, _, _ = await run(
        [[tool_call("read", {"text": "x"}, id="c1")], text("ok")], extensions=[ext_a, ext_b]
    )
    assert _text(_tool_results(s)[0].content) == "first"


async def test_s17_s18_c8_allow_and_exclude():
    holder: dict = {}

    def ext(pi: ExtensionAPI) -> None:
        holder["pi"] = pi
        pi.register_tool(make_echo("echo"))
        pi.register_tool(make_echo("shout"))

    s = create_agent_session(
        model=ScriptedModel([text("x")]),
        extensions=[ext],
        custom_tools=[make_echo("custom")],
        allowed_tool_names=["echo", "shout", "custom", "ls"],
        excluded_tool_names=["shout", "ls"],
    )
    assert sorted(s.active_tool_names) == ["custom", "echo"]
    # S18: the extension cannot get past allow/exclude
    holder["pi"].set_active_tools(["shout", "ls", "read", "echo"])
    assert holder["pi"].get_active_tools() == ["echo"]
    names = [t["name"] if isinstance(t, dict) else t.name for t in holder["pi"].get_all_tools()]
    assert "shout" not in names and "read" not in names
    await s.close()

    empty = create_agent_session(
        model=ScriptedModel([text("x")]), extensions=[ext], allowed_tool_names=[]
    )
    assert empty.active_tool_names == []
    await empty.close()


async def test_s15_c9_set_active_tools_ignores_unknown_names():
    holder: dict = {}

    def ext(pi: ExtensionAPI) -> None:
        holder["pi"] = pi
        pi.register_tool(make_echo("echo", prompt_snippet="Echo things"))
        pi.register_tool(make_echo("shout"))

    s = create_agent_session(model=ScriptedModel([text("x")]), extensions=[ext])
    assert {"echo", "shout", "read"} <= set(s.active_tool_names)
    s.set_active_tools_by_name(["shout", "no_such_tool", "echo"])
    assert s.active_tool_names == ["shout", "echo"]
    holder["pi"].set_active_tools(["ghost", "shout"])
    assert holder["pi"].get_active_tools() == ["shout"]
    assert "- echo: Echo things" not in s.system_prompt  # prompt rebuilt for the new set
    s.set_active_tools_by_name([])
    assert s.active_tool_names == []
    await s.close()


def test_c3_active_tools_from_factory_before_binding_raises():
    caught: list = []

    def ext(pi: ExtensionAPI) -> None:
        try:
            pi.get_active_tools()
        except Exception as exc:
            caught.append(str(exc))

    create_agent_session(model=ScriptedModel([text("x")]), extensions=[ext])
    assert caught and "not initialized" in caught[0].lower()


async def test_s21_c12_system_prompt_snippets_and_guidelines():
    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(
            make_echo(
                "echo",
                prompt_snippet="Echo   the\n  given text",
                prompt_guidelines=["  Use echo for repeating. ", "", "Shared rule"],
            )
        )
        pi.register_tool(make_echo("quiet", prompt_guidelines=["Shared rule"]))

    s = create_agent_session(model=ScriptedModel([text("x")]), extensions=[ext])
    sp = s.system_prompt
    assert "- echo: Echo the given text" in sp
    assert "- Use echo for repeating." in sp
    assert sp.count("- Shared rule") == 1
    assert "- quiet:" not in sp  # no snippet: not listed, but still active/callable
    assert "quiet" in s.active_tool_names
    s.set_active_tools_by_name(["quiet"])
    assert "- echo: Echo the given text" not in s.system_prompt
    assert "- Use echo for repeating." not in s.system_prompt
    await s.close()


def _timed(name: str, delay: float, log: list, **kw: Any) -> ToolDefinition:
    async def exe(tool_call_id, params, signal, on_update, ctx):
        log.append(("begin", name))
        await asyncio.sleep(delay)
        log.append(("finish", name))
        return ToolResult(content=[TextContent(text=name)], details={})

    return ToolDefinition(
        name=name, label=name, description=name, parameters=EchoParams, execute=exe, **kw
    )


async def test_s34_c27_parallel_batch_order():
    log: list = []
    tools = [_timed("slow", 0.15, log), _timed("fast", 0.01, log)]
    s, events, _ = await run(
        [
            [tool_call("slow", {"text": "a"}, id="c1"), tool_call("fast", {"text": "b"}, id="c2")],
            text("ok"),
        ],
        custom_tools=tools,
    )
    assert log[:2] == [("begin", "slow"), ("begin", "fast")]  # concurrent
    ends = [e.tool_call_id for e in events if e.type == "tool_execution_end"]
    assert ends == ["c2", "c1"]  # completion order
    assert [m.tool_call_id for m in _tool_results(s)] == ["c1", "c2"]  # source order
    tool_evts = [(e.type, e.tool_call_id) for e in events if e.type.startswith("tool_execution_")]
    assert tool_evts[:2] == [("tool_execution_start", "c1"), ("tool_execution_start", "c2")]


async def test_s34_c27_sequential_mode_makes_whole_batch_sequential():
    log: list = []
    tools = [_timed("slow", 0.1, log), _timed("fast", 0.01, log, execution_mode="sequential")]
    _, events, _ = await run(
        [
            [tool_call("slow", {"text": "a"}, id="c1"), tool_call("fast", {"text": "b"}, id="c2")],
            text("ok"),
        ],
        custom_tools=tools,
    )
    assert log == [("begin", "slow"), ("finish", "slow"), ("begin", "fast"), ("finish", "fast")]
    tool_evts = [
        (e.type, e.tool_call_id)
        for e in events
        if e.type in ("tool_execution_start", "tool_execution_end")
    ]
    assert tool_evts == [
        ("tool_execution_start", "c1"),
        ("tool_execution_end", "c1"),
        ("tool_execution_start", "c2"),
        ("tool_execution_end", "c2"),
    ]


async def test_c29_abort_inside_tool_call_handler():
    later_model_calls: list = []
    ran: list = []
    result_handlers: list = []

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_echo(log=ran))

        def gate(event, ctx):
            if event.tool_call_id == "c1":
                ctx.abort()

        pi.on("tool_call", gate)
        pi.on("tool_result", lambda e, c: result_handlers.append(e))

    def second_step(_input):
        later_model_calls.append(1)
        return text("should not be asked")

    s, events, _ = await run(
        [
            [tool_call("echo", {"text": "a"}, id="c1"), tool_call("echo", {"text": "b"}, id="c2")],
            second_step,
        ],
        extensions=[ext],
    )
    assert later_model_calls == [] and ran == [] and result_handlers == []
    msgs = _tool_results(s)
    assert msgs[0].tool_call_id == "c1" and msgs[0].is_error is True
    assert "Operation aborted" in _text(msgs[0].content)
    assert not [e for e in events if getattr(e, "tool_call_id", None) == "c2"]


async def test_s33_session_abort_does_not_preempt_tool_ignoring_signal():
    started = asyncio.Event()

    async def stubborn(tool_call_id, params, signal, on_update, ctx):
        started.set()
        await asyncio.sleep(0.1)
        return ToolResult(content=[TextContent(text="finished anyway")], details={})

    tool = ToolDefinition(
        name="stubborn", label="S", description="s", parameters=EchoParams, execute=stubborn
    )
    s = create_agent_session(
        model=ScriptedModel([[tool_call("stubborn", {"text": "a"}, id="c1")], text("ok")]),
        custom_tools=[tool],
    )
    task = asyncio.create_task(s.prompt("go"))
    await asyncio.wait_for(started.wait(), 5)
    s.abort()
    await asyncio.wait_for(task, 5)
    (msg,) = _tool_results(s)
    assert msg.is_error is False and _text(msg.content) == "finished anyway"
    await s.close()


async def test_s4_c7_tool_registered_during_execute_is_added():
    holder: dict = {}

    async def adder(tool_call_id, params, signal, on_update, ctx):
        holder["pi"].register_tool(make_echo("late"))
        return ToolResult(content=[TextContent(text="added")], details={})

    def ext(pi: ExtensionAPI) -> None:
        holder["pi"] = pi
        pi.register_tool(
            ToolDefinition(
                name="adder", label="A", description="a", parameters=EchoParams, execute=adder
            )
        )

    s, _, model = await run(
        [
            [tool_call("adder", {"text": "x"}, id="c1")],
            [tool_call("late", {"text": "y"}, id="c2")],
            text("ok"),
        ],
        extensions=[ext],
    )
    model.assert_complete()
    first, second = _tool_results(s)
    assert list(getattr(first, "added_tool_names", None) or []) == ["late"]
    assert (
        second.is_error is False and _text(second.content) == "y"
    )  # C10: next request of the same run
    assert "late" in s.active_tool_names


async def test_c34_close_then_prompt_refused():
    s = create_agent_session(model=ScriptedModel([text("one"), text("two")]))
    await s.prompt("first")
    await s.close()
    with pytest.raises(Exception):  # noqa: B017 - the spec only says "refused"
        await s.prompt("again")


async def test_c16_rebinding_input_seen_by_later_handlers_not_execute():
    seen: list = []

    async def exe(tool_call_id, params, signal, on_update, ctx):
        seen.append(("execute", params.text))
        return ToolResult(content=[TextContent(text=params.text)], details={})

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(
            ToolDefinition(name="e", label="E", description="e", parameters=EchoParams, execute=exe)
        )

        def rebind(event, ctx):
            event.input = EchoParams(text="rebound")

        pi.on("tool_call", rebind)
        pi.on("tool_call", lambda event, ctx: seen.append(("later", event.input.text)))

    await run([[tool_call("e", {"text": "orig"}, id="c1")], text("ok")], extensions=[ext])
    assert seen == [("later", "rebound"), ("execute", "orig")]


async def test_c31_no_ui_context():
    seen: list = []

    async def exe(tool_call_id, params, signal, on_update, ctx):
        seen.append((ctx.has_ui, await ctx.ui.confirm("t", "m", timeout=5)))
        return ToolResult(content=[TextContent(text="x")], details={})

    tool = ToolDefinition(name="e", label="E", description="e", parameters=EchoParams, execute=exe)
    await run([[tool_call("e", {"text": "a"}, id="c1")], text("ok")], custom_tools=[tool])
    assert seen == [(False, False)]


async def test_c23_result_handler_may_flip_is_error():
    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_echo())
        pi.on("tool_result", lambda event, ctx: {"is_error": True})

    s, events, _ = await run(
        [[tool_call("echo", {"text": "a"}, id="c1")], text("ok")], extensions=[ext]
    )
    (msg,) = _tool_results(s)
    assert msg.is_error is True and _text(msg.content) == "a"
    end = next(e for e in events if e.type == "tool_execution_end")
    assert end.is_error is True


async def test_c28_all_terminate_stops_the_loop():
    asked: list = []

    async def fin(tool_call_id, params, signal, on_update, ctx):
        return ToolResult(content=[TextContent(text="bye")], details={}, terminate=True)

    tool = ToolDefinition(
        name="fin", label="F", description="f", parameters=EchoParams, execute=fin
    )

    def step(_input):
        asked.append(1)
        return text("more")

    s, _, _ = await run([[tool_call("fin", {"text": "a"}, id="c1")], step], custom_tools=[tool])
    assert asked == []
    assert _text(_tool_results(s)[0].content) == "bye"


async def test_c33_model_failure_does_not_raise_out_of_prompt():
    s, events, _ = await run([RuntimeError("provider down")])
    assert s.messages[-1].role == "assistant"
    assert events[-1].type == "agent_end"


async def test_c5_c11_get_all_tools_metadata_and_source():
    holder: dict = {}

    def ext(pi: ExtensionAPI) -> None:
        holder["pi"] = pi
        pi.register_tool(make_echo("echo", prompt_guidelines=["g1"]))

    s = create_agent_session(
        model=ScriptedModel([text("x")]), extensions=[ext], custom_tools=[make_echo("mine")]
    )
    _OPEN.append(s)

    def field(t, k):
        return t[k] if isinstance(t, dict) else getattr(t, k)

    infos = {field(t, "name"): t for t in holder["pi"].get_all_tools()}
    assert {"read", "echo", "mine"} <= set(infos)
    assert "<builtin:read>" in str(field(infos["read"], "source_info"))
    assert "<sdk:mine>" in str(field(infos["mine"], "source_info"))
    echo = infos["echo"]
    assert field(echo, "label") == "Echo" and field(echo, "description") == "echo text."
    assert "text" in str(field(echo, "parameters"))
    assert not callable(field(echo, "parameters"))
    assert not any(
        callable(v) for v in (vars(echo).values() if not isinstance(echo, dict) else echo.values())
    )


def test_c6_register_tool_rejects_non_model_parameters():
    caught: list = []

    def ext(pi: ExtensionAPI) -> None:
        try:
            pi.register_tool(
                ToolDefinition(
                    name="badtool",
                    label="B",
                    description="b",
                    parameters={"type": "string"},
                    execute=None,
                )
            )
        except Exception as exc:
            caught.append(str(exc))

    create_agent_session(model=ScriptedModel([text("x")]), extensions=[ext])
    assert caught and "badtool" in caught[0]


async def test_s13_late_updates_dropped_and_update_args_raw():
    async def exe(tool_call_id, params, signal, on_update, ctx):
        on_update(ToolResult(content=[TextContent(text="early")], details={}))
        asyncio.get_running_loop().call_soon(
            on_update, ToolResult(content=[TextContent(text="late")], details={})
        )
        return ToolResult(content=[TextContent(text="done")], details={})

    tool = ToolDefinition(name="num", label="N", description="n", parameters=NumParams, execute=exe)
    _, events, _ = await run(
        [[tool_call("num", {"n": "7"}, id="c1")], text("ok")], custom_tools=[tool]
    )
    await asyncio.sleep(0.05)
    ups = [e for e in events if e.type == "tool_execution_update"]
    assert [_text(e.partial_result.content) for e in ups] == ["early"]
    assert ups[0].args == {"n": "7"}  # C13: raw, before coercion
    types = [e.type for e in events]
    assert types.index("tool_execution_update") < types.index("tool_execution_end")
