"""An MCP ``CallToolResult`` as our ``ToolResult``: text and images for the model, the rest
in ``details``.

Text blocks become ``TextContent`` and image blocks ``ImageContent`` (the model sees them;
``details["images"]`` lists their type and size, not their data). Other binary blocks become a
short text note (``[audio audio/wav, 1.2 kB: kept in details, not shown to the model]``) and
the block itself goes to ``details`` for the notebook. ``structuredContent`` goes to ``details`` only:
the model sees it just when the server also wrote it into a text block, as the MCP
specification asks servers to do.

What does not belong here: calling the server.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from pi_notebook.agent.types import ToolResult
from pi_notebook.ai.messages import ImageContent as PiImage
from pi_notebook.ai.messages import ResultContent, content_text
from pi_notebook.ai.messages import TextContent as PiText
from pi_notebook.mcp.errors import McpToolError

__all__ = ["result_text", "to_tool_result"]

_SDK_META = "io.modelcontextprotocol/"  # protocol stamps (server info), not the tool's own
_NO_TEXT = "(The tool returned no text; its structured result is kept for the user.)"


def _bytes(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def _size(data: str) -> str:
    n = _bytes(data)
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} kB"


def _part(block: Any, details: dict[str, Any]) -> ResultContent:
    """The model's part for one content block: images as images, the rest as text."""
    if isinstance(block, ImageContent):
        details.setdefault("images", []).append(
            {"mime_type": block.mime_type, "bytes": _bytes(block.data)}
        )
        return PiImage(data=block.data, mime_type=block.mime_type)
    return PiText(text=_block(block, details))


def _block(block: Any, details: dict[str, Any]) -> str:
    """The model's text for one content block; binary blocks are kept in ``details``."""
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent):  # for result_text; to_tool_result sends the image
        return f"[image {block.mime_type}, {_size(block.data)}]"
    if isinstance(block, AudioContent):
        details.setdefault("audios", []).append({"mime_type": block.mime_type, "data": block.data})
        return f"[audio {block.mime_type}, {_size(block.data)}: kept in details, not shown to the model]"
    if isinstance(block, ResourceLink):
        details.setdefault("resource_links", []).append({"uri": str(block.uri), "name": block.name})
        return f"[resource link {block.name}: {block.uri}]"
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if isinstance(resource, TextResourceContents):
            return f"[resource {resource.uri}]\n{resource.text}"
        if isinstance(resource, BlobResourceContents):  # pyright: ignore[reportUnnecessaryIsInstance] - newer SDKs add kinds
            details.setdefault("resources", []).append(
                {"uri": str(resource.uri), "mime_type": resource.mime_type, "blob": resource.blob}
            )
            return f"[resource {resource.uri} ({resource.mime_type or 'binary'}, {_size(resource.blob)}): kept in details]"
    return f"[{getattr(block, 'type', type(block).__name__)} content: not shown to the model]"


def result_text(result: CallToolResult) -> str:
    """All the model-facing text of ``result``, joined by newlines."""
    return "\n".join(_block(block, {}) for block in result.content)


def to_tool_result(result: CallToolResult, *, server: str, tool: str) -> ToolResult:
    """``result`` as a ``ToolResult`` (``details``: server, tool, structured content, image
    sizes, other binary blocks, ``_meta``).

    Raises:
        McpToolError: the server marked the result as an error (its text is the message), so
            the call ends as an error result (S30).
    """
    details: dict[str, Any] = {"server": server, "tool": tool}
    parts: list[ResultContent] = [_part(block, details) for block in result.content]
    if result.structured_content is not None:
        details["structured_content"] = result.structured_content
    meta = {k: v for k, v in (result.meta or {}).items() if not k.startswith(_SDK_META)}
    if meta:
        details["meta"] = meta
    if result.is_error:
        text = content_text(parts) or f"MCP tool {tool} on {server!r} failed"
        raise McpToolError(text)
    if not parts and result.structured_content is not None:
        parts = [PiText(text=_NO_TEXT)]
    return ToolResult(content=parts, details=details)
