"""The event recorder: an extension that writes the session's events into the audit (D8, S27).

``audit_extension(log)`` returns an extension factory. Its handlers are synchronous, return
nothing and never raise: the audit observes the run, it never steers it. Records are queued
(not durable); the gate and the backend write their own durable records (approval, final
arguments, capability mismatch) through the same log, and the session writes the decision of
the ``tool_call`` chain (one record per fact: the recorder does not write it again).

Kinds written here (typed in ``records``): ``session_start``, ``tool_execution_start``,
``tool_execution_update``, ``tool_execution_end``, ``session_shutdown``, ``extension_error``
from the error listener, and ``tool_result`` only when a ``tool_result`` handler changed the
result (otherwise the end record already holds it). A result is summarised once. An update is
recorded only while its call runs past the update interval: a call that ends sooner keeps the
number of its updates and the last one in its end record (one record per fact).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .encode import to_jsonable
from .log import AuditLog
from .records import (
    AuditRecord,
    ExtensionError,
    SessionShutdown,
    SessionStart,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolResultRecord,
)

if TYPE_CHECKING:
    from ..agent.views import ViewOf

__all__ = ["UPDATE_INTERVAL", "audit_extension", "summarise_result"]

_log = logging.getLogger("pi_notebook.audit")
UPDATE_INTERVAL = 1.0  # seconds between recorded updates of one call, counted from its start
_clock = time.monotonic  # tests replace it to drive the update rate limit
_TEXT_LIMIT = 2000


class _EventSource(Protocol):
    def on(self, event_type: str, handler: Callable[..., Any], /) -> Any: ...


_mapping_types: dict[type, bool] = {}  # type -> is it a Mapping (the ABC check, once per type)


def _get(obj: Any, name: str, default: Any = None) -> Any:
    kind = type(obj)
    mapping = _mapping_types.get(kind)
    if mapping is None:
        mapping = _mapping_types[kind] = isinstance(obj, Mapping)
    if mapping:
        return obj.get(name, default)
    return getattr(obj, name, default)


def _decoded_size(data: str) -> int:
    """The byte size of base64 ``data`` (from its length, without decoding it)."""
    data = data.rstrip().rstrip("=")
    return len(data) * 3 // 4


def summarise_result(result: Any) -> dict[str, Any]:
    """A bounded summary of a tool result: its text (cut to 2,000 chars), its images' types
    and sizes (never their data) and its details.

    Accepts a result object or dict with ``content`` (parts with ``text``) and ``details``.
    The summary holds JSON-safe values only.
    """
    return _summary(result, convert=True)


def _summary(result: Any, *, convert: bool) -> dict[str, Any]:
    # convert=False leaves ``details`` as it is: the log's encoder converts it in the same
    # pass that encodes the record (the recorder's records are encoded at once, so later
    # changes to the details cannot reach them).
    if result is None:
        return {}
    parts = _get(result, "content") or []
    texts: list[str] = []
    other: list[str] = []
    images: list[dict[str, Any]] = []
    for part in parts if isinstance(parts, list | tuple) else [parts]:
        text = getattr(part, "text", None) if not isinstance(part, dict) else part.get("text")  # pyright: ignore[reportUnknownMemberType]
        if isinstance(text, str):
            texts.append(text)
        elif _get(part, "type") == "image" and isinstance(_get(part, "data"), str):
            # the image's type and size, never its (base64) data
            mime = _get(part, "mime_type", _get(part, "mimeType"))
            images.append({"mime_type": str(mime), "bytes": _decoded_size(_get(part, "data"))})
        else:
            other.append(str(_get(part, "type", type(part).__name__)))
    joined = texts[0] if len(texts) == 1 else "\n".join(texts)
    summary: dict[str, Any] = {"text": joined[:_TEXT_LIMIT], "text_chars": len(joined)}
    if len(joined) > _TEXT_LIMIT:
        summary["text_truncated"] = True
    if images:
        summary["images"] = images
    if other:
        summary["other_parts"] = other
    details = _get(result, "details")
    if details is not None:
        summary["details"] = to_jsonable(details) if convert else details
    return summary


@dataclass
class _CallState:
    started: float
    last_update: float | None = None
    updates: int = 0
    skipped: int = 0
    pending: Any = None  # the last update not recorded yet (rate limit)
    returned: Any = None  # the tool_result event: the result as execute returned it


class _Recorder:
    def __init__(self, log: AuditLog, source: Any) -> None:
        self.log = log
        self.source = source
        self.calls: dict[str, _CallState] = {}

    def _append(self, record: AuditRecord) -> None:
        self.log.append(record)

    def session_start(self, event: Any, ctx: Any = None) -> None:
        model = _get(event, "model") or _get(ctx, "model")
        tools = _get(event, "active_tools")
        if tools is None:
            getter = getattr(self.source, "get_active_tools", None)
            tools = getter() if callable(getter) else None
        self._append(SessionStart(model=_describe_model(model), active_tools=tools))

    def tool_execution_start(self, event: Any, _ctx: Any = None) -> None:
        call_id = _opt(_get(event, "tool_call_id"))
        self.calls[call_id or ""] = _CallState(started=_clock())
        tool_name, args = _opt(_get(event, "tool_name")), _get(event, "args")
        code_argument, code = _shown_code(self.log.call_views, tool_name, args)
        self._append(
            ToolExecutionStart(
                tool_call_id=call_id,
                tool_name=tool_name,
                args=args,
                code_argument=code_argument,
                code=code,
            )
        )

    def tool_execution_update(self, event: Any, _ctx: Any = None) -> None:
        call_id = _opt(_get(event, "tool_call_id")) or ""
        state = self.calls.setdefault(call_id, _CallState(started=_clock()))
        state.updates += 1
        now = _clock()
        since = state.last_update if state.last_update is not None else state.started
        if now - since < UPDATE_INTERVAL:
            # Keep a reference only: a call that ends within the interval (most do) keeps
            # it in its end record; a call still running when the next one comes records it.
            state.pending, state.skipped = event, state.skipped + 1
            return
        state.last_update, state.pending = now, None
        self._update(event, state)

    def _update(self, event: Any, state: _CallState) -> None:
        self._append(
            ToolExecutionUpdate(
                tool_call_id=_opt(_get(event, "tool_call_id")),
                tool_name=_opt(_get(event, "tool_name")),
                update=state.updates,
                skipped_before=state.skipped,
                partial_result=_summary(_get(event, "partial_result"), convert=False),
            )
        )
        state.skipped = 0

    def tool_result(self, event: Any, _ctx: Any = None) -> None:
        # Only keep a reference: if no later handler changes the result, the end record
        # holds it, and summarising it twice would be wasted work.
        call_id = _opt(_get(event, "tool_call_id")) or ""
        state = self.calls.get(call_id)
        if state is not None:
            state.returned = (
                event,
                list(_get(event, "content") or []),
                _get(event, "details"),
                bool(_get(event, "is_error", False)),
            )

    def tool_execution_end(self, event: Any, _ctx: Any = None) -> None:
        call_id = _opt(_get(event, "tool_call_id"))
        tool_name = _opt(_get(event, "tool_name"))
        state = self.calls.pop(call_id or "", None)
        last_update = None
        if state is not None and state.pending is not None:
            # The last update was held back by the rate limit: the end record keeps it (one
            # record per fact: a progress note superseded by the outcome is not its own).
            last_update = _summary(_get(state.pending, "partial_result"), convert=False)
        duration = None if state is None else round((_clock() - state.started) * 1000, 3)
        result = _get(event, "result")
        is_error = bool(_get(event, "is_error", False))
        if state is not None and state.returned is not None:
            returned, content, details, returned_error = state.returned
            if _changed(result, content, details, returned_error, is_error):
                self._append(
                    ToolResultRecord(
                        tool_call_id=call_id,
                        tool_name=tool_name,
                        input=to_jsonable(_get(returned, "input")),
                        is_error=returned_error,
                        result=_summary(returned, convert=False),
                    )
                )
        self._append(
            ToolExecutionEnd(
                tool_call_id=call_id,
                tool_name=tool_name,
                is_error=is_error,
                duration_ms=duration,
                result=_summary(result, convert=False),
                updates=0 if state is None else state.updates,
                last_update=last_update,
            )
        )

    def session_shutdown(self, event: Any, _ctx: Any = None) -> None:
        # No flush here: this runs on the event loop; the session flushes in a thread.
        self._append(SessionShutdown(open_calls=sorted(self.calls)))

    def error(self, error_event: Any, *_rest: Any) -> None:
        event = _get(error_event, "event")
        self._append(
            ExtensionError(
                tool_call_id=_opt(_get(event, "tool_call_id")),
                tool_name=_opt(_get(event, "tool_name")),
                extension_path=_get(error_event, "extension_path"),
                event=event if isinstance(event, str) else _get(event, "type", event),
                error=_get(error_event, "error"),
            )
        )


def _changed(
    result: Any, content: list[Any], details: Any, was_error: bool, is_error: bool
) -> bool:
    """Whether the final result differs from the one ``execute`` returned (a handler patched
    it): compared by identity, which is what an unpatched result keeps."""
    if result is None or was_error != is_error or _get(result, "details") is not details:
        return True
    final = list(_get(result, "content") or [])
    return len(final) != len(content) or any(
        a is not b for a, b in zip(final, content, strict=True)
    )


def _shown_code(
    view_of: ViewOf | None, tool_name: str | None, args: Any
) -> tuple[str | None, str | None]:
    """How the call's tool shows its code, for the start record: the argument that is the
    code (``code_argument``), else the code itself; ``(None, None)`` when it shows none.

    Stored when written, so whoever reads the store later shows the statement without the
    tool's package (a bare ``AuditLog`` in a fresh interpreter). A failing view is logged by
    its type and costs only this note, never the record."""
    if view_of is None or tool_name is None or not isinstance(args, Mapping):
        return None, None
    try:
        view = view_of(tool_name, args)
    except Exception as exc:  # its message may quote the arguments: only its type is logged
        _log.warning("audit: the view of a %r call failed (%s)", tool_name, type(exc).__name__)
        return None, None
    if not isinstance(view.code, str):
        return None, None
    shown = view.code_argument
    if shown is not None and args.get(shown) == view.code:  # pyright: ignore[reportUnknownMemberType]
        return shown, None
    return None, view.code


def _opt(value: Any) -> str | None:
    return None if value is None else str(value)


def _describe_model(model: Any) -> Any:
    if model is None or isinstance(model, str):
        return model
    for attr in ("id", "model_id", "name"):
        value = getattr(model, attr, None)
        if isinstance(value, str):
            provider = getattr(model, "provider", None)
            return f"{provider}:{value}" if isinstance(provider, str) else value
    return type(model).__name__


def _guarded(name: str, handler: Callable[..., None]) -> Callable[..., None]:
    def run(*args: Any) -> None:
        try:
            handler(*args)
        except Exception:  # auditing must never break the run
            _log.exception("audit: the %s handler failed", name)

    run.__name__ = f"audit_{name}"
    return run


_EVENTS = (
    "session_start",
    "tool_execution_start",
    "tool_execution_update",
    "tool_result",
    "tool_execution_end",
    "session_shutdown",
)


def audit_extension(log: AuditLog) -> Callable[[Any], None]:
    """An extension factory that records the session's events into ``log`` (D8).

    The factory subscribes with ``pi.on(event_type, handler)`` to session_start,
    tool_execution_start/update/end, tool_result and session_shutdown, and with
    ``pi.on_error(handler)`` (if the API has it) to extension errors. Handlers are sync,
    return ``None`` and never raise.
    """

    def register(pi: _EventSource) -> None:
        recorder = _Recorder(log, pi)
        for name in _EVENTS:
            pi.on(name, _guarded(name, getattr(recorder, name)))
        on_error = getattr(pi, "on_error", None)
        if callable(on_error):
            on_error(_guarded("error", recorder.error))

    return register
