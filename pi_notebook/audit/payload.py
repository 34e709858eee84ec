"""What a record's payload and ids become before they are queued: storable on every engine.

The payload becomes canonical JSON (orjson, or the C encoder, converts models, DataFrames and
the like through ``to_jsonable`` as it meets them), redacted, truncated to a size, with lone
surrogates escaped; the ids are cut to their column sizes (with a digest, so distinct ids
stay distinct) and rid of NUL. So a record the store refuses should not exist; the writer
still isolates one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orjson as _orjson

from .encode import safe_field, to_jsonable
from .redact import Redactor, dumps, truncate

try:
    from _json import make_encoder as _make_encoder
except ImportError:  # an interpreter without the C accelerator
    _make_encoder = None

__all__ = ["LIMITS", "encode_payload", "storable_ids"]

LIMITS = {"kind": 64, "tool_call_id": 255, "tool_name": 255, "policy_version": 64}
"""Column sizes of the schema, in characters."""
_ASCII_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)
_ENCODER_CONVERTING = json.JSONEncoder(
    sort_keys=True,
    separators=(",", ":"),
    ensure_ascii=False,
    allow_nan=False,
    default=to_jsonable,
)


def _direct_encoder() -> Any:
    """``_ENCODER_CONVERTING``'s C encoder, made once: ``JSONEncoder.encode`` makes a new one
    (and a dict of markers) on every call, which is half its cost on a record's payload.

    Without markers it does not look for cycles: a cyclic payload recurses until
    ``RecursionError``, which sends it the slow way as ``ValueError`` did. ``None`` (use
    ``_ENCODER_CONVERTING``) where there is no C encoder or it does not give the same text.
    """
    if _make_encoder is None:
        return None
    try:
        made = _make_encoder(
            None, to_jsonable, json.encoder.encode_basestring, None, ":", ",", True, False, False
        )
        sample: dict[str, Any] = {"b": [1, 2.5, None, True], "a": {"é": '"\n'}, "c": {1}}
        if "".join(made(sample, 0)) != _ENCODER_CONVERTING.encode(sample):
            return None
    except Exception:  # another signature in another Python: the encoder's own way
        return None
    return made


_C_ENCODE = _direct_encoder()
# Sorted keys; dataclasses and dates go to ``to_jsonable``, as from the C encoder (orjson would
# write them its own way). Subclasses of str, int, dict and list are written as their base
# type, as the C encoder writes them (``str()`` of one may say something else).
_ORJSON_OPTIONS = (
    _orjson.OPT_SORT_KEYS | _orjson.OPT_PASSTHROUGH_DATACLASS | _orjson.OPT_PASSTHROUGH_DATETIME
)


def encode_payload(payload: Mapping[str, Any] | None, redactor: Redactor, max_bytes: int) -> str:
    """The stored text of a payload: canonical JSON, redacted, truncated, storable anywhere.

    Never raises for an awkward value (see ``to_jsonable``); a payload that is not a mapping
    is wrapped as ``{"value": ...}``.
    """
    value: Any = None
    text = ""
    if payload is None:
        payload = {}
    if type(payload) is dict:
        # Most payloads are plain JSON already: the fast encoders write them as they are,
        # converting only the values they do not know (models, DataFrames, dates) through
        # ``to_jsonable`` on the way; whatever both refuse (NaN, keys of mixed types, cycles)
        # takes the slow path below.
        text = _orjson_text(payload) or _c_text(payload)
    if not text:
        value = to_jsonable(payload)
        if not isinstance(value, dict):
            value = {"value": value}
        text = dumps(value)
    text, value = redactor.redact_json(text, value)
    if len(text) * 4 > max_bytes and (len(text.encode("utf-8", "surrogatepass")) > max_bytes):
        text = truncate(json.loads(text) if value is None else value, text, max_bytes)
        value = None
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: no store takes them; escape them
            text = _ASCII_ENCODER.encode(json.loads(text) if value is None else value)
    return text


def _orjson_text(payload: dict[str, Any]) -> str:
    """``payload`` written by orjson (the C encoder's text at a fraction of its cost), or ""
    when orjson refuses it (keys that are not text, integers past 64 bits, lone surrogates)
    or the text holds a null, which may be a NaN or an infinity: orjson writes those as null,
    where the C encoder refuses them."""
    try:
        text = _orjson.dumps(payload, default=to_jsonable, option=_ORJSON_OPTIONS).decode()
    except (TypeError, ValueError, RecursionError):
        return ""
    return "" if "null" in text else text


def _c_text(payload: dict[str, Any]) -> str:
    """``payload`` written by the C encoder made once, or "" when it refuses it."""
    try:
        if _C_ENCODE is not None:
            return "".join(_C_ENCODE(payload, 0))
        return _ENCODER_CONVERTING.encode(payload)
    except (TypeError, ValueError, RecursionError):
        return ""


def storable_ids(
    kind: str, tool_call_id: Any, tool_name: Any, policy_version: Any
) -> tuple[list[Any], dict[str, int]]:
    """The four id fields fit for their columns, and the original length of each one cut."""
    fields: list[Any] = [kind, tool_call_id, tool_name, policy_version]
    for value in fields:  # the common case, all short plain text (or None): nothing to do
        if value is not None and (
            type(value) is not str or len(value) > 64 or not value.isascii() or "\x00" in value
        ):
            break
    else:
        return fields, {}
    cut: dict[str, int] = {}
    for i, name in enumerate(("kind", "tool_call_id", "tool_name", "policy_version")):
        value = fields[i]
        if value is not None and (
            type(value) is not str or len(value) > 64 or not value.isascii() or "\x00" in value
        ):
            fields[i], original = safe_field(value, LIMITS[name])
            if original is not None:
                cut[name] = original
    return fields, cut
