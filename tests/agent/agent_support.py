"""Helpers shared by the agent-core tests (imported by the tests/agent modules).

``make_tool`` builds an ``AgentTool`` around a plain async function; ``Recorder`` is an
agent subscriber that keeps every event; ``trace`` turns events into short strings
(``"tool_execution_end:c1"``, ``"message_start:toolResult"``,
``"message_update:toolcall_delta"``, ``"message_end:toolResult:c1"``) so a test can pin a whole event sequence.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from pydantic import BaseModel

from pi_notebook.agent.agent import Agent
from pi_notebook.agent.events import AgentEvent
from pi_notebook.agent.types import AgentTool, ToolResult, ToolUpdateCallback
from pi_notebook.ai.abort import AbortSignal
from pi_notebook.ai.messages import TextContent, ToolResultMessage, content_text
from pi_notebook.ai.scripted import Step
from pi_notebook.testing import ScriptedModel

Execute = Callable[[str, Any, AbortSignal, ToolUpdateCallback], Awaitable[ToolResult]]


class EchoParams(BaseModel):
    text: str


class CountParams(BaseModel):
    n: int


def result(text: str, details: Any = None, **kwargs: Any) -> ToolResult:
    return ToolResult(content=[TextContent(text=text)], details=details, **kwargs)


async def echo_execute(
    tool_call_id: str, params: Any, signal: AbortSignal, on_update: ToolUpdateCallback
) -> ToolResult:
    return result(params.text, {"id": tool_call_id})


def make_tool(
    name: str = "echo",
    execute: Execute = echo_execute,
    *,
    parameters: type[BaseModel] = EchoParams,
    **kwargs: Any,
) -> AgentTool[Any]:
    return AgentTool(
        name=name,
        label=name.title(),
        description=f"The {name} tool.",
        parameters=parameters,
        execute=execute,
        **kwargs,
    )


def tag(event: Any) -> str:
    """One event as a short string: type plus the call id, message role or stream event."""
    kind: str = event.type
    if kind.startswith("tool_execution_"):
        return f"{kind}:{event.tool_call_id}"
    if kind == "message_update":
        return f"{kind}:{event.assistant_message_event.type}"
    if kind in ("message_start", "message_end"):
        if event.message.role == "toolResult":
            return f"{kind}:toolResult:{event.message.tool_call_id}"
        return f"{kind}:{event.message.role}"
    return kind


def trace(events: Iterable[Any], *, updates: bool = True) -> list[str]:
    """Tags of ``events``; ``updates=False`` leaves out the model's ``message_update``s."""
    return [tag(e) for e in events if updates or e.type != "message_update"]


class Recorder:
    """A synchronous subscriber that keeps every event."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []

    def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)

    def trace(self, *, updates: bool = False) -> list[str]:
        return trace(self.events, updates=updates)

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.type == kind]

    def end(self, tool_call_id: str) -> Any:
        (found,) = [e for e in self.of("tool_execution_end") if e.tool_call_id == tool_call_id]
        return found


def make_agent(
    steps: list[Step], tools: Iterable[AgentTool[Any]] = (), **kwargs: Any
) -> tuple[Agent, ScriptedModel, Recorder]:
    model = ScriptedModel(steps)
    agent = Agent(model=model, tools=list(tools), **kwargs)
    recorder = Recorder()
    agent.subscribe(recorder)
    return agent, model, recorder


def tool_results(agent: Agent) -> list[ToolResultMessage]:
    return [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]


def result_text(agent: Agent, tool_call_id: str) -> str:
    (found,) = [m for m in tool_results(agent) if m.tool_call_id == tool_call_id]
    return content_text(found.content)
