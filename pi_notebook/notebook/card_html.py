"""One call as HTML: the pieces of a card, shared by the live cards and the record.

The header (label, tool, the status word with rows, decisions and times, the call id), the
call's code or arguments as its tool shows them (its :class:`~pi_notebook.agent.views.CallView`),
what the model asked for when the person edited the call, why it needed approval, its result
(a table, or its text) and its error. Everything that came from the model, a tool or the
database is escaped.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from typing import Any

from ..agent.views import CallView, ViewOf
from .format import format_count, format_seconds, frame_html
from .record_style import style_attr, tone
from .result_frames import result_dataframe
from .store import CardState

__all__ = [
    "args_html",
    "call_view_of",
    "card_head_html",
    "card_html",
    "card_summary",
    "card_tone",
    "edit_html",
    "error_html",
    "progress_html",
    "reasons_html",
    "result_html",
]


def _rows_note(card: CardState) -> str | None:
    details = card.details if isinstance(card.details, dict) else {}
    count = details.get("row_count")
    if not isinstance(count, int):
        return None
    frame = result_dataframe(details)
    if details.get("statement_kind") == "write" and (frame is None or not len(frame.columns)):
        return f"{format_count(count)} row{'' if count == 1 else 's'} changed"
    exact = details.get("row_count_exact", True)
    if details.get("size_capped") and frame is not None:  # stopped at the size bound
        of = format_count(count) if exact else f"at least {format_count(count)}"
        return f"{format_count(len(frame))} of {of} rows kept (size limit)"
    more = "" if exact else "more than "
    return f"{more}{format_count(count)} row{'' if count == 1 else 's'}"


def card_summary(card: CardState) -> str:
    """``approved by ana · 3 rows changed · waited 9.1 s · ran 0.04 s``: the word and who
    decided (``· granted scope g-… (UPDATE t, ≤ 50 rows, 30 min)`` when the answer was a
    grant; ``granted (g-…)`` for a call that ran inside one), what it did, and how long: the
    person's wait apart from the call's own time."""
    word = card.word
    if word == "granted" and card.grant:
        parts = [f"granted {card.grant}"]  # ran inside a grant: which one
    else:
        if card.approver and word in ("approved", "rejected"):
            word += f" by {card.approver}"
        parts = [word]
        if card.grant:
            parts.append(card.grant)  # the scope this answer granted
    note = _rows_note(card) if card.status == "done" else None
    if note:
        parts.append(note)
    if card.waited_s is not None and card.run_time is not None:
        parts.append(f"waited {format_seconds(card.waited_s)}")
        parts.append(f"ran {format_seconds(card.run_time)}")
    elif card.duration is not None:
        parts.append(format_seconds(card.duration))
    return " · ".join(parts)


def call_view_of(tool_name: str, args: Any, view_of: ViewOf | None) -> CallView | None:
    """The view of a call as its tool describes it, or ``None`` without ``view_of``."""
    return None if view_of is None else view_of(tool_name, args)


def _code_class(language: str | None) -> str:
    """``pi-sql`` for SQL (the class the record has always had), else ``pi-code``."""
    return "pi-sql" if language is not None and language.lower() == "sql" else "pi-code"


def args_html(args: Any, view: CallView | None = None) -> str:
    """A call's arguments as its tool shows them (``view``): its code block, in the code's
    language, then the other arguments on one line; without code (or without a view) the
    arguments as indented JSON."""
    if view is not None and view.code is not None:
        lang = view.code_language
        data = (
            f" data-language='{lang}'"
            if lang and lang.lower() != "sql" and re.fullmatch(r"[\w+.-]{1,32}", lang)
            else ""
        )
        out = f"<pre class='{_code_class(lang)}'{data}{style_attr('pre')}>{html.escape(view.code)}</pre>"
        if view.fields:
            rest_text = html.escape(json.dumps(dict(view.fields), default=str))
            out += f"<pre class='pi-args'{style_attr('pre')}>{rest_text}</pre>"
        return out
    if view is not None and isinstance(args, Mapping):
        args = dict(view.fields)
    if args in (None, {}):
        return ""
    try:
        text = json.dumps(args, indent=2, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(args)
    return f"<pre class='pi-args'{style_attr('pre')}>{html.escape(text)}</pre>"


def card_head_html(card: CardState, label: str, *, elapsed: float | None = None) -> str:
    """The card's first line: label, tool, the status word with rows and duration, call id.

    ``elapsed`` (seconds) is shown for a call still running.
    """
    word = card.word
    summary = card_summary(card)
    if elapsed is not None and card.status in ("running", "queued", "awaiting approval"):
        summary += f" · {format_seconds(elapsed)}"
    return (
        "<div class='pi-card-head'>"
        f"<b{style_attr('label')}>{html.escape(label)}</b>"
        f"<span class='pi-tool'{style_attr('tool')}>{html.escape(card.tool_name)}</span>"
        f"<span class='pi-word pi-status {tone(word)}'{style_attr('status')}>{html.escape(summary)}</span>"
        f"<span class='pi-id'{style_attr('id')}>{html.escape(card.tool_call_id)}</span></div>"
    )


def progress_html(card: CardState) -> str:
    """The latest progress text of a call still going, else nothing."""
    if card.progress and card.status not in ("done", "error", "blocked"):
        return f"<div class='pi-meta'{style_attr('meta')}><i>{html.escape(card.progress)}</i></div>"
    return ""


def edit_html(card: CardState, view_of: ViewOf | None = None) -> str:
    """What the model asked for, when the person edited the call before approving it (the
    card's own SQL or arguments are then the edit, which is what ran)."""
    if card.original_args is None:
        return ""
    view = call_view_of(card.tool_name, card.original_args, view_of)
    return (
        f"<div class='pi-meta pi-edited'{style_attr('meta')}>Edited before approval; "
        f"the model asked for:</div>{args_html(card.original_args, view)}"
    )


def reasons_html(reasons: tuple[str, ...]) -> str:
    """Why a call needed approval, one reason each."""
    if not reasons:
        return ""
    items = "; ".join(html.escape(r) for r in reasons)
    return f"<div class='pi-reasons'{style_attr('meta')}>Needs approval because: {items}</div>"


def result_html(card: CardState, *, preview_rows: int = 10) -> str:
    """A finished call's result: its table (formatted, scrolling), or its text if no table."""
    if card.status != "done":
        return ""
    frame = result_dataframe(card.details)
    if frame is not None and len(frame.columns):
        total = card.details.get("row_count") if isinstance(card.details, dict) else None
        kept = len(frame)
        return frame_html(
            frame, max_rows=preview_rows, total=max(total, kept) if isinstance(total, int) else kept
        )
    if frame is None and card.content:
        # No DataFrame: the tool's text is its result, so show it (not folded away).
        text = html.escape(chr(10).join(card.content))
        return f"<pre class='pi-content'{style_attr('pre')}>{text}</pre>"
    return ""


def error_html(card: CardState) -> str:
    """Why the call failed or was stopped, if it was."""
    if not card.error:
        return ""
    return f"<pre class='pi-error'{style_attr('pre')}>{html.escape(card.error)}</pre>"


def card_tone(card: CardState) -> str:
    """The CSS class of the card's colour (``pi-ok``, ``pi-warn``, ``pi-bad``, ...)."""
    return tone(card.word)


def card_html(
    card: CardState,
    label: str,
    *,
    preview_rows: int = 10,
    reasons: tuple[str, ...] = (),
    view_of: ViewOf | None = None,
) -> str:
    """One call as HTML: header, its code or arguments (as its tool shows them, ``view_of``),
    why it needed approval, result, error."""
    view = call_view_of(card.tool_name, card.args, view_of)
    return (
        f"<div class='pi-card {card_tone(card)}'{style_attr('card')} "
        f"data-call='{html.escape(card.tool_call_id)}'>"
        f"{card_head_html(card, label)}{args_html(card.args, view)}{edit_html(card, view_of)}"
        f"{reasons_html(reasons)}"
        f"{result_html(card, preview_rows=preview_rows)}{error_html(card)}</div>"
    )
