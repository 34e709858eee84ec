"""What the audit reads of a notebook file: its stamped outputs, the outputs that look like
records without a stamp, the prompts of its ``%%pi`` cells, and the digests that tie an output
and a prompt to their record.

A settled run's display output carries ``metadata["pi_notebook"]`` (its stamp); a provisional
one is told apart by :func:`~.provisional.is_provisional`. An output looks like a record when
its HTML carries :data:`RECORD_CLASS` (or :data:`PROVISIONAL_CLASS`), or its text starts as a
record's does. :func:`~.notebook.verify_notebook` checks what is read here against the store.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import AuditError
from .provisional import is_provisional

__all__ = [
    "PROVISIONAL_CLASS",
    "RECORD_CLASS",
    "NotebookRead",
    "Stamp",
    "looks_like_record",
    "malformed_stamp",
    "nb_text",
    "output_digest",
    "prompt_body",
    "prompt_digest",
    "read_notebook",
]

RECORD_CLASS = "pi-record"
"""The CSS class of a record's outer ``<div>`` (``pi_notebook.notebook.record`` writes it)."""

PROVISIONAL_CLASS = "pi-provisional"
"""The CSS class of a provisional record's outer ``<div>`` (a run that has not settled)."""

_RECORD_HTML = re.compile(r"""class\s*=\s*["'][^"']*\bpi-record\b""")
_RECORD_PLAIN = re.compile(
    r"^\s*\S+ (?:done|failed|stopped|blocked|starting|running)\b[^\n]*· \d+ calls? · model "
)
_PROVISIONAL_HTML = re.compile(r"""class\s*=\s*["'][^"']*\bpi-provisional\b""")
_PROVISIONAL_PLAIN = re.compile(r"^\s*◌ interrupted · \d+ calls? · model ")
_PI_CELL = re.compile(r"^\s*%%pi\b[^\n]*(?:\n|$)")


def prompt_body(source: str) -> str | None:
    """The prompt of a ``%%pi`` cell's source (the body below ``%%pi``), stripped; else None."""
    match = _PI_CELL.match(source)
    return source[match.end() :].strip() if match else None


def prompt_digest(prompt: str) -> str:
    """SHA-256 (hex) of a run's prompt, stripped (as ``%%pi`` runs it)."""
    return hashlib.sha256(prompt.strip().encode("utf-8")).hexdigest()


def nb_text(value: Any) -> Any:
    """A notebook string as one text.

    nbformat"""
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
    canonical = {str(mime): nb_text(value) for mime, value in data.items()}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Stamp:
    """One stamped output: where it is, its stamp, its data and its cell's source."""

    where: str
    meta: dict[str, Any]
    data: Any
    source: str = ""


@dataclass
class NotebookRead:
    """What :func:`verify_notebook` takes from a notebook file."""

    stamps: list[Stamp]
    unstamped: list[str]  # where an output looks like a record but has no stamp
    unstamped_digests: set[str]  # their data's digests
    prompts: list[str]  # the prompt digest of each ``%%pi`` cell
    provisional: list[Stamp] = field(default_factory=list[Stamp])


def looks_like_record(data: Any) -> bool:
    """Whether an output's data looks like a record (settled or provisional)."""
    if not isinstance(data, Mapping):
        return False
    page = nb_text(data.get("text/html"))  # pyright: ignore[reportUnknownMemberType]
    plain = nb_text(data.get("text/plain"))  # pyright: ignore[reportUnknownMemberType]
    return (
        isinstance(page, str)
        and (_RECORD_HTML.search(page) is not None or _PROVISIONAL_HTML.search(page) is not None)
    ) or (
        isinstance(plain, str)
        and (_RECORD_PLAIN.match(plain) is not None or _PROVISIONAL_PLAIN.match(plain) is not None)
    )


def read_notebook(path: str | os.PathLike[str]) -> NotebookRead:
    """The stamped outputs, the outputs that look like records without a stamp, and the
    prompts of the ``%%pi`` cells."""
    import nbformat

    try:
        notebook: Any = nbformat.read(os.fspath(path), as_version=4)  # pyright: ignore[reportUnknownMemberType]
    except FileNotFoundError:
        raise
    except Exception as exc:  # invalid JSON or not a notebook: say so plainly
        raise AuditError(f"{os.fspath(path)} is not a readable notebook ({exc})") from exc
    found: list[Stamp] = []
    provisional: list[Stamp] = []
    unstamped: list[str] = []
    prompts: list[str] = []
    digests: set[str] = set()
    for ci, cell in enumerate(notebook.cells):
        source = nb_text(cell.get("source", ""))
        body = prompt_body(source) if cell.cell_type == "code" and isinstance(source, str) else None
        if body is not None:
            prompts.append(prompt_digest(body))
        for oi, output in enumerate(cell.get("outputs", []) if cell.cell_type == "code" else []):
            if output.get("output_type") not in ("display_data", "execute_result"):
                continue
            where = f"cell {ci} output {oi}"
            meta = (output.get("metadata") or {}).get("pi_notebook")
            data = output.get("data") or {}
            if is_provisional(meta):
                text = source if isinstance(source, str) else ""
                provisional.append(Stamp(where, meta, data, text))
            elif meta is not None:
                found.append(Stamp(where, meta, data, source if isinstance(source, str) else ""))
            elif looks_like_record(data):
                unstamped.append(where)
                digests.add(output_digest(data))
    return NotebookRead(found, unstamped, digests, prompts, provisional)


def malformed_stamp(meta: Any) -> str | None:
    """What is wrong with a settled run's stamp, or ``None``."""
    if not isinstance(meta, Mapping):
        return "its pi_notebook stamp is not an object"
    for key in ("run_id", "session_id", "output_digest", "record_hash"):
        if not isinstance(meta.get(key), str):  # pyright: ignore[reportUnknownMemberType]
            return f"its stamp has no {key}"
    calls = meta.get("calls")  # pyright: ignore[reportUnknownMemberType]
    if not isinstance(calls, list) or not all(isinstance(c, Mapping) for c in calls):  # pyright: ignore[reportUnknownVariableType]
        return "its stamp's calls are not a list of objects"
    return None
