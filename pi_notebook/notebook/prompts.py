"""Questions the agent asks the user, as widgets: approval, choice and text prompts.

A prompt is answered once: by a button click, by its method (``approve()``, ``reject()``,
``choose()``, ``submit()``, ``cancel()``) so scripts and tests can drive it, by its deadline
(``expired``) or by the run's abort signal (``aborted``). Afterwards every control is
disabled. ``wait()`` is what the UI adapter awaits; the buttons resolve it, so the kernel
must stay free to receive clicks (the ``%%pi`` cell has returned long before).
"""

from __future__ import annotations

import asyncio
import html
import time
from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets as widgets

from ..ai.abort import AbortSignal

__all__ = ["ApprovalPrompt", "ChoicePrompt", "Prompt", "TextPrompt"]

_DECIDED_TEXT = {
    "approved": "✔ Approved",
    "rejected": "✘ Rejected",
    "expired": "⌛ Expired: no decision in time (counts as a rejection)",
    "aborted": "■ Aborted: the run was stopped",
    "answered": "✔ Answered",
    "cancelled": "✘ Cancelled",
}


class Prompt(widgets.VBox):
    """Base class: a question with an optional deadline, answered exactly once."""

    def __init__(self, *, title: str, timeout: float | None, body: Sequence[widgets.Widget],
                 controls: Sequence[widgets.DOMWidget]) -> None:  # fmt: skip
        self.title = title
        self.timeout = timeout
        self.decision: str | None = None
        self.value: Any = None
        self.decided_at: float | None = None
        self.requested_at = time.time()
        self._controls = list(controls)
        self._future: asyncio.Future[str] | None = None
        self._listeners: list[Callable[[Prompt], None]] = []
        self.countdown = widgets.HTML(self._countdown_text(timeout))
        heading = widgets.HTML(f"<b>{html.escape(title)}</b>")
        super().__init__(
            children=[heading, *body, widgets.HBox(list(controls)), self.countdown],
            layout=widgets.Layout(border="2px solid #f0ad4e", padding="6px", margin="4px 0"),
        )
        self.add_class("pi-prompt")

    @staticmethod
    def _countdown_text(remaining: float | None) -> str:
        if remaining is None:
            return "<i>Waiting for your decision.</i>"
        return f"<i>Expires in {max(0, round(remaining))} s.</i>"

    @property
    def decided(self) -> bool:
        return self.decision is not None

    def on_decided(self, listener: Callable[[Prompt], None]) -> None:
        """Call ``listener(prompt)`` once the prompt is answered (at once if it is)."""
        if self.decided:
            listener(self)
        else:
            self._listeners.append(listener)

    def _decide(self, decision: str, value: Any = None) -> bool:
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
            if remaining <= 0:
                self._decide("expired")
                return
            self.countdown.value = self._countdown_text(remaining)
            await asyncio.sleep(min(1.0, remaining))

    async def wait(self, signal: AbortSignal | None = None) -> str:
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


def _button(description: str, style: str, action: Callable[[], Any]) -> widgets.Button:
    button = widgets.Button(description=description, button_style=style)
    button.on_click(lambda _b: action())
    return button


class ApprovalPrompt(Prompt):
    """Approve / Reject for a statement that needs the user's consent.

    Args:
        title: what is asked, e.g. "Database write".
        sql: the statement, shown as code.
        reason: why it needs approval.
        timeout: seconds until the prompt expires (``None``: never).
        tool_call_id: the call this approval is for.
    """

    def __init__(self, *, title: str, sql: str, reason: str, timeout: float | None,
                 tool_call_id: str | None = None) -> None:  # fmt: skip
        self.sql = sql
        self.reason = reason
        self.tool_call_id = tool_call_id
        self.approve_button = _button("Approve", "success", self.approve)
        self.reject_button = _button("Reject", "danger", self.reject)
        body = [
            widgets.HTML(
                f"<pre style='white-space:pre-wrap;margin:4px 0'>{html.escape(sql)}</pre>"
            ),
            widgets.HTML(f"Needs approval because: {html.escape(reason)}"),
        ]
        super().__init__(title=title, timeout=timeout, body=body,
                         controls=[self.approve_button, self.reject_button])  # fmt: skip
        self.add_class("pi-approval")

    def approve(self) -> bool:
        """Approve (what the Approve button does). False if already decided."""
        return self._decide("approved")

    def reject(self) -> bool:
        """Reject (what the Reject button does). False if already decided."""
        return self._decide("rejected")


class ChoicePrompt(Prompt):
    """Pick one of several options (``ctx.ui.select``)."""

    def __init__(self, *, title: str, options: Sequence[str], timeout: float | None) -> None:
        self.dropdown = widgets.Dropdown(options=list(options))
        self.ok_button = _button("OK", "primary", lambda: self.choose(self.dropdown.value))
        self.cancel_button = _button("Cancel", "", self.cancel)
        super().__init__(title=title, timeout=timeout, body=[self.dropdown],
                         controls=[self.ok_button, self.cancel_button])  # fmt: skip
        self._controls.append(self.dropdown)

    def choose(self, option: Any) -> bool:
        """Answer with ``option``."""
        return self._decide("answered", option)

    def cancel(self) -> bool:
        """Decline to answer."""
        return self._decide("cancelled")


class TextPrompt(Prompt):
    """Type a line of text (``ctx.ui.input``)."""

    def __init__(self, *, title: str, placeholder: str, timeout: float | None) -> None:
        self.text = widgets.Text(placeholder=placeholder)
        self.submit_button = _button("Submit", "primary", lambda: self.submit(self.text.value))
        self.cancel_button = _button("Cancel", "", self.cancel)
        super().__init__(title=title, timeout=timeout, body=[self.text],
                         controls=[self.submit_button, self.cancel_button])  # fmt: skip
        self._controls.append(self.text)

    def submit(self, value: str) -> bool:
        """Answer with ``value``."""
        return self._decide("answered", value)

    def cancel(self) -> bool:
        """Decline to answer."""
        return self._decide("cancelled")
