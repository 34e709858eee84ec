"""``AgentSession``: extensions, the tool registry and the agent, put together.

The session owns the registry (built-in < extension < SDK custom; allow/exclude over
all), the active set, the base system prompt, and the before/after tool hooks it
installs into the agent core (:mod:`.tool_hooks`), where the extensions' ``tool_call`` and
``tool_result`` chains run (S5). Session subscribers see an event only after every
extension handler for it has finished (C30; :mod:`.listeners`).

Approval for any tool (``ToolDefinition.requires_approval``) is enforced there: after every
``tool_call`` handler ran, the session asks for it (bound to the hash of the final
arguments); the wrapper checks that hash again right before ``execute``; the capability dies
when the call ends (see :mod:`pi_notebook.approvals.tools`). A prompt meets the pre-model
events (:mod:`.premodel`) before the agent core sees it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..agent.agent import Agent
from ..agent.types import ExecutionMode
from ..agent.views import CallView, ViewOf, default_call_view
from ..ai.abort import AbortController, AbortSignal
from ..ai.messages import Message, ToolResultMessage
from ..ai.model import Model
from ..ai.usage import UsageMeter, UsageTotals
from ..approvals.tools import ToolApprovals
from ..errors import AgentBusyError, SessionClosedError
from ..extensions.api import ExtensionAPI
from ..extensions.context import ExtensionContext
from ..extensions.events import SessionShutdownEvent, SessionStartEvent
from ..extensions.loader import (
    Diagnostic,
    ExtensionSource,
    clash_diagnostics,
    finish_async_loads,
    labelled_extension,
    load_extensions,
)
from ..extensions.runner import Extension, ExtensionRunner
from ..extensions.types import RegisteredTool, ToolDefinition, ToolInfo
from ..extensions.ui import UIContext
from ..extensions.wrapper import wrap_registered_tool
from .direct import call_tool as direct_call
from .direct import direct_call_signal
from .listeners import SessionListener, SessionListeners
from .premodel import PreModelHooks, SystemPromptState, prepare_prompt
from .prompt import build_system_prompt
from .registry import ToolSet
from .retention import ResultRetention
from .tool_hooks import ToolHooks

if TYPE_CHECKING:
    from ..audit import AuditLog

__all__ = ["AgentSession", "SessionClosedError"]

log = logging.getLogger(__name__)


def _weak_view_of(session: AgentSession) -> ViewOf:
    """``session.view_of_call`` without keeping the session alive (then: the default view)."""
    ref = weakref.ref(session)

    def view_of(tool_name: str, args: Any) -> CallView:
        alive = ref()
        if alive is None:
            return default_call_view(tool_name, args)
        return alive.view_of_call(tool_name, args)

    return view_of


class AgentSession:
    """A running agent with its extensions. Build it with ``create_agent_session``."""

    def __init__(
        self,
        *,
        model: Model,
        extensions: Iterable[ExtensionSource] = (),
        custom_tools: Iterable[ToolDefinition[Any]] = (),
        builtin_tools: Iterable[ToolDefinition[Any]] = (),
        allowed_tool_names: Iterable[str] | None = None,
        excluded_tool_names: Iterable[str] | None = None,
        ui: UIContext | None = None,
        cwd: str | None = None,
        audit: AuditLog | None = None,
        owns_audit: bool = False,
        tool_execution: ExecutionMode | None = None,
    ) -> None:
        self._model = model
        self._ui = ui
        self._cwd = os.path.abspath(cwd or os.getcwd())
        self._audit = audit
        self._owns_audit = owns_audit
        self._session_id = audit.session_id if audit is not None else uuid.uuid4().hex
        self._tools = ToolSet(
            builtin_tools, custom_tools, allowed=allowed_tool_names, excluded=excluded_tool_names
        )
        self._closed = False
        self._started = False
        self._preparing: AbortController | None = None  # set while input/before_agent_start run
        self._usage = UsageMeter()
        self.runner = ExtensionRunner()
        self.tool_approvals = ToolApprovals(lambda: self._audit)
        self._hooks = PreModelHooks(
            self.runner, audit=lambda: self._audit, model_name=lambda: self.model_name
        )
        tool_hooks = ToolHooks(
            self.runner, self.tool_approvals, lambda name: self._tools.get(name), audit
        )
        self.agent = Agent(
            model=model,
            before_tool_call=tool_hooks.before_tool_call,
            after_tool_call=tool_hooks.after_tool_call,
            tool_execution=tool_execution or "parallel",
        )
        self._prompts = SystemPromptState(self.agent.state)
        # Bounds the result DataFrames kept; fed by the listeners, after every subscriber.
        self.result_retention = ResultRetention()
        self._listeners = SessionListeners(
            self.runner, self.tool_approvals, self._usage, self.result_retention
        )
        # Events nobody wants (no subscriber, no extension handler) are not even built.
        self.agent.subscribe(self._listeners.dispatch, events=self._listeners.wants)
        self.diagnostics: list[Diagnostic] = []
        self._load(audit, extensions)

    def _load(self, audit: AuditLog | None, extensions: Iterable[ExtensionSource]) -> None:
        """Load the extensions: the audit's recorder first (when there is a log), then the
        caller's; bind them unless an async factory is still to finish (in :meth:`start`)."""
        sources: list[ExtensionSource] = []
        if audit is not None:
            from ..audit import audit_extension

            # The log's summaries show calls as this session's tools describe them (weakly:
            # the log may outlive the session; then it shows no code).
            audit.call_views = _weak_view_of(self)

            sources.append(labelled_extension(audit_extension(audit), "<audit>"))
        sources.extend(extensions)
        self.diagnostics, self._pending = load_extensions(sources, self.runner, self._make_api)
        if not self._pending:
            self._bind()
        else:
            # Async factories finish in start(); until then the tools already known (built-in,
            # SDK, sync extensions) are usable, and an active set chosen now is kept (C7).
            self.refresh_tools()

    # -- wiring ---------------------------------------------------------------
    def _make_api(self, extension: Extension) -> ExtensionAPI:
        return ExtensionAPI(
            extension,
            self.runner,
            audit=self._audit,
            set_active=self.set_active_tools_by_name,
            get_active=lambda: self._tools.active_names,
            get_all=self.get_all_tools,
        )

    def _bind(self) -> None:
        self.diagnostics.extend(clash_diagnostics(self.runner))
        for diagnostic in self.diagnostics:
            log.warning("extension diagnostic: %s", diagnostic)
        self.runner.bind(self, self.refresh_tools)
        self.refresh_tools()

    async def start(self) -> None:
        """Finish async extension factories and emit ``session_start`` (once)."""
        if self._started:
            return
        self._started = True
        if self._pending:
            pending, self._pending = self._pending, []
            self.diagnostics.extend(await finish_async_loads(pending, self.runner))
            self._bind()
        await self.runner.emit(
            SessionStartEvent(model=self.model_name, active_tools=self._tools.active_names)
        )

    # -- SessionHost (read by ctx) -------------------------------------------
    @property
    def model(self) -> Model:
        return self._model

    @property
    def model_name(self) -> str:
        return f"{self._model.provider}:{self._model.id}"

    @property
    def cwd(self) -> str:
        return self._cwd

    @property
    def ui(self) -> UIContext | None:
        return self._ui

    @property
    def audit(self) -> AuditLog | None:
        return self._audit

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def messages(self) -> list[Message]:
        return self.agent.state.messages

    @property
    def system_prompt(self) -> str:
        """The system prompt the next request sends (this prompt's, while a run goes on)."""
        return self.agent.state.system_prompt

    @property
    def base_system_prompt(self) -> str:
        """The prompt built from the active tools, before ``before_agent_start`` handlers."""
        return self._prompts.base

    @property
    def usage(self) -> UsageTotals:
        """Tokens in/out, cost (``None`` if a model has no known price), requests (a copy)."""
        return self._usage.session.copy()

    @property
    def last_run_usage(self) -> UsageTotals:
        """The same for the latest run (the one going on, if any)."""
        return self._usage.run.copy()

    @property
    def signal(self) -> AbortSignal | None:
        direct = direct_call_signal()
        if direct is not None:
            return direct
        if self._preparing is not None:
            return self._preparing.signal
        return self.agent.signal

    @property
    def is_running(self) -> bool:
        return self._preparing is not None or self.agent.state.is_running

    @property
    def closed(self) -> bool:
        return self._closed

    # -- registry and active set ----------------------------------------------
    @property
    def tool_registry(self) -> dict[str, RegisteredTool]:
        return self._tools.registry

    @property
    def active_tool_names(self) -> list[str]:
        return self._tools.active_names

    def refresh_tools(self) -> None:
        """Rebuild the registry from every source and keep the active set coherent (C7)."""
        self._tools.refresh(self.runner.registered_tools())
        self._apply_active()

    def set_active_tools_by_name(self, names: Sequence[str]) -> None:
        """Replace the active set: unknown or filtered names are ignored, order kept (S15, C9)."""
        self._tools.choose(names)
        self._apply_active()

    def _apply_active(self) -> None:
        tools = self._tools.active_tools()
        self.agent.state.tools = [
            wrap_registered_tool(
                t,
                self._context_for(t),
                lambda: self._tools.active_names,
                self.tool_approvals.before_execute,
            )
            for t in tools
        ]
        self._prompts.set_base(build_system_prompt([t.definition for t in tools]))

    def _context_for(self, tool: RegisteredTool) -> Callable[[str], ExtensionContext]:
        path = tool.source_info.path
        return lambda call_id: self.runner.create_context(path, tool_call_id=call_id)

    def view_of_call(self, tool_name: str, args: Any) -> CallView:
        """How a call of ``tool_name`` with ``args`` reads: the tool's own ``describe_call``,
        else its label and arguments (a tool not in the registry: its name and arguments)."""
        return self._tools.view_of(tool_name, args)

    def get_all_tools(self) -> list[ToolInfo]:
        """Registry metadata, no callables (C11)."""
        return self._tools.infos()

    # -- public API -------------------------------------------------------------
    def subscribe(self, listener: SessionListener) -> Callable[[], None]:
        """Receive every event (after the extensions' handlers); returns an unsubscriber."""
        return self._listeners.subscribe(listener)

    async def prompt(self, text: str | Message) -> None:
        """Send a prompt (after ``input`` and ``before_agent_start``) and run until the model
        stops calling tools."""
        if self._closed:
            raise SessionClosedError("This session is closed; create a new one to prompt again.")
        if self.is_running or self._preparing is not None:
            raise AgentBusyError("A prompt is already running; wait for it or call abort().")
        # One abort for the whole prompt: Stop during input/before_agent_start (a schema read
        # stuck on a silent server, say) reaches their ctx.signal, then the run ends at once.
        controller = self._preparing = AbortController()
        try:
            await self.start()
            prepared = await prepare_prompt(self.runner, text, self._prompts.base)
        finally:
            self._preparing = None
        if prepared is None:
            return  # an input handler handled it
        self._prompts.begin(prepared.system_prompt)
        self._hooks.install(self.agent)  # for this prompt's requests
        try:
            await self.agent.prompt(prepared.messages, controller=controller)
        finally:
            self._prompts.end()

    async def call_tool(
        self,
        name: str,
        args: Mapping[str, Any],
        *,
        tool_call_id: str | None = None,
        signal: AbortSignal | None = None,
    ) -> ToolResultMessage:
        """One governed call of an active tool without a model (see :mod:`.direct`): the same
        validation, ``tool_call`` handlers, approval, ``tool_result`` handlers, events and audit
        as a model's call. Returns the final result message; never raises for a failing call."""
        return await direct_call(
            self,
            name,
            args,
            tool_call_id=tool_call_id,
            signal=signal,
            emit=self._listeners.dispatch,
        )

    def abort(self, reason: str | None = None) -> None:
        """Abort the running prompt, if any (also while its pre-model handlers run)."""
        if self._preparing is not None:
            self._preparing.abort(reason)
        self.agent.abort(reason)

    async def close(self) -> None:
        """Emit ``session_shutdown``, flush the audit, and refuse further prompts (C34)."""
        if self._closed:
            return
        self.abort("session closed")
        self._closed = True
        if self._pending:
            # Closed before it ever started: async factories never ran, so drop them, and
            # bind so the loaded extensions' handlers get a ctx for session_shutdown.
            for extension, coroutine in self._pending:
                coroutine.close()
                self.runner.extensions.remove(extension)
            self._pending = []
            self._bind()
        await self.runner.emit(SessionShutdownEvent())
        if self._audit is not None:
            # Flushing waits on the writer thread: keep the event loop (the kernel) free.
            await asyncio.to_thread(self._audit.close if self._owns_audit else self._audit.flush)

    # For tests and tools that replay events.
    def extension_errors(self) -> list[Mapping[str, str]]:
        return [
            {"extension_path": e.extension_path, "event": e.event, "error": e.error}
            for e in self.runner.errors
        ]
