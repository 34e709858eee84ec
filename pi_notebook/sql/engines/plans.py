"""Reading a read's cost from an engine's ``EXPLAIN (FORMAT JSON)`` plan (read budget).

What a read scans is taken from its plan's leaves (the scans and other row sources): the
rows each is estimated to produce, summed, and where the engine gives a row width, rows x
width as bytes. A plan's top node would say what the read returns, which for an aggregate
over a large table is one row; its leaves say what it reads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from pi_notebook.sql.engines.base import ReadEstimate

__all__ = ["EXPLAINABLE", "explain_prefix", "leaves", "not_planned", "plan_json"]

EXPLAINABLE = re.compile(
    r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*\(*\s*(select|with|values|table|from)\b",
    re.IGNORECASE | re.DOTALL,
)
"""A statement an ``EXPLAIN`` prefix can only plan (it can never join the prefix into
``EXPLAIN ANALYZE``, which executes), after any leading comments (so a comment in front of
a read does not take it out of the budget)."""


def explain_prefix(sql: str) -> str | None:
    """``EXPLAIN (FORMAT JSON) <sql>`` (trailing semicolons dropped), or ``None`` when ``sql``
    does not start as a query."""
    if not EXPLAINABLE.match(sql):
        return None
    return "EXPLAIN (FORMAT JSON) " + sql.strip().rstrip(";").rstrip()


def not_planned(sql: str) -> ReadEstimate:
    """The estimate of a read no ``EXPLAIN`` prefix may plan (it does not start as a query)."""
    word = sql.split(None, 1)[0].upper() if sql.strip() else "this"
    return ReadEstimate(rows=None, bytes=None, source=f"no estimate for {word} statements")


def plan_json(value: Any) -> Any:
    """The plan as Python values (a driver hands JSON back parsed or as text)."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def leaves(node: Any, children: str) -> Iterator[dict[str, Any]]:
    """The nodes of the plan ``node`` (a dict, or a list of them) without child nodes under
    the key ``children``."""
    if isinstance(node, list):
        for item in node:
            yield from leaves(item, children)
        return
    if not isinstance(node, dict):
        return
    below = node.get(children) or []
    if below:
        yield from leaves(below, children)
    else:
        yield node
