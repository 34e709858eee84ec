"""Who is at the keyboard, and whom a call acts for: the answers every audit record, approval
and review uses.

On a JupyterHub the hub names the user of each single-user server in ``JUPYTERHUB_USER``;
elsewhere ``PI_NOTEBOOK_USER`` names the person (a shared service account, a CI job), and the
operating system's login name is the last resort. A value that is empty, not printable or
longer than :data:`MAX_USER_LENGTH` characters is skipped, as if unset: a name that cannot be
stored as written would make the record say something other than who acted.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = [
    "MAX_USER_LENGTH",
    "UNKNOWN_USER",
    "USER_ENV_VARS",
    "acting_for",
    "current_user",
    "requester",
]

USER_ENV_VARS = ("JUPYTERHUB_USER", "PI_NOTEBOOK_USER")
"""Environment variables read in order; the first usable one names the user."""

MAX_USER_LENGTH = 255
"""The audit's ``user`` column holds at most this many characters."""

UNKNOWN_USER = "unknown"
"""The name used when neither the environment nor the OS names anyone."""


def _usable(name: str | None) -> str | None:
    if name is None:
        return None
    name = name.strip()
    if not name or len(name) > MAX_USER_LENGTH or not name.isprintable():
        return None
    return name


def current_user() -> str:
    """The person this process acts for.

    ``JUPYTERHUB_USER``, else ``PI_NOTEBOOK_USER``, else the OS login name, else
    ``"unknown"`` (a container with no login entry). Read afresh at every call, so a test
    or a process that switches users by setting the environment is seen at once.
    """
    for var in USER_ENV_VARS:
        name = _usable(os.environ.get(var))
        if name is not None:
            return name
    try:
        login = _usable(getpass.getuser())
    except Exception:  # no login name in some containers (getpass raises OSError/KeyError)
        login = None
    return login or UNKNOWN_USER


_acting_for: ContextVar[str | None] = ContextVar("pi_notebook_acting_for", default=None)


@contextmanager
def acting_for(name: str) -> Iterator[None]:
    """Calls made inside this block act for ``name``: :func:`requester` answers it.

    For a process that serves several people, such as the MCP server, where each request's
    verified token names its own subject. The block is a context (asyncio tasks started
    inside it inherit it), so concurrent requests never see each other's name.

    Raises:
        ValueError: ``name`` is empty, not printable or too long.
    """
    usable = _usable(name)
    if usable is None:
        raise ValueError("acting_for() needs a printable name of 1 to 255 characters")
    token = _acting_for.set(usable)
    try:
        yield
    finally:
        _acting_for.reset(token)


def requester() -> str:
    """Whom the current call acts for: the name of the enclosing :func:`acting_for`, else
    :func:`current_user`."""
    return _acting_for.get() or current_user()
