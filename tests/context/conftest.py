"""Helpers for the context tests (issue 13): a small echo tool."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from pi_notebook import TextContent, ToolDefinition, ToolResult, define_tool


class EchoParams(BaseModel):
    text: str = "hi"


def echo_tool(name: str = "echo") -> ToolDefinition[Any]:
    """A tool answering ``<name>:<text>`` with ``details={"tool": name}``."""

    async def execute(
        tool_call_id: str, params: Any, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        return ToolResult(
            content=[TextContent(text=f"{name}:{params.text}")], details={"tool": name}
        )

    return define_tool(
        ToolDefinition(
            name=name,
            label=name,
            description=f"The {name} tool.",
            parameters=EchoParams,
            execute=execute,
        )
    )


@pytest.fixture
def make_tool() -> Callable[..., ToolDefinition[Any]]:
    return echo_tool
