"""Built-in file tools: ``read`` and ``ls``, confined to the session's working directory."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import BaseModel, Field

from ..agent.types import ToolResult, ToolUpdateCallback
from ..ai.abort import AbortSignal
from ..ai.messages import TextContent
from ..extensions.context import ExtensionContext
from ..extensions.types import ToolDefinition, define_tool

__all__ = ["LS_MAX_ENTRIES", "READ_MAX_BYTES", "READ_MAX_LINES", "ls_tool", "read_tool"]

READ_MAX_LINES = 2000
READ_MAX_BYTES = 50_000
LS_MAX_ENTRIES = 500


def _inside(cwd: str, path: str) -> Path:
    root = Path(cwd).resolve()
    target = (root / path).resolve()
    if target != root and root not in target.parents:
        raise PermissionError(f"{path} is outside the working directory {root}")
    return target


class ReadParams(BaseModel):
    path: str = Field(min_length=1, description="File path, relative to the working directory.")
    offset: int = Field(default=1, ge=1, description="First line to show (1-based).")
    limit: int | None = Field(default=None, ge=1, description="Most lines to show.")


def _read_window(path: Path, start: int, limit: int) -> tuple[list[str], int, bool]:
    """Lines ``start`` .. ``start + limit`` within the byte budget, the file's line count,
    and whether a single over-long line had to be clipped."""
    shown: list[str] = []
    size = 0
    clipped = False
    full = False
    total = 0
    with path.open(encoding="utf-8", errors="replace") as handle:
        for total, raw in enumerate(handle, start=1):
            if full or total <= start or len(shown) >= limit:
                continue
            line = raw.rstrip("\r\n")
            cost = len(line.encode("utf-8")) + 1
            if size + cost > READ_MAX_BYTES:
                if (
                    not shown
                ):  # one line over the whole budget: show its start, or read never advances
                    shown.append(
                        line.encode("utf-8")[:READ_MAX_BYTES].decode("utf-8", errors="ignore")
                    )
                    clipped = True
                full = True
                continue
            shown.append(line)
            size += cost
    return shown, total, clipped


async def _read(
    tool_call_id: str,
    params: ReadParams,
    signal: AbortSignal,
    on_update: ToolUpdateCallback,
    ctx: ExtensionContext,
) -> ToolResult:
    path = _inside(ctx.cwd, params.path)
    if not path.is_file():
        raise FileNotFoundError(f"{params.path} is not a file")
    limit = min(params.limit or READ_MAX_LINES, READ_MAX_LINES)
    # Off the event loop, one line at a time: a large file neither stalls the kernel nor
    # has to fit in memory.
    shown, total, clipped = await asyncio.to_thread(_read_window, path, params.offset - 1, limit)
    if params.offset > max(total, 1):
        raise ValueError(
            f"Offset {params.offset} is beyond the end of {params.path} ({total} lines)"
        )
    start = params.offset - 1
    end = start + len(shown)
    text = "\n".join(shown) if total else "(empty file)"
    truncated = clipped or end < total
    notes: list[str] = []
    if clipped:
        notes.append(f"Line {end} is longer than {READ_MAX_BYTES} bytes; only its start is shown.")
    if end < total:
        notes.append(
            f"Showing lines {start + 1}-{end} of {total}. Use offset={end + 1} to continue."
        )
    if notes:
        text += "\n\n[" + " ".join(notes) + "]"
    return ToolResult(
        content=[TextContent(text=text)],
        details={
            "path": str(path),
            "total_lines": total,
            "first_line": start + 1,
            "last_line": end,
            "truncated": truncated,
        },
    )


read_tool: ToolDefinition[ReadParams] = define_tool(
    ToolDefinition(
        name="read",
        label="Read file",
        description=f"Read a text file under the working directory (at most {READ_MAX_LINES} lines or {READ_MAX_BYTES // 1000} KB per call).",
        parameters=ReadParams,
        execute=_read,
        prompt_snippet="read a text file under the working directory",
    )
)


class LsParams(BaseModel):
    path: str = Field(default=".", description="Directory, relative to the working directory.")


async def _ls(
    tool_call_id: str,
    params: LsParams,
    signal: AbortSignal,
    on_update: ToolUpdateCallback,
    ctx: ExtensionContext,
) -> ToolResult:
    path = _inside(ctx.cwd, params.path)
    if not path.is_dir():
        raise NotADirectoryError(f"{params.path} is not a directory")
    entries = sorted(path.iterdir(), key=lambda p: p.name.lower())
    names = [p.name + ("/" if p.is_dir() else "") for p in entries[:LS_MAX_ENTRIES]]
    text = "\n".join(names) if names else "(empty directory)"
    if len(entries) > LS_MAX_ENTRIES:
        text += f"\n\n[{len(entries) - LS_MAX_ENTRIES} more entries not shown.]"
    return ToolResult(
        content=[TextContent(text=text)],
        details={
            "path": str(path),
            "entries": len(entries),
            "truncated": len(entries) > LS_MAX_ENTRIES,
        },
    )


ls_tool: ToolDefinition[LsParams] = define_tool(
    ToolDefinition(
        name="ls",
        label="List directory",
        description=f"List a directory under the working directory (at most {LS_MAX_ENTRIES} entries).",
        parameters=LsParams,
        execute=_ls,
        prompt_snippet="list a directory under the working directory",
    )
)
