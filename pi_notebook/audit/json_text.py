"""The canonical JSON text of an audit payload (:func:`dumps`: sorted keys, compact, UTF-8 kept
as is) and its bound (:func:`truncate`: long strings cut first, then a note of the original size
with a preview).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["STRICT_ENCODER", "dumps", "truncate"]

_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
# For payloads straight from the caller: refuses NaN and unknown types, which then go
# through ``to_jsonable`` instead.
STRICT_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def dumps(value: Any) -> str:
    """The canonical JSON text of a payload: sorted keys, compact, UTF-8 kept as is."""
    return _ENCODER.encode(value)


def truncate(value: Any, text: str, max_bytes: int) -> str:
    """Bound a payload's JSON ``text`` to about ``max_bytes`` (UTF-8), noting the original size.

    Long strings are cut first, so the structure (and short fields such as ``decision`` or
    ``args_hash``) survives; if that is not enough, the payload becomes
    ``{"_truncated": true, "original_bytes": N, "preview": ...}`` plus its short top-level
    scalars.
    """
    original = len(text.encode("utf-8"))
    if original <= max_bytes:
        return text
    limit = max(64, max_bytes // 8)
    shortened = dumps(_cut_strings(value, limit))
    if isinstance(value, Mapping) and len(shortened.encode("utf-8")) <= max_bytes - 64:
        note = {**json.loads(shortened), "_truncated": True, "original_bytes": original}
        return dumps(note)
    keep: dict[str, Any] = {"_truncated": True, "original_bytes": original}
    if isinstance(value, Mapping):
        for key, item in value.items():
            if (
                isinstance(item, bool | int | float)
                or item is None
                or (isinstance(item, str) and len(item) <= 200)
            ):
                keep[str(key)] = item
    budget = max_bytes - len(dumps(keep).encode("utf-8")) - 32
    if budget < 0:  # too many scalars: keep only the note
        keep = {"_truncated": True, "original_bytes": original}
        budget = max_bytes - 96
    preview = _cut_utf8(text, max(0, budget))
    while True:
        # Re-encoding the preview as a JSON string escapes quotes and so may grow it.
        keep["preview"] = preview
        out = dumps(keep)
        if len(out.encode("utf-8")) <= max_bytes or not preview:
            return out
        preview = preview[: len(preview) * 3 // 4]


def _cut_strings(value: Any, limit: int) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]}…[{len(value) - limit} more chars]"
    if isinstance(value, Mapping):
        return {k: _cut_strings(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut_strings(v, limit) for v in value]
    return value


def _cut_utf8(text: str, max_bytes: int) -> str:
    data = text.encode("utf-8")[:max_bytes]
    return data.decode("utf-8", errors="ignore")
