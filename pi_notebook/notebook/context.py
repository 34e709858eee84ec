"""Notebook context for the model: ``{name}`` in a prompt, and DataFrames mentioned by name.

``notebook_context(namespace)`` is an extension factory (the notebook registers it with the
kernel's ``user_ns``; any mapping works). Two handlers, on the public events:

* ``input``: ``{name}`` becomes the value of ``name`` in the namespace, as ``%%ai`` users
  expect. ``{{`` and ``}}`` are literal braces. A name that is not defined, and anything in
  braces that is not a plain name (``{x + 1}``, ``{"a": 1}``, ``{df.shape}``), stays as
  written. Strings are inserted as they are, other values by their ``repr``; either way at
  most ``max_value_chars`` characters, and never the password of a URL.
* ``before_agent_start``: when the prompt names a DataFrame (or Series) of the namespace as a
  word, a message gives the model its shape, columns and dtypes. Never its rows: to share
  rows, interpolate it (``{df}``) or let the model call ``inspect_variable``.

Names starting with ``_`` (IPython's output history) are never mentioned.
"""

from __future__ import annotations

import keyword
import re
import reprlib
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from pi_notebook.extensions import ExtensionAPI
from pi_notebook.secrets import scrub

__all__ = ["CUSTOM_TYPE", "describe_frames", "interpolate", "notebook_context"]

CUSTOM_TYPE = "notebook_context"
_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


def _repr() -> reprlib.Repr:
    short = reprlib.Repr()
    short.maxlist = short.maxtuple = short.maxset = short.maxdict = 50
    short.maxstring = short.maxother = 100_000  # the final cut happens below
    short.maxlevel = 4
    return short


def _render(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else _repr().repr(value)
    text = scrub(text)
    if len(text) > limit:
        text = f"{text[:limit]}… [cut at {limit:,} of {len(text):,} characters]"
    return text


def interpolate(text: str, namespace: Mapping[str, Any], *, max_value_chars: int = 2_000) -> str:
    """``text`` with ``{name}`` replaced from ``namespace`` (rules in the module docstring).

    Never raises for what a value does: one whose ``repr`` fails shows as
    ``<Type instance at 0x…>``.
    """
    if "{" not in text and "}" not in text:
        return text

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        name = match.group(1)
        if not name.isidentifier() or keyword.iskeyword(name) or name not in namespace:
            return token
        try:
            return _render(namespace[name], max_value_chars)
        except Exception:  # a broken __repr__ must not break the prompt
            return token

    return _TOKEN.sub(replace, text)


def _kind(value: pd.DataFrame | pd.Series) -> str:
    return "pandas DataFrame" if isinstance(value, pd.DataFrame) else "pandas Series"


def describe_frames(
    prompt: str, namespace: Mapping[str, Any], *, max_columns: int = 50, max_frames: int = 10
) -> str | None:
    """Shape, columns and dtypes of the DataFrames and Series ``prompt`` names; ``None`` if
    it names none. No values."""
    lines: list[str] = []
    for name, value in list(namespace.items()):
        if len(lines) >= max_frames:
            break
        if not isinstance(name, str) or name.startswith("_"):
            continue
        if not isinstance(value, pd.DataFrame | pd.Series):
            continue
        if not re.search(rf"(?<!\w){re.escape(name)}(?!\w)", prompt):
            continue
        if isinstance(value, pd.Series):
            lines.append(f"- {name}: pandas Series, {len(value):,} values, dtype {value.dtype}")
            continue
        rows, width = value.shape
        columns = [f"{c} ({t})" for c, t in list(value.dtypes.astype(str).items())[:max_columns]]
        more = f", and {width - max_columns} more columns" if width > max_columns else ""
        lines.append(
            f"- {name}: {_kind(value)}, {rows:,} rows x {width} columns: {', '.join(columns)}{more}"
        )
    if not lines:
        return None
    return (
        "Notebook variables named in the prompt (their structure only; no rows were shared):\n"
        + "\n".join(lines)
    )


def notebook_context(
    namespace: Mapping[str, Any], *, max_value_chars: int = 2_000, max_columns: int = 50
) -> Callable[[ExtensionAPI], None]:
    """The extension factory for ``namespace`` (read at each prompt, so it stays current)."""

    def register(pi: ExtensionAPI) -> None:
        def on_input(event: Any, ctx: Any) -> dict[str, str] | None:
            text = interpolate(event.text, namespace, max_value_chars=max_value_chars)
            return None if text == event.text else {"text": text}

        def on_start(event: Any, ctx: Any) -> dict[str, str] | None:
            described = describe_frames(event.prompt, namespace, max_columns=max_columns)
            if described is None:
                return None
            return {"message": described, "custom_type": CUSTOM_TYPE}

        pi.on("input", on_input)
        pi.on("before_agent_start", on_start)

    return register
