"""The session's safe built-in tools (B1): ``read``, ``ls``, ``inspect_variable``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..extensions.types import ToolDefinition
from .files import ls_tool, read_tool
from .variables import inspect_variable_tool

__all__ = ["builtin_tools", "inspect_variable_tool", "ls_tool", "read_tool"]


def builtin_tools(*, namespace: Mapping[str, Any] | None = None) -> list[ToolDefinition[Any]]:
    return [read_tool, ls_tool, inspect_variable_tool(namespace)]
