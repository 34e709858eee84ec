"""The wrapper: a registered definition becomes an ``AgentTool`` (S4).

It injects a fresh ``ctx`` for the call (``create_context(tool_call_id)``: its ``ui`` is bound to
the call) as the fifth ``execute`` argument and reports tools that
``execute`` added to the active set. Tool-call and tool-result interception are not
here: they are the hooks the session installs into the agent core (S5). The one check
that is here is the last one before ``execute``: ``before_execute`` (the session's approval
check) sees the final arguments and may refuse the call by raising.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel

from ..agent.types import AgentTool, ToolResult, ToolUpdateCallback
from ..ai.abort import AbortSignal
from .context import ExtensionContext
from .types import RegisteredTool, ToolDefinition

__all__ = ["BeforeExecute", "ContextFactory", "wrap_registered_tool", "wrap_tool_definition"]

ContextFactory = Callable[[str], ExtensionContext]
"""``create_context(tool_call_id)``: a fresh ``ctx`` serving that call."""
BeforeExecute = Callable[[str, ToolDefinition[Any], BaseModel], Awaitable[None]]
"""``before_execute(tool_call_id, definition, params)``: runs right before ``execute`` with the
final arguments; raising refuses the call (the message becomes its error result)."""


def wrap_tool_definition(
    definition: ToolDefinition[Any], create_context: ContextFactory
) -> AgentTool[Any]:
    """The generic wrapper: ``execute`` gets ``create_context(tool_call_id)`` at call time."""

    async def execute(
        tool_call_id: str, params: BaseModel, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        return await definition.execute(
            tool_call_id, params, signal, on_update, create_context(tool_call_id)
        )

    return AgentTool(
        name=definition.name,
        label=definition.label,
        description=definition.description,
        parameters=definition.parameters,
        execute=execute,
        prepare_arguments=definition.prepare_arguments,
        execution_mode=definition.execution_mode,
        describe_call=definition.describe_call,
    )


def wrap_registered_tool(
    registered: RegisteredTool,
    create_context: ContextFactory,
    active_tool_names: Callable[[], list[str]],
    before_execute: BeforeExecute | None = None,
) -> AgentTool[Any]:
    """Wrap, and set ``added_tool_names`` when ``execute`` only added active tools.

    ``before_execute`` (if given) runs first, on the arguments ``execute`` is about to get.
    """
    definition = registered.definition
    tool = wrap_tool_definition(definition, create_context)

    async def execute(
        tool_call_id: str, params: BaseModel, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> ToolResult:
        if before_execute is not None:
            await before_execute(tool_call_id, definition, params)
        before = active_tool_names()
        # ``definition.execute`` directly: one coroutine fewer per call than ``tool.execute``.
        result = await definition.execute(
            tool_call_id, params, signal, on_update, create_context(tool_call_id)
        )
        after = active_tool_names()
        if after == before:  # the usual case: execute changed nothing
            return result
        added = [name for name in after if name not in before]
        removed = [name for name in before if name not in after]
        if added and not removed and isinstance(result, ToolResult):  # pyright: ignore[reportUnnecessaryIsInstance]
            return dataclasses.replace(result, added_tool_names=added)
        return result

    return dataclasses.replace(tool, execute=execute)
