"""Who is at the keyboard: the one answer every audit record, approval and review uses.

On a JupyterHub the hub names the user of each single-user server in ``JUPYTERHUB_USER``;
elsewhere ``PI_NOTEBOOK_USER`` names the person (a shared service account, a CI job), and the
operating system's login name is the last resort. A value that is empty, not printable or
longer than :data:`MAX_USER_LENGTH` characters is skipped, as if unset: a name that cannot be
stored as written would make the record say something other than who acted.
"""

from __future__ import annotations

import getpass
import os

__all__ = ["MAX_USER_LENGTH", "UNKNOWN_USER", "USER_ENV_VARS", "current_user"]

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
