"""Built-in ``inspect_variable``: a short summary of a kernel (or given) variable.

Input and output history is never shown: IPython keeps every cell's source and result in
``In``, ``Out``, ``_ih``, ``_oh``, ``_i``, ``_ii``, ``_iii``, ``_i<N>``, ``_``, ``__``,
``___`` and ``_<N>``, and a password typed into ``%pi_connect`` would reach the model
through them. Those names answer as if they did not exist.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Mapping
from typing import Any

import pandas as pd  # pyright: ignore[reportMissingTypeStubs]
from pydantic import BaseModel, Field

from ..agent.types import ToolResult, ToolUpdateCallback
from ..ai.abort import AbortSignal
from ..ai.messages import TextContent
from ..extensions.context import ExtensionContext
from ..extensions.types import ToolDefinition, define_tool

__all__ = ["HEAD_ROWS", "REPR_MAX_CHARS", "inspect_variable_tool", "is_history_name", "summarise"]

_HISTORY = re.compile(r"^(In|Out|_ih|_oh|_dh|_i{1,3}|_i\d+|_{1,3}|_\d+|exit|quit|get_ipython)$")


def is_history_name(name: str) -> bool:
    """Whether ``name`` is one of IPython's history variables (never shown to the model)."""
    return bool(_HISTORY.match(name))


HEAD_ROWS = 5
REPR_MAX_CHARS = 2000


class InspectParams(BaseModel):
    name: str = Field(min_length=1, description="Name of the variable to inspect.")


def _short_repr() -> reprlib.Repr:
    # Python 3.11's Repr takes no constructor arguments; set the limits as attributes.
    short = reprlib.Repr()
    short.maxstring = short.maxother = REPR_MAX_CHARS
    short.maxlist = short.maxdict = 20
    return short


def summarise(value: Any) -> tuple[str, dict[str, Any]]:
    """Text for the model and details for the app; bounded whatever the value."""
    kind = f"{type(value).__module__}.{type(value).__qualname__}".removeprefix("builtins.")
    if isinstance(value, pd.DataFrame):
        frame: Any = value  # pandas ships no complete stubs
        dtypes = ", ".join(f"{c}: {t}" for c, t in frame.dtypes.astype(str).items())
        head = str(frame.head(HEAD_ROWS).to_string(max_colwidth=40))
        text = f"type: {kind}\nshape: {value.shape[0]} rows x {value.shape[1]} columns\ncolumns: {dtypes}\nhead:\n{head}"
        details: dict[str, Any] = {
            "type": kind,
            "shape": list(value.shape),
            "columns": [str(c) for c in value.columns],
        }
    else:
        short = _short_repr()
        text = f"type: {kind}"
        details = {"type": kind}
        if hasattr(value, "__len__"):
            try:
                details["length"] = len(value)
                text += f"\nlength: {details['length']}"
            except TypeError:
                pass
        text += f"\nvalue: {short.repr(value)}"
    if len(text) > REPR_MAX_CHARS * 2:
        text = text[: REPR_MAX_CHARS * 2] + "\n[truncated]"
    return text, details


def _is_history(namespace: Mapping[str, Any], name: str) -> bool:
    if is_history_name(name):
        return True
    value = namespace[name]  # another name bound to the history itself (h = In)
    return any(namespace.get(h) is value for h in ("In", "Out", "_ih", "_oh") if h in namespace)


def inspect_variable_tool(namespace: Mapping[str, Any] | None) -> ToolDefinition[InspectParams]:
    """The tool, reading ``namespace`` (a notebook's ``user_ns`` or a dict given to the session)."""

    async def execute(
        tool_call_id: str,
        params: InspectParams,
        signal: AbortSignal,
        on_update: ToolUpdateCallback,
        ctx: ExtensionContext,
    ) -> ToolResult:
        if namespace is None or params.name not in namespace or _is_history(namespace, params.name):
            # Not KeyError: its str() adds quotes, and this text is what the model reads.
            raise NameError(f"No variable named {params.name!r} in the namespace")
        text, details = summarise(namespace[params.name])
        return ToolResult(content=[TextContent(text=text)], details=details)

    return define_tool(
        ToolDefinition(
            name="inspect_variable",
            label="Inspect variable",
            description="Summarise a variable of the notebook: type, length, and for a DataFrame its shape, columns and first rows.",
            parameters=InspectParams,
            execute=execute,
            prompt_snippet="summarise a notebook variable (type, shape, columns, head)",
        )
    )
