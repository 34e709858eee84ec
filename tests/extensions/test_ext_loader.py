"""The loader: factories, files, modules, entry points; sync and async; diagnostics (C4, C35)."""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from pi_notebook import ExtensionAPI, create_agent_session
from pi_notebook.extensions import ENTRY_POINT_GROUP, entry_point_extensions
from pi_notebook.extensions import loader as loader_module
from pi_notebook.testing import ScriptedModel, text, tool_call

TOOL_MODULE = """
from pydantic import BaseModel
from pi_notebook import TextContent, ToolDefinition, ToolResult

class Params(BaseModel):
    text: str = ""

async def run(tool_call_id, params, signal, on_update, ctx):
    return ToolResult(content=[TextContent(text="{name} ran")])

def make(name):
    return ToolDefinition(name=name, label=name, description="d", parameters=Params, execute=run)
"""


def tool_file(name: str, *, factory: str = "register", extra: str = "") -> str:
    return (
        TOOL_MODULE.replace("{name}", name)
        + f"\ndef {factory}(pi):\n    pi.register_tool(make({name!r}))\n"
        + extra
    )


async def test_c35_extension_file_exposes_register(write_extension: Any) -> None:
    path = write_extension(tool_file("from_file"))
    model = ScriptedModel([tool_call("from_file", {}), text("done")])
    session = create_agent_session(model=model, extensions=[path], audit=False)
    assert session.diagnostics == []
    await session.prompt("go")
    assert session.messages[2].content[0].text == "from_file ran"


def test_c35_file_without_register_is_a_diagnostic_naming_the_file(
    write_extension: Any, make_tool: Any
) -> None:
    path = write_extension(tool_file("nope", factory="setup"))

    def good(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo"))

    session = create_agent_session(
        model=ScriptedModel([]), extensions=[str(path), good], audit=False
    )
    assert len(session.diagnostics) == 1
    assert str(path) in str(session.diagnostics[0])
    assert "register" in session.diagnostics[0].message
    assert "echo" in session.active_tool_names


def test_c35_module_name_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pi_test_module_ext.py").write_text(tool_file("from_module"), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pi_test_module_ext", raising=False)
    session = create_agent_session(
        model=ScriptedModel([]), extensions=["pi_test_module_ext"], audit=False
    )
    assert session.diagnostics == []
    assert session.tool_registry["from_module"].source_info.path == "pi_test_module_ext"


def test_c35_missing_module_is_a_diagnostic(make_tool: Any) -> None:
    def good(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo"))

    session = create_agent_session(
        model=ScriptedModel([]), extensions=["pi_no_such_extension_module", good], audit=False
    )
    assert [d.extension_path for d in session.diagnostics] == ["pi_no_such_extension_module"]
    assert "ModuleNotFoundError" in session.diagnostics[0].message
    assert "echo" in session.active_tool_names


def test_c35_entry_point_names_its_callable_directly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pi_test_ep_ext.py").write_text(
        tool_file("from_ep", factory="database_extension"), encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pi_test_ep_ext", raising=False)
    ep = EntryPoint(name="db", value="pi_test_ep_ext:database_extension", group=ENTRY_POINT_GROUP)
    session = create_agent_session(model=ScriptedModel([]), extensions=[ep], audit=False)
    assert session.diagnostics == []
    assert session.tool_registry["from_ep"].source_info.path == "pi_test_ep_ext:database_extension"


def test_c35_broken_entry_point_is_a_diagnostic() -> None:
    ep = EntryPoint(name="gone", value="pi_no_such_ep_module:register", group=ENTRY_POINT_GROUP)
    session = create_agent_session(model=ScriptedModel([]), extensions=[ep], audit=False)
    assert [d.extension_path for d in session.diagnostics] == ["pi_no_such_ep_module:register"]


def test_entry_point_extensions_lists_the_group(monkeypatch: pytest.MonkeyPatch) -> None:
    ep = EntryPoint(name="db", value="somewhere:register", group=ENTRY_POINT_GROUP)
    asked: list[str] = []

    def fake_entry_points(*, group: str) -> list[EntryPoint]:
        asked.append(group)
        return [ep]

    monkeypatch.setattr(loader_module, "entry_points", fake_entry_points)
    assert entry_point_extensions() == [ep]
    assert asked == ["pi_notebook.extensions"]


async def test_async_factory_loads_before_first_request(
    make_tool: Any, write_extension: Any
) -> None:
    order: list[str] = []

    async def slow(pi: ExtensionAPI) -> None:
        order.append("async factory")
        pi.register_tool(make_tool("async_tool"))

    path = write_extension(
        tool_file("async_file", factory="_sync") + "\nasync def register(pi):\n    _sync(pi)\n"
    )

    def sync(pi: ExtensionAPI) -> None:
        order.append("sync factory")
        pi.register_tool(make_tool("sync_tool"))

    model = ScriptedModel([text("hi")])
    session = create_agent_session(model=model, extensions=[slow, path, sync], audit=False)
    await session.prompt("go")
    # a sync factory runs at once, an async one's body when the session starts; load order
    # (and so first-wins and handler order) stays the order of the sources
    assert order == ["sync factory", "async factory"]
    assert [t.name for t in session.get_all_tools()][-3:] == [
        "async_tool",
        "async_file",
        "sync_tool",
    ]
    assert {"async_tool", "async_file", "sync_tool"} <= set(model.calls[0].tool_names)
    assert session.diagnostics == []


async def test_factory_that_raises_is_a_diagnostic_and_others_load(
    write_extension: Any, make_tool: Any
) -> None:
    broken = write_extension(
        """
        def register(pi):
            raise RuntimeError("cannot reach the database")
        """
    )

    async def broken_async(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("half"))
        raise ValueError("async boom")

    syntax = write_extension("def register(pi:\n")

    def good(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo"))

    model = ScriptedModel([tool_call("echo", {}), text("done")])
    session = create_agent_session(
        model=model, extensions=[broken, broken_async, syntax, good], audit=False
    )
    await session.prompt("go")
    by_path = {d.extension_path: d.message for d in session.diagnostics}
    assert (
        by_path[str(broken.resolve())] == "factory raised RuntimeError: cannot reach the database"
    )
    assert by_path["<inline:1>"] == "factory raised ValueError: async boom"
    assert "SyntaxError" in by_path[str(syntax)]
    assert "half" not in session.tool_registry  # a failed extension leaves nothing behind
    assert "echo" in model.calls[0].tool_names
    assert session.messages[2].is_error is False


def test_missing_file_is_a_diagnostic(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.py"
    session = create_agent_session(model=ScriptedModel([]), extensions=[missing], audit=False)
    assert len(session.diagnostics) == 1
    assert str(missing) in str(session.diagnostics[0])


def test_c4_clash_diagnostic_names_both_paths(write_extension: Any) -> None:
    first = write_extension(tool_file("shared"), name="first_ext")
    second = write_extension(tool_file("shared"), name="second_ext")
    session = create_agent_session(model=ScriptedModel([]), extensions=[first, second], audit=False)
    assert len(session.diagnostics) == 1
    diagnostic = session.diagnostics[0]
    assert diagnostic.extension_path == str(second.resolve())
    assert diagnostic.message == f'Tool "shared" conflicts with {first.resolve()}'
    assert session.tool_registry["shared"].source_info.path == str(first.resolve())


def test_c4_inline_clash_and_first_wins(make_tool: Any) -> None:
    a, b = make_tool("same", description="from a"), make_tool("same", description="from b")

    def ext_a(pi: ExtensionAPI) -> None:
        pi.register_tool(a)

    def ext_b(pi: ExtensionAPI) -> None:
        pi.register_tool(b)

    session = create_agent_session(model=ScriptedModel([]), extensions=[ext_a, ext_b], audit=False)
    assert [str(d) for d in session.diagnostics] == [
        '<inline:2>: Tool "same" conflicts with <inline:1>'
    ]
    assert session.tool_registry["same"].definition is a


def test_c4_clash_after_loading_keeps_first_without_diagnostic(make_tool: Any) -> None:
    a, b = make_tool("same", description="from a"), make_tool("same", description="from b")
    apis: list[ExtensionAPI] = []

    def ext_a(pi: ExtensionAPI) -> None:
        pi.register_tool(a)

    def ext_b(pi: ExtensionAPI) -> None:
        apis.append(pi)

    session = create_agent_session(model=ScriptedModel([]), extensions=[ext_a, ext_b], audit=False)
    apis[0].register_tool(b)
    assert session.diagnostics == []
    assert session.tool_registry["same"].definition is a


def test_unknown_event_name_is_rejected_with_extension_named() -> None:
    def ext(pi: ExtensionAPI) -> None:
        pi.on("tool_cal", lambda event, ctx: None)

    session = create_agent_session(model=ScriptedModel([]), extensions=[ext], audit=False)
    assert len(session.diagnostics) == 1
    assert "<inline:1>" in str(session.diagnostics[0])
    assert "'tool_cal'" in session.diagnostics[0].message


async def test_c35_file_with_postponed_annotations_and_dataclasses_loads(
    write_extension: Any,
) -> None:
    path = write_extension(
        """
        from __future__ import annotations

        from dataclasses import dataclass
        from enum import Enum

        from pydantic import BaseModel
        from pi_notebook import TextContent, ToolDefinition, ToolResult

        class Mode(str, Enum):
            fast = "fast"

        @dataclass
        class Settings:
            url: str
            retries: int = 3

        class Params(BaseModel):
            mode: Mode

        async def run(tool_call_id, params: Params, signal, on_update, ctx) -> ToolResult:
            return ToolResult(content=[TextContent(text=f"{params.mode.value} {Settings('u').retries}")])

        def register(pi):
            pi.register_tool(ToolDefinition(name="typed", label="T", description="d",
                                            parameters=Params, execute=run))
        """
    )
    model = ScriptedModel([tool_call("typed", {"mode": "fast"}), text("done")])
    session = create_agent_session(model=model, extensions=[path], audit=False)
    assert session.diagnostics == []
    await session.prompt("go")
    assert session.messages[2].content[0].text == "fast 3"


def test_failed_file_leaves_no_module_behind(write_extension: Any) -> None:
    path = write_extension("raise ImportError('missing driver')\n")
    before = set(sys.modules)
    session = create_agent_session(model=ScriptedModel([]), extensions=[path], audit=False)
    assert "missing driver" in session.diagnostics[0].message
    assert {m for m in set(sys.modules) - before if m.startswith("pi_notebook_extension_")} == set()


async def test_c7_before_async_factories_finish_known_tools_are_active(make_tool: Any) -> None:
    async def later(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("async_tool"))

    def now(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("sync_tool", snippet="ready at once"))

    model = ScriptedModel([text("hi")])
    session = create_agent_session(model=model, extensions=[later, now], audit=False)
    assert session.active_tool_names == ["read", "ls", "inspect_variable", "sync_tool"]
    assert "- sync_tool: ready at once" in session.system_prompt
    session.set_active_tools_by_name(["sync_tool"])  # a choice made before start is kept
    await session.prompt("go")
    assert model.calls[0].tool_names == ["sync_tool", "async_tool"]  # new names join (C7)
