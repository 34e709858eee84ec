"""Replace the built-in ``read`` with a version that numbers its lines.

The second kind of wrapping of chapter §13, *same-name replacement*: registering a
tool named ``read`` makes the registry use this definition instead of the built-in
(extension > built-in; an SDK custom tool named ``read`` would replace this one in
turn). It is a replacement, not a decorator: nothing here calls the built-in, and
``pi.get_all_tools()`` would not give us its ``execute`` anyway (metadata only). So
this file brings its whole backend: the path check, the limits and the note.

Load it by path: ``create_agent_session(..., extensions=["extensions/read_override.py"])``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from pi_notebook import (
    AbortSignal,
    ExtensionAPI,
    ExtensionContext,
    TextContent,
    ToolDefinition,
    ToolResult,
    define_tool,
)
from pi_notebook.agent.types import ToolUpdateCallback

MAX_LINES = 500
MAX_LINE_CHARS = 500


class NumberedReadParams(BaseModel):
    path: str = Field(min_length=1, description="File path, relative to the working directory.")
    offset: int = Field(default=1, ge=1, description="First line to show (1-based).")
    limit: int = Field(default=MAX_LINES, ge=1, le=MAX_LINES, description="Most lines to show.")


def _resolve_inside(cwd: str, path: str) -> Path:
    root = Path(cwd).resolve()
    target = (root / path).resolve()
    if target != root and root not in target.parents:
        raise PermissionError(f"{path} is outside the working directory")
    if not target.is_file():
        raise FileNotFoundError(f"{path} is not a file")
    return target


async def read_numbered(
    tool_call_id: str,
    params: NumberedReadParams,
    signal: AbortSignal,
    on_update: ToolUpdateCallback,
    ctx: ExtensionContext,
) -> ToolResult:
    """Lines as ``<number>\\t<text>``, long lines cut, with a note when more remain."""
    path = _resolve_inside(ctx.cwd, params.path)
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    first = params.offset
    chosen = lines[first - 1 : first - 1 + params.limit]
    width = len(str(first + max(len(chosen) - 1, 0)))
    numbered = [
        f"{number:>{width}}\t{line[:MAX_LINE_CHARS]}{' [cut]' if len(line) > MAX_LINE_CHARS else ''}"
        for number, line in enumerate(chosen, start=first)
    ]
    last = first + len(chosen) - 1
    text = (
        "\n".join(numbered) if numbered else f"(no lines from {first}; the file has {len(lines)})"
    )
    if last < len(lines):
        text += f"\n\n[{len(lines) - last} more lines. Use offset={last + 1} to continue.]"
    return ToolResult(
        content=[TextContent(text=text)],
        details={
            "path": str(path),
            "first_line": first,
            "last_line": last,
            "total_lines": len(lines),
        },
    )


read_with_line_numbers = define_tool(
    ToolDefinition(
        name="read",
        label="Read file (numbered)",
        description=f"Read a text file under the working directory, with line numbers (at most {MAX_LINES} lines per call).",
        parameters=NumberedReadParams,
        execute=read_numbered,
        prompt_snippet="read a text file under the working directory, with line numbers",
        prompt_guidelines=["Cite line numbers from read when you quote a file."],
    )
)


def register(pi: ExtensionAPI) -> None:
    pi.register_tool(read_with_line_numbers)
