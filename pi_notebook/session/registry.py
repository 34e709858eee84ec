"""The tool registry: built-ins, then extension tools, then SDK custom tools (S17, S19).

A later source overwrites an earlier one with the same name (SDK custom > extension >
built-in); between extensions the first to register wins (the runner decides that).
The allow-list and exclude set filter every source alike. :class:`ToolSet` holds a session's
registry with its active set, and says how each registered tool's calls read.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from ..agent.views import CallView, call_view, default_call_view
from ..extensions.api import check_tool_definition
from ..extensions.types import RegisteredTool, SourceInfo, ToolDefinition, ToolInfo

__all__ = ["ToolSet", "build_registry", "builtin_entries", "next_active_names", "sdk_entries"]


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


class ToolSet:
    """The session's tools: the registry built from every source and the active set (C7,
    C9, S15), filtered by the allow-list and the exclude set.

    Args:
        builtin_tools: the built-in tools' definitions.
        custom_tools: the SDK's ``custom_tools`` (checked as :func:`sdk_entries` does).
        allowed: the allow-list (``None``: every tool).
        excluded: names never registered.
    """

    def __init__(
        self,
        builtin_tools: Iterable[ToolDefinition[Any]],
        custom_tools: Iterable[ToolDefinition[Any]],
        *,
        allowed: Iterable[str] | None,
        excluded: Iterable[str] | None,
    ) -> None:
        self._builtins = builtin_entries(builtin_tools)
        self._custom = sdk_entries(custom_tools)
        self._allowed = None if allowed is None else frozenset(allowed)
        self._excluded = frozenset(excluded or ())
        self._registry: dict[str, RegisteredTool] = {}
        self._known: set[str] = set()
        self._active: list[str] = []

    @property
    def registry(self) -> dict[str, RegisteredTool]:
        """Every registered tool by name (a copy)."""
        return dict(self._registry)

    @property
    def active_names(self) -> list[str]:
        """The active tools' names, in order (a copy)."""
        return list(self._active)

    def get(self, name: str) -> RegisteredTool | None:
        """The registered tool called ``name``, if any."""
        return self._registry.get(name)

    def active_tools(self) -> list[RegisteredTool]:
        """The active tools, in order."""
        return [self._registry[name] for name in self._active]

    def refresh(self, extension_tools: Iterable[RegisteredTool]) -> None:
        """Rebuild the registry with the extensions' tools now registered; the active set
        keeps its names still registered and gains the names new to the registry (C7)."""
        self._registry = build_registry(
            self._builtins,
            extension_tools,
            self._custom,
            allowed=self._allowed,
            excluded=self._excluded,
        )
        self._active = next_active_names(self._registry, self._active, self._known)
        self._known |= set(self._registry)

    def choose(self, names: Iterable[str]) -> None:
        """Make ``names`` the active set: unknown or filtered names are ignored, order kept,
        each once (S15, C9)."""
        chosen: list[str] = []
        for name in names:
            if name in self._registry and name not in chosen:
                chosen.append(name)
        self._active = chosen

    def view_of(self, tool_name: str, args: Any) -> CallView:
        """How a call of ``tool_name`` with ``args`` reads: the tool's own ``describe_call``,
        else its label and arguments (a tool not in the registry: its name and arguments)."""
        tool = self._registry.get(tool_name)
        if tool is None:
            return default_call_view(tool_name, args)
        return call_view(tool.definition.label, args, tool.definition.describe_call)

    def infos(self) -> list[ToolInfo]:
        """Every registered tool's metadata, no callables (C11)."""
        return [
            ToolInfo(
                name=t.name,
                label=t.definition.label,
                description=t.definition.description,
                parameters=t.definition.parameters.model_json_schema(),
                prompt_guidelines=tuple(t.definition.prompt_guidelines or ()),
                source_info=t.source_info,
            )
            for t in self._registry.values()
        ]
