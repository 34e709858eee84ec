"""How the database tools' calls read: ``query_database`` shows its statement as SQL.

The host shows a call from the tool's own ``describe_call``; ``query_call_view`` is
``query_database``'s (the statement is the code, in SQL; the other arguments are fields), and
``call_views`` is both tools' views by name, for reading stored records without a session
(``AuditLog(url, call_views=call_views)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..agent.views import CallView, default_call_view, remember_call_view
from .names import DESCRIBE_TOOL, TOOL_NAME

__all__ = ["DESCRIBE_LABEL", "QUERY_LABEL", "call_views", "query_call_view"]

QUERY_LABEL = "Query database"
"""``query_database``'s label."""
DESCRIBE_LABEL = "Describe database"
"""``describe_database``'s label."""
_CODE = "sql"


def query_call_view(args: Mapping[str, Any]) -> CallView:
    """A ``query_database`` call: its statement as a SQL block (editable: an edit goes back
    into ``sql``), its other arguments as fields. Without a statement: its arguments."""
    sql = args.get(_CODE)
    if not isinstance(sql, str):
        return default_call_view(QUERY_LABEL, args)
    rest = {k: v for k, v in args.items() if k != _CODE}
    return CallView(
        title=QUERY_LABEL, code=sql, code_language="sql", code_argument=_CODE, fields=rest
    )


def call_views(tool_name: str, args: Any) -> CallView:
    """The database tools' view of a call by tool name (another tool's: its name and
    arguments)."""
    if tool_name == TOOL_NAME and isinstance(args, Mapping):
        return query_call_view(args)  # pyright: ignore[reportUnknownArgumentType]
    return default_call_view(DESCRIBE_LABEL if tool_name == DESCRIBE_TOOL else tool_name, args)


remember_call_view(TOOL_NAME, query_call_view)  # an audit read by URL still shows the statement
