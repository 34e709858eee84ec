"""The agent core's tool contract: ``AgentTool``, ``ToolResult`` and the tool hooks.

The core knows nothing of extensions, SQL or notebooks. A tool is a name, a pydantic
parameter model and an async ``execute``. Hooks installed by the host (the session)
run before and after each call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeAlias, TypeVar

from pydantic import BaseModel

from ..ai.abort import AbortSignal
from ..ai.messages import AssistantMessage, Message, ResultContent, ToolCall, Usage
from ..ai.model import ToolSchema
from .views import CallDescriber

__all__ = [
    "AfterToolCallContext",
    "AfterToolCallResult",
    "AgentContext",
    "AgentTool",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "ExecutionMode",
    "ToolResult",
    "ToolUpdateCallback",
]

P = TypeVar("P", bound=BaseModel)
ExecutionMode: TypeAlias = Literal["sequential", "parallel"]


@dataclass(kw_only=True)
class ToolResult:
    """What a tool returns (and what ``on_update`` carries as a partial result).

    ``content`` goes to the model; ``details`` stays with the application (renderers,
    events, audit) and is never sent to the model. Secrets never go into ``content``.
    """

    content: list[ResultContent] = field(default_factory=list)
    details: Any = None
    usage: Usage | None = None
    terminate: bool = False
    added_tool_names: list[str] | None = None


ToolUpdateCallback: TypeAlias = Callable[[ToolResult], None]


@dataclass(kw_only=True)
class AgentTool(Generic[P]):
    """A tool as the agent core runs it.

    ``execute(tool_call_id, params, signal, on_update)`` may raise: the exception's
    message becomes an error tool result. ``prepare_arguments`` receives a copy of the
    raw arguments and returns what gets validated; it may raise (its message becomes
    the error text). ``describe_call`` (optional) says how a call is shown (see
    :mod:`pi_notebook.agent.views`); the core never calls it.
    """

    name: str
    label: str
    description: str
    parameters: type[P]
    execute: Callable[[str, P, AbortSignal, ToolUpdateCallback], Awaitable[ToolResult]]
    prepare_arguments: Callable[[Any], Any] | None = None
    execution_mode: ExecutionMode | None = None
    describe_call: CallDescriber | None = None
    _schema: tuple[type[BaseModel], dict[str, Any]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _offered: ToolSchema | None = field(default=None, init=False, repr=False, compare=False)

    def json_schema(self) -> dict[str, Any]:
        """The parameters' JSON Schema, built once per parameter model (it goes into every
        model request, and building it costs more than the rest of a turn). Read-only:
        every request shares the same dict."""
        if self._schema is None or self._schema[0] is not self.parameters:
            self._schema = (self.parameters, self.parameters.model_json_schema())
        return self._schema[1]

    def tool_schema(self) -> ToolSchema:
        """The tool as offered to a model (name, description, :meth:`json_schema`), built
        again only when one of them changed. Frozen: every request shares it."""
        parameters = self.json_schema()
        offered = self._offered
        if (
            offered is None
            or offered.parameters is not parameters
            or offered.name != self.name
            or offered.description != self.description
        ):
            offered = self._offered = ToolSchema(
                name=self.name, description=self.description, parameters=parameters
            )
        return offered


@dataclass(kw_only=True)
class AgentContext:
    """What one model request is built from: prompt, history and offered tools."""

    system_prompt: str
    messages: list[Message]
    tools: Sequence[AgentTool[Any]]


@dataclass(kw_only=True)
class BeforeToolCallContext:
    """Given to the before-tool hook after validation. ``args`` is the validated object;
    the hook may mutate it in place and ``execute`` sees the change (not re-validated)."""

    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: BaseModel
    context: AgentContext


@dataclass(kw_only=True)
class BeforeToolCallResult:
    block: bool = False
    reason: str | None = None
    terminate: bool = False


@dataclass(kw_only=True)
class AfterToolCallContext:
    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: BaseModel
    result: ToolResult
    is_error: bool
    context: AgentContext


@dataclass(kw_only=True)
class AfterToolCallResult:
    """A patch: fields left as ``None`` keep their current value."""

    content: list[ResultContent] | None = None
    details: Any = None
    usage: Usage | None = None
    is_error: bool | None = None
    terminate: bool | None = None


BeforeToolCallHook: TypeAlias = Callable[
    [BeforeToolCallContext, AbortSignal],
    Awaitable[BeforeToolCallResult | None] | BeforeToolCallResult | None,
]
AfterToolCallHook: TypeAlias = Callable[
    [AfterToolCallContext, AbortSignal],
    Awaitable[AfterToolCallResult | None] | AfterToolCallResult | None,
]
