"""The durable record of a settled run: the display output a notebook file keeps.

``record_bundle(state, info)`` returns the MIME bundle that replaces the live view when a run
settles: ``text/html`` that needs no kernel and no widget state (status, the assistant's text
rendered from Markdown by markdown-it-py, each call's card with its SQL, decision, outcome,
rows and a preview of its result), ``text/markdown`` with the assistant's text, and a readable
``text/plain``. The live cards use the same pieces (:func:`card_html`), so what a person saw
while the run went on is what the file keeps.

Everything that came from the model, a tool or the database is escaped; the model's Markdown
is rendered with raw HTML disabled. Colours are JupyterLab's CSS variables (with fallbacks
for viewers without them), so the record follows the light and dark themes.

The pieces of a card are :mod:`.card_html`, the styles :mod:`.record_style`, the result
DataFrames in a call's details :mod:`.result_frames`; their names are re-exported here.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from markdown_it import MarkdownIt

from ..agent.views import ViewOf
from ..audit.notebook import RECORD_CLASS
from .card_html import (
    args_html,
    call_view_of,
    card_head_html,
    card_html,
    card_summary,
    card_tone,
    edit_html,
    error_html,
    progress_html,
    reasons_html,
    result_html,
)
from .format import format_seconds, frame_text
from .record_style import INLINE, RECORD_CSS, style_attr, tone
from .result_frames import drop_result_frames, result_dataframe
from .store import RunState

__all__ = [
    "INLINE",
    "RECORD_CSS",
    "RUN_WORDS",
    "RunInfo",
    "args_html",
    "call_errors",
    "call_view_of",
    "card_head_html",
    "card_html",
    "card_summary",
    "card_tone",
    "drop_result_frames",
    "edit_html",
    "error_html",
    "markdown_html",
    "progress_html",
    "reasons_html",
    "record_bundle",
    "result_dataframe",
    "result_html",
    "run_tone",
    "run_word",
]

_MD = MarkdownIt("commonmark", {"html": False}).enable("table").enable("strikethrough")

RUN_WORDS = {
    "idle": "⏳ starting",
    "running": "● running",
    "done": "✔ done",
    "failed": "✘ failed",
    "stopped": "■ stopped",
    "blocked": "⊘ blocked",
}


@dataclass(frozen=True, kw_only=True)
class RunInfo:
    """What a record says about its run besides the store's state.

    Attributes:
        run_id: the run's id (also in the stamped metadata).
        model: ``provider:id`` of the model that answered.
        label_of: a tool's label from its name.
        view_of: how a call reads, from its tool's ``describe_call`` (``None``: its arguments).
        usage: a short line of tokens (and cost), when known.
        elapsed: seconds the run took.
        preview_rows: rows of each result table the record keeps.
    """

    run_id: str
    model: str
    label_of: Callable[[str], str] = str
    view_of: ViewOf | None = None
    usage: str | None = None
    elapsed: float | None = None
    preview_rows: int = 10


def markdown_html(text: str) -> str:
    """The model's Markdown as HTML (raw HTML in it is escaped, not rendered)."""
    return _MD.render(text)


def call_errors(state: RunState) -> int:
    """How many calls of the run ended in an error (not stopped, refused or rejected)."""
    return sum(card.word == "error" for card in state.cards.values())


def run_word(state: RunState) -> str:
    """The run's status as shown: ``✔ done``, ``○ done · 1 error``, ``■ stopped
    (interrupted)``, ...

    A run is done when the model ended normally (Pi's meaning), whatever its calls did; but
    when a call errored it is not shown as a plain success: ``○ done · N error(s)``.
    """
    word = RUN_WORDS[state.status]
    if state.status == "stopped" and state.stop_reason == "interrupted":
        word += " (interrupted)"
    errors = call_errors(state) if state.status == "done" else 0
    if errors:
        word = f"○ done · {errors} error{'' if errors == 1 else 's'}"
    return word


def run_tone(state: RunState) -> str:
    """The CSS class of the run's colour: green only for a done run whose calls all worked."""
    if state.status == "done" and call_errors(state):
        return "pi-muted"
    return tone(state.status)


def _head(state: RunState, info: RunInfo) -> str:
    word = run_word(state)
    calls = len(state.cards)
    bits = [
        f"<span class='pi-word pi-run-status {run_tone(state)}'{style_attr('word')}>{word}</span>"
    ]
    bits.append(f"{calls} call{'' if calls == 1 else 's'}")
    if info.elapsed is not None:
        bits.append(format_seconds(info.elapsed))
    bits.append(f"model {html.escape(info.model)}")
    if info.usage:
        bits.append(html.escape(info.usage))
    return f"<div class='pi-head'{style_attr('head')}>{' · '.join(bits)}</div>"


def _timeline_html(state: RunState, info: RunInfo) -> str:
    out: list[str] = []
    for kind, key in state.timeline:
        if kind == "text":
            text = state.assistant[key] if key < len(state.assistant) else ""
            if text.strip():
                out.append(f"<div class='pi-text'{style_attr('text')}>{markdown_html(text)}</div>")
        else:
            card = state.cards.get(key)
            if card is not None:
                out.append(
                    card_html(
                        card,
                        info.label_of(card.tool_name),
                        preview_rows=info.preview_rows,
                        reasons=card.reasons,
                        view_of=info.view_of,
                    )
                )
    return "".join(out)


def _code_of(tool_name: str, args: Any, view_of: ViewOf | None) -> str | None:
    if not isinstance(args, Mapping):
        return None
    view = call_view_of(tool_name, args, view_of)
    return view.code if view is not None else None


def _plain(state: RunState, info: RunInfo) -> str:
    calls = len(state.cards)
    lines = [f"{run_word(state)} · {calls} call{'' if calls == 1 else 's'} · model {info.model}"]
    for kind, key in state.timeline:
        if kind == "text":
            text = state.assistant[key] if key < len(state.assistant) else ""
            if text.strip():
                lines += ["", text.strip()]
            continue
        card = state.cards.get(key)
        if card is None:
            continue
        lines += ["", f"[{info.label_of(card.tool_name)} · {card.tool_name}] {card_summary(card)}"]
        code = _code_of(card.tool_name, card.args, info.view_of)
        if code is not None:
            lines += [f"    {line}" for line in code.splitlines()]
        original = card.original_args
        asked = _code_of(card.tool_name, original, info.view_of)
        if asked is not None:
            lines += ["    (edited before approval; the model asked for:)"]
            lines += [f"    {line}" for line in asked.splitlines()]
        elif original is not None:
            lines += ["    (edited before approval)"]
        frame = result_dataframe(card.details)
        if frame is not None and len(frame.columns) and card.status == "done":
            table = frame_text(frame, max_rows=info.preview_rows)
            lines += [f"    {line}" for line in table.splitlines()]
        elif card.content and card.status == "done":
            lines += [f"    {line}" for line in "\n".join(card.content).splitlines()[:20]]
        if card.error:
            lines += [f"    ! {line}" for line in card.error.splitlines()[:5]]
    if state.error:
        lines += ["", f"! {state.error}"]
    return "\n".join(lines)


def record_bundle(state: RunState, info: RunInfo) -> dict[str, str]:
    """The record's MIME bundle: ``text/html``, ``text/markdown`` and ``text/plain``."""
    error = (
        f"<div class='pi-error-line'{style_attr('error')}>{html.escape(state.error)}</div>"
        if state.error
        else ""
    )
    notices = "".join(
        f"<div class='pi-meta'{style_attr('meta')}>{html.escape(n)}</div>" for n in state.notices
    )
    body = (
        f"<div class='pi-rec {RECORD_CLASS}'{style_attr('rec')} data-run='{html.escape(info.run_id)}'>"
        f"{RECORD_CSS}"
        f"{_head(state, info)}{_timeline_html(state, info)}{notices}{error}</div>"
    )
    answer = state.assistant_text.strip()
    markdown = answer or f"*{run_word(state)}*"
    return {"text/html": body, "text/markdown": markdown, "text/plain": _plain(state, info)}
