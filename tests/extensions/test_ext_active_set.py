"""Active set, allow/exclude and mid-run changes (S4, S15-S18, C7-C10, C25)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pi_notebook import ExtensionAPI, TextContent, ToolResult, create_agent_session
from pi_notebook.testing import ScriptedModel, text, tool_call


def setting_active(apis: list[ExtensionAPI], names: Callable[[list[str]], Sequence[str]]) -> Any:
    """An execute that sets the active set to ``names(current)`` through ``pi``."""

    async def execute(
        tool_call_id: str, params: Any, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        pi = apis[0]
        pi.set_active_tools(list(names(pi.get_active_tools())))
        return ToolResult(content=[TextContent(text="changed")])

    return execute


async def test_s15_set_active_tools_filters_unknown_replaces_and_rebuilds_prompt(
    make_tool: Any,
) -> None:
    apis: list[ExtensionAPI] = []

    def ext(pi: ExtensionAPI) -> None:
        apis.append(pi)
        pi.register_tool(make_tool("a", snippet="tool a"))
        pi.register_tool(make_tool("b", snippet="tool b"))

    session = create_agent_session(model=ScriptedModel([]), extensions=[ext], audit=False)
    assert "- a: tool a" in session.system_prompt
    apis[0].set_active_tools(["b", "no_such_tool", "a_typo"])
    assert session.active_tool_names == ["b"]
    assert apis[0].get_active_tools() == ["b"]
    assert [t.name for t in session.agent.state.tools] == ["b"]
    assert "- b: tool b" in session.system_prompt
    assert "- a: tool a" not in session.system_prompt
    assert "a" in session.tool_registry  # still registered, only inactive


async def test_s15_change_takes_effect_from_next_turn(make_tool: Any) -> None:
    apis: list[ExtensionAPI] = []

    def ext(pi: ExtensionAPI) -> None:
        apis.append(pi)
        pi.register_tool(make_tool("echo", snippet="echo text"))

    model = ScriptedModel([text("one"), text("two")])
    session = create_agent_session(model=model, extensions=[ext], audit=False)
    await session.prompt("first")
    apis[0].set_active_tools([n for n in apis[0].get_active_tools() if n != "echo"])
    await session.prompt("second")
    assert "echo" in model.calls[0].tool_names
    assert "echo" not in model.calls[1].tool_names
    assert "- echo: echo text" in model.calls[0].system_prompt
    assert "- echo: echo text" not in model.calls[1].system_prompt


async def test_c10_active_change_inside_execute_reaches_next_request_of_same_run(
    make_tool: Any,
) -> None:
    apis: list[ExtensionAPI] = []

    def ext(pi: ExtensionAPI) -> None:
        apis.append(pi)
        pi.register_tool(
            make_tool("switch", execute=setting_active(apis, lambda _: ["switch", "b"]))
        )
        pi.register_tool(make_tool("a", snippet="tool a"))
        pi.register_tool(make_tool("b", snippet="tool b"))

    model = ScriptedModel([tool_call("switch", {}), text("done")])
    session = create_agent_session(model=model, extensions=[ext], audit=False)
    await session.prompt("go")
    assert len(model.calls) == 2  # one run, two requests
    assert model.calls[0].tool_names == ["read", "ls", "inspect_variable", "switch", "a", "b"]
    assert model.calls[1].tool_names == ["switch", "b"]
    assert "- a: tool a" in model.calls[0].system_prompt
    assert "- a: tool a" not in model.calls[1].system_prompt
    assert "- b: tool b" in model.calls[1].system_prompt


async def test_s4_added_tool_names_set_when_execute_only_adds(
    make_tool: Any, results_of: Any
) -> None:
    apis: list[ExtensionAPI] = []

    def ext(pi: ExtensionAPI) -> None:
        apis.append(pi)
        pi.register_tool(
            make_tool("enable", execute=setting_active(apis, lambda cur: [*cur, "x", "y"]))
        )
        pi.register_tool(make_tool("x"))
        pi.register_tool(make_tool("y"))

    model = ScriptedModel([tool_call("enable", {}), text("done")])
    session = create_agent_session(model=model, extensions=[ext], audit=False)
    apis[0].set_active_tools(["enable"])
    await session.prompt("go")
    [result] = results_of(session)
    assert result.added_tool_names == ["x", "y"]
    assert model.calls[1].tool_names == ["enable", "x", "y"]


async def test_s4_added_tool_names_absent_when_change_also_removes(
    make_tool: Any, results_of: Any
) -> None:
    apis: list[ExtensionAPI] = []

    def ext(pi: ExtensionAPI) -> None:
        apis.append(pi)
        pi.register_tool(make_tool("swap", execute=setting_active(apis, lambda _: ["swap", "x"])))
        pi.register_tool(make_tool("x"))
        pi.register_tool(make_tool("old"))
        pi.register_tool(make_tool("plain"))

    model = ScriptedModel([[tool_call("swap", {}), tool_call("plain", {})], text("done")])
    session = create_agent_session(
        model=model, extensions=[ext], audit=False, tool_execution="sequential"
    )
    apis[0].set_active_tools(["swap", "old", "plain"])
    await session.prompt("go")
    swap, plain = results_of(session)
    assert swap.added_tool_names is None  # "x" added but "old" removed in the same change
    assert plain.added_tool_names is None  # no change at all


async def test_s16_c25_tool_deactivated_after_request_is_still_found_and_gated(
    make_tool: Any, results_of: Any
) -> None:
    apis: list[ExtensionAPI] = []
    gated: list[str] = []
    ran: list[tuple[str, Any]] = []

    def ext(pi: ExtensionAPI) -> None:
        apis.append(pi)
        pi.register_tool(
            make_tool(
                "disable_b", execute=setting_active(apis, lambda cur: [n for n in cur if n != "b"])
            )
        )
        pi.register_tool(make_tool("b", log=ran))
        pi.on("tool_call", lambda event, ctx: gated.append(event.tool_name))

    model = ScriptedModel(
        [
            [tool_call("disable_b", {}), tool_call("b", {"text": "late"})],
            tool_call("b", {}),
            text("done"),
        ]
    )
    session = create_agent_session(
        model=model, extensions=[ext], audit=False, tool_execution="sequential"
    )
    await session.prompt("go")
    first, second, third = results_of(session)
    # the call the model already produced still runs, through the gate
    assert first.is_error is False and second.is_error is False
    assert [name for name, _ in ran] == ["b"]
    assert gated == ["disable_b", "b"]
    # the next request no longer offers it: a call to it is not found
    assert "b" not in model.calls[1].tool_names
    assert third.is_error is True
    assert third.content[0].text == "Tool b not found"


async def test_c25_never_offered_name_gets_start_and_end_events(
    make_tool: Any, results_of: Any
) -> None:
    events: list[tuple[str, str]] = []
    handler_saw: list[str] = []

    def ext(pi: ExtensionAPI) -> None:
        pi.on("tool_call", lambda event, ctx: handler_saw.append(event.tool_name))

    model = ScriptedModel([tool_call("ghost", {"a": 1}, id="g1"), text("done")])
    session = create_agent_session(model=model, extensions=[ext], audit=False)
    session.subscribe(
        lambda e: (
            events.append((e.type, e.tool_call_id)) if e.type.startswith("tool_execution") else None
        )
    )
    await session.prompt("go")
    assert events == [("tool_execution_start", "g1"), ("tool_execution_end", "g1")]
    [result] = results_of(session)
    assert (result.is_error, result.content[0].text) == (True, "Tool ghost not found")
    assert handler_saw == []


def test_s17_allow_list_filters_every_source(make_tool: Any) -> None:
    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("ext_keep"))
        pi.register_tool(make_tool("ext_drop"))

    session = create_agent_session(
        model=ScriptedModel([]),
        extensions=[ext],
        custom_tools=[make_tool("sdk_keep"), make_tool("sdk_drop")],
        allowed_tool_names=["ls", "ext_keep", "sdk_keep"],
        audit=False,
    )
    assert set(session.tool_registry) == {"ls", "ext_keep", "sdk_keep"}
    assert session.active_tool_names == ["ls", "ext_keep", "sdk_keep"]


def test_s17_exclude_filters_every_source(make_tool: Any) -> None:
    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("ext_tool"))

    session = create_agent_session(
        model=ScriptedModel([]),
        extensions=[ext],
        custom_tools=[make_tool("sdk_tool")],
        excluded_tool_names=["read", "ext_tool", "sdk_tool"],
        audit=False,
    )
    assert session.active_tool_names == ["ls", "inspect_variable"]
    assert [t.name for t in session.get_all_tools()] == ["ls", "inspect_variable"]


def test_s18_extension_cannot_activate_past_allow_or_exclude(make_tool: Any) -> None:
    apis: list[ExtensionAPI] = []

    def ext(pi: ExtensionAPI) -> None:
        apis.append(pi)
        pi.register_tool(make_tool("allowed"))
        pi.register_tool(make_tool("not_allowed"))
        pi.register_tool(make_tool("excluded"))

    session = create_agent_session(
        model=ScriptedModel([]),
        extensions=[ext],
        allowed_tool_names=["allowed", "excluded"],
        excluded_tool_names=["excluded"],
        audit=False,
    )
    apis[0].set_active_tools(["not_allowed", "excluded", "allowed", "read"])
    assert session.active_tool_names == ["allowed"]
    assert [t.name for t in apis[0].get_all_tools()] == ["allowed"]


def test_c7_refresh_keeps_deactivated_tools_inactive_and_adds_new(make_tool: Any) -> None:
    apis: list[ExtensionAPI] = []

    def ext(pi: ExtensionAPI) -> None:
        apis.append(pi)
        pi.register_tool(make_tool("a"))
        pi.register_tool(make_tool("b"))

    session = create_agent_session(
        model=ScriptedModel([]), extensions=[ext], builtin_tools=False, audit=False
    )
    apis[0].set_active_tools(["b"])
    apis[0].register_tool(make_tool("c"))  # a refresh
    assert session.active_tool_names == ["b", "c"]  # "a" stays off, "c" is new and active
    session.refresh_tools()
    assert session.active_tool_names == ["b", "c"]


def test_c8_allow_list_holds_only_named_tools_whatever_the_source(make_tool: Any) -> None:
    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("read"))  # replaces the built-in; allowed by name

    session = create_agent_session(
        model=ScriptedModel([]), extensions=[ext], allowed_tool_names=["read"], audit=False
    )
    assert [(t.name, t.source_info.kind) for t in session.get_all_tools()] == [
        ("read", "extension")
    ]


def test_c8_empty_allow_list_means_no_tools_and_prompt_says_so(make_tool: Any) -> None:
    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo", snippet="echo"))

    session = create_agent_session(
        model=ScriptedModel([]), extensions=[ext], allowed_tool_names=[], audit=False
    )
    assert session.tool_registry == {}
    assert session.active_tool_names == []
    assert "No tools are available" in session.system_prompt
    assert "Available tools" not in session.system_prompt


def test_c8_exclude_wins_over_allow_list(make_tool: Any) -> None:
    session = create_agent_session(
        model=ScriptedModel([]),
        allowed_tool_names=["read", "ls"],
        excluded_tool_names=["ls"],
        audit=False,
    )
    assert session.active_tool_names == ["read"]


async def test_c9_set_active_by_name_order_replace_filter_and_empty(make_tool: Any) -> None:
    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("a", snippet="tool a"))
        pi.register_tool(make_tool("b"))

    model = ScriptedModel([text("none")])
    session = create_agent_session(
        model=model, extensions=[ext], excluded_tool_names=["read"], audit=False
    )
    session.set_active_tools_by_name(["b", "ls", "a"])
    assert session.active_tool_names == ["b", "ls", "a"]  # argument order kept
    session.set_active_tools_by_name(["a"])
    assert session.active_tool_names == ["a"]  # replaced, not merged
    session.set_active_tools_by_name(["read", "a"])
    assert session.active_tool_names == ["a"]  # "read" was excluded: cannot be activated
    session.set_active_tools_by_name([])
    assert session.active_tool_names == []
    assert "No tools are available" in session.system_prompt
    await session.prompt("go")
    assert model.calls[0].tools == ()
