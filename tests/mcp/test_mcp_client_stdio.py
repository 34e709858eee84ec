"""The MCP client extension against the toy server as a real stdio subprocess.

One server process serves the whole module (the kill test restarts it, as it should).
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from pi_notebook import AgentSession, ExtensionAPI, ImageContent, create_agent_session
from pi_notebook.mcp import McpConnection, McpExtension, McpServerUnavailable, mcp_extension
from pi_notebook.mcp.config import parse_server
from pi_notebook.testing import text, tool_call
from tests.mcp.mcp_support import Relay, ScriptedUI, toy_stdio, wait_for_text

pytestmark = pytest.mark.asyncio(loop_scope="module")

PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()  # the toy's picture
TOOLS = ["lookup", "write_marker", "nap", "header", "picture"]


def policy(pi: ExtensionAPI) -> None:
    """Ordinary handlers: they must apply to MCP tools unchanged."""

    def gate(event: Any, ctx: Any) -> dict[str, Any] | None:
        if event.tool_name == "mcp__toy__lookup" and event.input.key == "forbidden":
            return {"block": True, "reason": "policy: that key is off limits"}
        return None

    def stamp(event: Any, ctx: Any) -> dict[str, Any] | None:
        if event.tool_name == "mcp__toy__lookup" and not event.is_error:
            return {"content": [*event.content, {"type": "text", "text": "[checked by policy]"}]}
        return None

    pi.on("tool_call", gate)
    pi.on("tool_result", stamp)


class Toy:
    def __init__(
        self, session: AgentSession, ext: McpExtension, ui: ScriptedUI, relay: Relay
    ) -> None:
        self.session, self.ext, self.ui, self.relay = session, ext, ui, relay

    @property
    def connection(self) -> McpConnection:
        return self.ext.connections["toy"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def toy(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Toy]:
    logs = tmp_path_factory.mktemp("mcp_logs")
    ext = mcp_extension({"toy": toy_stdio()}, log_dir=logs)
    ui, relay = ScriptedUI(), Relay()
    session = create_agent_session(
        model=relay, extensions=[ext, policy], ui=ui, audit="sqlite://", builtin_tools=False
    )
    await session.start()
    yield Toy(session, ext, ui, relay)
    await session.close()
    assert not ext.connections, "closing the session stops the servers"


async def test_tools_listed_and_registered_with_server_schema_and_source(toy: Toy) -> None:
    registry = toy.session.tool_registry
    assert sorted(registry) == sorted(f"mcp__toy__{t}" for t in TOOLS)
    remote = {t.name: t for t in await toy.connection.list_tools()}
    infos = {info.name: info for info in toy.session.get_all_tools()}
    for name in TOOLS:
        info = infos[f"mcp__toy__{name}"]
        assert info.source_info.origin == "mcp:toy"
        assert info.source_info.path == "<mcp:toy>"
        assert info.parameters == remote[name].input_schema  # providers see the server's schema
        assert info.description == remote[name].description
    assert toy.session.active_tool_names == list(registry)  # active like any extension tool
    approval = {t.remote_name: t.requires_approval for t in toy.ext.tools.values()}
    assert approval == {
        "lookup": False,
        "write_marker": True,
        "nap": False,
        "header": False,
        "picture": False,
    }
    definition = registry["mcp__toy__write_marker"].definition
    assert callable(definition.requires_approval)
    assert "destructive" in definition.requires_approval(None)


async def test_read_only_call_runs_through_the_model(toy: Toy) -> None:
    model = toy.relay.script([[tool_call("mcp__toy__lookup", {"key": "ab"}, id="r1")], text("ok")])
    await toy.session.prompt("look ab up")
    model.assert_complete()
    result = toy.session.messages[-2]
    assert result.role == "toolResult" and not result.is_error
    shown = "\n".join(part.text for part in result.content)
    assert '"value": "AB"' in shown and "[checked by policy]" in shown  # tool_result handler ran
    assert result.details["structured_content"]["value"] == "AB"
    offered = {t.name: t.parameters for t in model.calls[0].tools}
    remote = {t.name: t.input_schema for t in await toy.connection.list_tools()}
    assert offered["mcp__toy__lookup"] == remote["lookup"]  # the provider request carries it
    assert not toy.ui.asked, "a read-only tool runs without asking"


async def test_tool_call_handlers_gate_mcp_tools(toy: Toy) -> None:
    result = await toy.session.call_tool("mcp__toy__lookup", {"key": "forbidden"})
    assert result.is_error and result.content[0].text == "policy: that key is off limits"


async def test_arguments_are_validated_against_the_server_schema(toy: Toy) -> None:
    result = await toy.session.call_tool("mcp__toy__nap", {"seconds": "long"})
    assert result.is_error
    error = result.content[0].text
    assert error.startswith('Validation failed for tool "mcp__toy__nap":')
    assert "  - root: 'marker' is a required property" in error
    assert "  - seconds: 'long' is not of type 'number'" in error


async def test_image_becomes_image_content_and_its_size_stays_in_details(toy: Toy) -> None:
    result = await toy.session.call_tool("mcp__toy__picture", {})
    assert not result.is_error
    assert result.content == [ImageContent(data=PIXEL, mime_type="image/png")]
    assert result.details["images"] == [{"mime_type": "image/png", "bytes": 24}]  # no data


async def test_the_model_sees_the_image_in_its_next_request(toy: Toy) -> None:
    model = toy.relay.script([[tool_call("mcp__toy__picture", {}, id="p1")], text("a pixel")])
    await toy.session.prompt("show me the picture")
    model.assert_complete()
    sent = model.calls[1].messages[-1]
    assert sent.role == "toolResult" and sent.tool_call_id == "p1" and not sent.is_error
    assert sent.content == [ImageContent(data=PIXEL, mime_type="image/png")]


async def test_destructive_call_asks_and_rejection_leaves_no_marker(
    toy: Toy, tmp_path: Path
) -> None:
    marker = tmp_path / "marker.txt"
    toy.ui.answers = [False]
    toy.ui.asked.clear()
    result = await toy.session.call_tool("mcp__toy__write_marker", {"path": str(marker)})
    assert toy.ui.asked == ["mcp__toy__write_marker"]
    assert result.is_error and not marker.exists()
    toy.ui.answers = [True]
    result = await toy.session.call_tool("mcp__toy__write_marker", {"path": str(marker)})
    assert not result.is_error and marker.read_text() == "written"


async def test_abort_cancels_the_sleeping_call_at_the_server(toy: Toy, tmp_path: Path) -> None:
    marker = tmp_path / "nap.txt"
    toy.relay.script(
        [[tool_call("mcp__toy__nap", {"seconds": 60, "marker": str(marker)}, id="n1")]]
    )

    def on_event(event: Any) -> None:
        if event.type == "tool_execution_update" and event.tool_call_id == "n1":
            toy.session.abort()  # the server said it started napping

    unsubscribe = toy.session.subscribe(on_event)
    try:
        await asyncio.wait_for(toy.session.prompt("nap"), 20)
    finally:
        unsubscribe()
    result = toy.session.messages[-1]
    assert result.role == "toolResult" and result.is_error
    assert result.content[0].text == "Operation aborted"
    assert await wait_for_text(marker, "cancelled") == "cancelled"  # the server was told
    assert (await toy.session.call_tool("mcp__toy__lookup", {"key": "x"})).is_error is False


async def test_stderr_goes_to_the_log_file_not_the_notebook(
    toy: Toy, capfd: pytest.CaptureFixture[str]
) -> None:
    await toy.session.call_tool("mcp__toy__lookup", {"key": "stderr-check"})
    assert "lookup stderr-check" in toy.connection.log_path.read_text()
    assert "stderr-check" not in capfd.readouterr().err


async def test_killed_server_gives_an_error_and_the_next_call_works(
    toy: Toy, tmp_path: Path
) -> None:
    started = asyncio.Event()
    pids: list[int] = []

    def on_event(event: Any) -> None:
        if event.type == "tool_execution_update" and event.tool_name == "mcp__toy__nap":
            pids.append(int(event.partial_result.details["message"].split()[-1]))
            started.set()

    unsubscribe = toy.session.subscribe(on_event)
    try:
        args = {"seconds": 60, "marker": str(tmp_path / "nap.txt")}
        call = asyncio.ensure_future(toy.session.call_tool("mcp__toy__nap", args))
        await asyncio.wait_for(started.wait(), 20)
        starts = toy.connection.starts
        os.kill(pids[0], signal.SIGKILL)
        result = await asyncio.wait_for(call, 20)
    finally:
        unsubscribe()
    assert result.is_error
    assert "MCP server 'toy' stopped while calling nap" in result.content[0].text
    assert "starts again on the next call" in result.content[0].text
    after = await toy.session.call_tool("mcp__toy__lookup", {"key": "again"})
    assert not after.is_error and toy.connection.starts == starts + 1
    assert after.details["structured_content"]["pid"] != str(pids[0])


async def test_hung_server_times_out_and_is_restarted(tmp_path: Path) -> None:
    config = parse_server("slow", toy_stdio(timeout=1))
    connection = McpConnection(config, log_dir=tmp_path)
    try:
        with pytest.raises(
            McpServerUnavailable, match=r"did not answer nap within 1 s; it was stopped"
        ):
            await connection.call_tool("nap", {"seconds": 60, "marker": str(tmp_path / "m")})
        result = await connection.call_tool("lookup", {"key": "k"})
        assert result.structured_content["value"] == "K" and connection.starts == 2
    finally:
        await connection.close()


async def test_server_that_cannot_start_is_skipped_with_the_reason(tmp_path: Path) -> None:
    ext = mcp_extension({"broken": {"command": str(tmp_path / "no-such-server")}}, log_dir=tmp_path)
    session = create_agent_session(
        model=Relay(), extensions=[ext], audit=False, builtin_tools=False
    )
    await session.start()
    try:
        assert session.tool_registry == {}
        assert "MCP server 'broken' could not be started" in ext.failures["broken"]
        assert str(tmp_path / "broken.log") in ext.failures["broken"]
    finally:
        await session.close()
