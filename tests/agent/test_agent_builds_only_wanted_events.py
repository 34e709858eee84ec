"""Events nobody listens to are not built, and everyone who listens still gets theirs.

``Agent.subscribe(listener, events=...)`` names the event types a listener wants; the loop
asks ``wants(event_type)`` before building an event, so a run whose listeners want only a
few types skips the rest (``message_update``, ``tool_execution_update`` ...). A session wants
what its extensions handle, what its subscribers get (every event), and what it reads itself
(usage, the end of a call).
"""

from __future__ import annotations

from typing import Any

from agent_support import make_tool, result
from pydantic import BaseModel

from pi_notebook import ExtensionAPI, ToolDefinition, create_agent_session
from pi_notebook.agent.agent import Agent
from pi_notebook.agent.types import ToolResult
from pi_notebook.ai.messages import TextContent, content_text
from pi_notebook.testing import ScriptedModel, text, tool_call


class NoParams(BaseModel):
    pass


async def _progress(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> ToolResult:
    on_update(result("half way"))
    on_update(result("almost"))
    return result("done")


def _script() -> ScriptedModel:
    return ScriptedModel([tool_call("progress", {}, id="c1"), text("finished")])


async def test_a_listener_gets_only_the_events_it_names() -> None:
    agent = Agent(model=_script(), tools=[make_tool("progress", _progress, parameters=NoParams)])
    ends: list[str] = []
    everything: list[str] = []
    agent.subscribe(lambda e: ends.append(e.type), events=("message_end", "agent_end"))
    unsubscribe = agent.subscribe(lambda e: everything.append(e.type), events="turn_end")
    await agent.prompt("go")
    assert ends == ["message_end"] * 4 + ["agent_end"]  # user, assistant, tool result, answer
    assert everything == ["turn_end", "turn_end"]
    unsubscribe()
    assert agent.wants("message_end") and not agent.wants("turn_end")
    assert not agent.wants("message_update") and not agent.wants("tool_execution_update")


async def test_a_wants_function_is_asked_at_each_event() -> None:
    agent = Agent(model=_script(), tools=[make_tool("progress", _progress, parameters=NoParams)])
    asked: list[str] = []
    got: list[str] = []

    def wants(event_type: str) -> bool:
        asked.append(event_type)
        return event_type == "tool_execution_update"

    def listener(event: Any) -> None:
        got.append(content_text(event.partial_result.content))

    agent.subscribe(listener, events=wants)
    await agent.prompt("go")
    assert got == ["half way", "almost"]
    assert "message_update" in asked and "turn_start" in asked


async def test_an_unfiltered_listener_still_gets_every_event_in_order() -> None:
    agent = Agent(model=_script(), tools=[make_tool("progress", _progress, parameters=NoParams)])
    filtered: list[str] = []
    every: list[str] = []
    agent.subscribe(lambda e: filtered.append(e.type), events=("message_end",))
    agent.subscribe(lambda e: every.append(e.type))
    await agent.prompt("go")
    assert every.count("message_update") > 0
    assert every.count("tool_execution_update") == 2
    assert every.index("tool_execution_update") < every.index("tool_execution_end")
    assert filtered == ["message_end"] * 4


def _progress_tool() -> ToolDefinition[Any]:
    async def execute(call_id: str, params: Any, signal: Any, on_update: Any, ctx: Any) -> Any:
        on_update(ToolResult(content=[TextContent(text="working")]))
        return ToolResult(content=[TextContent(text="ok")], details={"n": 1})

    return ToolDefinition(
        name="progress",
        label="Progress",
        description="Reports progress.",
        parameters=NoParams,
        execute=execute,
    )


async def test_a_session_builds_what_its_extensions_handle_and_reads_its_own() -> None:
    seen: list[str] = []

    def extension(pi: ExtensionAPI) -> None:
        pi.register_tool(_progress_tool())
        pi.on("tool_execution_update", lambda e, ctx: seen.append(f"update:{e.tool_call_id}"))
        pi.on("tool_execution_end", lambda e, ctx: seen.append(f"end:{e.tool_call_id}"))

    session = create_agent_session(
        model=_script(), extensions=[extension], audit=False, builtin_tools=False
    )
    agent = session.agent
    assert agent.wants("tool_execution_update") and agent.wants("tool_execution_end")
    assert agent.wants("message_end") and agent.wants("agent_start")  # usage, retention
    assert not agent.wants("message_update") and not agent.wants("turn_start")
    await session.prompt("go")
    assert seen == ["update:c1", "end:c1"]
    assert session.usage.requests == 2  # the usage meter still sees every answer
    assert [m.role for m in session.messages] == ["user", "assistant", "toolResult", "assistant"]

    # A subscriber wants everything: from then on every event is built again.
    events: list[str] = []
    unsubscribe = session.subscribe(lambda e: events.append(e.type))
    assert agent.wants("message_update") and agent.wants("turn_start")
    unsubscribe()
    assert not agent.wants("message_update")
    await session.close()


async def test_a_handler_added_during_a_run_gets_the_later_events() -> None:
    later: list[str] = []

    def extension(pi: ExtensionAPI) -> None:
        pi.register_tool(_progress_tool())

        def on_end(event: Any, ctx: Any) -> None:
            # From now on this extension listens to turn_end too.
            pi.on("turn_end", lambda e, c: later.append(e.type))

        pi.on("tool_execution_end", on_end)

    session = create_agent_session(
        model=_script(), extensions=[extension], audit=False, builtin_tools=False
    )
    await session.prompt("go")
    assert later == ["turn_end", "turn_end"]
    await session.close()
