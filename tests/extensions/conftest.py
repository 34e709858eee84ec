"""Helpers for the extension-system tests: a small tool builder and extension files on disk."""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import pytest
from pydantic import BaseModel

from pi_notebook import TextContent, ToolDefinition, ToolResult, define_tool


class EchoParams(BaseModel):
    text: str = "hi"


Execute = Callable[[str, Any, Any, Any, Any], Awaitable[ToolResult]]


class MakeTool(Protocol):
    def __call__(
        self,
        name: str = ...,
        *,
        execute: Execute | None = ...,
        parameters: type[BaseModel] = ...,
        snippet: str | None = ...,
        guidelines: Sequence[str] | None = ...,
        description: str | None = ...,
        log: list[tuple[str, Any]] | None = ...,
    ) -> ToolDefinition[Any]: ...


def _make_tool(
    name: str = "echo",
    *,
    execute: Execute | None = None,
    parameters: type[BaseModel] = EchoParams,
    snippet: str | None = None,
    guidelines: Sequence[str] | None = None,
    description: str | None = None,
    log: list[tuple[str, Any]] | None = None,
) -> ToolDefinition[Any]:
    """A tool answering ``<name>:<params as dict>``; ``log`` records (name, params) per run."""

    async def default(
        tool_call_id: str, params: Any, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        if log is not None:
            log.append((name, params))
        return ToolResult(
            content=[TextContent(text=f"{name}:{params.model_dump()}")], details={"tool": name}
        )

    return define_tool(
        ToolDefinition(
            name=name,
            label=name.title(),
            description=description or f"The {name} tool.",
            parameters=parameters,
            execute=execute or default,
            prompt_snippet=snippet,
            prompt_guidelines=guidelines,
        )
    )


@pytest.fixture
def make_tool() -> MakeTool:
    return _make_tool


_file_ids = itertools.count(1)


class WriteExtension(Protocol):
    def __call__(self, body: str, *, name: str | None = ...) -> Path: ...


@pytest.fixture
def write_extension(tmp_path: Path) -> WriteExtension:
    """Write ``body`` (dedented) to a fresh ``.py`` file and return its path."""

    def write(body: str, *, name: str | None = None) -> Path:
        path = tmp_path / f"{name or f'ext_{next(_file_ids)}'}.py"
        path.write_text(textwrap.dedent(body), encoding="utf-8")
        return path

    return write


def result_text(message: Any) -> str:
    """The text of a tool-result message or result (parts may be objects or dicts)."""
    parts = message.content
    return "\n".join(p.text if isinstance(p, TextContent) else p["text"] for p in parts)


@pytest.fixture
def text_of() -> Callable[[Any], str]:
    return result_text


def tool_results(session: Any) -> list[Any]:
    """The tool-result messages of a session, in order."""
    return [m for m in session.messages if m.role == "toolResult"]


@pytest.fixture
def results_of() -> Callable[[Any], list[Any]]:
    return tool_results
