"""``ctx``: what a tool's ``execute`` and every handler receive, created afresh per call (C31)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..ai.abort import AbortSignal
from ..ai.messages import Message
from ..ai.model import Model
from .ui import NoUI, UIContext, bound_to_call

if TYPE_CHECKING:
    from ..audit import AuditLog

__all__ = ["ExtensionContext", "SessionHost", "SessionReadView"]


class SessionHost(Protocol):
    """What the runner needs from the session it is bound to."""

    @property
    def model(self) -> Model: ...
    @property
    def cwd(self) -> str: ...
    @property
    def ui(self) -> UIContext | None: ...
    @property
    def audit(self) -> AuditLog | None: ...
    @property
    def session_id(self) -> str: ...
    @property
    def messages(self) -> Sequence[Message]: ...
    @property
    def active_tool_names(self) -> list[str]: ...
    @property
    def system_prompt(self) -> str: ...
    @property
    def signal(self) -> AbortSignal | None: ...
    @property
    def is_running(self) -> bool: ...
    def abort(self, reason: str | None = None) -> None: ...


@dataclass(frozen=True)
class SessionReadView:
    """Read-only access to the session: history, active tools, system prompt."""

    _host: SessionHost

    @property
    def session_id(self) -> str:
        return self._host.session_id

    @property
    def messages(self) -> tuple[Message, ...]:
        return tuple(self._host.messages)

    @property
    def active_tool_names(self) -> list[str]:
        return list(self._host.active_tool_names)

    @property
    def system_prompt(self) -> str:
        return self._host.system_prompt


class ExtensionContext:
    """Per-call context: ``tool_call_id``, ``has_ui``, ``ui``, ``cwd``, ``model``, ``signal``,
    ``audit``, ``session`` (read view), ``abort()``, ``is_idle()``, ``get_system_prompt()``.

    ``signal`` is taken when the context is created, so a handler sees the signal of the
    run it was called in even if it keeps ``ctx`` around. ``tool_call_id`` is the call the
    context serves (its ``tool_call`` and ``tool_result`` handlers, its ``execute``, its
    approval), ``None`` for a handler of an event that belongs to no call; ``ui`` is bound to
    that call. The rest are the session's own, fixed for its life, and read from it on use (a
    context is made for every handler and call, and most read none of them).
    """

    __slots__ = ("_host", "_ui", "extension_path", "signal", "tool_call_id")

    def __init__(
        self,
        host: SessionHost,
        *,
        extension_path: str | None = None,
        tool_call_id: str | None = None,
    ) -> None:
        self._host = host
        self.extension_path = extension_path
        self.tool_call_id = tool_call_id
        self.signal: AbortSignal | None = host.signal
        self._ui: Any = None

    @property
    def ui(self) -> Any:
        """The session's UI bound to this context's call (see
        :func:`~pi_notebook.extensions.ui.bound_to_call`), or one that refuses every dialog
        when the session has none."""
        if self._ui is None:
            ui = self._host.ui
            self._ui = _NO_UI if ui is None else bound_to_call(ui, self.tool_call_id)
        return self._ui

    @property
    def has_ui(self) -> bool:
        return self._host.ui is not None

    @property
    def cwd(self) -> str:
        return self._host.cwd

    @property
    def model(self) -> Model:
        return self._host.model

    @property
    def audit(self) -> AuditLog | None:
        return self._host.audit

    @property
    def session(self) -> SessionReadView:
        """Read-only view of the session: history, active tools, system prompt."""
        return SessionReadView(self._host)

    def abort(self, reason: str | None = None) -> None:
        """Abort the current run (the call in progress ends with "Operation aborted")."""
        self._host.abort(reason)

    def is_idle(self) -> bool:
        return not self._host.is_running

    def get_system_prompt(self) -> str:
        return self._host.system_prompt


_NO_UI = NoUI()  # stateless: one instance serves every context
