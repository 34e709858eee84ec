"""``ToolCard``: one tool call rendered live from its :class:`~.store.CardState`.

The card's pieces are HTML from :mod:`.record` (the same the durable record uses), so the
live card and the saved record read alike. ``render(card)`` only assigns trait values, and
traitlets sends a change only when a value differs; the view calls it only for cards whose
state changed. The result table is appended to an ``Output`` widget with
``append_display_data`` exactly once, so it is part of the widget's state rather than
printed into whichever cell is running.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from .record import (
    args_html,
    card_head_html,
    card_tone,
    error_html,
    progress_html,
    reasons_html,
    result_dataframe,
    result_html,
)
from .store import CardState

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["LIVE_PREVIEW_ROWS", "ToolCard", "result_dataframe"]

LIVE_PREVIEW_ROWS = 20
_TONES = ("pi-ok", "pi-warn", "pi-bad", "pi-busy", "pi-muted")


class _Table:
    """A result table as display data: formatted HTML, and the frame's text for text/plain."""

    def __init__(self, html: str, plain: str) -> None:
        self._html, self._plain = html, plain

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/html": self._html, "text/plain": self._plain}


class ToolCard(widgets.VBox):
    """A tool call: header, arguments, progress, approval, result, model content, error."""

    def __init__(self, tool_call_id: str, label: str) -> None:
        self.tool_call_id = tool_call_id
        self.label = label
        self.status = "queued"
        self.header = widgets.HTML()
        self.args_view = widgets.HTML()
        self.progress = widgets.HTML()
        self.approval_box = widgets.VBox()
        self.result = widgets.Output()
        self.content_view = widgets.HTML()
        self.content_fold = widgets.Accordion(children=[self.content_view], selected_index=None)
        self.content_fold.set_title(0, "Model-facing content")
        self.content_fold.layout.display = "none"
        self.error_view = widgets.HTML()
        self.dataframe: pd.DataFrame | None = None
        self._args: Any = object()
        self._result_shown = False
        self._tone = ""
        super().__init__(
            children=[self.header, self.args_view, self.progress, self.approval_box,
                      self.result, self.content_fold, self.error_view],
        )  # fmt: skip
        self.add_class("pi-tool-card")
        self.add_class("pi-card")

    @property
    def prompt(self) -> Any:
        """The approval (or other) prompt shown in this card, if any."""
        return self.approval_box.children[0] if self.approval_box.children else None

    def show_prompt(self, prompt: widgets.Widget) -> None:
        self.approval_box.children = (prompt,)

    def render(self, card: CardState, *, elapsed: float | None = None) -> None:
        """Bring the widgets in line with ``card`` (``elapsed``: seconds it has been running)."""
        self.status = card.status
        tone = card_tone(card)
        if tone != self._tone:
            if self._tone:
                self.remove_class(self._tone)
            self.add_class(tone)
            self._tone = tone
        self.header.value = card_head_html(card, self.label, elapsed=elapsed)
        if card.args is not self._args:
            self._args = card.args
            self.args_view.value = args_html(card.args) + reasons_html(card.reasons)
        self.progress.value = progress_html(card)
        if card.status == "done" and not self._result_shown:
            self._result_shown = True
            frame = result_dataframe(card.details)
            self.dataframe = frame
            table = result_html(card, preview_rows=LIVE_PREVIEW_ROWS)
            if table:
                plain = frame.head(LIVE_PREVIEW_ROWS).to_string() if frame is not None else ""
                self.result.append_display_data(_Table(table, plain or "\n".join(card.content)))
            if frame is not None and card.content:
                # The model saw a preview, not the table: keep it one click away.
                self.content_view.value = f"<pre class='pi-content'>{_escape(card.content)}</pre>"
                self.content_fold.layout.display = ""
        self.error_view.value = error_html(card)


def _escape(lines: tuple[str, ...]) -> str:
    import html

    return html.escape("\n".join(lines))
