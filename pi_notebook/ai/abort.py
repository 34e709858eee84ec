"""Cooperative cancellation: an asyncio port of the web platform's AbortController.

A controller owns one signal. Whoever starts work hands the signal down (to a model
stream, a tool, a database driver); whoever wants the work stopped calls
``controller.abort()``. Listeners run synchronously inside ``abort()``; a listener that
raises is isolated so that the others still run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ..errors import AbortError

__all__ = ["AbortController", "AbortError", "AbortSignal"]


class AbortSignal:
    """Read side of an abort: a flag, a reason, listeners, and an awaitable."""

    def __init__(self) -> None:
        self._aborted = False
        self._reason: Any = None
        self._listeners: list[Callable[[], None]] = []
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def reason(self) -> Any:
        return self._reason

    def add_listener(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` on abort (at once if already aborted). Returns a remover."""
        if self._aborted:
            listener()
            return lambda: None
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    def throw_if_aborted(self) -> None:
        if self._aborted:
            raise AbortError(str(self._reason) if self._reason else "Operation aborted")

    async def wait(self) -> None:
        """Return once the signal is aborted."""
        if self._aborted:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        try:
            await future
        finally:
            if future in self._waiters:
                self._waiters.remove(future)

    def __await__(self):  # type: ignore[no-untyped-def]
        return self.wait().__await__()

    def _fire(self, reason: Any) -> None:
        if self._aborted:
            return
        self._aborted = True
        self._reason = reason
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            try:
                listener()
            except Exception:  # a broken listener must not stop the others
                pass
        for future in self._waiters:
            if not future.done():
                # Futures belong to their loop; abort() may come from another thread.
                loop = future.get_loop()
                if loop.is_closed():
                    continue
                try:
                    running = asyncio.get_running_loop()
                except RuntimeError:
                    running = None
                if running is loop:
                    future.set_result(None)
                else:
                    loop.call_soon_threadsafe(_resolve, future)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class AbortController:
    """Owns an :class:`AbortSignal` and aborts it."""

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: Any = None) -> None:
        """Abort the signal. Idempotent: later calls keep the first reason."""
        self.signal._fire(reason if reason is not None else "Operation aborted")  # pyright: ignore[reportPrivateUsage]
