"""``RunView``: the widget below a ``%%pi`` cell, rendering a :class:`~.store.RunState`.

Rendering is throttled: ``request_render()`` coalesces calls into at most one render per
``min_interval`` (50 ms, so about 20 updates a second however fast a tool reports);
``request_render(urgent=True)`` renders now, for the few events a person waits on (a card
appears or ends, an approval is asked, the run ends). Everything goes through widget state,
never ``print``/``display``, because the task that drives it runs after the cell returned.
"""

from __future__ import annotations

import asyncio
import html
import time
from collections.abc import Callable

import ipywidgets as widgets

from .cards import ToolCard
from .store import RunState

__all__ = ["RunView"]

_RUN_STATUS = {
    "idle": ("⏳ starting", "#777"),
    "running": ("● running", "#337ab7"),
    "done": ("✔ done", "#3c763d"),
    "stopped": ("■ stopped", "#a94442"),
    "error": ("✘ failed", "#a94442"),
}


class RunView(widgets.VBox):
    """Status, a Stop button, the assistant's text and one card per tool call.

    Args:
        get_state: returns the current store state.
        on_stop: called when Stop is pressed (or ``stop()`` is called).
        label_of: a tool's label from its name.
        min_interval: seconds between throttled renders.
    """

    def __init__(self, get_state: Callable[[], RunState], on_stop: Callable[[], None],
                 label_of: Callable[[str], str], *, min_interval: float = 0.05) -> None:  # fmt: skip
        self._get_state = get_state
        self._on_stop = on_stop
        self._label_of = label_of
        self.min_interval = min_interval
        self.render_count = 0
        self._last_render = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self.status = widgets.HTML()
        self.stop_button = widgets.Button(description="Stop", button_style="warning", icon="stop")
        self.stop_button.on_click(lambda _b: self.stop())
        self.assistant = widgets.HTML()
        self.card_box = widgets.VBox()
        self.notices = widgets.HTML()
        self.dialogs = widgets.VBox()
        self.error = widgets.HTML()
        self._cards: dict[str, ToolCard] = {}
        super().__init__(children=[
            widgets.HBox([self.status, self.stop_button]), self.assistant, self.card_box,
            self.dialogs, self.notices, self.error,
        ])  # fmt: skip
        self.add_class("pi-run")
        self.render()

    # -- actions ---------------------------------------------------------------
    def stop(self) -> None:
        """Stop the run (what the Stop button does)."""
        self.stop_button.disabled = True
        self._on_stop()

    @property
    def cards(self) -> list[ToolCard]:
        """The tool cards, in the order the calls started."""
        return [self._cards[i] for i in self._get_state().order if i in self._cards]

    def card(self, tool_call_id: str) -> ToolCard:
        """The card of one call, created if the store knows the call but it is not drawn yet."""
        if tool_call_id not in self._cards:
            self.render()
        return self._cards[tool_call_id]

    def show_dialog(self, dialog: widgets.Widget) -> None:
        """Show a prompt that belongs to no card (``select``/``input`` outside a call)."""
        self.dialogs.children = (*self.dialogs.children, dialog)

    # -- rendering ---------------------------------------------------------------
    def request_render(self, *, urgent: bool = False) -> None:
        """Render soon (throttled) or, if ``urgent``, now."""
        if urgent:
            self.render()
            return
        if self._handle is not None:
            return  # a render is already scheduled; it will pick up the latest state
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.render()  # no loop (plain script): nothing to coalesce with
            return
        delay = max(0.0, self._last_render + self.min_interval - time.monotonic())
        self._handle = loop.call_later(delay, self.render)

    def render(self) -> None:
        """Bring every widget in line with the store's current state."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._last_render = time.monotonic()
        self.render_count += 1
        state = self._get_state()
        text, colour = _RUN_STATUS[state.status]
        if state.stop_requested and state.status == "running":
            text = "■ stopping…"
        self.status.value = f"<b class='pi-run-status' style='color:{colour}'>{text}</b>"
        if state.status in ("done", "stopped", "error"):
            self.stop_button.disabled = True
        self.assistant.value = (
            f"<div class='pi-assistant' style='white-space:pre-wrap'>{html.escape(state.assistant_text)}</div>"
            if state.assistant_text else ""
        )  # fmt: skip
        added = False
        for card_state in state.card_list():
            widget = self._cards.get(card_state.tool_call_id)
            if widget is None:
                widget = ToolCard(card_state.tool_call_id, self._label_of(card_state.tool_name))
                self._cards[card_state.tool_call_id] = widget
                added = True
            widget.render(card_state)
        if added:
            self.card_box.children = tuple(self._cards[i] for i in state.order)
        self.notices.value = "<br>".join(html.escape(n) for n in state.notices)
        self.error.value = (
            f"<pre class='pi-run-error' style='white-space:pre-wrap;color:#a94442'>{html.escape(state.error)}</pre>"
            if state.error else ""
        )  # fmt: skip
