"""``python -m pi_notebook.mcp serve``: the governed database tools for any MCP client.

Usage::

    python -m pi_notebook.mcp serve --database-url URL [--audit-url URL] [--data-policy FILE]
                                    [--approval-timeout SECONDS] [--http PORT]

Over stdio by default (a desktop client starts it as a child process). ``--http PORT`` serves
streamable HTTP on 127.0.0.1 only, behind a bearer token: ``PI_NOTEBOOK_MCP_TOKEN`` when set,
else a random one printed once at start. ``--http 0`` picks a free port. Secrets come from the
environment: ``--database-url`` may be left out to use ``PI_NOTEBOOK_DATABASE_URL``.

Nothing but the protocol is written to stdout in stdio mode; logs go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import logging
import os
import secrets
import socket
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.stdio import stdio_server

from pi_notebook.ai.abort import AbortSignal
from pi_notebook.ai.events import AssistantMessageEvent
from pi_notebook.ai.model import Context
from pi_notebook.database import DatabaseExtension
from pi_notebook.errors import ConfigurationError
from pi_notebook.mcp.approval import McpApprovalUI
from pi_notebook.mcp.server import SERVED_TOOLS, GovernedToolServer
from pi_notebook.secrets import safe_url
from pi_notebook.session import AgentSession, create_agent_session

__all__ = ["TOKEN_ENV", "ServeOptions", "StaticTokenVerifier", "main", "serve", "served_session"]

log = logging.getLogger("pi_notebook.mcp")

TOKEN_ENV = "PI_NOTEBOOK_MCP_TOKEN"
DATABASE_ENV = "PI_NOTEBOOK_DATABASE_URL"


class _NoModel:
    """The server's session runs tools for its client and never asks a model."""

    id = "none"
    provider = "mcp-server"

    async def stream(
        self, context: Context, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        raise RuntimeError("the MCP server's session has no model; it only runs tools")
        yield  # pragma: no cover - makes this an async generator


class StaticTokenVerifier:
    """Accepts exactly one bearer token (compared in constant time)."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self._token.encode()):
            return AccessToken(token="<bearer>", client_id="pi_notebook-bearer", scopes=[])
        return None


class ServeOptions(argparse.Namespace):
    command: str
    database_url: str | None
    audit_url: str | None
    data_policy: str | None
    approval_timeout: float
    http: int | None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pi_notebook.mcp",
        description="Serve pi_notebook's governed database tools over MCP.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve_p = sub.add_parser("serve", help="serve query_database and describe_database over MCP")
    serve_p.add_argument("--database-url", help=f"SQLAlchemy URL (default: ${DATABASE_ENV})")
    serve_p.add_argument(
        "--audit-url",
        help="SQLAlchemy URL of the audit store (default: the data directory, or $PI_NOTEBOOK_AUDIT_URL)",
    )
    serve_p.add_argument(
        "--data-policy", help="YAML/JSON file of column protections (mask, hash, drop)"
    )
    serve_p.add_argument(
        "--approval-timeout",
        type=float,
        default=120.0,
        help="seconds a person has to answer (default 120)",
    )
    serve_p.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT instead of stdio (0: any free port)")  # fmt: skip
    return parser


def _database_extension(options: ServeOptions) -> DatabaseExtension:
    url = options.database_url or os.environ.get(DATABASE_ENV)
    if not url:
        raise ConfigurationError(f"give --database-url URL or set {DATABASE_ENV}")
    return DatabaseExtension(
        url, approval_timeout_s=options.approval_timeout, data_policy=options.data_policy or None
    )


@asynccontextmanager
async def served_session(
    options: ServeOptions,
) -> AsyncGenerator[tuple[AgentSession, GovernedToolServer]]:
    """The governed session and its MCP server, closed (audit flushed) on exit."""
    database = _database_extension(options)

    def dialect() -> str:
        return database.backend.dialect if database.backend is not None else "sqlite"

    ui = McpApprovalUI()
    session = create_agent_session(
        model=_NoModel(),
        extensions=[database],
        allowed_tool_names=list(SERVED_TOOLS),
        ui=ui,
        audit=options.audit_url,
        builtin_tools=False,
    )
    try:
        await session.start()
        server = GovernedToolServer(
            session,
            dialect=dialect(),
            approval_ttl_s=max(options.approval_timeout, 60.0),
            transport="http" if options.http is not None else "stdio",
        )
        yield session, server
    finally:
        await session.close()


async def _serve_stdio(server: GovernedToolServer) -> None:
    lowlevel = server.server
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


async def _serve_http(server: GovernedToolServer, port: int) -> None:
    import uvicorn

    token = os.environ.get(TOKEN_ENV)
    if token is not None and not token.strip():
        raise SystemExit(
            f"{TOKEN_ENV} is set but empty: set it to a token, or unset it to have one generated."
        )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = sock.getsockname()[1]
    generated = token is None
    if token is None:
        token = secrets.token_urlsafe(32)
    base = f"http://127.0.0.1:{port}"
    app = server.server.streamable_http_app(
        host="127.0.0.1",
        auth=AuthSettings(issuer_url=base, resource_server_url=None),  # pyright: ignore[reportArgumentType]
        token_verifier=StaticTokenVerifier(token),
    )

    def announce() -> None:
        print(f"pi_notebook MCP server listening on {base}/mcp", flush=True)
        if generated:
            print(f"Bearer token (shown once; set {TOKEN_ENV} to choose it): {token}", flush=True)

    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await _AnnouncingServer(config, announce).serve(sockets=[sock])


class _AnnouncingServer:
    """A uvicorn server that calls ``on_started`` once it accepts connections."""

    def __new__(cls, config: Any, on_started: Any) -> Any:
        import uvicorn

        class Announcing(uvicorn.Server):
            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                await super().startup(sockets=sockets)
                if self.started:
                    on_started()

        return Announcing(config)


async def serve(options: ServeOptions) -> None:
    """Serve until the client disconnects (stdio) or the process is stopped (HTTP)."""
    async with served_session(options) as (_, server):
        log.info(
            "serving %s for %s over %s",
            ", ".join(server.served_tools()),
            safe_url(options.database_url or os.environ.get(DATABASE_ENV, "")),
            server.transport,
        )
        if options.http is not None:
            await _serve_http(server, options.http)
        else:
            await _serve_stdio(server)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit status."""
    options = _parser().parse_args(argv, namespace=ServeOptions())
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(name)s: %(message)s")
    try:
        asyncio.run(serve(options))
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0
