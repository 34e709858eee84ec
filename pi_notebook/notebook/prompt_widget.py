"""``Prompt``: a question to the person, as a widget, answered exactly once.

A prompt is answered once: by a button click, by its method so scripts and tests can drive
it, by its deadline (``expired``) or by the run's abort signal (``aborted``). Afterwards every
control is disabled. ``wait()`` is what the UI adapter awaits; the buttons resolve it, so the
kernel must stay free to receive clicks.
"""

from __future__ import annotations

import asyncio
import html
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeAlias

import ipywidgets as widgets

from ..ai.abort import AbortSignal
from ..approvals.protocol import Decision

__all__ = ["Prompt", "PromptAnswer", "button"]

PromptAnswer: TypeAlias = Decision | Literal["answered", "cancelled"]
"""How a prompt was answered: an approval prompt with a :data:`~pi_notebook.approvals.Decision`
(``approved``, ``granted`` when the person granted a scope, ``rejected``, ``expired``,
``aborted``), a choice or text prompt ``answered`` or ``cancelled`` (or ``expired``,
``aborted``)."""

_DECIDED_TEXT: dict[PromptAnswer, str] = {
    "approved": "✔ Approved",
    "granted": "✔ Granted: statements inside the scope run without asking",
    "rejected": "✘ Rejected",
    "expired": "⌛ Expired: no decision in time (counts as a rejection)",
    "aborted": "■ Aborted: the run was stopped",
    "answered": "✔ Answered",
    "cancelled": "✘ Cancelled",
}


class Prompt(widgets.VBox):
    """Base class: a question with an optional deadline, answered exactly once."""

    def __init__(
        self,
        *,
        title: str,
        timeout: float | None,
        body: Sequence[widgets.Widget],
        controls: Sequence[widgets.DOMWidget],
        self_expire: bool = True,
        also_disable: Sequence[widgets.DOMWidget] = (),
        after_controls: Sequence[widgets.Widget] = (),
    ) -> None:
        self.title = title
        self.timeout = timeout
        self.self_expire = self_expire
        self.decision: PromptAnswer | None = None
        self.value: Any = None
        self.decided_at: float | None = None
        self.requested_at = time.time()
        self._controls = [*controls, *also_disable]
        self._future: asyncio.Future[PromptAnswer] | None = None
        self._listeners: list[Callable[[Prompt], None]] = []
        self.countdown = widgets.HTML(self._countdown_text(timeout))
        heading = widgets.HTML(f"<b>{html.escape(title)}</b>")
        super().__init__(
            children=[
                heading,
                *body,
                widgets.HBox(list(controls)),
                *after_controls,
                self.countdown,
            ],
            layout=widgets.Layout(padding="6px", margin="4px 0"),
        )
        self.add_class("pi-prompt")

    @staticmethod
    def _countdown_text(remaining: float | None) -> str:
        if remaining is None:
            return "<i>Waiting for your decision.</i>"
        seconds = max(0, round(remaining))
        if seconds >= 60:
            return f"<i>Expires in {seconds // 60} min {seconds % 60:02d} s.</i>"
        return f"<i>Expires in {seconds} s.</i>"

    @property
    def decided(self) -> bool:
        return self.decision is not None

    def on_decided(self, listener: Callable[[Prompt], None]) -> None:
        """Call ``listener(prompt)`` once the prompt is answered (at once if it is)."""
        if self.decided:
            listener(self)
        else:
            self._listeners.append(listener)

    def _decide(self, decision: PromptAnswer, value: Any = None) -> bool:
        if self.decision is not None:
            return False  # the first answer wins; a late click or timeout changes nothing
        self.decision, self.value, self.decided_at = decision, value, time.time()
        for control in self._controls:
            control.set_trait("disabled", True)
        self.countdown.value = f"<b>{_DECIDED_TEXT.get(decision, decision)}</b>"
        if self._future is not None and not self._future.done():
            self._future.set_result(decision)
        for listener in self._listeners:
            listener(self)
        self._listeners.clear()
        return True

    def _aborted(self) -> None:
        self._decide("aborted")

    def expire(self) -> None:
        """Treat the prompt as unanswered in time."""
        self._decide("expired")

    async def _tick(self, deadline: float) -> None:
        while self.decision is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 and not self.self_expire:
                # The caller owns the deadline (the approval gate): it cancels the wait.
                self.countdown.value = "<i>Expiring…</i>"
                await asyncio.sleep(1.0)
                continue
            if remaining <= 0:
                self._decide("expired")
                return
            self.countdown.value = self._countdown_text(remaining)
            await asyncio.sleep(min(1.0, remaining))

    async def wait(self, signal: AbortSignal | None = None) -> PromptAnswer:
        """Wait for the answer; returns the decision string.

        An aborted ``signal`` answers ``aborted``; the deadline answers ``expired``; being
        cancelled (the caller gave up) also counts as ``expired``.
        """
        if self.decision is not None:
            return self.decision
        loop = asyncio.get_running_loop()
        self._future = loop.create_future()
        remove = signal.add_listener(self._aborted) if signal else None
        ticker = None
        if self.timeout is not None and self.decision is None:
            ticker = loop.create_task(self._tick(time.monotonic() + self.timeout))
        try:
            if self.decision is not None:
                return self.decision
            return await self._future
        except asyncio.CancelledError:
            self._decide("expired")
            raise
        finally:
            if remove is not None:
                remove()
            if ticker is not None:
                ticker.cancel()


def button(description: str, style: str, action: Callable[[], Any]) -> widgets.Button:
    """A button that calls ``action()`` when clicked."""
    button = widgets.Button(description=description, button_style=style)
    button.on_click(lambda _b: action())
    return button
