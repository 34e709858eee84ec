"""The runner: dispatches events to extension handlers (as Pi's extension runner does).

Three dispatch rules:

* ``tool_call`` handlers run in load order, then registration order, on one shared
  event object; the first block stops the chain; a raising handler propagates (the
  caller blocks the call with its message) and is *not* reported to the error
  listener (C17, C18, S31).
* ``tool_result`` handlers chain patches; a raising handler is reported and isolated:
  the current result stands (S31, C23).
* Every other event: each handler runs; one that raises is reported as
  ``{extension_path, event, error}`` and does not stop the others (C32).

The pre-model events (``input``, ``before_agent_start``, ``context``,
``before_provider_request``) chain results as Pi does; :mod:`.premodel` emits them through a
runner (``premodel.emit_input(runner, text)``, ...).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..agent.common import maybe_await
from ..ai.messages import to_result_parts
from ..errors import RuntimeNotInitializedError
from .context import ExtensionContext, SessionHost
from .events import (
    ExtensionErrorEvent,
    ToolCallEvent,
    ToolCallEventResult,
    ToolResultEvent,
    ToolResultEventResult,
)
from .types import RegisteredTool, SourceInfo

__all__ = ["Extension", "ExtensionRunner", "Handler", "RuntimeNotInitializedError"]

log = logging.getLogger(__name__)

Handler = Callable[[Any, ExtensionContext], Awaitable[Any] | Any]
ErrorListener = Callable[[ExtensionErrorEvent], Awaitable[None] | None]


@dataclass(kw_only=True)
class Extension:
    """One loaded extension: where it came from, its handlers and its tools."""

    source_info: SourceInfo
    handlers: dict[str, list[Handler]] = field(default_factory=dict[str, list[Handler]])
    tools: dict[str, RegisteredTool] = field(default_factory=dict[str, RegisteredTool])
    error_listeners: list[ErrorListener] = field(default_factory=list[ErrorListener])

    @property
    def path(self) -> str:
        return self.source_info.path


class ExtensionRunner:
    """Holds the loaded extensions and dispatches events to them."""

    def __init__(self) -> None:
        self.extensions: list[Extension] = []
        self.errors: list[ExtensionErrorEvent] = []
        self._host: SessionHost | None = None
        self._on_registered: Callable[[], None] | None = None
        self._error_listeners: list[ErrorListener] = []

    # -- binding --------------------------------------------------------------
    @property
    def bound(self) -> bool:
        return self._host is not None

    def bind(self, host: SessionHost, on_registered: Callable[[], None]) -> None:
        """Attach to a session; from now on registrations refresh its registry (C3)."""
        self._host = host
        self._on_registered = on_registered

    def require_host(self, what: str) -> SessionHost:
        if self._host is None:
            raise RuntimeNotInitializedError(what)
        return self._host

    def tool_registered(self) -> None:
        if self._on_registered is not None:
            self._on_registered()

    def create_context(
        self, extension_path: str | None = None, *, tool_call_id: str | None = None
    ) -> ExtensionContext:
        """A fresh ``ctx`` for one call or one handler (C31), serving the call
        ``tool_call_id`` when it is given (its ``ui`` is bound to that call)."""
        host = self._host
        if host is None:
            raise RuntimeNotInitializedError("create_context")
        return ExtensionContext(host, extension_path=extension_path, tool_call_id=tool_call_id)

    def on_error(self, listener: ErrorListener) -> Callable[[], None]:
        """Host-level error listener (the session's); extensions use ``pi.on_error``."""
        self._error_listeners.append(listener)
        return lambda: self._error_listeners.remove(listener)

    # -- tools ----------------------------------------------------------------
    def registered_tools(self) -> list[RegisteredTool]:
        """Every extension tool; between extensions the first to register a name wins."""
        seen: dict[str, RegisteredTool] = {}
        for extension in self.extensions:
            for name, tool in extension.tools.items():
                seen.setdefault(name, tool)
        return list(seen.values())

    def has_handlers(self, event_type: str) -> bool:
        """Whether any extension has a handler for ``event_type`` now (asked per event)."""
        for extension in self.extensions:
            if extension.handlers.get(event_type):
                return True
        return False

    # -- dispatch -------------------------------------------------------------
    async def report(self, extension_path: str, event: str, error: BaseException | str) -> None:
        text = error if isinstance(error, str) else (str(error) or type(error).__name__)
        report = ExtensionErrorEvent(extension_path=extension_path, event=event, error=text)
        self.errors.append(report)
        log.warning("extension %s failed on %s: %s", extension_path, event, text)
        listeners = [*self._error_listeners]
        for extension in self.extensions:
            listeners.extend(extension.error_listeners)
        for listener in listeners:
            try:
                await maybe_await(listener(report))
            except Exception:  # an error listener must not loop back into itself
                log.exception("extension error listener failed")

    async def emit(self, event: Any) -> None:
        """Dispatch an ordinary event; raising handlers are reported, not propagated."""
        event_type: str = event.type
        call_id: str | None = getattr(event, "tool_call_id", None)  # a tool_execution_* event
        for extension in self.extensions:
            handlers = extension.handlers.get(event_type)
            if not handlers:
                continue
            ctx = self.create_context(extension.path, tool_call_id=call_id)  # one per extension
            for handler in handlers:
                try:
                    returned = handler(event, ctx)
                    if returned is not None:  # most handlers are sync and return nothing
                        await maybe_await(returned)
                except Exception as exc:
                    await self.report(extension.path, event_type, exc)

    async def emit_tool_call(self, event: ToolCallEvent) -> ToolCallEventResult | None:
        """Run the ``tool_call`` chain. Raises what a handler raises (fail closed)."""
        for extension in self.extensions:
            handlers = extension.handlers.get("tool_call")
            if not handlers:
                continue
            ctx = self.create_context(extension.path, tool_call_id=event.tool_call_id)
            for handler in handlers:
                raw = await maybe_await(handler(event, ctx))
                decision = _tool_call_decision(raw, extension.path, event.tool_name)
                if decision is not None and decision.block:
                    return decision
        return None

    async def emit_tool_result(self, event: ToolResultEvent) -> ToolResultEventResult | None:
        """Chain ``tool_result`` patches onto ``event``; None when nothing was patched."""
        patched = False
        for extension in self.extensions:
            handlers = extension.handlers.get("tool_result")
            if not handlers:
                continue
            ctx = self.create_context(extension.path, tool_call_id=event.tool_call_id)
            for handler in handlers:
                try:
                    raw = await maybe_await(handler(event, ctx))
                    patch = _tool_result_patch(raw, extension.path, event.tool_name)
                except Exception as exc:  # S31: isolate; the current result stands
                    await self.report(extension.path, "tool_result", exc)
                    continue
                if patch is None:
                    continue
                patched = True
                if patch.content is not None:
                    # Later handlers see TextContent/ImageContent parts, whether a patch
                    # gave a string, plain dicts or objects.
                    event.content = to_result_parts(patch.content)
                if patch.details is not None:
                    event.details = patch.details
                if patch.is_error is not None:
                    event.is_error = patch.is_error
        if not patched:
            return None
        return ToolResultEventResult(
            content=event.content, details=event.details, is_error=event.is_error
        )


def _tool_call_decision(raw: Any, path: str, tool_name: str) -> ToolCallEventResult | None:
    if raw is None or isinstance(raw, ToolCallEventResult):
        return raw
    if isinstance(raw, Mapping):
        values: Mapping[str, Any] = raw  # pyright: ignore[reportUnknownVariableType]
        unknown = set(values) - {"block", "reason", "terminate"}
        if unknown:
            raise ValueError(
                f"Extension {path} returned unknown keys {sorted(unknown)} from its tool_call "
                f'handler for tool "{tool_name}"; the call is blocked'
            )
        return ToolCallEventResult(
            block=bool(values.get("block", False)),
            reason=values.get("reason"),
            terminate=bool(values.get("terminate", False)),
        )
    # Fail closed: a gate that answers in a shape we cannot read does not let the call through.
    raise TypeError(
        f"Extension {path} returned {type(raw).__name__} from its tool_call handler for tool "
        f'"{tool_name}" (expected None, a dict or ToolCallEventResult); the call is blocked'
    )


def _tool_result_patch(raw: Any, path: str, tool_name: str) -> ToolResultEventResult | None:
    if raw is None or isinstance(raw, ToolResultEventResult):
        return raw
    if isinstance(raw, Mapping):
        values: Mapping[str, Any] = raw  # pyright: ignore[reportUnknownVariableType]
        unknown = set(values) - {"content", "details", "is_error"}
        if unknown:
            raise ValueError(
                f"Extension {path} returned unknown keys {sorted(unknown)} from its tool_result "
                f'handler for tool "{tool_name}" (terminate cannot be patched); patch ignored'
            )
        return ToolResultEventResult(
            content=values.get("content"),
            details=values.get("details"),
            is_error=values.get("is_error"),
        )
    raise TypeError(
        f"Extension {path} returned {type(raw).__name__} from its tool_result handler for "
        f'tool "{tool_name}" (expected None, a dict or ToolResultEventResult); patch ignored'
    )
