"""The UI an extension can talk to through ``ctx.ui``.

A host supplies an object with these async methods (a notebook renders them as
widgets; a script or test may pass its own). Without a UI, ``NoUI`` answers at once:
``confirm`` is False, ``select`` and ``input`` are None, so a gate fails closed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ..ai.abort import AbortSignal

__all__ = ["NoUI", "UIContext"]

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
