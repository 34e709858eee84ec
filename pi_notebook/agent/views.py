"""How a tool call is shown: ``CallView``, which a tool gives of itself.

The host knows no tool's arguments. A tool may say how one of its calls reads (a title, one
block of code and its language, the other arguments worth showing); the notebook's cards,
record and approval prompts, the audit summaries and the MCP server's questions render that
and name no tool. A tool that says nothing is shown by :func:`default_call_view`:
its title and its arguments.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

__all__ = [
    "CallDescriber",
    "CallView",
    "ViewOf",
    "call_view",
    "default_call_view",
    "known_call_views",
    "remember_call_view",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class CallView:
    """How one call reads.

    Attributes:
        title: what the call is, e.g. the tool's label.
        code: the one argument shown as a block of code (a statement, a URL, a script), or
            ``None`` when the call has none.
        code_language: the language of ``code`` (e.g. ``"sql"``), for highlighting and for
            the block's CSS class; ``None`` when plain.
        code_argument: the name of the argument ``code`` is, so a person's edit of the code
            goes back into that argument; ``None`` when ``code`` cannot be edited.
        fields: the other arguments worth showing, name to a JSON value.
    """

    title: str
    code: str | None = None
    code_language: str | None = None
    code_argument: str | None = None
    fields: Mapping[str, Any] = field(default_factory=dict[str, Any])


CallDescriber: TypeAlias = Callable[[Mapping[str, Any]], CallView]
"""A tool's ``describe_call(args)``: the view of a call with these arguments."""
ViewOf: TypeAlias = Callable[[str, Any], CallView]
"""``view_of(tool_name, args)``: how a host that knows its tools shows any call."""


def default_call_view(title: str, args: Any) -> CallView:
    """The view of a call whose tool does not describe itself: its title and its arguments
    (a non-mapping argument value is shown under ``args``)."""
    if isinstance(args, Mapping):
        return CallView(title=title, fields=dict(args))  # pyright: ignore[reportUnknownArgumentType]
    return CallView(title=title, fields={} if args is None else {"args": args})


def call_view(title: str, args: Any, describe: CallDescriber | None = None) -> CallView:
    """``describe(args)`` when the tool gives one and it answers with a ``CallView``; else
    (no describer, arguments that are not a mapping, a describer that raises or answers
    something else) :func:`default_call_view`. A failing describer is logged (its exception's
    type, never its message), never raised: showing a call must not stop it."""
    if describe is not None and isinstance(args, Mapping):
        try:
            view = describe(args)  # pyright: ignore[reportUnknownArgumentType]
        except Exception as exc:  # its message may quote the arguments: only its type is logged
            log.warning(
                "describe_call of %r failed (%s); showing its arguments", title, type(exc).__name__
            )
        else:
            if isinstance(view, CallView):  # pyright: ignore[reportUnnecessaryIsInstance]
                return view
            log.warning("describe_call of %r returned %r, not a CallView", title, type(view))
    return default_call_view(title, args)


_KNOWN: dict[str, CallDescriber] = {}


def remember_call_view(tool_name: str, describe: CallDescriber) -> None:
    """Remember how calls of ``tool_name`` read, for whoever reads stored records without the
    tools at hand (an audit opened by URL in a fresh kernel). A package registers its tools'
    describers when it is imported; a session's own tools take precedence where it has them."""
    _KNOWN[tool_name] = describe


def known_call_views(tool_name: str, args: Any) -> CallView:
    """The view of a call by its tool's remembered describer (:func:`remember_call_view`), or
    its name and arguments for a tool nobody described."""
    return call_view(tool_name, args, _KNOWN.get(tool_name))
