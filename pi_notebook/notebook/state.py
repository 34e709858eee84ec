"""``NotebookState``: the session, its database and audit, and the runs of one kernel.

Built from :class:`~.config.PiNotebook`. Cells share one conversation (the session's
messages) until ``%pi_reset`` clears it, which keeps the session itself: its tools, grants and
settings. A configuration change (``%config``, ``%pi_model``, ``%pi_connect``,
``%pi_extension``) builds a new session for the next run: the conversation starts afresh and
the old session's grants end (its database extension revokes them when it closes); the tool
choices, earlier runs and their results, and the audit log (unless ``audit_url`` changed) are
kept, so ``%pi_audit`` shows the whole notebook. :data:`REBUILD_NOTE` says so to the person.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError

from ..audit.records import ConversationReset
from ..database import DatabaseExtension, database_extension
from ..extensions.loader import labelled_extension
from ..secrets import safe_url
from ..session import AgentSession, create_agent_session
from .cell_options import bind_output, parse_cell_options
from .config import PiNotebook
from .interrupt import stop_on_interrupt
from .result_frames import drop_all_but_latest
from .run import Run
from .session_parts import (
    DATABASE_SOURCE,
    close_later,
    context_extensions,
    database_problem,
    database_url_of,
    mcp_extension,
    open_audit,
)
from .tool_choices import ToolChoices
from .ui import NotebookUI
from .usage import usage_frame

__all__ = ["CONVERSATION_NOTE", "REBUILD_NOTE", "RESET_NOTE", "NotebookState", "safe_url"]

CONVERSATION_NOTE = "cells share one conversation; %pi_reset starts a new one"
REBUILD_NOTE = (
    "New session: a fresh conversation, and any grants ended; kept: your tool choices, earlier "
    "results{audit}."
)
RESET_NOTE = (
    "New conversation: the model no longer sees earlier cells ({cleared} cleared); kept: the "
    "session's tools, grants and settings, earlier results and the audit log."
)


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
        self.ui = NotebookUI(lambda: self.active_run, default_timeout=config.approval_timeout)
        self.runs: list[Run] = []
        self.active_run: Run | None = None
        self.database: DatabaseExtension | None = None
        self.database_url = ""
        self.audit: Any = None
        self._audit_url: str | None = None
        self.session: AgentSession | None = None
        self.stale = False
        self._background: set[asyncio.Task[Any]] = set()
        self.tool_choices = ToolChoices()  # %pi_tools: it survives every rebuild
        self.past_usage: list[tuple[str, Any]] = []  # (model, UsageTotals) of replaced sessions
        self.model_override: Any = None  # a model object from set_model(), over config.model
        self._rebuild_note: str | None = None  # set when a build replaced a session
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

        All or nothing: if anything fails, the current session, database and audit log stay
        in force and the error says what to fix.

        Raises:
            pi_notebook.ai.resolve.ModelSpecError: the model string does not resolve.
            UsageError: the audit log cannot be opened, or the database extension did not
                load (its diagnostic says why).
            RuntimeError: a run is going.
        """
        from ..ai.resolve import resolve_model

        if self.active_run is not None:
            raise RuntimeError("a run is going")
        cfg = self.config
        model = self.model_override if self.model_override is not None else resolve_model(cfg.model)
        url = database_url_of(cfg)
        database = database_extension(
            url=url,
            approval_timeout_s=cfg.approval_timeout,
            row_cap=cfg.row_cap,
            statement_timeout_s=cfg.statement_timeout,
            memory_limit_bytes=cfg.memory_limit_bytes,
            review=dict(cfg.review) or None,
            role_per_user=cfg.role_per_user,
        )
        mcp = mcp_extension(cfg)
        audit_url = cfg.audit_url or None
        audit, new_audit = open_audit(self.audit, self._audit_url, audit_url)
        try:
            session = self._assemble(model, database, mcp, audit)
        except BaseException:
            if new_audit:
                audit.close()
            raise
        problem = database_problem(session, url)
        if problem is not None:
            self._close_later(session, audit.close if new_audit else None)
            raise problem
        self.tool_choices.apply(session)
        self.database, self.database_url, self.stale = database, url, False
        self.mcp = mcp
        self._replace(session, audit, audit_url, new_audit)
        return session

    def _assemble(
        self, model: Any, database: DatabaseExtension, mcp: Any, audit: Any
    ) -> AgentSession:
        """A session of ``model`` with this notebook's extensions (the run's events, the
        database, the context, MCP when configured, the configured ones), tools and UI."""
        cfg = self.config
        return create_agent_session(
            model=model,
            extensions=[
                self._events_extension,
                labelled_extension(database, DATABASE_SOURCE),
                *context_extensions(self.namespace),
                *([mcp] if mcp is not None else []),
                *cfg.extensions,
            ],
            allowed_tool_names=cfg.allowed_tools,
            excluded_tool_names=cfg.excluded_tools or None,
            ui=self.ui,
            cwd=os.getcwd(),
            audit=audit,
            namespace=self.namespace,
        )

    def _replace(
        self, session: AgentSession, audit: Any, audit_url: str | None, new_audit: bool
    ) -> None:
        """Make ``session`` and ``audit`` current: the old session closes in the background,
        then the old log, if this build replaced it."""
        old, self.session = self.session, session
        if old is not None:
            self.past_usage.append((old.model_name, old.usage))
            audit_note = ", the audit log"
            if new_audit:
                where = safe_url(audit_url) if audit_url else "the default file"
                audit_note = f"; the audit log is now {where} (earlier records stay in the old one)"
            self._rebuild_note = REBUILD_NOTE.format(audit=audit_note)
        old_audit = self.audit
        self.audit, self._audit_url = audit, audit_url
        then = old_audit.close if new_audit and old_audit is not None else None
        if old is not None:
            self._close_later(old, then)
        elif then is not None:
            then()

    def usage_frame(self) -> Any:
        """Tokens and cost per session of this kernel, the current one last (``%pi_usage``)."""
        return usage_frame(self.past_usage, self.session)

    def set_model(self, model: Any) -> None:
        """Use ``model`` (a model object, e.g. a ``ScriptedModel``) for the next runs.

        ``%pi_model SPEC`` (a string) replaces it again.

        Raises:
            UsageError: a run is going, or the session does not build with it.
        """
        if self.active_run is not None:
            raise UsageError("A %%pi run is still going: wait for it, then set the model.")
        before = self.model_override
        self.model_override = model
        try:
            self.build()
        except BaseException:
            self.model_override = before
            raise

    def choose_tools(self, activate: list[str], deactivate: list[str]) -> None:
        """Apply ``%pi_tools --activate/--deactivate`` and remember it for later sessions."""
        self.tool_choices.choose(activate, deactivate, self.session)

    def reconfigure(self, **changes: Any) -> AgentSession:
        """Change settings and rebuild; if the rebuild fails, the settings are put back.

        Raises:
            whatever :meth:`build` raises; the previous session stays current.
        """
        before = {name: getattr(self.config, name) for name in changes}
        was_stale = self.stale
        for name, value in changes.items():
            setattr(self.config, name, value)
        try:
            return self.build()
        except BaseException:
            for name, value in before.items():
                setattr(self.config, name, value)
            self.stale = was_stale
            raise

    def take_rebuild_note(self) -> str | None:
        """What the last rebuild kept and dropped (:data:`REBUILD_NOTE`), once; ``None`` if no
        session was replaced since it was last taken."""
        note, self._rebuild_note = self._rebuild_note, None
        return note

    def reset_conversation(self) -> str:
        """``%pi_reset``: clear the model's messages; the session (tools, grants, settings,
        audit log) stays. Returns the line that says what was kept.

        Raises:
            UsageError: a run is going.
        """
        if self.active_run is not None:
            raise UsageError(
                "A %%pi run is still going: wait for it, press Stop or run %pi_abort, then "
                "run %pi_reset."
            )
        cleared = 0
        if self.session is not None:
            cleared = len(self.session.messages)
            self.session.messages.clear()
        if self.audit is not None:
            self.audit.append(ConversationReset(cleared_messages=cleared))
        return RESET_NOTE.format(cleared=f"{cleared} message{'s' if cleared != 1 else ''}")

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
        close_later(self._background, session, then)

    # -- runs -------------------------------------------------------------------
    def start_run(self, prompt: str) -> Run:
        """Start a run of ``prompt`` on the running loop; returns at once."""
        session = self.current_session()
        registry = session.tool_registry

        def label_of(name: str) -> str:
            tool = registry.get(name)
            return tool.definition.label if tool is not None else name

        run = Run(session, prompt, label_of=label_of, on_finish=self._finished, usage_of=_run_usage)
        self.runs.append(run)
        self.active_run = run
        run.start()
        return run

    def start_cell_run(self, options: str, body: str, *, background: bool) -> Run:
        """Check a ``%%pi`` cell, start its run and show its live view below the cell.

        Raises:
            UsageError: an unknown option or a bad ``-o NAME``, an empty cell, a run still
                going, no running loop, or a configuration that does not build.
        """
        opts = parse_cell_options(options)
        if opts.output is not None and self.namespace is None:
            raise UsageError("-o NAME needs the notebook's namespace: run %%pi in IPython.")
        if not body.strip():
            raise UsageError("The %%pi cell is empty: write a question below %%pi.")
        if self.active_run is not None:
            raise UsageError(
                "A %%pi run is still going: wait for it, press Stop or run %pi_abort, "
                "then run the cell again."
            )
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise UsageError(
                "%%pi needs a running asyncio loop: run it in a Jupyter kernel."
            ) from None
        if self.stale or self.session is None:
            from ..ai.resolve import ModelSpecError

            try:
                self.build()
            except ModelSpecError as exc:
                raise UsageError(
                    f"{exc} Set it with %pi_model offline (or openai:<id>, anthropic:<id>)."
                ) from None
        note = self.take_rebuild_note()
        if note is not None:
            print(note)  # the settings changed since the last cell
        run = self.start_run(body.strip())
        run.background = background
        run.output_name = opts.output
        if background:
            stop_on_interrupt(run)  # the cell returns at once: the kernel's ■ still stops it
        run.show()
        return run

    def _finished(self, run: Run) -> None:
        if self.active_run is run:
            self.active_run = None
        if run.output_name is not None and self.namespace is not None:
            bind_output(run, run.output_name, self.namespace)
        self.bound_results()

    @property
    def keep_results(self) -> int | None:
        """How many result DataFrames the notebook keeps: the session's bound
        (``session.result_retention.keep``; ``PI_NOTEBOOK_KEEP_RESULTS``, default 20)."""
        from ..session.retention import DEFAULT_KEEP

        retention = getattr(self.session, "result_retention", None)
        return retention.keep if retention is not None else DEFAULT_KEEP

    def bound_results(self) -> int:
        """Drop the DataFrames of all but the latest :attr:`keep_results` calls of every run
        across rebuilt sessions too; returns how many were dropped.

          A dropped result's ``details["dataframe"]`` becomes the retention's note and
          ``details["dataframe_dropped"]`` is set, as the session does: its card and record keep
          the preview they show, and ``%pi_result`` for it says how to get the rows again.
        """
        keep = self.keep_results
        if keep is None:
            return 0
        newest_first = (
            card.details for run in reversed(self.runs) for card in reversed(run.state.card_list())
        )
        return drop_all_but_latest(newest_first, keep)

    def status_line(self) -> str:
        """One line: model, database (no password), how to ask, that cells share a conversation."""
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
        return (
            f"pi_notebook: model {model} · database {safe_url(self.database_url)}{sample} · "
            f"ask in a %%pi cell ({CONVERSATION_NOTE})"
        )

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


def _run_usage(run: Run) -> str | None:
    """The run's usage line for its record (tokens and cost), when the model reported any."""
    usage = getattr(run.session, "last_run_usage", None)
    if usage is None or not usage.total_tokens:
        return None
    return str(usage)
