"""Aggregates that build a value as large as their input, and where a read may hold one.

An aggregate that builds a string, list or map (``string_agg``, ``list``, ``histogram``...)
holds its state inside DuckDB's ``memory_limit``, but its value can be as large as its whole
input, and every copy of it is made outside the limit (a ``concat(s, s, ...)``, or a row of a
join or of a window that repeats it: ``string_agg`` of 10 million rows copied 32 times took
3.6 GB). So such an aggregate is a read only where each value is made once and handed to the
result as it is (:func:`aggregate_findings`): in the statement's own select list, ``HAVING``
or ``ORDER BY`` (not in a subquery, CTE or window), wrapped in nothing but a cast, an index
or slice, a length, a filter or a comparison; and fed by at most
:data:`MAX_AGGREGATED_ROWS` generated rows (``range()``, ``generate_series()`` sources).
Then what leaves DuckDB is one copy of what its memory limit held, as Python objects.

The values one scalar call builds have theirs, in :mod:`pi_notebook.sql.sizes`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from sqlglot import exp

from pi_notebook.sql.findings import Finding, writes
from pi_notebook.sql.sizes import integer_literal

__all__ = ["MAX_AGGREGATED_ROWS", "aggregate_findings", "building_aggregate"]

_UNBOUNDED = math.inf

_BUILDING_CLASSES: frozenset[type[exp.Expr]] = frozenset(
    cls
    for cls in (
        exp.GroupConcat,
        exp.ArrayAgg,
        exp.ArrayConcatAgg,
        exp.ArrayUniqueAgg,
        getattr(exp, "ArrayUnionAgg", None),
        getattr(exp, "JSONArrayAgg", None),
        getattr(exp, "JSONObjectAgg", None),
        getattr(exp, "ObjectAgg", None),
    )
    if cls is not None
)
_BUILDING_NAMES = frozenset(
    """string_agg listagg group_concat list array_agg histogram histogram_exact map_agg
    json_group_array json_group_object json_agg json_object_agg jsonb_agg bitstring_agg
    list_concat_agg array_concat_agg""".split()
)
_TOP_N_CLASSES: frozenset[type[exp.Expr]] = frozenset(
    {exp.Max, exp.Min, exp.ArgMax, exp.ArgMin, exp.ApproxTopK}
)
_MAX_TOP_N = 1_000
"""``max(x, n)``, ``arg_max(x, y, n)``: a list of n values; a literal n up to this is bounded."""
_HANDED_ON: frozenset[type[exp.Expr]] = frozenset(
    {
        exp.Alias,
        exp.Paren,
        exp.Filter,
        exp.IgnoreNulls,
        exp.RespectNulls,
        exp.Cast,
        exp.TryCast,
        exp.Bracket,
        exp.Length,
        exp.ArraySize,
        exp.Ordered,
        exp.Order,
        exp.Having,
        exp.EQ,
        exp.NEQ,
        exp.GT,
        exp.GTE,
        exp.LT,
        exp.LTE,
        exp.Is,
        exp.Not,
        exp.And,
        exp.Or,
        exp.Like,
        exp.ILike,
        exp.Between,
        exp.In,
    }
)
"""What may stand between a building aggregate and its select: nothing that copies it."""
_REDUCERS = frozenset({"len", "length", "array_length", "octet_length", "strlen", "bit_length"})


def building_aggregate(node: exp.Expr) -> bool:
    """Whether ``node`` is an aggregate call whose value may be as large as its input."""
    cls = type(node)
    if cls in _BUILDING_CLASSES:
        return True
    if cls is exp.Anonymous:
        return node.name.lower() in _BUILDING_NAMES
    if cls in _TOP_N_CLASSES:
        count = node.args.get("count") or node.args.get("expression")
        if cls in (exp.ArgMax, exp.ArgMin):
            count = node.args.get("count")
        if count is None:
            return False
        value = integer_literal(count)
        return value is None or value > _MAX_TOP_N
    return False


MAX_AGGREGATED_ROWS = 1_000_000
"""Most rows ``range()``/``generate_series()`` sources may feed a building aggregate: the
one value it makes leaves DuckDB as Python objects several times its size (a list of 30
million integers took 3.5 GB), and the row cap does not apply to what one value holds."""


def aggregate_findings(aggregates: Sequence[exp.Expr], root: exp.Expr) -> list[Finding]:
    """Why the building ``aggregates`` of the statement ``root`` may be copied outside
    DuckDB's memory limit, or be built from more generated rows than a read may pack into one
    value (see the module docstring), or nothing."""
    for node in aggregates:
        problem = _copied(node, root)
        if problem is not None:
            return [writes(f"{problem} may exhaust the notebook's memory", when_executed=False)]
    rows = 1.0
    for source in root.find_all(exp.GenerateSeries):
        if isinstance(source.parent, exp.Table):
            rows *= _series_rows(source)
    if rows > MAX_AGGREGATED_ROWS:
        return [
            writes(
                "an aggregate that builds one value from more than "
                f"{MAX_AGGREGATED_ROWS:,} generated rows may exhaust the notebook's "
                "memory",
                when_executed=False,
            )
        ]
    return []


def _series_rows(node: exp.Expr) -> float:
    start, end = integer_literal(node.args.get("start")), integer_literal(node.args.get("end"))
    step = integer_literal(node.args.get("step")) if node.args.get("step") is not None else 1
    if start is None or end is None or not step:
        return _UNBOUNDED
    return abs(end - start) // abs(step) + 1


_SHOWN = {
    "groupconcat": "string_agg",
    "arrayagg": "list",
    "arrayconcatagg": "array_concat_agg",
    "arrayuniqueagg": "array_unique_agg",
    "argmax": "arg_max",
    "argmin": "arg_min",
    "approxtopk": "approx_top_k",
}


def _copied(node: exp.Expr, root: exp.Expr) -> str | None:
    name = node.name.lower() if isinstance(node, exp.Anonymous) else node.key
    name = _SHOWN.get(name, name)
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.Select):
            break
        if isinstance(parent, exp.Window):
            return f"{name}() over a window (the whole value on every row)"
        if isinstance(parent, exp.Anonymous) and parent.name.lower() in _REDUCERS:
            pass
        elif type(parent) not in _HANDED_ON:
            return f"{name}() used inside another expression (which may copy it)"
        parent = parent.parent
    if parent is None:
        return f"{name}() outside a query"
    select = parent
    above = select.parent
    while isinstance(above, exp.Union | exp.Intersect | exp.Except):
        above = above.parent
    if select is not root and not (above is None and _in_set_operation(select, root)):
        return f"{name}() in a subquery, CTE or derived table (its value may be copied)"
    return None


def _in_set_operation(select: exp.Expr, root: exp.Expr) -> bool:
    parent = select.parent
    while isinstance(parent, exp.Union | exp.Intersect | exp.Except):
        if parent is root:
            return True
        parent = parent.parent
    return False
