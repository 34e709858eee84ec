"""``python -m pi_notebook.mcp serve``: the governed database tools for any MCP client.

Usage::

    python -m pi_notebook.mcp serve --database-url URL [--audit-url URL] [--data-policy FILE]
                                    [--approval-timeout SECONDS]
                                    [--http PORT [--issuer URL --audience AUD
                                                  [--resource-url URL]]]

Over stdio by default (a desktop client starts it as a child process). ``--http PORT`` serves
streamable HTTP on 127.0.0.1 only (``--http 0`` picks a free port), in one of two ways:

* ``--issuer URL --audience AUD`` (for a team): an OAuth 2.1 resource server (MCP
  authorization). Only bearer JWTs signed by a key of the issuer's JWKS, with that ``iss``,
  that ``aud`` and an unexpired ``exp``, are accepted (:mod:`pi_notebook.mcp.oauth`). The
  Protected Resource Metadata of ``/mcp`` (RFC 9728) is served at
  ``/.well-known/oauth-protected-resource/mcp``, naming the issuer and the scopes
  ``db:read`` and ``db:write``; a request without a valid token gets 401 with
  ``WWW-Authenticate: Bearer ... resource_metadata="..."``, one without ``db:read`` 403.
  ``db:write`` is needed even to ask for a write (:mod:`pi_notebook.mcp.scopes`), and the
  token's ``sub`` is the requester in each call's ``mcp_request`` audit record. Behind a
  proxy, ``--resource-url https://HOST/mcp`` names the URL clients use (default
  ``http://127.0.0.1:PORT/mcp``); the proxy passes ``/mcp`` and
  ``/.well-known/oauth-protected-resource/mcp`` through unchanged.
* Without an issuer (for one person on one machine only): one shared bearer token,
  ``PI_NOTEBOOK_MCP_TOKEN`` when set, else a random one printed once at start. Whoever holds
  it may read and ask for writes, and the audit cannot tell its holders apart.

No token is ever passed on to the database or written to the audit or the logs. Secrets
come from the environment: ``--database-url`` may be left out to use
``PI_NOTEBOOK_DATABASE_URL``.

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
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from mcp.server.auth.settings import AuthSettings
from mcp.server.stdio import stdio_server
from sqlalchemy.engine import make_url

from pi_notebook.ai.abort import AbortSignal
from pi_notebook.ai.events import AssistantMessageEvent
from pi_notebook.ai.model import Context
from pi_notebook.database import DatabaseExtension
from pi_notebook.errors import ConfigurationError
from pi_notebook.mcp.approval import McpApprovalUI
from pi_notebook.mcp.oauth import JwksCache, JwtVerifier, discover, require_secure
from pi_notebook.mcp.scopes import READ_SCOPE, SCOPES, scope_gate
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
    """Accepts exactly one bearer token (compared in constant time): local use only.

    Its holder names nobody (no subject) and may do what the server does: read, and ask for
    writes (``db:read`` and ``db:write``).
    """

    def __init__(self, token: str) -> None:
        self._token = token

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self._token.encode()):
            return AccessToken(
                token="<bearer>", client_id="pi_notebook-bearer", scopes=list(SCOPES)
            )
        return None


class ServeOptions(argparse.Namespace):
    command: str
    database_url: str | None
    audit_url: str | None
    data_policy: str | None
    approval_timeout: float
    http: int | None
    issuer: str | None
    audience: str | None
    resource_url: str | None
    role_per_user: bool


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
    serve_p.add_argument(
        "--role-per-user",
        action="store_true",
        help="PostgreSQL: run each statement under SET LOCAL ROLE to the requester's role (the token's subject over --http with --issuer, else the server's user)",
    )
    serve_p.add_argument(
        "--http",
        type=int,
        metavar="PORT",
        help="serve streamable HTTP on 127.0.0.1:PORT instead of stdio (0: any free port)",
    )
    serve_p.add_argument(
        "--issuer",
        metavar="URL",
        help="with --http: accept only JWTs of this OAuth issuer (its JWKS found through RFC 8414 / OpenID discovery)",
    )
    serve_p.add_argument(
        "--audience", metavar="AUD", help="with --issuer: the aud the tokens must carry"
    )
    serve_p.add_argument(
        "--resource-url",
        metavar="URL",
        help="with --issuer: the URL clients reach /mcp at, behind a proxy (default http://127.0.0.1:PORT/mcp)",
    )
    return parser


def _check_auth_options(options: ServeOptions) -> None:
    if (options.issuer is None) != (options.audience is None):
        raise ConfigurationError("give --issuer and --audience together")
    if options.issuer is not None and options.http is None:
        raise ConfigurationError("--issuer and --audience apply to --http only")
    if options.issuer is not None and not (options.audience or "").strip():
        raise ConfigurationError("--audience must not be empty")
    if options.resource_url is not None:
        if options.issuer is None:
            raise ConfigurationError("--resource-url applies with --issuer only")
        require_secure(options.resource_url, "resource URL")
        if urlsplit(options.resource_url).path != "/mcp" or "?" in options.resource_url:
            raise ConfigurationError(
                f"the resource URL {options.resource_url!r} must end in /mcp, as the server "
                "serves it (the proxy passes the path through unchanged)"
            )


def _database_extension(options: ServeOptions) -> DatabaseExtension:
    url = options.database_url or os.environ.get(DATABASE_ENV)
    if not url:
        raise ConfigurationError(f"give --database-url URL or set {DATABASE_ENV}")
    role_per_user = getattr(options, "role_per_user", False) is True
    if role_per_user and make_url(url).get_backend_name() != "postgresql":
        raise ConfigurationError(
            "--role-per-user needs a PostgreSQL database: other engines would run every "
            "statement with the login's own privileges"
        )
    return DatabaseExtension(
        url,
        approval_timeout_s=options.approval_timeout,
        data_policy=options.data_policy or None,
        role_per_user=role_per_user,
    )


@asynccontextmanager
async def served_session(
    options: ServeOptions,
) -> AsyncGenerator[tuple[AgentSession, GovernedToolServer]]:
    """The governed session and its MCP server, closed (audit flushed) on exit."""
    database = _database_extension(options)

    def dialect() -> str:
        return database.backend.dialect if database.backend is not None else "sqlite"

    def memory_capped() -> bool:
        return database.backend is not None and database.backend.memory_capped

    ui = McpApprovalUI()
    # The scope gate decides first: a token without db:write is never asked about a write.
    scopes = scope_gate(
        dialect=dialect, authenticated=options.http is not None, memory_bounded=memory_capped
    )
    session = create_agent_session(
        model=_NoModel(),
        extensions=[scopes, database],
        allowed_tool_names=list(SERVED_TOOLS),
        ui=ui,
        audit=options.audit_url,
        builtin_tools=False,
    )
    server: GovernedToolServer | None = None
    try:
        await session.start()
        server = GovernedToolServer(
            session,
            dialect=dialect(),
            memory_bounded=memory_capped(),
            approval_ttl_s=max(options.approval_timeout, 60.0),
            transport="http" if options.http is not None else "stdio",
        )
        yield session, server
    finally:
        if server is not None:
            server.pending.close()  # questions still unanswered end expired, in the audit
        await session.close()


async def _serve_stdio(server: GovernedToolServer) -> None:
    lowlevel = server.server
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


@dataclass(frozen=True, kw_only=True)
class _HttpAuth:
    """How the HTTP server checks tokens."""

    verifier: TokenVerifier
    issuer: str | None = None  # None: the local shared token
    resource_url: str | None = None  # None: http://127.0.0.1:PORT/mcp
    shown_token: str | None = None  # a generated shared token, printed once


async def _http_auth(options: ServeOptions) -> _HttpAuth:
    """The issuer's JWT verifier (discovered now, so a wrong issuer stops the start), or the
    shared token."""
    if options.issuer is not None and options.audience is not None:
        metadata = await discover(options.issuer)
        verifier = JwtVerifier(
            issuer=metadata.issuer, audience=options.audience, keys=JwksCache(metadata.jwks_uri)
        )
        return _HttpAuth(
            verifier=verifier, issuer=metadata.issuer, resource_url=options.resource_url
        )
    token = os.environ.get(TOKEN_ENV)
    if token is not None and not token.strip():
        raise SystemExit(
            f"{TOKEN_ENV} is set but empty: set it to a token, or unset it to have one generated."
        )
    if token is None:
        shown = secrets.token_urlsafe(32)
        return _HttpAuth(verifier=StaticTokenVerifier(shown), shown_token=shown)
    return _HttpAuth(verifier=StaticTokenVerifier(token))


def _http_app(server: GovernedToolServer, auth: _HttpAuth, base: str) -> Any:
    if auth.issuer is None:
        return server.server.streamable_http_app(
            host="127.0.0.1",
            auth=AuthSettings(issuer_url=base, resource_server_url=None),  # pyright: ignore[reportArgumentType]
            token_verifier=auth.verifier,
        )
    resource = auth.resource_url or f"{base}/mcp"
    app = server.server.streamable_http_app(
        host="127.0.0.1",
        auth=AuthSettings(
            issuer_url=auth.issuer,  # pyright: ignore[reportArgumentType]
            resource_server_url=resource,  # pyright: ignore[reportArgumentType]
            required_scopes=[READ_SCOPE],  # no db:read: 403 insufficient_scope
            validate_token_resource=False,  # the verifier checks aud itself
        ),
        token_verifier=auth.verifier,
    )
    # The SDK lists only the required scopes in the metadata; a client must also learn that
    # db:write exists, so the metadata route is replaced by the SDK's own, with both.
    path = urlsplit(str(build_resource_metadata_url(resource))).path  # pyright: ignore[reportArgumentType]
    routes = create_protected_resource_routes(
        resource_url=resource,  # pyright: ignore[reportArgumentType]
        authorization_servers=[auth.issuer],  # pyright: ignore[reportArgumentType]
        scopes_supported=list(SCOPES),
        resource_name="pi_notebook governed database",
    )
    app.router.routes[:] = [
        *routes,
        *(r for r in app.router.routes if getattr(r, "path", None) != path),
    ]
    return app


async def _serve_http(server: GovernedToolServer, port: int, auth: _HttpAuth) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    app = _http_app(server, auth, base)

    def announce() -> None:
        print(f"pi_notebook MCP server listening on {base}/mcp", flush=True)
        if auth.issuer is not None:
            print(f"Accepting tokens of {auth.issuer}", flush=True)
            if auth.resource_url is not None:
                print(f"Clients reach it at {auth.resource_url}", flush=True)
        elif auth.shown_token is not None:
            print(
                f"Bearer token (shown once; set {TOKEN_ENV} to choose it): {auth.shown_token}",
                flush=True,
            )

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
    """Serve until the client disconnects (stdio) or the process is stopped (HTTP).

    Raises:
        ConfigurationError: the options do not fit together, or the issuer's metadata cannot
            be read (before anything is served).
    """
    _check_auth_options(options)
    auth = await _http_auth(options) if options.http is not None else None
    async with served_session(options) as (_, server):
        log.info(
            "serving %s for %s over %s",
            ", ".join(server.served_tools()),
            safe_url(options.database_url or os.environ.get(DATABASE_ENV, "")),
            server.transport,
        )
        if options.http is not None and auth is not None:
            await _serve_http(server, options.http, auth)
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
