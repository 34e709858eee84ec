"""Per-person database roles on PostgreSQL (``role_per_user``): the database's own privileges
apply to whoever the call acts for.

The backend connects as one login; with ``role_per_user`` every transaction it opens (reads,
approved writes, the write preview, the read-budget ``EXPLAIN``, the Arrow reads) also runs
``SET LOCAL ROLE <the person's role>``, so it ends with the transaction, and the session reset
(``DISCARD ALL``, :mod:`.reset`) resets it again. PostgreSQL lets the login assume only the
roles granted to it.

The role is named on the caller's side, per call: :func:`pi_notebook.identity.requester`
(the MCP request's subject, else the notebook's user), mapped through ``role_for`` when given.
Before a connection first sets a role, the backend checks that the role exists and is granted
to the login: if not, the call is refused with what an administrator must run, and nothing
runs. A failure later (a grant revoked meanwhile) fails the statement with the database's own
error, and the check runs again next time. Never a fallback to the login's own privileges.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy.dialects import postgresql

from pi_notebook.errors import QueryRefused
from pi_notebook.identity import requester

__all__ = [
    "MAX_ROLE_BYTES",
    "RoleFor",
    "RoleRefused",
    "check_role",
    "forget_role",
    "quote_role",
    "role_for_call",
    "role_options",
    "set_role_sql",
]

RoleFor = Callable[[str], str | None] | Mapping[str, str]
"""How a user's name becomes a role name: a mapping, or a function (``None``: no role)."""

MAX_ROLE_BYTES = 63
"""PostgreSQL cuts longer identifiers silently, which could name another role: refused."""

_PREPARER = postgresql.dialect().identifier_preparer
_CHECKED_KEY = "pi_notebook_pg_roles_checked"
_CHECK_SQL = (
    "SELECT session_user, r.oid IS NOT NULL, "
    "COALESCE(pg_catalog.pg_has_role(session_user, r.oid, 'MEMBER'), false) "
    "FROM (SELECT 1) AS one LEFT JOIN pg_catalog.pg_roles AS r ON r.rolname = {param}"
)


class RoleRefused(QueryRefused):
    """The person's database role cannot be used (unnamed, missing, not granted to the
    login): nothing was run."""


def quote_role(role: str) -> str:
    """``role`` as a PostgreSQL identifier (quoted exactly as written)."""
    return _PREPARER.quote_identifier(role)


def _shown(role: str) -> str:
    """``role`` as an administrator would type it (quoted only where needed)."""
    return _PREPARER.quote(role)


def set_role_sql(role: str) -> str:
    """The statement that makes ``role`` the current user until the transaction ends."""
    return f"SET LOCAL ROLE {quote_role(role)}"


def role_options(
    backend: str, role_per_user: bool, role_for: RoleFor | None
) -> tuple[bool, RoleFor | None]:
    """A backend's ``role_per_user`` and ``role_for`` as given, checked against its engine.

    Raises:
        ValueError: ``role_per_user`` off PostgreSQL, or ``role_for`` without it.
    """
    if role_per_user and backend != "postgresql":
        raise ValueError(
            f"role_per_user needs PostgreSQL; {backend} statements would run with the "
            "login's own privileges."
        )
    if role_for is not None and not role_per_user:
        raise ValueError("role_for is used only with role_per_user=True.")
    return role_per_user is True, role_for


def role_for_call(role_for: RoleFor | None) -> str:
    """The role the current call runs under: :func:`~pi_notebook.identity.requester`'s name,
    mapped through ``role_for`` when given.

    Raises:
        RoleRefused: no role for this user, or a name PostgreSQL cannot hold as written.
    """
    user = requester()
    if role_for is None:
        role: str | None = user
    elif isinstance(role_for, Mapping):
        role = role_for.get(user)
    else:
        role = role_for(user)
    if not role:
        raise RoleRefused(
            f"Refused: no database role is configured for user {user}; nothing was run. "
            "Add them to the extension's role_for."
        )
    if "\x00" in role or len(role.encode()) > MAX_ROLE_BYTES:
        raise RoleRefused(
            f"Refused: {role[:80]!r} cannot be a PostgreSQL role name (at most "
            f"{MAX_ROLE_BYTES} bytes, no NUL); nothing was run. Map the user to a role with "
            "role_for."
        )
    return role


def check_role(cursor: Any, info: dict[Any, Any] | None, role: str, *, param: str = "%s") -> None:
    """Check that ``role`` exists and is granted to the login, on a connection's ``cursor``
    (``param``: the driver's placeholder). ``info`` (the pooled connection's info) remembers
    the roles already checked on it, so the check runs once per connection and role.

    Raises:
        RoleRefused: the role does not exist, or the login may not assume it.
    """
    checked: set[str] | None = info.setdefault(_CHECKED_KEY, set()) if info is not None else None
    if checked is not None and role in checked:
        return
    cursor.execute(_CHECK_SQL.format(param=param), (role,))
    rows = cursor.fetchall()
    login, exists, granted = (str(rows[0][0]), bool(rows[0][1]), bool(rows[0][2]))
    grant = f"GRANT {_shown(role)} TO {_shown(login)}"
    if not exists:
        raise RoleRefused(
            f"Refused: role {_shown(role)} does not exist in the database; nothing was run. "
            f"An administrator creates it: CREATE ROLE {_shown(role)} NOLOGIN; {grant}"
        )
    if not granted:
        raise RoleRefused(
            f"Refused: role {_shown(role)} is not granted to the login {_shown(login)}; "
            f"nothing was run. An administrator grants it: {grant}"
        )
    if checked is not None:
        checked.add(role)


def forget_role(info: dict[Any, Any], role: str | None) -> None:
    """A run under ``role`` failed: check the role again before its next use here."""
    checked = info.get(_CHECKED_KEY)
    if role is not None and checked is not None:
        checked.discard(role)
