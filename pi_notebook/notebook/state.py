"""``NotebookState``: the session, its database and audit, and the runs of one kernel.

Built from :class:`~.config.PiNotebook`. A configuration change (``%config``,
``%pi_model``, ``%pi_connect``, ``%pi_extension``) builds a new session for the next run;
the audit log is kept across sessions so ``%pi_audit`` shows the whole notebook.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import ArgumentError

from ..database import DatabaseExtension, database_extension
from ..extensions.loader import labelled_extension
from ..secrets import safe_url, scrub
from ..session import AgentSession, create_agent_session
from .config import PiNotebook
from .run import Run
from .ui import NotebookUI

__all__ = ["NotebookState", "check_database_url", "safe_url"]


class NotebookState:
    """What ``%load_ext pi_notebook`` set up in this kernel; see :func:`current`.

    Attributes:
        config: the ``PiNotebook`` settings.
        session: the current :class:`AgentSession`.
        database: the database extension object (``.results``, ``.approvals``).
        database_url: the database the extension queries.
        runs: every run of this kernel, oldest first.
        ui: the notebook's ``UIContext`` adapter.
    """

    def __init__(self, config: PiNotebook, namespace: dict[str, Any] | None = None) -> None:
        self.config = config
        self.namespace = namespace
        self.ui = NotebookUI(lambda: self.active_run, default_timeout=config.approval_timeout,
                             explain=self._explain_approval)  # fmt: skip
        self.runs: list[Run] = []
        self.active_run: Run | None = None
        self.database: DatabaseExtension | None = None
        self.database_url = ""
        self.audit: Any = None
        self._audit_url: str | None = None
        self.session: AgentSession | None = None
        self.stale = False
        self._background: set[asyncio.Task[Any]] = set()
        config.observe(self._on_config_change)

    def _on_config_change(self, _change: Any) -> None:
        self.stale = True  # applied by the next %%pi or magic, which can report errors
        self.ui.default_timeout = self.config.approval_timeout

    @property
    def last_run(self) -> Run | None:
        """The most recent run, if any."""
        return self.runs[-1] if self.runs else None

    # -- building ---------------------------------------------------------------
    def build(self) -> AgentSession:
        """Build a session from the configuration and make it current.

        Raises:
            pi_notebook.ai.resolve.ModelSpecError: the model string does not resolve.
            RuntimeError: a run is going.
        """
        from ..ai.resolve import resolve_model
        from ..audit import AuditLog
        from ..sample_db import sample_database_url

        if self.active_run is not None:
            raise RuntimeError("a run is going")
        cfg = self.config
        model = resolve_model(cfg.model)
        url = (
            cfg.database_url or os.environ.get("PI_NOTEBOOK_DATABASE_URL") or sample_database_url()
        )
        database = database_extension(url=url, approval_timeout_s=cfg.approval_timeout)
        audit_url = cfg.audit_url or None
        if self.audit is None or audit_url != self._audit_url:
            if self.audit is not None:
                self.audit.close()
            self.audit, self._audit_url = AuditLog(audit_url), audit_url
        session = create_agent_session(
            model=model,
            extensions=[
                self._events_extension,
                labelled_extension(database, "pi_notebook.database"),
                *cfg.extensions,
            ],
            allowed_tool_names=cfg.allowed_tools,
            excluded_tool_names=cfg.excluded_tools or None,
            ui=self.ui,
            cwd=os.getcwd(),
            audit=self.audit,
            namespace=self.namespace,
        )
        old, self.session = self.session, session
        self.database, self.database_url, self.stale = database, url, False
        if old is not None:
            self._close_later(old)
        return session

    def _explain_approval(self, sql: str) -> str | None:
        explain = getattr(self.database, "explain_approval", None)
        return str(explain(sql)) if callable(explain) else None

    def current_session(self) -> AgentSession:
        """The session, rebuilt first if the configuration changed."""
        if self.session is None or self.stale:
            return self.build()
        return self.session

    def _events_extension(self, pi: Any) -> None:
        # tool_call / tool_result tell the store whether a call passed validation and whether
        # it executed, which is how a card tells "blocked" from "error".
        def forward(event: Any, _ctx: Any) -> None:
            if self.active_run is not None:
                self.active_run.dispatch(event)

        pi.on("tool_call", forward)
        pi.on("tool_result", forward)

    def _close_later(self, session: AgentSession, then: Callable[[], None] | None = None) -> None:
        """Close ``session`` (on the running loop if there is one), then call ``then``."""

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
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- runs -------------------------------------------------------------------
    def start_run(self, prompt: str) -> Run:
        """Start a run of ``prompt`` on the running loop; returns at once."""
        session = self.current_session()
        registry = session.tool_registry

        def label_of(name: str) -> str:
            tool = registry.get(name)
            return tool.definition.label if tool is not None else name

        run = Run(session, prompt, label_of=label_of, on_finish=self._finished)
        self.runs.append(run)
        self.active_run = run
        run.start()
        return run

    def _finished(self, run: Run) -> None:
        if self.active_run is run:
            self.active_run = None

    def status_line(self) -> str:
        """One line: model, database (no password), how to ask."""
        session = self.current_session()
        model = session.model_name
        model = "offline" if model == "offline:offline" else model
        if model.startswith("offline"):
            model += " (rule-based demo, not an LLM)"
        sample = (
            ""
            if self.config.database_url or os.environ.get("PI_NOTEBOOK_DATABASE_URL")
            else " (bundled sample)"
        )
        return f"pi_notebook: model {model} · database {safe_url(self.database_url)}{sample} · ask in a %%pi cell"

    def close(self) -> None:
        """Stop any run, close the session and the audit log."""
        if self.active_run is not None:
            self.active_run.abort()
        audit, self.audit = self.audit, None
        # The audit log is closed only after the session: the aborted run still records.
        then = audit.close if audit is not None else None
        if self.session is not None:
            self._close_later(self.session, then)
            self.session = None
        elif then is not None:
            then()


def check_database_url(url: str) -> str:
    """Validate a SQLAlchemy URL for ``%pi_connect``; returns it stripped.

    Raises:
        ValueError: with a one-line reason and what to do.
    """
    text = url.strip().strip("'\"")
    try:
        parsed = sa.make_url(text)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise ValueError(
            f"{scrub(text)!r} is not a SQLAlchemy URL; write e.g. sqlite:///path/to/file.db "
            "or postgresql+psycopg://user@host/db"
        ) from None
    try:
        parsed.get_dialect()
    except Exception as exc:  # NoSuchModuleError, or a driver that is not installed
        raise ValueError(
            f"no driver for {parsed.drivername!r} ({type(exc).__name__}); "
            "install it or use another URL"
        ) from None
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        # Connecting would silently create an empty database file.
        if not Path(parsed.database or "").expanduser().is_file():
            raise ValueError(
                f"no SQLite file at {parsed.database}; give the path of an existing database"
            )
    return text
