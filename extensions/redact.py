"""Redact secrets from tool results before the model sees them.

The first kind of wrapping of chapter §13, *event wrapping*: a ``tool_result`` handler
runs after any tool's own ``execute`` and patches its ``content``. It needs no
reference to the tool it wraps, so it covers built-in, extension and SDK tools alike.

Masked: the password of a URL (``postgresql://user:***@host``), ``password=...`` /
``api_key: ...`` style pairs, bearer tokens, and strings shaped like well-known API keys
(OpenAI, Anthropic, AWS, GitHub, Slack, Google). ``details`` are left alone: they are
never sent to the model (the audit log redacts its own copy).

Load it by path: ``create_agent_session(..., extensions=["extensions/redact.py"])``.
"""

from __future__ import annotations

import re
from typing import Any

from pi_notebook import ExtensionAPI, TextContent, ToolResultEvent, ToolResultEventResult
from pi_notebook.ai.messages import ResultContent

MASK = "***"

# Each pattern masks its ``secret`` group, or the whole match when it has none.
PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^:/?#@\s]*:(?P<secret>[^/?#@\s]+)@"),
    re.compile(
        r"(?i)\b(?:password|passwd|pwd|secret|api[_-]?key|(?:access[_-]?|auth[_-]?)?token"
        r"|client[_-]?secret)[\"']?\s*[:=]\s*[\"']?(?P<secret>[^\s\"',;&]+)"
    ),
    re.compile(r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/=\-]{8,})"),
    re.compile(r"\bsk-(?:ant-)?[A-Za-z0-9_\-]{16,}"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"),
)


def _mask(match: re.Match[str]) -> str:
    if "secret" not in match.re.groupindex:
        return MASK
    start, end = match.span("secret")
    whole_start = match.start()
    text = match.group(0)
    return text[: start - whole_start] + MASK + text[end - whole_start :]


def redact(text: str) -> str:
    """``text`` with every secret the patterns recognise replaced by ``***``."""
    for pattern in PATTERNS:
        text = pattern.sub(_mask, text)
    return text


def _part_text(part: Any) -> str | None:
    if isinstance(part, TextContent):
        return part.text
    if isinstance(part, dict) and part.get("type") == "text":  # pyright: ignore[reportUnknownMemberType]
        return str(part.get("text", ""))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    return None


def redact_result(event: ToolResultEvent, ctx: Any) -> ToolResultEventResult | None:
    """Patch ``content`` when a text part held a secret; otherwise leave the result alone."""
    changed = False
    content: list[ResultContent] = []  # images pass through untouched
    for part in event.content:
        original = _part_text(part)
        if original is None:
            content.append(part)
            continue
        cleaned = redact(original)
        changed = changed or cleaned != original
        content.append(TextContent(text=cleaned))
    return ToolResultEventResult(content=content) if changed else None


def register(pi: ExtensionAPI) -> None:
    pi.on("tool_result", redact_result)
