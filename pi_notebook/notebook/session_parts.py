"""What a notebook's session is built from, and how a replaced one is put away.

:class:`~.state.NotebookState` builds a session from the ``PiNotebook`` settings: the
database URL (the setting, else ``PI_NOTEBOOK_DATABASE_URL``, else the bundled sample), the
MCP client extension of ``PiNotebook.mcp_servers``, the notebook-context extension, and the
audit log (the current one while ``audit_url`` is unchanged). A database extension that did
not load is the build's failure; a replaced session is closed in the background.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError

from ..extensions.loader import labelled_extension
from ..secrets import safe_url, scrub
from ..session import AgentSession
from .config import PiNotebook

__all__ = [
    "CONTEXT_SOURCE",
    "DATABASE_SOURCE",
    "close_later",
    "context_extensions",
    "database_problem",
    "database_url_of",
    "mcp_extension",
    "open_audit",
]

DATABASE_SOURCE = "pi_notebook.database"
"""The label the database extension is loaded under (its diagnostics carry it)."""
CONTEXT_SOURCE = "pi_notebook.notebook.context"
"""The label of the notebook-context extension."""


def database_url_of(config: PiNotebook) -> str:
    """The database the session queries: ``database_url``, else
    ``PI_NOTEBOOK_DATABASE_URL``, else the bundled sample database."""
    from ..sample_db import sample_database_url

    return (
        config.database_url or os.environ.get("PI_NOTEBOOK_DATABASE_URL") or sample_database_url()
    )


def mcp_extension(config: PiNotebook) -> Any:
    """The MCP client extension of ``PiNotebook.mcp_servers`` (docs/mcp.md), or ``None``.

    Raises:
        UsageError: servers are configured but the MCP SDK is not installed, or a server's
            settings are unusable.
    """
    from ..errors import ConfigurationError

    try:
        from ..mcp.magic import notebook_extension
    except ImportError:  # the mcp extra is not installed
        if config.mcp_servers:
            raise UsageError(
                'MCP servers need the MCP SDK: pip install "pi-notebook[mcp]"'
            ) from None
        return None
    try:
        return notebook_extension(config)
    except ConfigurationError as exc:
        raise UsageError(f"PiNotebook.mcp_servers: {exc}; fix it with %pi_mcp") from None


def context_extensions(namespace: dict[str, Any] | None) -> list[Any]:
    """The notebook-context extension ({name} in prompts, DataFrames mentioned by name), when
    there is a namespace to read."""
    if namespace is None:
        return []
    from .context import notebook_context

    return [labelled_extension(notebook_context(namespace), CONTEXT_SOURCE)]


def open_audit(current: Any, current_url: str | None, audit_url: str | None) -> tuple[Any, bool]:
    """The audit log for ``audit_url`` and whether it is new: ``current`` if the URL is
    unchanged, else a new one.

    Raises:
        UsageError: the log cannot be opened (the previous one stays in force).
    """
    from ..audit import AuditLog

    if current is not None and audit_url == current_url:
        return current, False
    try:
        return AuditLog(audit_url), True
    except Exception as exc:
        kept = "the previous audit log stays in force" if current is not None else ""
        raise UsageError(
            f"The audit log at {safe_url(audit_url) if audit_url else 'the default file'} "
            f"cannot be opened ({type(exc).__name__}){'; ' + kept if kept else ''}. "
            "Fix it with %config PiNotebook.audit_url = '<SQLAlchemy URL>' (or '' for the "
            "default file)."
        ) from None


def database_problem(session: AgentSession, url: str) -> UsageError | None:
    """The error to raise when the database extension did not load into ``session`` (its
    first diagnostic, with ``url``'s secrets scrubbed), else ``None``."""
    problems = [
        d for d in session.diagnostics if d.extension_path == DATABASE_SOURCE and d.level == "error"
    ]
    if not problems:
        return None
    return UsageError(
        f"The database extension did not load: {scrub(problems[0].message, url)}; "
        "the previous connection stays (fix the URL and run %pi_connect again)."
    )


def close_later(
    background: set[asyncio.Task[Any]],
    session: AgentSession,
    then: Callable[[], None] | None = None,
) -> None:
    """Close ``session`` (on the running loop if there is one, the task kept in
    ``background`` until it ends; else at once), then call ``then``."""

    async def close() -> None:
        try:
            await session.close()
        finally:
            if then is not None:
                then()

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(close())
        return
    task = loop.create_task(close())
    background.add(task)
    task.add_done_callback(background.discard)
