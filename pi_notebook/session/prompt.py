"""The base system prompt, rebuilt from the active tools' snippets and guidelines (S21, C12)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..extensions.types import ToolDefinition

__all__ = ["BASE_PROMPT", "build_system_prompt"]

BASE_PROMPT = (
    "You are pi_notebook, an assistant working inside a Jupyter notebook for a data person. "
    "Use the tools offered to you to answer, say plainly what you did, and never invent results."
)


def _one_line(text: str | None) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


def build_system_prompt(active: Sequence[ToolDefinition[Any]], *, base: str = BASE_PROMPT) -> str:
    """Only active tools contribute; a blank snippet counts as none; guidelines are
    trimmed, blanks dropped and duplicates (also across tools) shown once."""
    lines = [base]
    if not active:
        lines += ["", "No tools are available in this session."]
        return "\n".join(lines)
    listed = [(d.name, _one_line(d.prompt_snippet)) for d in active if _one_line(d.prompt_snippet)]
    if listed:
        lines += ["", "Available tools:"]
        lines += [f"- {name}: {snippet}" for name, snippet in listed]
    guidelines: list[str] = []
    for definition in active:
        for bullet in definition.prompt_guidelines or ():
            bullet = bullet.strip()
            if bullet and bullet not in guidelines:
                guidelines.append(bullet)
    if guidelines:
        lines += ["", "Guidelines:"]
        lines += [f"- {bullet}" for bullet in guidelines]
    return "\n".join(lines)
