"""``ExtensionAPI``: the object each extension factory receives (``pi``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel

from ..errors import ToolRegistrationError
from .events import EXTENSION_EVENT_TYPES, ExtensionErrorEvent
from .runner import ErrorListener, Extension, ExtensionRunner, Handler
from .types import RegisteredTool, ToolDefinition, ToolInfo

if TYPE_CHECKING:
    from ..audit import AuditLog

__all__ = ["ExtensionAPI", "ToolRegistrationError", "check_tool_definition"]


def check_tool_definition(definition: ToolDefinition[Any], owner: str) -> None:
    """Raise ``ToolRegistrationError`` naming ``owner`` and the tool unless the definition
    has a name, a callable ``execute`` and a pydantic model whose JSON Schema is an object.

    The schema is derived here, once, so a model that cannot produce one fails at
    registration instead of breaking every later model request of the session.
    """
    name = getattr(definition, "name", None)
    if not isinstance(name, str) or not name:
        raise ToolRegistrationError(f"{owner}: a tool needs a non-empty name")
    # Checked at run time: a definition may come from untyped code.
    parameters: Any = getattr(definition, "parameters", None)
    if not (isinstance(parameters, type) and issubclass(parameters, BaseModel)):
        raise ToolRegistrationError(
            f'{owner}: tool "{name}" has parameters of type {type(cast(object, parameters)).__name__}; '
            "it needs a pydantic model class (an object schema)"
        )
    try:
        schema = parameters.model_json_schema()
    except Exception as exc:
        reason = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ToolRegistrationError(
            f'{owner}: tool "{name}": no JSON Schema can be derived from {parameters.__name__} ({reason})'
        ) from exc
    if schema.get("type") != "object":
        raise ToolRegistrationError(
            f'{owner}: tool "{name}" has parameters {parameters.__name__} whose JSON Schema is not '
            f"an object (type {schema.get('type')!r}); use a pydantic model with fields"
        )
    if not callable(getattr(definition, "execute", None)):
        raise ToolRegistrationError(f'{owner}: tool "{name}" has no callable execute')


class ExtensionAPI:
    """Registers tools and handlers for one extension.

    ``register_tool`` and ``on`` work while the factory runs. ``get_active_tools``,
    ``set_active_tools`` and ``get_all_tools`` need the session, so calling them from
    inside the factory raises "extension runtime not initialized" (C3).
    """

    def __init__(
        self,
        extension: Extension,
        runner: ExtensionRunner,
        *,
        audit: AuditLog | None = None,
        set_active: Callable[[Sequence[str]], None] | None = None,
        get_active: Callable[[], list[str]] | None = None,
        get_all: Callable[[], list[ToolInfo]] | None = None,
    ) -> None:
        self._extension = extension
        self._runner = runner
        self._set_active = set_active
        self._get_active = get_active
        self._get_all = get_all
        self.audit = audit  # D11: the session's audit log, or None

    @property
    def extension_path(self) -> str:
        return self._extension.path

    def register_tool(self, definition: ToolDefinition[Any], *, origin: str | None = None) -> None:
        """Register (by reference) under ``definition.name``; a second registration of the
        same name in this extension replaces the first (C2). ``origin`` names what inside the
        extension provides the tool (e.g. ``mcp:NAME``); it goes into the tool's source info."""
        check_tool_definition(definition, f"Extension {self.extension_path}")
        source = self._extension.source_info
        if origin is not None:
            source = dataclasses.replace(source, origin=origin)
        self._extension.tools[definition.name] = RegisteredTool(
            definition=definition, source_info=source
        )
        self._runner.tool_registered()

    def on(self, event: str, handler: Handler) -> Callable[[], None]:
        """Subscribe ``handler(event, ctx)`` (sync or async); returns an unsubscribe function."""
        if event not in EXTENSION_EVENT_TYPES:
            raise ValueError(
                f"Extension {self.extension_path}: unknown event {event!r}; known events: "
                + ", ".join(sorted(EXTENSION_EVENT_TYPES))
            )
        handlers = self._extension.handlers.setdefault(event, [])
        handlers.append(handler)
        return lambda: handlers.remove(handler) if handler in handlers else None

    def on_error(self, listener: ErrorListener) -> Callable[[], None]:
        """Receive ``ExtensionErrorEvent``s for handler errors of every extension (C32)."""
        listeners: list[Callable[[ExtensionErrorEvent], Any]] = self._extension.error_listeners
        listeners.append(listener)
        return lambda: listeners.remove(listener) if listener in listeners else None

    def get_active_tools(self) -> list[str]:
        if self._get_active is None or not self._runner.bound:
            self._runner.require_host("get_active_tools")
        assert self._get_active is not None
        return self._get_active()

    def set_active_tools(self, names: Sequence[str]) -> None:
        """Choose the active tools within what the host allows (S15, S18)."""
        if self._set_active is None or not self._runner.bound:
            self._runner.require_host("set_active_tools")
        assert self._set_active is not None
        self._set_active(list(names))

    def get_all_tools(self) -> list[ToolInfo]:
        """Registry metadata only: never the original ``execute`` (S20, C11)."""
        if self._get_all is None or not self._runner.bound:
            self._runner.require_host("get_all_tools")
        assert self._get_all is not None
        return self._get_all()
