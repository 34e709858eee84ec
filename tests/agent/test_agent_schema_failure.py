"""C33: a tool whose JSON Schema cannot be built ends the run with an error message."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from pi_notebook.agent.agent import Agent
from pi_notebook.agent.types import AgentTool, ToolResult
from pi_notebook.testing import ScriptedModel, text


class Opaque:
    pass


class NoSchema(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    value: Opaque


async def _never(*_: object) -> ToolResult:
    raise AssertionError("must not run")


async def test_c33_unbuildable_tool_schema_is_an_error_message_not_a_raise() -> None:
    model = ScriptedModel([text("unused")])
    tool = AgentTool(name="bad", label="Bad", description="d", parameters=NoSchema, execute=_never)
    agent = Agent(model=model, tools=[tool])
    await agent.prompt("hi")
    last = agent.state.messages[-1]
    assert last.role == "assistant" and last.stop_reason == "error"
    assert last.error_message is not None and "tool schemas" in last.error_message
    assert model.remaining == 1  # the model was never asked
