"""Who is calling the MCP server, and what their token's scopes let them do.

The MCP server serves many clients from one session. For each ``tools/call`` it makes the
caller's :class:`Principal` (from the SDK's verified access token) current with
:func:`acting_as`; the served session's first ``tool_call`` handler, :func:`scope_gate`,
then decides from the principal's scopes, before the database gate can preview, use a grant
or ask anyone:

* ``describe_database`` and a statement the classifier calls a plain read need ``db:read``;
* any other statement (a write, a side effect, or one the classifier refuses) needs
  ``db:write``, even to be asked about: without it the call is blocked with a tool error and
  nobody is asked (fail closed);
* any other tool is blocked.

Over stdio (a local child process with no token) there is no principal and no scope applies.
On an authenticated transport a call with no principal is blocked.

What does not belong here: verifying tokens (:mod:`pi_notebook.mcp.oauth`) and the approval
itself (:mod:`pi_notebook.mcp.approval`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from mcp.server.auth.provider import AccessToken

from pi_notebook.identity import acting_for
from pi_notebook.sql import classify

__all__ = [
    "READ_SCOPE",
    "SCOPES",
    "WRITE_SCOPE",
    "Principal",
    "acting_as",
    "current_principal",
    "principal_of",
    "scope_gate",
]

READ_SCOPE = "db:read"
"""Reads through ``query_database`` and ``describe_database``."""

WRITE_SCOPE = "db:write"
"""Asking for (and, once approved, running) anything that is not a plain read."""

SCOPES = (READ_SCOPE, WRITE_SCOPE)


@dataclass(frozen=True, kw_only=True)
class Principal:
    """The caller of one MCP request, as its verified token names it (never the token).

    Attributes:
        subject: the token's ``sub`` (the requester in the audit); ``None`` for the local
            shared token, which names nobody.
        client_id: the OAuth client (``client_id`` or ``azp`` claim).
        issuer: the token's ``iss``; ``None`` for the local shared token.
        scopes: what the token grants.
    """

    subject: str | None
    client_id: str
    issuer: str | None
    scopes: frozenset[str]

    def allows(self, scope: str) -> bool:
        return scope in self.scopes

    def describe(self) -> dict[str, Any]:
        """The audit's view of the caller."""
        return {
            "requester": self.subject,
            "client_id": self.client_id,
            "issuer": self.issuer,
            "scopes": sorted(self.scopes),
        }


def principal_of(token: AccessToken | None) -> Principal | None:
    """The principal of a verified access token (``None`` for none)."""
    if token is None:
        return None
    issuer = (token.claims or {}).get("iss")
    return Principal(
        subject=token.subject,
        client_id=token.client_id,
        issuer=str(issuer) if issuer is not None else None,
        scopes=frozenset(token.scopes),
    )


_current: ContextVar[Principal | None] = ContextVar("pi_notebook_mcp_principal", default=None)


@contextmanager
def acting_as(principal: Principal | None) -> Generator[Principal | None]:
    """Make ``principal`` the caller for this task (and the tasks it starts).

    A principal with a subject is also whom the calls act for
    (:func:`pi_notebook.identity.acting_for`): the ``requester`` of their approval records,
    and the approver of an approval the client answers without naming anyone else.
    """
    token = _current.set(principal)
    try:
        if principal is not None and principal.subject is not None:
            with acting_for(principal.subject):
                yield principal
        else:
            yield principal
    finally:
        _current.reset(token)


def current_principal() -> Principal | None:
    """The caller of the request being served, if any."""
    return _current.get()


def _block(reason: str) -> dict[str, Any]:
    return {"block": True, "reason": reason}


def _needs(tool_name: str, args: Any, dialect: str, memory_bounded: bool) -> tuple[str | None, str]:
    """The scope a call needs (``None``: the tool is not served) and what it is."""
    if tool_name == "describe_database":
        return READ_SCOPE, "describing the database"
    if tool_name != "query_database":
        return None, f"the tool {tool_name!r}"
    sql = getattr(args, "sql", None)
    verdict = classify(sql if isinstance(sql, str) else "", dialect, memory_bounded=memory_bounded)
    if verdict.kind == "read":
        return READ_SCOPE, "a read"
    why = "; ".join(verdict.reasons)
    return WRITE_SCOPE, "a statement that is not a plain read" + (f" ({why})" if why else "")


def scope_gate(
    *,
    dialect: Callable[[], str],
    authenticated: bool,
    memory_bounded: Callable[[], bool] = lambda: False,
) -> Callable[[Any], None]:
    """The extension factory whose ``tool_call`` handler enforces the caller's scopes.

    Load it before the database extension so it decides first. ``authenticated`` says the
    transport carries tokens (HTTP): then a call without a principal is blocked.
    ``memory_bounded()`` says the engine runs under an OS memory cap (the backend's
    ``memory_capped``), so a read is the read the database gate sees.
    """

    def factory(pi: Any) -> None:
        async def gate(event: Any, _ctx: Any) -> dict[str, Any] | None:
            principal = current_principal()
            if principal is None:
                if not authenticated:
                    return None  # stdio: a local child process, no tokens, no scopes
                return _block("Refused: the request carried no verified token. Nothing was run.")
            scope, what = _needs(event.tool_name, event.input, dialect(), memory_bounded())
            if scope is None:
                return _block(f"Refused: {what} is not served. Nothing was run.")
            if principal.allows(scope):
                return None
            held = " ".join(sorted(principal.scopes)) or "none"
            return _block(
                f"Refused: {what} needs the scope {scope}, and this token's scopes are: {held}. "
                "Nobody was asked and nothing was run."
            )

        pi.on("tool_call", gate)

    return factory
