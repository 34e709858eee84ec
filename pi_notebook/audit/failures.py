"""How the writer tells a store's failure from a record's, and what stands in for a refused one.

A store's failure (locked, read-only, full, unreachable) is retried; a record's (text no
driver takes, a value too long) is isolated, and the record replaced in the chain by an
``audit_record_rejected`` stub built here. Error texts are cut short and scrubbed of
credentials: SQLAlchemy's messages carry the statement and its parameters.
"""

from __future__ import annotations

import hashlib
import json

from sqlalchemy import exc as sa_exc

from ..secrets import scrub

__all__ = ["ascii_cut", "rejected_payload", "short_error", "store_problem"]


def store_problem(exc: BaseException) -> bool:
    """Whether ``exc`` says the store cannot take writes now (as opposed to this content)."""
    if isinstance(exc, sa_exc.DBAPIError):
        if exc.connection_invalidated:
            return True
        exc = exc.orig if isinstance(exc.orig, BaseException) else exc
    name = type(exc).__name__
    if name in ("DataError", "ProgrammingError", "NotSupportedError") or isinstance(
        exc, UnicodeError | ValueError | TypeError
    ):
        return False
    # OperationalError (locked, read-only, disk full, I/O, connection), InterfaceError,
    # IntegrityError (another writer took our seq), OSError, timeouts: all about the store.
    return True


def short_error(exc: BaseException) -> str:
    """One line naming the driver's error, at most 300 characters, credentials scrubbed."""
    orig = exc.orig if isinstance(exc, sa_exc.DBAPIError) else exc
    text = str(orig).strip().splitlines()[0] if str(orig).strip() else ""
    return scrub(f"{type(orig).__name__}: {text}"[:300])


def rejected_payload(kind: str, payload: str, why: str) -> str:
    """The payload of the stub that replaces a refused record: ASCII JSON, always storable."""
    safe = payload.encode("utf-8", "backslashreplace")
    return json.dumps(
        {
            "rejected_kind": ascii_cut(kind, 64),
            "error": ascii_cut(why, 300),
            "payload_sha256": hashlib.sha256(safe).hexdigest(),
            "payload_chars": len(payload),
            "payload_preview": ascii_cut(payload, 200),
        },
        sort_keys=True,
        separators=(",", ":"),
    )


def ascii_cut(text: str, limit: int) -> str:
    out = text.encode("ascii", "backslashreplace").decode("ascii").replace("\x00", "\\x00")
    return out if len(out) <= limit else out[: limit - 3] + "..."
