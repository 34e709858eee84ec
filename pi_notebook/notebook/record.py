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
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from markdown_it import MarkdownIt

from ..agent.views import CallView, ViewOf
from ..audit.notebook import RECORD_CLASS
from .format import format_count, format_seconds, frame_html, frame_text
from .store import CardState, RunState

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
_TONE = {
    "allowed": "ok",
    "approved": "ok",
    "granted": "ok",
    "done": "ok",
    "rejected": "warn",
    "expired": "warn",
    "refused": "warn",
    "blocked": "warn",
    "awaiting approval": "warn",
    "error": "bad",
    "failed": "bad",
    "aborted": "muted",
    "stopped": "muted",
    "queued": "muted",
    "idle": "muted",
    "running": "busy",
}

INLINE: dict[str, str] = {
    "rec": "line-height:1.4",
    "head": "margin:2px 0 6px 0",
    "word": "font-weight:bold",
    "text": "margin:4px 0",
    "card": "border-left-width:4px;border-left-style:solid;border-radius:3px;padding:4px 8px;"
    "margin:6px 0",
    "label": "margin-right:8px",
    "tool": "font-family:monospace;opacity:0.75;margin-right:8px",
    "status": "font-weight:bold;margin-right:8px",
    "id": "opacity:0.6;font-size:smaller;margin-left:8px",
    "meta": "opacity:0.75",
    "pre": "white-space:pre-wrap;word-break:normal;overflow-wrap:normal;overflow-x:auto;"
    "margin:4px 0;padding:4px 6px;font-family:monospace;text-align:left",
    "error": "font-weight:bold",
}
"""Inline ``style`` attributes: the record's essential layout where ``<style>`` is stripped.

JupyterLab's sanitizer (untrusted notebooks: a colleague's copy) removes ``<style>`` but keeps
``class`` and ``style`` attributes, and a declaration only if its value is plain CSS (lengths,
keywords, literal colours; never ``var(...)``). So the inline styles carry layout only, with no
colour: the card's left bar takes the text colour and secondary text is dimmed with
``opacity``, which reads in the light and the dark theme alike. The colours (from JupyterLab's
``--jp-*`` variables) are in :data:`RECORD_CSS`, and apply wherever it survives (the live view,
a trusted notebook, nbconvert's HTML).
"""


def _style(key: str) -> str:
    return f" style='{INLINE[key]}'"


RECORD_CSS = """<style>
.pi-rec{font-family:var(--jp-ui-font-family,sans-serif);font-size:var(--jp-ui-font-size1,13px);color:var(--jp-ui-font-color1,#212121)}
.pi-rec .pi-head{margin:2px 0 6px 0;color:var(--jp-ui-font-color2,#616161)}
.pi-rec .pi-word{font-weight:bold}
.pi-rec .pi-ok{color:var(--jp-success-color1,#2e7d32)}
.pi-rec .pi-warn{color:var(--jp-warn-color1,#e65100)}
.pi-rec .pi-bad{color:var(--jp-error-color1,#c62828)}
.pi-rec .pi-busy{color:var(--jp-brand-color1,#1565c0)}
.pi-rec .pi-muted{color:var(--jp-ui-font-color2,#616161)}
.pi-rec .pi-text{margin:4px 0;line-height:1.45}
.pi-rec .pi-text p{margin:4px 0}
.pi-rec .pi-text table,.pi-rec .pi-table{border-collapse:collapse;margin:4px 0}
.pi-rec .pi-text th,.pi-rec .pi-text td,.pi-rec .pi-table th,.pi-rec .pi-table td{border:1px solid var(--jp-border-color2,#e0e0e0);padding:2px 8px;text-align:left}
.pi-rec .pi-table th{background:var(--jp-layout-color2,#eeeeee)}
.pi-rec .pi-num{text-align:right !important;font-variant-numeric:tabular-nums}
.pi-rec .pi-card{border:1px solid var(--jp-border-color2,#e0e0e0);border-left:4px solid var(--jp-border-color1,#bdbdbd) !important;border-radius:3px;padding:4px 8px;margin:6px 0;background:var(--jp-layout-color1,#fff)}
.pi-rec .pi-card.pi-ok{border-left-color:var(--jp-success-color1,#2e7d32) !important}
.pi-rec .pi-card.pi-warn{border-left-color:var(--jp-warn-color1,#e65100) !important}
.pi-rec .pi-card.pi-bad{border-left-color:var(--jp-error-color1,#c62828) !important}
.pi-rec .pi-card.pi-busy{border-left-color:var(--jp-brand-color1,#1565c0) !important}
.pi-rec .pi-card{color:var(--jp-ui-font-color1,#212121)}
.pi-rec .pi-card-head{display:flex;flex-wrap:wrap;gap:0 8px;align-items:baseline}
.pi-rec .pi-tool{font-family:var(--jp-code-font-family,monospace)}
.pi-rec .pi-id{font-size:smaller;margin-left:auto !important}
.pi-rec pre.pi-sql,.pi-rec pre.pi-args,.pi-rec pre.pi-content,.pi-rec pre.pi-error{white-space:pre-wrap;word-break:normal;overflow-wrap:normal;overflow-x:auto;margin:4px 0;padding:4px 6px;font-family:var(--jp-code-font-family,monospace);font-size:var(--jp-code-font-size,12px);background:var(--jp-layout-color2,#f5f5f5);color:var(--jp-content-font-color1,#212121);border-radius:2px}
.pi-rec pre.pi-error{color:var(--jp-error-color1,#c62828)}
.pi-rec .pi-reasons{margin:2px 0;color:var(--jp-ui-font-color2,#616161)}
.pi-rec .pi-table-wrap{max-width:100%;max-height:22em;overflow:auto;margin:4px 0}
.pi-rec .pi-table{font-size:var(--jp-code-font-size,12px)}
.pi-rec .pi-table-note{font-size:smaller}
.pi-rec .pi-error-line{color:var(--jp-error-color1,#c62828)}
.pi-rec .pi-prompt{border:2px solid var(--jp-warn-color1,#e65100);border-radius:3px;background:var(--jp-layout-color1,#fff)}
.pi-rec .pi-preview{margin:4px 0}
.pi-rec .pi-sql-editor textarea{font-family:var(--jp-code-font-family,monospace);font-size:var(--jp-code-font-size,12px)}
</style>"""


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


def result_dataframe(details: Any) -> Any:
    """The result DataFrame in a tool result's ``details`` (``details["dataframe"]``), if any."""
    import pandas as pd  # here, not at import time: importing the notebook layer stays light

    frame = details.get("dataframe") if isinstance(details, dict) else None
    return frame if isinstance(frame, pd.DataFrame) else None


def drop_result_frames(details: Any) -> None:
    """Release the DataFrames in a result's ``details`` (in place), as the session's retention
    does: each becomes its note and ``details["dataframe_dropped"]`` is set."""
    import pandas as pd

    from ..session.retention import DROPPED_NOTE

    if not isinstance(details, dict):
        return
    for key, value in list(details.items()):  # pyright: ignore[reportUnknownVariableType]
        if isinstance(value, pd.DataFrame):
            details[key] = DROPPED_NOTE
    details["dataframe_dropped"] = True


def markdown_html(text: str) -> str:
    """The model's Markdown as HTML (raw HTML in it is escaped, not rendered)."""
    return _MD.render(text)


def _tone(word: str) -> str:
    return "pi-" + _TONE.get(word, "muted")


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
        out = (
            f"<pre class='{_code_class(lang)}'{data}{_style('pre')}>{html.escape(view.code)}</pre>"
        )
        if view.fields:
            rest_text = html.escape(json.dumps(dict(view.fields), default=str))
            out += f"<pre class='pi-args'{_style('pre')}>{rest_text}</pre>"
        return out
    if view is not None and isinstance(args, Mapping):
        args = dict(view.fields)
    if args in (None, {}):
        return ""
    try:
        text = json.dumps(args, indent=2, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(args)
    return f"<pre class='pi-args'{_style('pre')}>{html.escape(text)}</pre>"


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
        f"<b{_style('label')}>{html.escape(label)}</b>"
        f"<span class='pi-tool'{_style('tool')}>{html.escape(card.tool_name)}</span>"
        f"<span class='pi-word pi-status {_tone(word)}'{_style('status')}>{html.escape(summary)}</span>"
        f"<span class='pi-id'{_style('id')}>{html.escape(card.tool_call_id)}</span></div>"
    )


def progress_html(card: CardState) -> str:
    """The latest progress text of a call still going, else nothing."""
    if card.progress and card.status not in ("done", "error", "blocked"):
        return f"<div class='pi-meta'{_style('meta')}><i>{html.escape(card.progress)}</i></div>"
    return ""


def edit_html(card: CardState, view_of: ViewOf | None = None) -> str:
    """What the model asked for, when the person edited the call before approving it (the
    card's own SQL or arguments are then the edit, which is what ran)."""
    if card.original_args is None:
        return ""
    view = call_view_of(card.tool_name, card.original_args, view_of)
    return (
        f"<div class='pi-meta pi-edited'{_style('meta')}>Edited before approval; "
        f"the model asked for:</div>{args_html(card.original_args, view)}"
    )


def reasons_html(reasons: tuple[str, ...]) -> str:
    """Why a call needed approval, one reason each."""
    if not reasons:
        return ""
    items = "; ".join(html.escape(r) for r in reasons)
    return f"<div class='pi-reasons'{_style('meta')}>Needs approval because: {items}</div>"


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
        return f"<pre class='pi-content'{_style('pre')}>{text}</pre>"
    return ""


def error_html(card: CardState) -> str:
    """Why the call failed or was stopped, if it was."""
    if not card.error:
        return ""
    return f"<pre class='pi-error'{_style('pre')}>{html.escape(card.error)}</pre>"


def card_tone(card: CardState) -> str:
    """The CSS class of the card's colour (``pi-ok``, ``pi-warn``, ``pi-bad``, ...)."""
    return _tone(card.word)


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
        f"<div class='pi-card {card_tone(card)}'{_style('card')} "
        f"data-call='{html.escape(card.tool_call_id)}'>"
        f"{card_head_html(card, label)}{args_html(card.args, view)}{edit_html(card, view_of)}"
        f"{reasons_html(reasons)}"
        f"{result_html(card, preview_rows=preview_rows)}{error_html(card)}</div>"
    )


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
    return _tone(state.status)


def _head(state: RunState, info: RunInfo) -> str:
    word = run_word(state)
    calls = len(state.cards)
    bits = [f"<span class='pi-word pi-run-status {run_tone(state)}'{_style('word')}>{word}</span>"]
    bits.append(f"{calls} call{'' if calls == 1 else 's'}")
    if info.elapsed is not None:
        bits.append(format_seconds(info.elapsed))
    bits.append(f"model {html.escape(info.model)}")
    if info.usage:
        bits.append(html.escape(info.usage))
    return f"<div class='pi-head'{_style('head')}>{' · '.join(bits)}</div>"


def _timeline_html(state: RunState, info: RunInfo) -> str:
    out: list[str] = []
    for kind, key in state.timeline:
        if kind == "text":
            text = state.assistant[key] if key < len(state.assistant) else ""
            if text.strip():
                out.append(f"<div class='pi-text'{_style('text')}>{markdown_html(text)}</div>")
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
        f"<div class='pi-error-line'{_style('error')}>{html.escape(state.error)}</div>"
        if state.error
        else ""
    )
    notices = "".join(
        f"<div class='pi-meta'{_style('meta')}>{html.escape(n)}</div>" for n in state.notices
    )
    body = (
        f"<div class='pi-rec {RECORD_CLASS}'{_style('rec')} data-run='{html.escape(info.run_id)}'>"
        f"{RECORD_CSS}"
        f"{_head(state, info)}{_timeline_html(state, info)}{notices}{error}</div>"
    )
    answer = state.assistant_text.strip()
    markdown = answer or f"*{run_word(state)}*"
    return {"text/html": body, "text/markdown": markdown, "text/plain": _plain(state, info)}
