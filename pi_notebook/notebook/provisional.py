"""The provisional record: what a run's cell keeps from its first event until it settles.

A live view is a widget, and a widget needs its kernel: restart the kernel while a prompt
waits and the saved file holds only a widget reference no one can show. So from its first
event a run also keeps a second display output, the *provisional record*: an ordinary
``text/html`` / ``text/markdown`` / ``text/plain`` bundle saying what is known so far (the
prompt, each call's SQL, ``awaiting approval``) and ending ``interrupted: nothing ran after
this point``. It is written so that whenever the kernel stops, what the file shows is true:

- it is sent *before* anything it does not mention can run: at the start, when a call starts,
  when an approval is asked and when it is answered (:data:`SAFETY_EVENTS`); later events (a
  call's end, the assistant's text) follow at most every :data:`EVERY_S` seconds, since a
  snapshot behind them only knows less;
- a call that started and has not ended reads ``outcome unknown: the kernel stopped while it
  ran; check the audit``; a call waiting for a person reads ``awaiting approval``.

While the live view is connected, JupyterLab hides the provisional record (a CSS rule in it
matches an output area that holds a connected view); once the kernel restarts, the widgets are
marked disconnected and it shows, below the stale view (whose note says the kernel stopped).
When the run settles, the final record replaces the live view and the provisional output is
emptied (:data:`BLANK`), so the file holds one record per run.

Its ``metadata["pi_notebook"]`` is ``{"provisional": true, "run_id", "session_id",
"prompt_digest", "calls"}``; ``pi_notebook.audit.verify_notebook`` checks it against the audit
and never counts it as a settled run.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from typing import Any

from ..agent.views import ViewOf
from ..audit.notebook import PROVISIONAL_CLASS, prompt_digest
from .card_html import args_html, call_view_of, card_html, edit_html, reasons_html
from .record import RunInfo, markdown_html
from .record_style import RECORD_CSS, style_attr
from .store import RunState

__all__ = [
    "BLANK",
    "EVERY_S",
    "INTERRUPTED",
    "MAX_CARDS",
    "OUTCOME_UNKNOWN",
    "SAFETY_EVENTS",
    "provisional_bundle",
    "provisional_calls",
    "provisional_metadata",
    "stale_note",
]

INTERRUPTED = "interrupted: nothing ran after this point"
OUTCOME_UNKNOWN = "outcome unknown: the kernel stopped while it ran; check the audit"
MAX_CARDS = 20
"""Calls a provisional record shows in full (the latest); earlier ones are counted."""
EVERY_S = 1.0
SAFETY_EVENTS = frozenset({"tool_execution_start", "approval_requested", "approval_resolved"})
"""Events after which something may run that the provisional record must already name."""
BLANK: dict[str, str] = {"text/plain": ""}
"""What the provisional output becomes once the final record is shown."""

_UNSETTLED = ("queued", "running")
_CSS = (
    "<style>.jp-OutputArea:has(.pi-run:not(.jupyter-widgets-disconnected)) "
    f"> .jp-OutputArea-child:has(.{PROVISIONAL_CLASS}){{display:none}}"
    f".jp-OutputArea:has(.{PROVISIONAL_CLASS}) > .jp-OutputArea-child:not(:has(.pi-run))"
    ":has(> .jp-OutputArea-output:not([data-mime-type])){display:none}</style>"
)
"""JupyterLab only: while a connected live view is in the output area, the provisional record
is hidden; once none is (the kernel restarted, or the file was reopened), a widget output that
cannot be shown ("Loading widget...", "Error displaying widget") is hidden instead. A rendered
MIME output carries ``data-mime-type``; a widget's does not."""


def _card(card: Any, label: str, view_of: ViewOf | None) -> str:
    if card.status not in (*_UNSETTLED, "awaiting approval"):  # ended: its facts are final
        return card_html(card, label, reasons=card.reasons, view_of=view_of)
    word = OUTCOME_UNKNOWN if card.status in _UNSETTLED else "awaiting approval"
    return (
        f"<div class='pi-card pi-warn'{style_attr('card')} data-call='{html.escape(card.tool_call_id)}'>"
        "<div class='pi-card-head'>"
        f"<b{style_attr('label')}>{html.escape(label)}</b>"
        f"<span class='pi-tool'{style_attr('tool')}>{html.escape(card.tool_name)}</span>"
        f"<span class='pi-word pi-status pi-warn'{style_attr('status')}>{html.escape(word)}</span>"
        f"<span class='pi-id'{style_attr('id')}>{html.escape(card.tool_call_id)}</span></div>"
        f"{args_html(card.args, call_view_of(card.tool_name, card.args, view_of))}"
        f"{edit_html(card, view_of)}{reasons_html(card.reasons)}</div>"
    )


def _word(card: Any) -> str:
    if card.status in _UNSETTLED:
        return OUTCOME_UNKNOWN
    return card.word


def _recent(state: RunState, entries: list[tuple[str, Any]]) -> list[Any]:
    return [c for kind, key in entries if kind == "card" and (c := state.cards.get(key))]


def _marker(shown: list[Any]) -> str:
    if any(card.status in _UNSETTLED for card in shown):
        return f"{INTERRUPTED} (a call marked 'outcome unknown' may have run: check the audit)"
    return INTERRUPTED


def stale_note(state: RunState) -> str:
    """What the live view says once its kernel is gone (shown by CSS, no buttons)."""
    if any(card.status in _UNSETTLED for card in _recent(state, _shown(state)[0])):
        return (
            "■ This run's kernel stopped while a call ran: its outcome is unknown (check the "
            "audit); nothing else ran after this point."
        )
    return "■ This run's kernel stopped: nothing ran after this point."


def _shown(state: RunState) -> tuple[list[tuple[str, Any]], int]:
    """The timeline entries shown (the latest :data:`MAX_CARDS` cards, with every message from
    the first of them on; all of a shorter run) and how many earlier cards are only counted.
    Walks back from the end: the cost does not grow with the run."""
    timeline, cards, first = state.timeline, 0, len(state.timeline)
    while first > 0 and cards < MAX_CARDS:
        first -= 1
        cards += timeline[first][0] == "card"
    if first > 0:  # more cards before: start at the earliest card shown
        while timeline[first][0] != "card":
            first += 1
    return list(timeline[first:]), len(state.cards) - cards


def provisional_bundle(
    state: RunState, info: RunInfo, prompt: str, *, cache: dict[str, tuple[Any, str]] | None = None
) -> dict[str, str]:
    """The provisional record's MIME bundle for ``state``: what the file says if the kernel
    stops now.

    Args:
        cache: call id to (card state, its HTML), reused while a card is unchanged.
    """
    entries, earlier = _shown(state)
    cache = {} if cache is None else cache
    calls = len(state.cards)
    head = (
        f"<div class='pi-head'{style_attr('head')}><span class='pi-word pi-run-status pi-warn'"
        f"{style_attr('word')}>◌ interrupted</span> · {calls} call{'s' if calls != 1 else ''}"
        f" · model {html.escape(info.model)}</div>"
    )
    parts = [
        f"<div class='pi-meta pi-prompt-text'{style_attr('meta')}>Prompt:</div>"
        f"<pre class='pi-args'{style_attr('pre')}>{html.escape(prompt)}</pre>"
    ]
    lines = [
        f"◌ interrupted · {calls} call{'s' if calls != 1 else ''} · model {info.model}",
        "",
        "Prompt:",
        *(f"    {line}" for line in prompt.splitlines()),
    ]
    if earlier:
        note = (
            f"{earlier} earlier call(s) not shown here: their records are in the audit (one "
            "still running when the kernel stopped has an unknown outcome)."
        )
        parts.append(f"<div class='pi-meta'{style_attr('meta')}>{html.escape(note)}</div>")
        lines += ["", note]
    texts = _add_entries(state, entries, info, cache, parts, lines)
    marker = _marker(_recent(state, entries))
    parts.append(
        f"<div class='pi-word pi-warn pi-interrupted'{style_attr('error')}>{html.escape(marker)}</div>"
    )
    lines += ["", marker]
    body = (
        f"<div class='pi-rec {PROVISIONAL_CLASS}'{style_attr('rec')} "
        f"data-run='{html.escape(info.run_id)}'>{RECORD_CSS}{_CSS}{head}{''.join(parts)}</div>"
    )
    answer = "\n\n".join(t for t in texts if t)
    markdown = f"{answer}\n\n*{marker}*" if answer else f"*{marker}*"
    return {"text/html": body, "text/markdown": markdown, "text/plain": "\n".join(lines)}


def _add_entries(
    state: RunState,
    entries: list[tuple[str, Any]],
    info: RunInfo,
    cache: dict[str, tuple[Any, str]],
    parts: list[str],
    lines: list[str],
) -> list[str]:
    """Add the shown timeline entries to the HTML ``parts`` and the plain ``lines`` (each
    card's HTML from ``cache`` while the card is unchanged); returns the messages' texts."""
    texts: list[str] = []
    for kind, key in entries:
        if kind == "text":
            text = state.assistant[key] if key < len(state.assistant) else ""
            texts.append(text.strip())
            if text.strip():
                parts.append(
                    f"<div class='pi-text'{style_attr('text')}>{markdown_html(text)}</div>"
                )
                lines += ["", text.strip()]
            continue
        card = state.cards.get(key)
        if card is None:
            continue
        label = info.label_of(card.tool_name)
        cached = cache.get(key)
        if cached is None or cached[0] is not card:
            cached = cache[key] = (card, _card(card, label, info.view_of))
        parts.append(cached[1])
        lines += ["", f"[{label} · {card.tool_name}] {_word(card)}"]
        view = call_view_of(card.tool_name, card.args, info.view_of)
        if view is not None and view.code is not None:
            lines += [f"    {line}" for line in view.code.splitlines()]
    return texts


def provisional_calls(
    state: RunState, args_hash_of: Callable[[str], str | None]
) -> list[dict[str, Any]]:
    """The calls a provisional record shows, as its stamp lists them: id, tool, the arguments
    hash when known, its state (``awaiting approval``, ``running``, ``done``...), decision,
    outcome and rows."""
    entries, _earlier = _shown(state)
    out: list[dict[str, Any]] = []
    for card in _recent(state, entries):
        details: Mapping[str, Any] = card.details if isinstance(card.details, dict) else {}
        rows = details.get("row_count")
        out.append(
            {
                "tool_call_id": card.tool_call_id,
                "tool_name": card.tool_name,
                "args_hash": details.get("args_hash") or args_hash_of(card.tool_call_id),
                "state": card.status,
                "decision": card.decision,
                "outcome": card.outcome,
                "rows": rows if isinstance(rows, int) and card.status == "done" else None,
            }
        )
    return out


def provisional_metadata(
    run_id: str, session_id: str, prompt: str, calls: list[dict[str, Any]]
) -> dict[str, Any]:
    """The provisional output's ``metadata`` (``{"pi_notebook": {...}}``)."""
    return {
        "pi_notebook": {
            "provisional": True,
            "run_id": run_id,
            "session_id": session_id,
            "prompt_digest": prompt_digest(prompt),
            "calls": calls,
        }
    }
