"""Argument preparation and validation (C14, C15).

Raw model arguments are copied, passed through the tool's optional
``prepare_arguments`` and validated by its pydantic model in lax mode, so compatible
values are coerced ("5" -> 5) on the copy while the assistant message keeps exactly
what the model sent.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import ToolArgumentsError
from .types import AgentTool

__all__ = ["ToolArgumentsError", "prepare_and_validate", "validation_error_text"]


def _location(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "root"


def validation_error_text(tool_name: str, error: ValidationError, received: Any) -> str:
    """The exact text of a validation failure, as the model reads it (C15)."""
    problems = "\n".join(f"  - {_location(e['loc'])}: {e['msg']}" for e in error.errors())
    shown = json.dumps(received, indent=2, ensure_ascii=False, default=repr)
    return f'Validation failed for tool "{tool_name}":\n{problems}\n\nReceived arguments:\n{shown}'


_SCALARS = (str, int, float, bool, type(None))


def _copy_arguments(raw: Any) -> Any:
    """A copy nothing downstream can share with the assistant message's arguments."""
    if type(raw) is dict and all(type(v) in _SCALARS for v in raw.values()):
        return dict(raw)  # the usual case, far cheaper than deepcopy
    return copy.deepcopy(raw)


def prepare_and_validate(tool: AgentTool[Any], raw_arguments: Any) -> BaseModel:
    """Prepare then validate a copy of ``raw_arguments``; raise ToolArgumentsError."""
    arguments = _copy_arguments(raw_arguments)
    if tool.prepare_arguments is not None:
        try:
            arguments = tool.prepare_arguments(arguments)
        except Exception as exc:
            raise ToolArgumentsError(str(exc) or type(exc).__name__) from exc
    try:
        return tool.parameters.model_validate(arguments)
    except ValidationError as exc:
        raise ToolArgumentsError(validation_error_text(tool.name, exc, arguments)) from exc
