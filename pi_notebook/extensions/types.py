"""What an extension registers: ``ToolDefinition``, and what the registry keeps of it.

``define_tool(d)`` returns ``d`` unchanged (S2, C1): it exists so a type checker sees
the parameter model inside ``execute``. It neither registers the tool nor adds any
safety; ``pi.register_tool(d)`` registers it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from pydantic import BaseModel

from ..agent.types import ExecutionMode, ToolResult, ToolUpdateCallback
from ..agent.views import CallDescriber
from ..ai.abort import AbortSignal

if TYPE_CHECKING:
    from .context import ExtensionContext

__all__ = [
    "RegisteredTool",
    "SourceInfo",
    "ToolDefinition",
    "ToolExecute",
    "ToolInfo",
    "define_tool",
]

P = TypeVar("P", bound=BaseModel)

ToolExecute = Callable[
    [str, P, AbortSignal, ToolUpdateCallback, "ExtensionContext"], Awaitable[ToolResult]
]


@dataclass(kw_only=True)
class ToolDefinition(Generic[P]):
    """A tool as an extension defines it (S6).

    ``execute(tool_call_id, params, signal, on_update, ctx)`` may raise; the message
    becomes an error result for the model. ``prompt_snippet`` is the one line under
    "Available tools" in the system prompt; ``prompt_guidelines`` become bullets.

    ``requires_approval``: ``True`` makes every call wait for a person's approval; a callable
    receives the validated parameters and returns the reason a call needs approval, or
    ``None`` when it does not (it may raise: the call is then blocked). The approval binds
    to the hash of the canonical JSON of the final arguments, after every ``tool_call``
    handler, and is checked again right before ``execute``.

    ``describe_call(args)`` (optional) says how a call reads: a ``CallView`` with a title, one
    block of code and its language (the argument it is, so an edit goes back into it), and
    the other arguments worth showing. The notebook (cards, record, approval prompts), the
    audit and approval summaries and the MCP server's questions render it; a tool without
    one is shown by its label and its arguments. It gets the arguments as plain JSON values
    (as the model sent them, or as recorded) and should not raise: a failure is logged and
    the default view is shown.
    """

    name: str
    label: str
    description: str
    parameters: type[P]
    execute: ToolExecute[P]
    prepare_arguments: Callable[[Any], Any] | None = None
    execution_mode: ExecutionMode | None = None
    prompt_snippet: str | None = None
    prompt_guidelines: Sequence[str] | None = None
    requires_approval: bool | Callable[[P], str | None] = False
    describe_call: CallDescriber | None = None


def define_tool(definition: ToolDefinition[P]) -> ToolDefinition[P]:
    """Return ``definition`` unchanged; it only carries the parameter type (C1)."""
    return definition


SourceKind = Literal["builtin", "extension", "sdk"]


@dataclass(frozen=True, kw_only=True)
class SourceInfo:
    """Where a tool came from (C5): ``<builtin:NAME>``, ``<sdk:NAME>``, ``<inline:N>``,
    or the extension's file path or module name. ``origin`` names what inside the extension
    provides the tool, when that is not the extension itself (an MCP server: ``mcp:NAME``)."""

    kind: SourceKind
    path: str
    origin: str | None = None

    def __str__(self) -> str:
        return self.path if self.origin is None else f"{self.path} [{self.origin}]"


@dataclass(frozen=True, kw_only=True)
class RegisteredTool:
    """A definition plus the source that registered it (S1, S3)."""

    definition: ToolDefinition[Any]
    source_info: SourceInfo

    @property
    def name(self) -> str:
        return self.definition.name


@dataclass(frozen=True, kw_only=True)
class ToolInfo:
    """Registry metadata, as ``get_all_tools()`` returns it: no callable (S20, C11)."""

    name: str
    label: str
    description: str
    parameters: dict[str, Any]
    prompt_guidelines: tuple[str, ...]
    source_info: SourceInfo
