"""Precedence of same-name tools, the definition fields and the system prompt (S6, S19-S21, C12)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from pi_notebook import ExtensionAPI, TextContent, ToolDefinition, ToolResult, create_agent_session
from pi_notebook.session.prompt import BASE_PROMPT
from pi_notebook.testing import ScriptedModel, text, tool_call


async def test_s19_registry_order_and_sdk_over_extension_over_builtin(
    make_tool: Any, results_of: Any
) -> None:
    ext_ls = make_tool("ls", description="extension ls")
    ext_read = make_tool("read", description="extension read")
    sdk_read = make_tool("read", description="sdk read")

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("own"))
        pi.register_tool(ext_ls)
        pi.register_tool(ext_read)

    model = ScriptedModel([[tool_call("read", {}), tool_call("ls", {})], text("done")])
    session = create_agent_session(
        model=model, extensions=[ext], custom_tools=[sdk_read, make_tool("sdk_only")], audit=False
    )
    infos = {t.name: t for t in session.get_all_tools()}
    # built-ins first, then extension tools, then SDK tools; an overwrite keeps the slot
    assert list(infos) == ["read", "ls", "inspect_variable", "own", "sdk_only"]
    assert (infos["read"].description, infos["read"].source_info.kind) == ("sdk read", "sdk")
    assert (infos["ls"].description, infos["ls"].source_info.kind) == ("extension ls", "extension")
    assert infos["inspect_variable"].source_info.kind == "builtin"
    await session.prompt("go")
    read, ls = results_of(session)
    assert read.details == {"tool": "read"} and ls.details == {"tool": "ls"}  # not the built-ins


def test_s19_between_extensions_first_registration_wins(make_tool: Any) -> None:
    a, b = make_tool("tool", description="a"), make_tool("tool", description="b")

    def ext_a(pi: ExtensionAPI) -> None:
        pi.register_tool(a)

    def ext_b(pi: ExtensionAPI) -> None:
        pi.register_tool(b)

    session = create_agent_session(model=ScriptedModel([]), extensions=[ext_a, ext_b], audit=False)
    assert session.tool_registry["tool"].definition is a
    assert len(session.diagnostics) == 1


async def test_s20_same_name_replaces_builtin_and_does_not_call_it(
    make_tool: Any, tmp_path: Any, results_of: Any
) -> None:
    (tmp_path / "notes.txt").write_text("secret notes\n", encoding="utf-8")
    calls: list[Any] = []

    class Params(BaseModel):
        path: str

    async def replacement(
        tool_call_id: str, params: Params, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        calls.append(params.path)
        return ToolResult(content=[TextContent(text="replacement")])

    seen_infos: list[Any] = []

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(
            ToolDefinition(
                name="read", label="R", description="mine", parameters=Params, execute=replacement
            )
        )
        pi.on("session_start", lambda event, ctx: seen_infos.extend(pi.get_all_tools()))

    model = ScriptedModel([tool_call("read", {"path": "notes.txt"}), text("done")])
    session = create_agent_session(model=model, extensions=[ext], cwd=str(tmp_path), audit=False)
    await session.prompt("go")
    [result] = results_of(session)
    assert result.content[0].text == "replacement"  # the built-in never read the file
    assert calls == ["notes.txt"]
    read_info = next(i for i in seen_infos if i.name == "read")
    assert read_info.description == "mine"
    assert not hasattr(read_info, "execute")
    assert model.calls[0].tools[0].parameters == Params.model_json_schema()


async def test_s6_definition_fields_reach_the_model_and_the_loop(
    make_tool: Any, results_of: Any
) -> None:
    class Params(BaseModel):
        """Parameters of the sum tool."""

        a: int = Field(description="first")
        b: int = Field(default=0, ge=0)

    seen: list[Any] = []

    async def add(
        tool_call_id: str, params: Params, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        seen.append(params)
        return ToolResult(content=[TextContent(text=str(params.a + params.b))])

    defn = ToolDefinition(
        name="sum",
        label="Sum",
        description="Add two numbers.",
        parameters=Params,
        execute=add,
        prepare_arguments=lambda raw: {"a": raw["x"], "b": raw.get("y", 0)},
        execution_mode="sequential",
        prompt_snippet="add two numbers",
        prompt_guidelines=["Use sum for arithmetic."],
    )

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(defn)

    model = ScriptedModel([tool_call("sum", {"x": "2", "y": 3}), text("done")])
    session = create_agent_session(model=model, extensions=[ext], audit=False)
    await session.prompt("go")
    schema = next(t for t in model.calls[0].tools if t.name == "sum")
    assert (schema.description, schema.parameters) == (
        "Add two numbers.",
        Params.model_json_schema(),
    )
    assert schema.parameters["type"] == "object"
    assert "- sum: add two numbers" in model.calls[0].system_prompt
    assert "- Use sum for arithmetic." in model.calls[0].system_prompt
    assert seen == [Params(a=2, b=3)]  # prepared, then validated (and coerced)
    assert results_of(session)[0].content[0].text == "5"
    [agent_tool] = [t for t in session.agent.state.tools if t.name == "sum"]
    assert (agent_tool.label, agent_tool.execution_mode) == ("Sum", "sequential")


async def test_s21_full_schema_sent_and_snippetless_tool_still_callable(
    make_tool: Any, results_of: Any
) -> None:
    class Params(BaseModel):
        query: str = Field(min_length=1, description="what to find")
        limit: int = 5

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("quiet", parameters=Params))  # no snippet
        pi.register_tool(make_tool("loud", snippet="a tool with a snippet"))

    model = ScriptedModel([tool_call("quiet", {"query": "x"}), text("done")])
    session = create_agent_session(model=model, extensions=[ext], builtin_tools=False, audit=False)
    await session.prompt("go")
    quiet = next(t for t in model.calls[0].tools if t.name == "quiet")
    assert quiet.parameters == Params.model_json_schema()
    assert quiet.parameters["properties"]["query"]["minLength"] == 1
    prompt = model.calls[0].system_prompt
    assert "quiet" not in prompt
    assert "- loud: a tool with a snippet" in prompt
    assert results_of(session)[0].is_error is False


def test_s21_only_active_tools_contribute(make_tool: Any) -> None:
    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("on", snippet="active one", guidelines=["Rule of on."]))
        pi.register_tool(make_tool("off", snippet="inactive one", guidelines=["Rule of off."]))

    session = create_agent_session(
        model=ScriptedModel([]), extensions=[ext], builtin_tools=False, audit=False
    )
    session.set_active_tools_by_name(["on"])
    assert "active one" in session.system_prompt and "Rule of on." in session.system_prompt
    assert (
        "inactive one" not in session.system_prompt and "Rule of off." not in session.system_prompt
    )


def test_c12_prompt_lines_snippets_and_guidelines(make_tool: Any) -> None:
    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(
            make_tool(
                "query",
                snippet="  run SQL\n   against   the\tdatabase ",
                guidelines=["  Prefer LIMIT.  ", "", "   ", "Never guess table names."],
            )
        )
        pi.register_tool(
            make_tool("blank", snippet=" \n\t ", guidelines=["Prefer LIMIT.", "Cite rows."])
        )

    session = create_agent_session(
        model=ScriptedModel([]), extensions=[ext], builtin_tools=False, audit=False
    )
    assert session.system_prompt == "\n".join(
        [
            BASE_PROMPT,
            "",
            "Available tools:",
            "- query: run SQL against the database",
            "",
            "Guidelines:",
            "- Prefer LIMIT.",
            "- Never guess table names.",
            "- Cite rows.",
        ]
    )
    session.set_active_tools_by_name(["blank"])
    assert "query" not in session.system_prompt
    assert "Never guess table names." not in session.system_prompt
    assert "- Prefer LIMIT." in session.system_prompt and "- Cite rows." in session.system_prompt
    assert "Available tools" not in session.system_prompt  # a blank snippet counts as none
