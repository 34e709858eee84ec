"""Provider failures as short, actionable sentences with no secret in them.

Each provider maps its SDK's exceptions onto :func:`status_failure`,
:func:`connection_failure` or :func:`unexpected_failure`; the result says what went
wrong, whether a retry may help, and how long the server asked us to wait. Every
message passes through :func:`scrub` before it leaves the provider.

Not here: the retry loop itself (``retry.py``) and anything SDK-specific.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, cast
from urllib.parse import urlsplit

__all__ = [
    "Failure",
    "connection_failure",
    "describe_sdk_error",
    "host_port",
    "missing_key_failure",
    "retry_after_s",
    "scrub",
    "status_failure",
    "unexpected_failure",
]

# Key-shaped tokens are redacted even when they are not the configured key: a server
# may echo a (partially masked) key, or a user may paste one into a base URL.
_KEY_PATTERN = re.compile(r"\bsk-[A-Za-z0-9_\-*]{6,}")
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
# Error types that SSE streams report with an HTTP 200 status (Anthropic, OpenAI).
_ERROR_TYPE_STATUS = {
    "rate_limit_error": 429,
    "overloaded_error": 529,
    "api_error": 500,
    "server_error": 500,
    "timeout_error": 504,
}


@dataclass(frozen=True, kw_only=True)
class Failure:
    """One failed attempt: a user-facing message and the retry decision."""

    message: str
    retryable: bool = False
    retry_after_s: float | None = None


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Remove every secret (and anything shaped like an API key) from ``text``."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return _KEY_PATTERN.sub("***", text)


def host_port(url: str) -> str:
    """``host:port`` of a URL, never its user-info, path or query."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return "the configured server"
    return f"{host}:{port}"


def retry_after_s(headers: Mapping[str, str] | None) -> float | None:
    """The wait the server asked for: ``retry-after-ms``, or ``Retry-After`` seconds/date."""
    if not headers:
        return None
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = parsedate_to_datetime(value)
            return max(0.0, (when - datetime.now(UTC)).total_seconds())
    except (ValueError, TypeError):
        return None


def missing_key_failure(vendor: str, key_env: str, base_env: str | None = None) -> Failure:
    """No key configured: name the variable to set."""
    hint = f", or set {base_env} to a local server that needs no key" if base_env else ""
    return Failure(
        message=f"{key_env} is not set: export your {vendor} API key as {key_env}{hint}."
    )


def _server_detail(body: Any, fallback: str) -> str:
    """The server's own one-line explanation, if its error body has one."""
    if isinstance(body, Mapping):
        fields = cast(Mapping[str, Any], body)
        error: Any = fields.get("error", body)
        if isinstance(error, Mapping):
            message: Any = cast(Mapping[str, Any], error).get("message")
            if isinstance(message, str) and message:
                return message
        elif isinstance(error, str) and error:
            return error
    elif isinstance(body, str) and body.strip():
        return body.strip()
    return fallback


def _error_type(body: Any) -> str | None:
    if isinstance(body, Mapping):
        error: Any = cast(Mapping[str, Any], body).get("error", body)
        if isinstance(error, Mapping):
            kind: Any = cast(Mapping[str, Any], error).get("type")
            return kind if isinstance(kind, str) else None
    return None


def status_failure(
    status: int | None,
    *,
    body: Any,
    headers: Mapping[str, str] | None,
    fallback: str,
    service: str,
    key_env: str,
    model_id: str,
    host: str,
) -> Failure:
    """A failure the server reported: an HTTP error status or an error event in the stream.

    ``service`` names the other side for messages, e.g. ``"the OpenAI API"``.
    """
    if status is None or 200 <= status < 300:
        # An error event inside a 200 stream: its type says what the status would be.
        status = _ERROR_TYPE_STATUS.get(_error_type(body) or "", status)
    detail = _server_detail(body, fallback)
    if len(detail) > 300:
        detail = detail[:300] + "…"
    if status == 401:
        # The server's 401 text often echoes part of the key; say nothing of it.
        return Failure(
            message=f"{_cap(service)} rejected the API key (401 Unauthorized) at {host}: check {key_env}."
        )
    if status == 403:
        return Failure(
            message=f"{_cap(service)} refused the request (403 Forbidden) at {host}: {detail}"
        )
    if status == 404:
        return Failure(
            message=f"Model {model_id!r} was not found at {host} (404): check the model id. {detail}"
        )
    if status == 429:
        return Failure(
            message=f"Rate limit or quota reached (429) at {host}: {detail}",
            retryable=True,
            retry_after_s=retry_after_s(headers),
        )
    if status is not None and status in _RETRYABLE_STATUS:
        return Failure(
            message=f"Server error ({status}) at {host}: {detail}",
            retryable=True,
            retry_after_s=retry_after_s(headers),
        )
    code = f" ({status})" if status else ""
    return Failure(message=f"Request failed{code} at {host}: {detail}")


def connection_failure(
    exc: BaseException, *, service: str, host: str, timeout_s: float | None
) -> Failure:
    """The server could not be reached, or stopped answering."""
    chain: list[str] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 4:
        chain.append(f"{type(seen).__name__}: {seen}".lower())
        seen = seen.__cause__ or seen.__context__
    text = " ".join(chain)
    if "timeout" in text or "timed out" in text:
        limit = f" within {timeout_s:g} s" if timeout_s else ""
        return Failure(
            message=f"{_cap(service)} at {host} did not answer{limit} (timeout).", retryable=True
        )
    if "refused" in text or "all connection attempts failed" in text:
        why = "connection refused (is the server running?)"
    elif (
        "name or service not known" in text
        or "nodename nor servname" in text
        or "getaddrinfo" in text
    ):
        why = "the host name could not be resolved"
    elif "remoteprotocolerror" in text or "incomplete" in text or "peer closed" in text:
        why = "the server closed the connection mid-response"
    else:
        why = "connection error"
    return Failure(message=f"Cannot reach {service} at {host}: {why}.", retryable=True)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def unexpected_failure(exc: BaseException, *, service: str) -> Failure:
    """Anything else: name the exception type so a bug report has something to go on."""
    text = str(exc).splitlines()[0][:300] if str(exc) else ""
    return Failure(
        message=f"Unexpected error talking to {service}: {type(exc).__name__}: {text}".rstrip(": ")
    )


def describe_sdk_error(
    exc: BaseException,
    sdk: Any,
    *,
    service: str,
    host: str,
    key_env: str,
    model_id: str,
    timeout_s: float | None,
) -> Failure:
    """Map an exception from the ``openai`` or ``anthropic`` SDK (``sdk`` is the module).

    Both SDKs share one exception hierarchy: ``APIConnectionError`` (with
    ``APITimeoutError``), ``APIStatusError`` (an HTTP status, or for Anthropic an
    ``error`` event mid-stream) and ``APIError`` (for OpenAI, an error object mid-stream).
    """
    if isinstance(exc, sdk.APIConnectionError):
        return connection_failure(exc, service=service, host=host, timeout_s=timeout_s)
    if isinstance(exc, sdk.APIError):
        status: int | None = getattr(exc, "status_code", None)
        response = getattr(exc, "response", None)
        return status_failure(
            status,
            body=getattr(exc, "body", None),
            headers=getattr(response, "headers", None),
            fallback=getattr(exc, "message", "") or str(exc),
            service=service,
            key_env=key_env,
            model_id=model_id,
            host=host,
        )
    if type(exc).__module__.startswith(("httpx", "httpcore")):
        # Anthropic's SDK lets transport errors from a body cut short pass through.
        return connection_failure(exc, service=service, host=host, timeout_s=timeout_s)
    return unexpected_failure(exc, service=service)
