"""``ToolCard``: one tool call rendered from its :class:`~.store.CardState`.

``render(card)`` only assigns trait values (traitlets sends a change only when a value
differs), so re-rendering an unchanged card costs nothing on the wire. The result DataFrame
is appended to an ``Output`` widget with ``append_display_data`` exactly once, so its HTML
table is part of the widget's state rather than printed into whichever cell is running.
"""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from .store import CardState

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ToolCard", "result_dataframe"]

_STATUS_COLOURS = {
    "queued": "#777",
    "awaiting approval": "#d58512",
    "running": "#337ab7",
    "done": "#3c763d",
    "error": "#a94442",
    "blocked": "#a94442",
}


def _args_html(args: Any) -> str:
    if isinstance(args, dict) and isinstance(args.get("sql"), str):
        # SQL is the point of most calls: show it as code, the other arguments below it.
        sql = f"<pre class='pi-sql' style='white-space:pre-wrap;margin:2px 0'>{html.escape(args['sql'])}</pre>"
        rest = {k: v for k, v in args.items() if k != "sql"}
        return sql + (f"<code>{html.escape(json.dumps(rest, default=str))}</code>" if rest else "")
    try:
        text = json.dumps(args, indent=2, default=str)
    except (TypeError, ValueError):
        text = repr(args)
    return f"<pre style='white-space:pre-wrap;margin:2px 0'>{html.escape(text)}</pre>"


def result_dataframe(details: Any) -> pd.DataFrame | None:
    """The result DataFrame in a tool result's ``details`` (``details["dataframe"]``), if any."""
    import pandas as pd  # here, not at import time: importing the notebook layer stays light

    frame = details.get("dataframe") if isinstance(details, dict) else None
    return frame if isinstance(frame, pd.DataFrame) else None


class ToolCard(widgets.VBox):
    """A tool call: label, status, arguments, progress, duration, result, model content, error."""

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
        super().__init__(
            children=[self.header, self.args_view, self.progress, self.approval_box,
                      self.result, self.content_fold, self.error_view],
            layout=widgets.Layout(border="1px solid #ccc", padding="4px", margin="4px 0"),
        )  # fmt: skip
        self.add_class("pi-tool-card")

    @property
    def prompt(self) -> Any:
        """The approval (or other) prompt shown in this card, if any."""
        return self.approval_box.children[0] if self.approval_box.children else None

    def show_prompt(self, prompt: widgets.Widget) -> None:
        self.approval_box.children = (prompt,)

    def render(self, card: CardState) -> None:
        """Bring the widgets in line with ``card``."""
        self.status = card.status
        colour = _STATUS_COLOURS.get(card.status, "#777")
        duration = f" · {card.duration:.2f} s" if card.duration is not None else ""
        self.header.value = (
            f"<b>{html.escape(self.label)}</b> <code>{html.escape(card.tool_name)}</code> "
            f"<span class='pi-status' style='color:{colour};font-weight:bold'>{card.status}</span>"
            f"<span class='pi-duration'>{duration}</span>"
            f" <small style='color:#999'>{html.escape(card.tool_call_id)}</small>"
        )
        self.args_view.value = _args_html(card.args)
        if card.progress is not None and card.status not in ("done", "error", "blocked"):
            self.progress.value = f"<i>{html.escape(card.progress)}</i>"
        else:
            self.progress.value = ""
        frame = result_dataframe(card.details)
        if frame is not None and self.dataframe is None:
            self.dataframe = frame
            self.result.append_display_data(frame)
        if card.content and card.status == "done":
            text = "\n".join(card.content)
            self.content_view.value = f"<pre style='white-space:pre-wrap'>{html.escape(text)}</pre>"
            self.content_fold.layout.display = ""
        if card.error:
            self.error_view.value = (
                f"<pre class='pi-error' style='white-space:pre-wrap;color:#a94442'>"
                f"{html.escape(card.error)}</pre>"
            )
