"""``RunView``: the live widget below a ``%%pi`` cell, rendering a :class:`~.store.RunState`.

The assistant's messages and the tool cards appear in the order they happened. Rendering is
throttled: ``request_render()`` coalesces calls into at most one render per ``min_interval``
(50 ms, so about 20 updates a second however fast a tool reports); ``request_render(urgent=
True)`` renders now, for the few events a person waits on (a card appears or ends, an
approval is asked, the run ends). A render touches only what changed: the caller marks the
cards and messages an event changed with :meth:`touch`, and the timeline's children are
re-assigned only when an entry is added. Everything goes through widget state, never
``print``/``display``, because the task that drives it may run after the cell returned.
"""

from __future__ import annotations

import asyncio
import html
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from ..agent.views import ViewOf
from .cards import ToolCard
from .format import format_seconds
from .provisional import stale_note
from .record import RECORD_CSS, markdown_html, run_tone, run_word
from .store import RunState

__all__ = ["RunView"]

_CHUNK = 50

_LIVE_CSS = """<style>
.pi-run:not(.jupyter-widgets-disconnected) > .pi-stale{display:none !important}
.pi-run.jupyter-widgets-disconnected > :not(.pi-stale){display:none !important}
.pi-run .pi-stale{font-weight:bold;color:var(--jp-warn-color1,#e65100)}
.pi-run.jupyter-widgets-disconnected::before{display:none}
</style>"""
"""A view whose kernel restarted (ipywidgets marks it ``jupyter-widgets-disconnected``) shows
only its stale note: no buttons that would reach no kernel."""

_TONE = {
    "running": "pi-busy",
    "done": "pi-ok",
    "failed": "pi-bad",
    "blocked": "pi-warn",
    "stopped": "pi-muted",
    "idle": "pi-muted",
}


class RunView(widgets.VBox):
    """Status, a Stop button, then the assistant's text and the tool cards in order.

    Args:
        get_state: returns the current store state.
        on_stop: called when Stop is pressed (or ``stop()`` is called).
        label_of: a tool's label from its name.
        view_of: how a call reads, from its tool's ``describe_call`` (``None``: its arguments).
        min_interval: seconds between throttled renders.
        clock: the time source for elapsed times (``time.monotonic``).
    """

    def __init__(
        self,
        get_state: Callable[[], RunState],
        on_stop: Callable[[], None],
        label_of: Callable[[str], str],
        *,
        min_interval: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
        view_of: ViewOf | None = None,
    ) -> None:
        self._get_state = get_state
        self._on_stop = on_stop
        self._label_of = label_of
        self._view_of = view_of
        self._clock = clock
        self.min_interval = min_interval
        self.render_count = 0
        self.card_renders = 0  # ToolCard.render calls: what a render cost
        self.started_at = clock()
        self._last_render = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self._dirty: set[Any] = set()
        self.status = widgets.HTML()
        self.stop_button = widgets.Button(description="Stop", button_style="warning", icon="stop")
        self.stop_button.on_click(lambda _b: self.stop())
        self.timeline = widgets.VBox()
        self.notices = widgets.HTML()
        self.dialogs = widgets.VBox()
        self.error = widgets.HTML()
        self.stale = widgets.HTML()
        self.stale.add_class("pi-stale")
        self._cards: dict[str, ToolCard] = {}
        self._texts: dict[int, widgets.HTML] = {}
        self._entries = 0
        # The timeline's entries sit in boxes of _CHUNK: adding one re-assigns a short list.
        self._chunks: list[widgets.VBox] = []
        super().__init__(
            children=[
                widgets.HTML(RECORD_CSS + _LIVE_CSS),
                widgets.HBox([self.status, self.stop_button]),
                self.timeline,
                self.dialogs,
                self.notices,
                self.error,
                self.stale,
            ]
        )
        self.add_class("pi-run")
        self.add_class("pi-rec")
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

    @property
    def assistant(self) -> str:
        """The assistant's text as shown (HTML of every message, in order)."""
        return "".join(self._texts[i].value for i in sorted(self._texts))

    def card(self, tool_call_id: str) -> ToolCard:
        """The card of one call, created if the store knows the call but it is not drawn yet."""
        if tool_call_id not in self._cards:
            self.render()
        return self._cards[tool_call_id]

    def show_dialog(self, dialog: widgets.Widget) -> None:
        """Show a prompt that belongs to no card (``select``/``input`` outside a call)."""
        self.dialogs.children = (*self.dialogs.children, dialog)

    # -- rendering ---------------------------------------------------------------
    def touch(self, key: Any) -> None:
        """Mark a card (its call id) or a message (``("text", i)``) as changed."""
        self._dirty.add(key)

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

    def tick(self) -> None:
        """Refresh elapsed times (the run's and each running call's)."""
        state = self._get_state()
        for card in self._cards.values():
            if card.status in ("running", "queued", "awaiting approval"):
                self._dirty.add(card.tool_call_id)
        if not state.settled:
            self.request_render()

    def _place(self, state: RunState, first: int) -> None:
        """Put timeline entries ``first:`` into their boxes (a new box every _CHUNK)."""
        timeline = state.timeline
        start_chunk = first // _CHUNK
        for index in range(start_chunk, (len(timeline) - 1) // _CHUNK + 1):
            entries = timeline[index * _CHUNK : (index + 1) * _CHUNK]
            children = tuple(
                self._texts[key] if kind == "text" else self._cards[key]
                for kind, key in entries
                if kind == "card" or key in self._texts
            )
            if index < len(self._chunks):
                self._chunks[index].children = children
            else:
                self._chunks.append(widgets.VBox(children=children))
        if len(self.timeline.children) != len(self._chunks):
            self.timeline.children = tuple(self._chunks)

    def _status_html(self, state: RunState) -> str:
        word = run_word(state)
        if state.stop_requested and not state.settled:
            word = "■ stopping…"
        tone = run_tone(state) if state.settled else _TONE.get(state.status, "pi-muted")
        elapsed = "" if state.settled else f" · {format_seconds(self._clock() - self.started_at)}"
        return f"<b class='pi-word pi-run-status {tone}'>{html.escape(word)}</b>{elapsed}"

    def render(self) -> None:
        """Bring the widgets in line with the store's current state (only what changed)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._last_render = time.monotonic()
        self.render_count += 1
        state = self._get_state()
        self.status.value = self._status_html(state)
        self.stale.value = "" if state.settled else html.escape(stale_note(state))
        if state.settled:
            self.stop_button.disabled = True
        if len(state.timeline) != self._entries:
            for kind, key in state.timeline[self._entries :]:
                if kind == "text":
                    self._dirty.add(("text", key))  # its widget appears with its first text
                elif key not in self._cards:
                    card = state.cards.get(key)
                    label = self._label_of(card.tool_name) if card is not None else key
                    self._cards[key] = ToolCard(key, label, view_of=self._view_of)
                    self._dirty.add(key)
            self._place(state, self._entries)
            self._entries = len(state.timeline)
        dirty, self._dirty = self._dirty, set()
        now = self._clock()
        new_text_at: int | None = None
        for key in dirty:
            if isinstance(key, tuple):
                index = key[1]
                text = state.assistant[index] if index < len(state.assistant) else ""
                widget = self._texts.get(index)
                if widget is None:
                    if not text.strip():
                        continue  # a message with only tool calls: no widget at all
                    widget = self._texts[index] = widgets.HTML()
                    where = state.timeline.index(("text", index))
                    new_text_at = where if new_text_at is None else min(new_text_at, where)
                widget.value = (
                    f"<div class='pi-text pi-assistant'>{markdown_html(text)}</div>"
                    if text.strip()
                    else ""
                )
                continue
            card_state = state.cards.get(key)
            card_widget = self._cards.get(key)
            if card_state is None or card_widget is None:
                continue
            self.card_renders += 1
            started = card_state.started_at
            card_widget.render(card_state, elapsed=None if started is None else now - started)
        if new_text_at is not None:
            self._place(state, new_text_at)
        self.notices.value = "<br>".join(
            f"<span class='pi-meta'>{html.escape(n)}</span>" for n in state.notices
        )
        self.error.value = (
            f"<pre class='pi-error pi-run-error'>{html.escape(state.error)}</pre>"
            if state.error
            else ""
        )
