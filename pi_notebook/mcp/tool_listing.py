"""A server's tool list read leniently: each malformed entry is skipped and named.

The SDK validates a ``tools/list`` result as a whole, so one entry without a name (or with a
schema that is not an object) would fail the whole listing. When it does
(:func:`invalid_listing`), :func:`lenient_page` takes the page's raw result and validates it
entry by entry: the good tools are kept, and each bad entry is reported by its number, its
name and the first reason (scrubbed), in a warning and in the list the caller gives.
"""

from __future__ import annotations

import logging
from typing import Any, cast

from mcp import Client
from mcp.types import ListToolsRequest, ListToolsResult, PaginatedRequestParams, Tool
from pydantic import TypeAdapter, ValidationError

from pi_notebook.mcp.errors import McpToolError
from pi_notebook.secrets import scrub

__all__ = ["invalid_listing", "lenient_page"]

log = logging.getLogger(__name__)

_RAW_RESULT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


def invalid_listing(exc: BaseException) -> bool:
    """Whether ``exc`` (or every exception of its group) is the SDK's validation error of a
    result."""
    if isinstance(exc, BaseExceptionGroup):
        inner: list[BaseException] = list(exc.exceptions)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        return bool(inner) and all(invalid_listing(e) for e in inner)
    return isinstance(exc, ValidationError)


async def lenient_page(
    client: Client, cursor: str | None, *, first: bool, server: str, skipped: list[str]
) -> ListToolsResult:
    """One page of ``server``'s tool list with each malformed entry skipped: why is appended
    to ``skipped`` and logged. ``first`` says whether this is the list's first page.

    Raises:
        McpToolError: the result holds no tools array at all.
        RuntimeError: this MCP SDK cannot return a result unvalidated.
    """
    params = PaginatedRequestParams(cursor=cursor) if cursor is not None else None
    raw = await _send_unvalidated(client, ListToolsRequest(params=params))
    entries = raw.get("tools")
    if not isinstance(entries, list):
        raise McpToolError(
            f"MCP server {server!r} listed no tools array ({type(entries).__name__})"
        )
    kept: list[Tool] = []
    for number, entry in enumerate(cast(list[Any], entries), start=1):
        try:
            kept.append(Tool.model_validate(entry))
        except ValidationError as exc:
            why = _skip_text(number, entry, exc)
            skipped.append(why)
            log.warning("MCP server %r: %s", server, why)
    next_cursor = raw.get("nextCursor")
    page = ListToolsResult(
        tools=kept, next_cursor=next_cursor if isinstance(next_cursor, str) else None
    )
    absorb = getattr(client.session, "_absorb_tool_listing", None)
    if absorb is not None:  # the SDK's own per-tool state, as its list_tools keeps it
        absorb(page, complete=first and page.next_cursor is None)
    return page


async def _send_unvalidated(client: Client, request: ListToolsRequest) -> dict[str, Any]:
    """``request``'s raw result: what the SDK's ``send_request`` does before it validates the
    whole result (which one malformed entry fails). It uses the session's internals; an SDK
    without them raises ``RuntimeError`` (the listing then fails as a whole, as before)."""
    session: Any = client.session
    stamp, dispatcher = getattr(session, "_stamp", None), getattr(session, "_dispatcher", None)
    send = getattr(dispatcher, "send_raw_request", None)
    if stamp is None or send is None:
        raise RuntimeError("this MCP SDK cannot return a tool list unvalidated")
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    options: dict[str, Any] = {}
    stamp(data, options)
    raw = await send(data["method"], data.get("params"), options)
    return _RAW_RESULT.validate_python(raw)


def _skip_text(number: int, entry: Any, exc: ValidationError) -> str:
    name: Any = cast(dict[str, Any], entry).get("name") if isinstance(entry, dict) else None
    shown = repr(name[:64]) if isinstance(name, str) else "without a name"
    first = exc.errors()[0] if exc.errors() else None
    where = ".".join(str(part) for part in first["loc"]) if first else ""
    reason = f"{where}: {first['msg']}" if first else "not a tool"
    return scrub(f"tool list entry {number} ({shown}) skipped: {reason}")
