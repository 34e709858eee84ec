"""What an approval binds to: the canonical JSON of a call's final arguments and its SHA-256.

Canonical JSON: sorted keys, compact separators, UTF-8 kept as is (``ensure_ascii=False``),
no NaN or infinity. Two argument sets share a hash only when they are equal as JSON. The SQL
tool hashes the same way after canonicalising its statement (:func:`pi_notebook.sql.args_hash`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

__all__ = ["args_hash", "canonical_args", "canonical_json"]


def canonical_json(value: Any) -> str:
    """The canonical JSON text of ``value``.

    Raises:
        TypeError, ValueError: ``value`` is not plain JSON (an object of another type, NaN).
    """
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def args_hash(args: Mapping[str, Any]) -> str:
    """SHA-256 hex of the canonical JSON of ``args`` (lone surrogates hashed as they are).

    Raises:
        TypeError, ValueError: ``args`` is not plain JSON.
    """
    return hashlib.sha256(canonical_json(dict(args)).encode("utf-8", "surrogatepass")).hexdigest()


def canonical_args(params: BaseModel) -> dict[str, Any]:
    """The validated parameters as the plain JSON dict an approval shows and binds to.

    A handler may have put a value of another type into a field (S8): it is serialised as it
    is, without a warning, so the hash still tells it apart.

    Raises:
        pydantic.PydanticSerializationError: a value has no JSON form.
    """
    return params.model_dump(mode="json", warnings=False)
