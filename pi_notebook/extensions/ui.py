"""The UI an extension can talk to through ``ctx.ui``.

A host supplies an object with these async methods (a notebook renders them as
widgets; a script or test may pass its own). Without a UI, ``NoUI`` answers at once:
``confirm`` is False, ``select`` and ``input`` are None, so a gate fails closed.

A host that shows each tool call on its own (the notebook's cards) may also define
``for_call(tool_call_id)``: the UI whose dialogs belong to that call. The context of a call
(its ``tool_call`` and ``tool_result`` handlers, its ``execute``) hands that to the extension as
``ctx.ui`` (:func:`bound_to_call`), so a ``confirm`` asked while two calls run lands on the
call that asked, and nothing has to guess.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ..ai.abort import AbortSignal

__all__ = ["CallBoundUI", "NoUI", "UIContext", "bound_to_call"]

log = logging.getLogger(__name__)


@runtime_checkable
class UIContext(Protocol):
    """``confirm`` is required. ``timeout`` is in seconds (C36); an expired timeout or an
    aborted signal answers False."""

    async def confirm(
        self,
        title: str,
        message: str,
        *,
        signal: AbortSignal | None = None,
        timeout: float | None = None,
    ) -> bool: ...


@runtime_checkable
class CallBoundUI(Protocol):
    """A host UI that can bind its dialogs to one tool call."""

    def for_call(self, tool_call_id: str) -> UIContext:
        """The UI whose dialogs belong to the call ``tool_call_id``."""
        ...


def bound_to_call(ui: Any, tool_call_id: str | None) -> Any:
    """``ui`` as the call ``tool_call_id`` sees it: ``ui.for_call(tool_call_id)`` when the host
    defines ``for_call``, else ``ui`` itself (also outside a call, ``tool_call_id=None``).

    ``for_call`` is looked up statically, so a UI whose ``__getattr__`` answers every name (a
    test double) is taken as it is.
    """
    if tool_call_id is None or inspect.getattr_static(ui, "for_call", None) is None:
        return ui
    return ui.for_call(tool_call_id)


class NoUI:
    """The UI of a session without one: every question is declined at once (C31)."""

    async def confirm(
        self,
        title: str,
        message: str,
        *,
        signal: AbortSignal | None = None,
        timeout: float | None = None,
    ) -> bool:
        return False

    async def select(
        self,
        title: str,
        options: Sequence[str],
        *,
        signal: AbortSignal | None = None,
        timeout: float | None = None,
    ) -> str | None:
        return None

    async def input(
        self,
        title: str,
        placeholder: str = "",
        *,
        signal: AbortSignal | None = None,
        timeout: float | None = None,
    ) -> str | None:
        return None

    def notify(self, message: str, level: str = "info") -> None:
        log.info("%s: %s", level, message)
