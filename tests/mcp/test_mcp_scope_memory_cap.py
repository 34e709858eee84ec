"""The MCP scope gate sees the database gate's reads: under an OS memory cap, a read the
kernel-memory rules would ask for needs only the read scope; without the cap, the write scope."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pi_notebook.mcp.scopes import READ_SCOPE, Principal, acting_as, scope_gate

LISTS = "SELECT c, l FROM (SELECT customer_id AS c, list(total) AS l FROM orders GROUP BY 1)"
FILE = "SELECT * FROM read_csv('/etc/passwd')"


class _Pi:
    def __init__(self) -> None:
        self.handlers: dict[str, Any] = {}

    def on(self, event: str, handler: Any) -> None:
        self.handlers[event] = handler


async def _blocked(sql: str, *, capped: bool) -> bool:
    pi = _Pi()
    scope_gate(dialect=lambda: "duckdb", authenticated=True, memory_bounded=lambda: capped)(pi)
    reader = Principal(subject="ana", client_id="c", issuer=None, scopes=frozenset({READ_SCOPE}))
    event = SimpleNamespace(tool_name="query_database", input=SimpleNamespace(sql=sql))
    with acting_as(reader):
        decision = await pi.handlers["tool_call"](event, None)
    return decision is not None and decision.get("block") is True


async def test_a_read_token_runs_lists_in_subqueries_only_under_the_cap() -> None:
    assert await _blocked(LISTS, capped=False)
    assert not await _blocked(LISTS, capped=True)
    assert await _blocked(FILE, capped=True)
