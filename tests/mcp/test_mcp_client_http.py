"""The MCP client extension against the toy server over streamable HTTP on loopback (14.1).

One server process serves the module; the kill test starts it again on the same port.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from pi_notebook import AgentSession, create_agent_session
from pi_notebook.mcp import McpExtension, mcp_extension
from pi_notebook.testing import text, tool_call
from tests.mcp.mcp_support import Relay, ScriptedUI, start_toy_http, stop, wait_for_text

pytestmark = pytest.mark.asyncio(loop_scope="module")


class Toy:
    def __init__(
        self,
        session: AgentSession,
        ext: McpExtension,
        ui: ScriptedUI,
        relay: Relay,
        proc: subprocess.Popen[str],
        url: str,
    ) -> None:
        self.session, self.ext, self.ui, self.relay = session, ext, ui, relay
        self.proc, self.url = proc, url


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def toy() -> AsyncIterator[Toy]:
    proc, url = start_toy_http()
    mp = pytest.MonkeyPatch()
    mp.setenv("PI_TEST_SECRET_HEADER", "s3cret-from-env")
    ext = mcp_extension({"web": {"url": url, "headers": {"X-Pi-Test": "${PI_TEST_SECRET_HEADER}"}}})
    ui, relay = ScriptedUI(), Relay()
    session = create_agent_session(
        model=relay,
        extensions=[ext],
        ui=ui,
        audit="sqlite://",
        builtin_tools=False,
        excluded_tool_names=["mcp__web__picture"],
    )
    state = Toy(session, ext, ui, relay, proc, url)
    try:
        await session.start()
        yield state
        await session.close()
    finally:
        mp.undo()
        stop(state.proc)  # the kill test may have replaced it


async def test_tools_listed_over_http_within_allow_and_exclude(toy: Toy) -> None:
    names = set(toy.session.tool_registry)
    assert names == {
        "mcp__web__lookup",
        "mcp__web__write_marker",
        "mcp__web__nap",
        "mcp__web__header",
    }
    assert all(t.source_info.origin == "mcp:web" for t in toy.session.tool_registry.values())
    toy.session.set_active_tools_by_name(["mcp__web__lookup", "mcp__web__header"])
    try:
        result = await toy.session.call_tool("mcp__web__nap", {"seconds": 0, "marker": "x"})
        assert result.is_error and result.content[0].text == "Tool mcp__web__nap not found"
    finally:
        toy.session.set_active_tools_by_name(list(toy.session.tool_registry))


async def test_headers_come_from_the_environment(toy: Toy) -> None:
    result = await toy.session.call_tool("mcp__web__header", {"name": "X-Pi-Test"})
    assert result.content[0].text == "s3cret-from-env"
    assert "s3cret" not in repr(toy.ext.servers[0])  # the config keeps the reference only


async def test_read_only_call_runs_through_the_model(toy: Toy) -> None:
    model = toy.relay.script(
        [[tool_call("mcp__web__lookup", {"key": "hi"}, id="h1")], text("done")]
    )
    await toy.session.prompt("look it up")
    model.assert_complete()
    result = toy.session.messages[-2]
    assert not result.is_error and result.details["structured_content"]["value"] == "HI"


async def test_destructive_call_asks_and_rejection_leaves_no_marker(
    toy: Toy, tmp_path: Path
) -> None:
    marker = tmp_path / "marker.txt"
    toy.ui.answers, toy.ui.asked = [False], []
    result = await toy.session.call_tool("mcp__web__write_marker", {"path": str(marker)})
    assert toy.ui.asked == ["mcp__web__write_marker"]
    assert result.is_error and not marker.exists()


async def test_abort_cancels_the_sleeping_call_at_the_server(toy: Toy, tmp_path: Path) -> None:
    marker = tmp_path / "nap.txt"
    toy.relay.script(
        [[tool_call("mcp__web__nap", {"seconds": 60, "marker": str(marker)}, id="n1")]]
    )

    def on_event(event: Any) -> None:
        if event.type == "tool_execution_update":
            toy.session.abort()

    unsubscribe = toy.session.subscribe(on_event)
    try:
        await asyncio.wait_for(toy.session.prompt("nap"), 20)
    finally:
        unsubscribe()
    assert toy.session.messages[-1].content[0].text == "Operation aborted"
    assert await wait_for_text(marker, "cancelled") == "cancelled"


async def test_killed_server_gives_an_error_and_the_next_call_works(
    toy: Toy, tmp_path: Path
) -> None:
    started = asyncio.Event()
    unsubscribe = toy.session.subscribe(
        lambda e: started.set() if e.type == "tool_execution_update" else None
    )
    try:
        args = {"seconds": 60, "marker": str(tmp_path / "nap.txt")}
        call = asyncio.ensure_future(toy.session.call_tool("mcp__web__nap", args))
        await asyncio.wait_for(started.wait(), 20)
        stop(toy.proc)
        result = await asyncio.wait_for(call, 20)
    finally:
        unsubscribe()
    assert (
        result.is_error and "MCP server 'web' stopped while calling nap" in result.content[0].text
    )
    port = int(toy.url.rsplit(":", 1)[1].split("/")[0])
    toy.proc, _ = start_toy_http(port)  # the server is back where it was
    after = await toy.session.call_tool("mcp__web__lookup", {"key": "back"})
    assert not after.is_error and after.details["structured_content"]["value"] == "BACK"
