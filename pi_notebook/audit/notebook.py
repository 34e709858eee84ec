"""The audit's view of a notebook file: the digest that stamps a durable run record.

A settled ``%%pi`` run leaves a display output whose ``metadata["pi_notebook"]`` names the
run, its calls and their audit hashes. The output's data (its MIME bundle) is digested with
:func:`output_digest`; the digest is recorded in the audit, so an edited output no longer
matches its record.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["output_digest"]


def _text(value: Any) -> Any:
    # nbformat may store multi-line strings as lists of lines; both forms digest alike.
    if isinstance(value, list) and all(isinstance(v, str) for v in value):  # pyright: ignore[reportUnknownVariableType]
        return "".join(value)  # pyright: ignore[reportUnknownArgumentType]
    return value


def output_digest(data: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of a display output's MIME bundle: canonical JSON, sorted keys.

    Args:
        data: the output's ``data`` dict (MIME type to content), as written or as read back
            from an ``.ipynb``.
    """
    canonical = {str(mime): _text(value) for mime, value in data.items()}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
