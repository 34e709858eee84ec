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
from ipywidgets.widgets.widget_string import HTMLStyle

from ..agent.views import ViewOf
from .card_html import (
    args_html,
    call_view_of,
    card_head_html,
    card_tone,
    edit_html,
    error_html,
    progress_html,
    reasons_html,
    result_html,
)
from .format import frame_text
from .result_frames import result_dataframe
from .store import CardState

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["LIVE_PREVIEW_ROWS", "ToolCard", "result_dataframe"]

LIVE_PREVIEW_ROWS = 20
_BASE_CLASSES = ("pi-tool-card", "pi-card")


class _Table:
    """A result table as display data: formatted HTML, and the frame's text for text/plain."""

    def __init__(self, html: str, plain: str) -> None:
        self._html, self._plain = html, plain

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/html": self._html, "text/plain": self._plain}


_SHARED: dict[str, widgets.Widget] = {}


def _shared() -> dict[str, widgets.Widget]:
    """Layout and style models every card uses unchanged: created once, not per card (a
    widget model each costs about as much as the rest of a card)."""
    if not _SHARED:
        _SHARED.update(layout=widgets.Layout(), box_layout=widgets.Layout(), style=HTMLStyle())
    return _SHARED


class ToolCard(widgets.VBox):
    """A tool call: one HTML body (header, arguments, progress, error), and the widgets a call
    may need, created when it needs them: an approval box, the result ``Output``, the folded
    model-facing content. Few widgets per card keep a run of a thousand calls light."""

    def __init__(self, tool_call_id: str, label: str, *, view_of: ViewOf | None = None) -> None:
        self.tool_call_id = tool_call_id
        self.label = label
        self.view_of = view_of  # how a call reads, from its tool's describe_call
        self.status = "queued"
        shared = _shared()
        self.body = widgets.HTML(layout=shared["layout"], style=shared["style"])
        self.approval_box: widgets.VBox | None = None
        self.result: widgets.Output | None = None
        self.content_fold: widgets.Accordion | None = None
        self._details: Any = None
        self._args: Any = object()
        self._args_html = ""
        self._tone = ""
        self._result_shown = False
        super().__init__(
            children=[self.body], _dom_classes=_BASE_CLASSES, layout=shared["box_layout"]
        )

    @property
    def dataframe(self) -> pd.DataFrame | None:
        """The call's result DataFrame while it is kept (``None`` once the notebook dropped it
        to bound memory: the card keeps its preview)."""
        return result_dataframe(self._details)

    @property
    def prompt(self) -> Any:
        """The approval (or other) prompt shown in this card, if any."""
        box = self.approval_box
        return box.children[0] if box is not None and box.children else None

    def show_prompt(self, prompt: widgets.Widget) -> None:
        if self.approval_box is None:
            self.approval_box = widgets.VBox()
            self.children = (self.body, self.approval_box, *self.children[1:])
        self.approval_box.children = (prompt,)

    def render(self, card: CardState, *, elapsed: float | None = None) -> None:
        """Bring the widgets in line with ``card`` (``elapsed``: seconds it has been running)."""
        self.status = card.status
        tone = card_tone(card)
        if tone != self._tone:
            self._dom_classes = (*_BASE_CLASSES, tone)  # one change on the wire, not two
            self._tone = tone
        if card.args is not self._args or not self._args_html:
            self._args = card.args
            view = call_view_of(card.tool_name, card.args, self.view_of)
            self._args_html = (
                args_html(card.args, view)
                + edit_html(card, self.view_of)
                + reasons_html(card.reasons)
            )
        self.body.value = (
            card_head_html(card, self.label, elapsed=elapsed)
            + self._args_html
            + progress_html(card)
            + error_html(card)
        )
        if card.status == "done" and not self._result_shown:
            self._result_shown = True
            self._show_result(card)

    def _show_result(self, card: CardState) -> None:
        frame = result_dataframe(card.details)
        self._details = card.details  # the frame is read from here, never held on its own
        extra: list[widgets.Widget] = []
        table = result_html(card, preview_rows=LIVE_PREVIEW_ROWS)
        if table:
            plain = frame_text(frame, max_rows=LIVE_PREVIEW_ROWS) if frame is not None else ""
            self.result = widgets.Output()
            self.result.append_display_data(_Table(table, plain or "\n".join(card.content)))
            extra.append(self.result)
        if frame is not None and card.content:
            # The model saw a preview, not the table: keep it one click away.
            content = widgets.HTML(f"<pre class='pi-content'>{_escape(card.content)}</pre>")
            self.content_fold = widgets.Accordion(children=[content], selected_index=None)
            self.content_fold.set_title(0, "Model-facing content")
            extra.append(self.content_fold)
        if extra:
            self.children = (*self.children, *extra)


def _escape(lines: tuple[str, ...]) -> str:
    import html

    return html.escape("\n".join(lines))
