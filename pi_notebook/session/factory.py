"""``create_agent_session``: the one-call way to build a session."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from ..agent.types import ExecutionMode
from ..ai.model import Model
from ..extensions.loader import ExtensionSource
from ..extensions.types import ToolDefinition
from ..extensions.ui import UIContext
from .session import AgentSession

if TYPE_CHECKING:
    from ..audit import AuditLog

__all__ = ["create_agent_session"]


def create_agent_session(
    *,
    model: Model | str,
    extensions: Iterable[ExtensionSource] = (),
    custom_tools: Iterable[ToolDefinition[Any]] = (),
    allowed_tool_names: Iterable[str] | None = None,
    excluded_tool_names: Iterable[str] | None = None,
    ui: UIContext | None = None,
    cwd: str | None = None,
    audit: AuditLog | str | Literal[False] | None = None,
    tool_execution: ExecutionMode | None = None,
    namespace: Mapping[str, Any] | None = None,
    builtin_tools: bool = True,
) -> AgentSession:
    """Build an :class:`AgentSession`.

    Args:
        model: a model object, or ``"offline"``, ``"openai:<id>"``, ``"anthropic:<id>"``.
        extensions: factories, module names, ``.py`` paths or entry points.
        custom_tools: SDK tools; they win over extension and built-in tools of the same name.
        allowed_tool_names: when given, only these names reach the registry.
        excluded_tool_names: never in the registry; wins over the allow-list.
        ui: an object with an async ``confirm(title, message, *, signal, timeout)``;
            ``None`` means no UI (writes that need approval are blocked).
        cwd: working directory for ``ctx.cwd`` and the file built-ins.
        audit: an audit log, a SQLAlchemy URL for one, ``None`` for the default file
            (or ``PI_NOTEBOOK_AUDIT_URL``), or ``False`` for none.
        tool_execution: ``"sequential"`` runs every batch in order.
        namespace: variables ``inspect_variable`` may read (a notebook passes ``user_ns``).
        builtin_tools: include ``read``, ``ls`` and ``inspect_variable``.
    """
    resolved = _resolved(model)
    builtins: list[ToolDefinition[Any]] = []
    if builtin_tools:
        from ..builtins import builtin_tools as make_builtins

        builtins = make_builtins(namespace=namespace)
    audit_log, owns_audit = _audit_log(audit)
    try:
        return AgentSession(
            model=resolved,
            extensions=extensions,
            custom_tools=custom_tools,
            builtin_tools=builtins,
            allowed_tool_names=allowed_tool_names,
            excluded_tool_names=excluded_tool_names,
            ui=ui,
            cwd=cwd,
            audit=audit_log,
            owns_audit=owns_audit,
            tool_execution=tool_execution,
        )
    except BaseException:
        # A session that was never built cannot close the log it would have owned.
        if owns_audit and audit_log is not None:
            audit_log.close()
        raise


def _resolved(model: Model | str) -> Model:
    """The model object of ``model`` (a string goes through ``resolve_model``)."""
    if isinstance(model, str):
        from ..ai.resolve import resolve_model

        return resolve_model(model)
    return model


def _audit_log(audit: AuditLog | str | Literal[False] | None) -> tuple[AuditLog | None, bool]:
    """The session's audit log and whether the session owns it (opened it, so closes it):
    the given log, a new one at a URL (``None``: the default), or none for ``False``."""
    if audit is False:
        return None, False
    from ..audit import AuditLog

    if isinstance(audit, AuditLog):
        return audit, False
    return AuditLog(audit), True
