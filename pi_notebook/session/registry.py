"""The tool registry: built-ins, then extension tools, then SDK custom tools (S17, S19).

A later source overwrites an earlier one with the same name (SDK custom > extension >
built-in); between extensions the first to register wins (the runner decides that).
The allow-list and exclude set filter every source alike.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from ..extensions.types import RegisteredTool

__all__ = ["build_registry", "next_active_names"]


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
