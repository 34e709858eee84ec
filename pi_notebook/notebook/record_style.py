"""The look of a record and of the live cards: inline styles, the stylesheet, the tones.

:data:`INLINE` carries the layout where ``<style>`` is stripped; :data:`RECORD_CSS` the
colours, from JupyterLab's CSS variables, wherever it survives; :func:`tone` maps a status word
to the CSS class of its colour.
"""

from __future__ import annotations

__all__ = ["INLINE", "RECORD_CSS", "style_attr", "tone"]

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


def style_attr(key: str) -> str:
    """`` style='...'`` with the inline style of ``key`` (a key of :data:`INLINE`)."""
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


def tone(word: str) -> str:
    """The CSS class of a status word's colour (``pi-ok``, ``pi-warn``, ``pi-bad``, ...)."""
    return "pi-" + _TONE.get(word, "muted")
