"""Credentials out of everything shown: one place that turns URLs and texts into safe forms.

Every status line, system prompt, error result, audit payload and log message that names a
database goes through :func:`safe_url`; every driver or server message that may echo a DSN
goes through :func:`scrub`. What does not belong here: redaction of tool payloads by pattern
(the audit's ``Redactor``) and API-key scrubbing of provider errors (``ai.providers``).
"""

from __future__ import annotations

import re
from urllib.parse import quote, quote_plus

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

__all__ = ["CREDENTIAL_KEYS", "safe_url", "scrub"]

CREDENTIAL_KEYS = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "pass",
        "secret",
        "token",
        "access_token",
        "auth_token",
        "api_key",
        "apikey",
        "key",
        "sslpassword",
        "sslkey",
        "private_key",
        "client_secret",
        "credentials",
        "aws_secret_access_key",
        "aws_session_token",
    }
)
"""Query-string keys whose values are credentials (compared in lower case)."""

_MASK = "***"
_URL_CREDENTIALS = re.compile(r"(\b[\w+.-]+://[^:/@\s]*):[^@\s]*@")
_KEY_VALUE = re.compile(
    r"\b(" + "|".join(sorted(map(re.escape, CREDENTIAL_KEYS), key=len, reverse=True)) + r")"
    r"(\s*[=:]\s*)('[^']*'|\"[^\"]*\"|[^\s&;,)]+)",
    re.I,
)


def safe_url(url: str | URL) -> str:
    """``url`` as text without any credential: the password and query-string secrets masked.

    Accepts a string or a SQLAlchemy ``URL``; text that is not a URL comes back as
    ``"<invalid URL>"`` rather than echoed (it may be a mistyped secret).
    """
    try:
        parsed = url if isinstance(url, URL) else make_url(url)
    except (ArgumentError, ValueError):
        return "<invalid URL>"
    query = {
        key: (_MASK if key.lower() in CREDENTIAL_KEYS else value)
        for key, value in parsed.query.items()
    }
    # render_as_string quotes the mask in the query string; show it as typed.
    return parsed.set(query=query).render_as_string(hide_password=True).replace("%2A%2A%2A", _MASK)


def scrub(text: str, url: str | URL | None = None) -> str:
    """Remove credentials from ``text``.

    Masks the password and query-string secrets of ``url`` (raw and URL-quoted), any
    ``scheme://user:secret@`` fragment and any ``password=...`` style pair.
    """
    for secret in _secrets_of(url):
        for form in {secret, quote(secret, safe=""), quote_plus(secret)}:
            if form:
                text = text.replace(form, _MASK)
    text = _URL_CREDENTIALS.sub(r"\1:" + _MASK + "@", text)
    return _KEY_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{_MASK}", text)


def _secrets_of(url: str | URL | None) -> list[str]:
    if url is None:
        return []
    try:
        parsed = url if isinstance(url, URL) else make_url(url)
    except (ArgumentError, ValueError):
        return []
    found = [str(parsed.password)] if parsed.password else []
    for key, value in parsed.query.items():
        if key.lower() in CREDENTIAL_KEYS:
            found.extend([value] if isinstance(value, str) else list(value))
    return [s for s in found if s]
