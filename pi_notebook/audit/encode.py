"""JSON-safe conversion of arbitrary audit payloads.

The audit must never drop a record because its payload is awkward, and must never raise into
the agent run. ``to_jsonable`` therefore converts what it knows (pydantic models, dataclasses,
DataFrames, bytes, datetimes, exceptions, sets, decimals, ...) and summarises everything else
with its type and a bounded ``repr``. Large values are summarised, not copied: a DataFrame
becomes its shape and columns, bytes become their length and SHA-256.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import hashlib
import json
import math
import reprlib
import sys
import uuid
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

__all__ = ["safe_field", "safe_text", "to_jsonable", "type_name"]

_MAX_DEPTH = 24
_MAX_ITEMS = 1000
_repr = reprlib.Repr()
_repr.maxstring = 200
_repr.maxother = 200


def type_name(obj: object) -> str:
    """The qualified name of ``obj``'s type, e.g. ``pandas.core.frame.DataFrame``."""
    cls = type(obj)
    module = getattr(cls, "__module__", "") or ""
    name = getattr(cls, "__qualname__", cls.__name__)
    return name if module == "builtins" else f"{module}.{name}"


def _safe_repr(obj: object) -> str:
    try:
        return _repr.repr(obj)
    except Exception:  # a broken __repr__ must not lose the record
        return f"<unrepresentable {type_name(obj)}>"


def to_jsonable(obj: Any) -> Any:
    """Convert ``obj`` into plain JSON types (dict with str keys, list, str, int, float, bool, None).

    Never raises: anything that cannot be converted is summarised as
    ``{"_type": <qualified type name>, "repr": <bounded repr>}``.
    """
    try:
        return _convert(obj, 0, set())
    except Exception:  # last resort, see the docstring
        return {"_type": type_name(obj), "repr": _safe_repr(obj)}


def safe_text(text: str) -> str:
    """``text`` with what no store takes escaped: lone surrogates (as ``\\udXXX``) and NUL."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\x00", "\\x00") if "\x00" in text else text


def safe_field(value: object, limit: int) -> tuple[str, int | None]:
    """``value`` as text fit for a ``VARCHAR(limit)`` column on every engine.

    Returns the text and, when it had to be cut, the original length (else ``None``). A cut
    value keeps its head and ends with ``~`` and 16 hex digits of its SHA-256, so two long
    values that share a head stay distinct and one value always cuts the same way.
    """
    text = safe_text(value if isinstance(value, str) else str(value))
    if len(text) <= limit:
        return text, None
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return f"{text[: limit - 17]}~{digest}", len(text)


def _convert(obj: Any, depth: int, seen: set[int]) -> Any:
    # Fast path first: most payloads are already plain JSON.
    cls = type(obj)
    if obj is None or cls is str or cls is int or cls is bool:
        return obj
    if (cls is dict or cls is list) and depth <= _MAX_DEPTH:
        if id(obj) in seen:
            return {"_type": type_name(obj), "_note": "cycle"}
        seen.add(id(obj))
        try:
            return _container(obj, depth, seen)
        finally:
            seen.discard(id(obj))
    if cls in _MODEL_TYPES and depth <= _MAX_DEPTH:  # seen to reach ``model_dump`` before
        return _dump_or_fields(obj, depth, seen)
    if isinstance(obj, float):
        # NaN and infinities are not JSON; keep them readable rather than emitting invalid text.
        return obj if math.isfinite(obj) else repr(obj)
    if isinstance(obj, str):  # a subclass: its text, as the encoders write it (not its str())
        return str.__str__(obj)
    if isinstance(obj, int):  # bool handled above; IntEnum and int subclasses (their value)
        return obj.value if isinstance(obj, enum.Enum) else int.__int__(obj)
    if depth > _MAX_DEPTH:
        return {"_type": type_name(obj), "repr": _safe_repr(obj), "_note": "nested too deeply"}
    if isinstance(obj, Mapping | list | tuple | set | frozenset):
        if id(obj) in seen:
            return {"_type": type_name(obj), "_note": "cycle"}
        seen.add(id(obj))
        try:
            return _container(obj, depth, seen)
        finally:
            seen.discard(id(obj))
    return _scalar_or_object(obj, depth, seen)


def _container(obj: Any, depth: int, seen: set[int]) -> Any:
    if type(obj) is dict or (type(obj) is not list and isinstance(obj, Mapping)):
        out: dict[str, Any] = {}
        for i, (key, value) in enumerate(obj.items()):
            if i >= _MAX_ITEMS:
                out["_truncated_items"] = len(obj) - _MAX_ITEMS
                break
            out[key if isinstance(key, str) else _key(key)] = _convert(value, depth + 1, seen)
        return out
    items = list(obj)
    converted = [_convert(v, depth + 1, seen) for v in items[:_MAX_ITEMS]]
    if isinstance(obj, set | frozenset):
        # Sets have no order; sort their JSON text so the payload (and its hash) is stable.
        converted.sort(key=_sort_key)
    if len(items) > _MAX_ITEMS:
        converted.append({"_truncated_items": len(items) - _MAX_ITEMS})
    return converted


def _sort_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _key(key: object) -> str:
    if isinstance(key, enum.Enum):
        return str(key.value)
    if isinstance(key, str | int | float | bool) or key is None:
        return str(key)
    return _safe_repr(key)


def _scalar_or_object(obj: Any, depth: int, seen: set[int]) -> Any:
    # pandas and numpy first: a result's DataFrame is in nearly every end record, and the
    # isinstance checks below cost it more than this lookup costs anything else.
    special = _pandas_or_numpy(obj)
    if special is not _NOTHING:
        return special
    if isinstance(obj, bytes | bytearray | memoryview):
        data = bytes(obj)
        return {"_type": "bytes", "length": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    if isinstance(obj, dt.datetime | dt.date | dt.time):
        return obj.isoformat()
    if isinstance(obj, dt.timedelta):
        return {"_type": "timedelta", "seconds": obj.total_seconds()}
    if isinstance(obj, decimal.Decimal):
        return str(obj)
    if isinstance(obj, uuid.UUID | PurePath):
        return str(obj)
    if isinstance(obj, enum.Enum):
        return _convert(obj.value, depth + 1, seen)
    if isinstance(obj, BaseException):
        return {"_type": "exception", "type": type_name(obj), "message": _safe_str(obj)}
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(obj, pydantic.BaseModel):
        # Every check above is one of the type, and each said no: the next model of this
        # type goes straight to its dump (a call's arguments are in every decision record).
        if len(_MODEL_TYPES) >= 1024:
            _MODEL_TYPES.clear()
        _MODEL_TYPES.add(type(obj))
    return _dump_or_fields(obj, depth, seen)


_MODEL_TYPES: set[type] = set()  # pydantic model types that reached ``_dump_or_fields``


def _dump_or_fields(obj: Any, depth: int, seen: set[int]) -> Any:
    dump = getattr(obj, "model_dump", None)
    if callable(dump) and not isinstance(obj, type):
        try:
            return _convert(dump(mode="json"), depth + 1, seen)
        except Exception:  # fall back to a python-mode dump, then to repr
            try:
                return _convert(dump(), depth + 1, seen)
            except Exception:
                pass
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if id(obj) in seen:
            return {"_type": type_name(obj), "_note": "cycle"}
        seen.add(id(obj))
        try:
            # Field by field rather than asdict(): asdict deep-copies and raises on odd values.
            return {
                f.name: _convert(getattr(obj, f.name, None), depth + 1, seen)
                for f in dataclasses.fields(obj)
            }
        finally:
            seen.discard(id(obj))
    return {"_type": type_name(obj), "repr": _safe_repr(obj)}


def _safe_str(obj: object) -> str:
    try:
        return str(obj)
    except Exception:
        return _safe_repr(obj)


_NOTHING: Any = object()


def _pandas_or_numpy(obj: Any) -> Any:
    # Only look at pandas/numpy if they are already imported: if they are not, obj cannot be
    # one of their objects, and importing them here would make every record slow.
    pd = sys.modules.get("pandas")
    if pd is not None:
        if isinstance(obj, pd.DataFrame):
            from pi_notebook.readers.pandas_internals import column_dtypes, first_labels

            return {
                "_type": "DataFrame",
                "shape": list(obj.shape),
                "columns": [_key(c) for c in first_labels(obj, _MAX_ITEMS)],
                "dtypes": [_dtype_text(t) for t in column_dtypes(obj)[:_MAX_ITEMS]],
            }
        if isinstance(obj, pd.Series):
            return {
                "_type": "Series",
                "length": len(obj),
                "name": _key(obj.name),
                "dtype": str(obj.dtype),
            }
        if isinstance(obj, pd.Timestamp):
            return obj.isoformat()
    np = sys.modules.get("numpy")
    if np is not None:
        if isinstance(obj, np.ndarray):
            return {"_type": "ndarray", "shape": list(obj.shape), "dtype": str(obj.dtype)}
        if isinstance(obj, np.generic):
            return to_jsonable(obj.item())
    return _NOTHING


_DTYPE_TEXT: dict[int, tuple[Any, str]] = {}  # id -> (the dtype, kept alive; its text)


def _dtype_text(dtype: Any) -> str:
    """``str(dtype)``, remembered for NumPy's built-in dtypes (immutable singletons, and
    ``str`` of one costs more than the rest of a small frame's summary)."""
    found = _DTYPE_TEXT.get(id(dtype))
    if found is not None and found[0] is dtype:
        return found[1]
    text = str(dtype)
    if getattr(dtype, "isbuiltin", 0) == 1 and type(dtype).__module__.startswith("numpy"):
        if len(_DTYPE_TEXT) >= 256:
            _DTYPE_TEXT.clear()
        _DTYPE_TEXT[id(dtype)] = (dtype, text)
    return text
