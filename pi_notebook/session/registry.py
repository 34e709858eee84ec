"""The tool registry: built-ins, then extension tools, then SDK custom tools (S17, S19).

A later source overwrites an earlier one with the same name (SDK custom > extension >
built-in); between extensions the first to register wins (the runner decides that).
The allow-list and exclude set filter every source alike.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from ..extensions.api import check_tool_definition
from ..extensions.types import RegisteredTool, SourceInfo, ToolDefinition

__all__ = ["build_registry", "builtin_entries", "next_active_names", "sdk_entries"]


def builtin_entries(definitions: Iterable[ToolDefinition[Any]]) -> list[RegisteredTool]:
    """The built-in tools as registry entries (source ``<builtin:NAME>``)."""
    return [
        RegisteredTool(
            definition=d, source_info=SourceInfo(kind="builtin", path=f"<builtin:{d.name}>")
        )
        for d in definitions
    ]


def sdk_entries(definitions: Iterable[ToolDefinition[Any]]) -> list[RegisteredTool]:
    """The SDK's ``custom_tools`` as registry entries (source ``<sdk:NAME>``), each checked
    first, as an extension's are when it registers them.

    Raises:
        ToolRegistrationError: a definition without a name, a callable ``execute`` or
            parameters whose JSON Schema is an object.
    """
    definitions = list(definitions)
    for definition in definitions:
        check_tool_definition(definition, "SDK custom_tools")
    return [
        RegisteredTool(definition=d, source_info=SourceInfo(kind="sdk", path=f"<sdk:{d.name}>"))
        for d in definitions
    ]


def build_registry(
    builtins: Iterable[RegisteredTool],
    extension_tools: Iterable[RegisteredTool],
    custom_tools: Iterable[RegisteredTool],
    *,
    allowed: Collection[str] | None,
    excluded: Collection[str],
) -> dict[str, RegisteredTool]:
    registry: dict[str, RegisteredTool] = {}
    for source in (builtins, extension_tools, custom_tools):
        for tool in source:
            registry[tool.name] = tool
    return {
        name: tool
        for name, tool in registry.items()
        if (allowed is None or name in allowed) and name not in excluded
    }


def next_active_names(
    registry: dict[str, RegisteredTool], previous_active: list[str], known: Collection[str]
) -> list[str]:
    """C7: keep the previously active names still in the registry, add names new to it."""
    kept = [name for name in previous_active if name in registry]
    added = [name for name in registry if name not in known and name not in kept]
    return kept + added
