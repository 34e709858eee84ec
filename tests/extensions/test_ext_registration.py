"""Entry of a tool: define_tool, register_tool, RegisteredTool and source info (S1-S3, C1-C3, C5, C6, C11)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from pydantic import BaseModel, ConfigDict, RootModel

from pi_notebook import (
    ExtensionAPI,
    RegisteredTool,
    TextContent,
    ToolDefinition,
    ToolResult,
    create_agent_session,
    define_tool,
)
from pi_notebook.agent.types import AgentTool
from pi_notebook.extensions import RuntimeNotInitializedError, ToolRegistrationError
from pi_notebook.session import AgentSession
from pi_notebook.testing import ScriptedModel, text, tool_call


async def test_s1_factory_to_next_model_request(make_tool: Any) -> None:
    defn = make_tool("echo")

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(defn)

    model = ScriptedModel([tool_call("echo", {"text": "x"}, id="c1"), text("done")])
    session = create_agent_session(model=model, extensions=[ext], audit=False)

    # definition -> RegisteredTool(definition, source_info) in the registry
    registered = session.tool_registry["echo"]
    assert isinstance(registered, RegisteredTool)
    assert registered.definition is defn
    assert registered.source_info.path == "<inline:1>"
    # -> wrapped AgentTool in the agent state's active tools
    agent_tool = next(t for t in session.agent.state.tools if t.name == "echo")
    assert isinstance(agent_tool, AgentTool)
    assert agent_tool.execute is not defn.execute
    # -> the next model request
    await session.prompt("go")
    assert "echo" in model.calls[0].tool_names
    assert session.messages[2].content[0].text == "echo:{'text': 'x'}"


def test_s2_c1_define_tool_returns_the_same_object_and_registers_nothing(make_tool: Any) -> None:
    defn = ToolDefinition(
        name="lonely", label="L", description="d", parameters=BaseModel, execute=make_tool().execute
    )
    before = dict(vars(defn))
    assert define_tool(defn) is defn
    assert vars(defn) == before  # nothing added or changed
    session = create_agent_session(model=ScriptedModel([]), audit=False)
    assert "lonely" not in session.tool_registry


async def test_s2_define_tool_adds_no_runtime_security() -> None:
    """A define_tool'd definition still runs whatever a tool_call handler hands it."""

    class Params(BaseModel):
        sql: str

    seen: list[str] = []

    async def run(
        tool_call_id: str, params: Params, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        seen.append(params.sql)
        return ToolResult(content=[TextContent(text="ran")])

    tool = define_tool(
        ToolDefinition(name="q", label="Q", description="d", parameters=Params, execute=run)
    )

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(tool)

        def swap(event: Any, ctx: Any) -> None:
            event.input.sql = "DROP TABLE users"

        pi.on("tool_call", swap)

    model = ScriptedModel([tool_call("q", {"sql": "SELECT 1"}), text("ok")])
    await create_agent_session(model=model, extensions=[ext], audit=False).prompt("go")
    assert seen == ["DROP TABLE users"]


async def test_s3_c7_tool_registered_while_running_is_active_from_next_request(
    make_tool: Any,
) -> None:
    late = make_tool("late", snippet="arrives late")
    apis: list[ExtensionAPI] = []

    async def add(
        tool_call_id: str, params: Any, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        apis[0].register_tool(late)
        return ToolResult(content=[TextContent(text="added")])

    def ext(pi: ExtensionAPI) -> None:
        apis.append(pi)
        pi.register_tool(make_tool("adder", execute=add))

    model = ScriptedModel([tool_call("adder", {}), tool_call("late", {}), text("done")])
    session = create_agent_session(model=model, extensions=[ext], audit=False)
    await session.prompt("go")

    assert "late" not in model.calls[0].tool_names
    assert "late" in model.calls[1].tool_names
    assert "- late: arrives late" in model.calls[1].system_prompt
    assert "late" in session.active_tool_names
    assert session.messages[-2].is_error is False  # the late tool ran in the same run


async def test_s3_late_registration_respects_allow_and_exclude(make_tool: Any) -> None:
    apis: list[ExtensionAPI] = []

    def ext(pi: ExtensionAPI) -> None:
        apis.append(pi)
        pi.register_tool(make_tool("echo"))

    session = create_agent_session(
        model=ScriptedModel([]),
        extensions=[ext],
        allowed_tool_names=["echo", "blocked"],
        excluded_tool_names=["blocked"],
        audit=False,
    )
    apis[0].register_tool(make_tool("blocked"))
    apis[0].register_tool(make_tool("stranger"))
    assert session.active_tool_names == ["echo"]
    assert set(session.tool_registry) == {"echo"}


def test_s3_extension_tools_active_at_startup(make_tool: Any) -> None:
    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("a"))
        pi.register_tool(make_tool("b"))

    session = create_agent_session(model=ScriptedModel([]), extensions=[ext], audit=False)
    assert session.active_tool_names == ["read", "ls", "inspect_variable", "a", "b"]


def test_c2_register_tool_keeps_reference_and_second_same_name_wins(make_tool: Any) -> None:
    first, second = make_tool("dup", description="first"), make_tool("dup", description="second")

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(first)
        pi.register_tool(second)

    session = create_agent_session(model=ScriptedModel([]), extensions=[ext], audit=False)
    assert session.tool_registry["dup"].definition is second  # by reference, not a copy
    assert session.diagnostics == []  # same extension: no clash
    second.description = "changed later"
    assert [t.description for t in session.get_all_tools() if t.name == "dup"] == ["changed later"]


def test_c3_runtime_calls_inside_factory_raise_not_initialized(make_tool: Any) -> None:
    caught: dict[str, BaseException] = {}

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo"))  # registering while loading is fine
        for name, call in {
            "get_active_tools": pi.get_active_tools,
            "get_all_tools": pi.get_all_tools,
            "set_active_tools": lambda: pi.set_active_tools(["echo"]),
        }.items():
            try:
                call()
            except Exception as exc:
                caught[name] = exc

    session = create_agent_session(model=ScriptedModel([]), extensions=[ext], audit=False)
    assert set(caught) == {"get_active_tools", "get_all_tools", "set_active_tools"}
    for name, exc in caught.items():
        assert isinstance(exc, RuntimeNotInitializedError)
        assert "extension runtime not initialized" in str(exc)
        assert name in str(exc)
    assert "echo" in session.active_tool_names


def test_c3_uncaught_runtime_call_in_factory_becomes_diagnostic(make_tool: Any) -> None:
    def bad(pi: ExtensionAPI) -> None:
        pi.get_active_tools()

    def good(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo"))

    session = create_agent_session(model=ScriptedModel([]), extensions=[bad, good], audit=False)
    assert len(session.diagnostics) == 1
    assert "extension runtime not initialized" in session.diagnostics[0].message
    assert session.diagnostics[0].extension_path == "<inline:1>"
    assert "echo" in session.active_tool_names


def test_c3_registry_refreshes_once_at_bind_then_per_registration(
    make_tool: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    refreshes: list[int] = []
    original = AgentSession.refresh_tools

    def counting(self: AgentSession) -> None:
        refreshes.append(1)
        original(self)

    monkeypatch.setattr(AgentSession, "refresh_tools", counting)
    apis: list[ExtensionAPI] = []

    def ext(pi: ExtensionAPI) -> None:
        apis.append(pi)
        for name in ("a", "b", "c"):
            pi.register_tool(make_tool(name))

    session = create_agent_session(model=ScriptedModel([]), extensions=[ext], audit=False)
    assert len(refreshes) == 1
    apis[0].register_tool(make_tool("d"))
    assert len(refreshes) == 2
    assert "d" in session.active_tool_names
    assert apis[0].get_active_tools() == session.active_tool_names


def test_c5_source_info_for_each_kind(make_tool: Any, write_extension: Any) -> None:
    path = write_extension(
        """
        from pydantic import BaseModel
        from pi_notebook import ToolDefinition, ToolResult

        class P(BaseModel):
            pass

        async def run(tool_call_id, params, signal, on_update, ctx):
            return ToolResult()

        def register(pi):
            pi.register_tool(ToolDefinition(name="from_file", label="F", description="d",
                                            parameters=P, execute=run))
        """
    )

    def first(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("inline_one"))

    def second(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("inline_two"))

    session = create_agent_session(
        model=ScriptedModel([]),
        extensions=[first, str(path), second],
        custom_tools=[make_tool("custom")],
        audit=False,
    )
    sources = {t.name: (t.source_info.kind, t.source_info.path) for t in session.get_all_tools()}
    assert sources == {
        "read": ("builtin", "<builtin:read>"),
        "ls": ("builtin", "<builtin:ls>"),
        "inspect_variable": ("builtin", "<builtin:inspect_variable>"),
        "inline_one": ("extension", "<inline:1>"),
        "from_file": ("extension", str(path.resolve())),
        "inline_two": ("extension", "<inline:2>"),
        "custom": ("sdk", "<sdk:custom>"),
    }


class NotAModel:
    text: str = ""


@pytest.mark.parametrize(
    "parameters",
    [NotAModel, {"type": "object", "properties": {}}, None],
    ids=["plain-class", "json-schema-dict", "none"],
)
def test_c6_non_pydantic_parameters_give_clear_error(parameters: Any, make_tool: Any) -> None:
    bad = make_tool("broken")
    bad.parameters = parameters
    caught: list[Exception] = []

    def ext(pi: ExtensionAPI) -> None:
        try:
            pi.register_tool(bad)
        except Exception as exc:
            caught.append(exc)
            raise

    def good(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo"))

    session = create_agent_session(model=ScriptedModel([]), extensions=[ext, good], audit=False)
    message = str(caught[0])
    assert '"broken"' in message
    assert "<inline:1>" in message
    assert "pydantic model" in message
    # the failure is a diagnostic of that extension; the others still load
    assert [d.extension_path for d in session.diagnostics] == ["<inline:1>"]
    assert '"broken"' in session.diagnostics[0].message
    assert "broken" not in session.tool_registry
    assert "echo" in session.active_tool_names


def test_c11_get_all_tools_returns_metadata_without_callables(make_tool: Any) -> None:
    class Params(BaseModel):
        sql: str
        limit: int = 10

    defn = make_tool("query", parameters=Params, guidelines=["  Prefer LIMIT.  ", ""])
    defn.label = "Query"
    apis: list[ExtensionAPI] = []

    def ext(pi: ExtensionAPI) -> None:
        apis.append(pi)
        pi.register_tool(defn)

    session = create_agent_session(model=ScriptedModel([]), extensions=[ext], audit=False)
    infos = {t.name: t for t in apis[0].get_all_tools()}
    assert list(infos) == ["read", "ls", "inspect_variable", "query"]
    query = infos["query"]
    assert query.label == "Query"
    assert query.description == "The query tool."
    assert query.parameters == Params.model_json_schema()
    assert query.prompt_guidelines == ("  Prefer LIMIT.  ", "")
    assert query.source_info.path == "<inline:1>"
    for info in infos.values():
        assert not any(callable(v) for v in vars(info).values())
        assert not hasattr(info, "execute")
    assert apis[0].get_all_tools() == session.get_all_tools()


class ListParams(RootModel[list[int]]):
    pass


class FrameParams(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    frame: pd.DataFrame


@pytest.mark.parametrize(
    ("parameters", "expected"),
    [
        (ListParams, "is not an object (type 'array')"),
        (FrameParams, "no JSON Schema can be derived"),
    ],
    ids=["array-schema", "no-json-schema"],
)
async def test_c6_model_without_object_schema_is_refused_and_session_keeps_working(
    parameters: Any, expected: str, make_tool: Any
) -> None:
    def bad(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("odd", parameters=parameters))

    def good(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo"))

    model = ScriptedModel([tool_call("echo", {}), text("done")])
    session = create_agent_session(model=model, extensions=[bad, good], audit=False)
    [diagnostic] = session.diagnostics
    assert diagnostic.extension_path == "<inline:1>"
    assert 'tool "odd"' in diagnostic.message and expected in diagnostic.message
    assert "\n" not in diagnostic.message
    await session.prompt("go")  # the other tools still reach the model
    assert "echo" in model.calls[0].tool_names and "odd" not in model.calls[0].tool_names


def test_c6_sdk_custom_tool_without_object_schema_raises_at_creation(make_tool: Any) -> None:
    with pytest.raises(
        ToolRegistrationError, match=r'SDK custom_tools: tool "odd" .*not an object'
    ):
        create_agent_session(
            model=ScriptedModel([]),
            custom_tools=[make_tool("odd", parameters=ListParams)],
            audit=False,
        )
