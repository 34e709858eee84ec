"""A small MCP server for the tests, written with the SDK's ``MCPServer``.

Tools: ``lookup`` (read-only), ``write_marker`` (destructive: writes a file), ``nap``
(read-only, sleeps; reports progress when it starts and writes ``cancelled`` to its marker
file when the client cancels it), ``header`` (echoes a request header), ``picture`` (returns
an image). Run it as
``python toy_server.py`` (stdio) or ``python toy_server.py --http PORT`` (streamable HTTP on
loopback; port 0 picks a free one, printed as ``LISTENING <url>`` on stdout once it accepts connections).
"""

from __future__ import annotations

import base64
import os
import socket
import sys
from pathlib import Path

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import ImageContent, ToolAnnotations

server = MCPServer("toy", version="1.0")

_PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(key: str) -> dict[str, str]:
    """Look a key up in a small table."""
    print(f"lookup {key}", file=sys.stderr)  # stderr must land in the client's log, not here
    return {"key": key, "value": key.upper(), "pid": str(os.getpid())}


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def write_marker(path: str, text: str = "written") -> str:
    """Write ``text`` to the file at ``path``."""
    Path(path).write_text(text)
    return f"wrote {path}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def nap(seconds: float, marker: str, ctx: Context) -> str:
    """Sleep; report progress once started; note a cancellation in ``marker``."""
    await anyio.Path(marker).write_text(f"started {os.getpid()}")
    await ctx.report_progress(0, 1, f"napping in {os.getpid()}")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await anyio.Path(marker).write_text("cancelled")
        raise
    return "rested"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def header(name: str, ctx: Context) -> str:
    """The value of one request header (HTTP only)."""
    return (ctx.headers or {}).get(name.lower(), "<missing>")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def picture() -> list[ImageContent]:
    """Return a tiny image."""
    return [ImageContent(type="image", data=_PIXEL, mime_type="image/png")]


def _serve_http(port: int) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = sock.getsockname()[1]

    class Announcing(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            print(f"LISTENING http://127.0.0.1:{port}/mcp", flush=True)

    app = server.streamable_http_app(host="127.0.0.1")
    anyio.run(Announcing(uvicorn.Config(app, log_level="warning")).serve, [sock])


if __name__ == "__main__":
    if "--http" in sys.argv:
        _serve_http(int(sys.argv[sys.argv.index("--http") + 1]))
    else:
        server.run("stdio")
