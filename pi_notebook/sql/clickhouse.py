"""ClickHouse's own constructs in a parsed query: what the generic walk cannot judge.

* a ``SETTINGS`` clause anywhere changes query settings (limits, ``readonly`` itself): not a
  read; a ``FORMAT`` clause changes what the engine returns (the tool reads Arrow): refused;
* calls are judged against :mod:`.functions_clickhouse`: aggregates with their combinators
  (``sumIf``, ``uniqMerge``), parameterised aggregates (``quantiles(0.5)(x)``), table
  functions that reach files, URLs, servers or programs, and calls whose size is set by an
  argument (``range(n)``, ``repeat(s, n)``, ``numbers(n)``, ``groupArray(x)``);
* ``system`` tables other than the catalogue's own descriptions.

The engine backstop stands behind every one of these (``readonly=1`` and
``max_memory_usage`` on every read, see :mod:`pi_notebook.sql.engines.chdb`).
"""

from __future__ import annotations

from typing import Literal

from sqlglot import exp

from pi_notebook.sql import functions_clickhouse as ch
from pi_notebook.sql.findings import Finding, rejects, writes

__all__ = [
    "PURE_NODES",
    "SIZED_CLASSES",
    "call_finding",
    "clause_findings",
    "size_findings",
    "table_finding",
]

PURE_NODES: frozenset[type[exp.Expr]] = frozenset({exp.Final, exp.PreWhere})
"""ClickHouse query clauses that only shape a read (``FROM t FINAL``, ``PREWHERE``)."""

SIZED_CLASSES: frozenset[type[exp.Expr]] = frozenset(
    {exp.Repeat, exp.Pad, exp.Space, exp.GenerateSeries, exp.GroupConcat, exp.ArrayAgg}
)
"""sqlglot's typed classes for ClickHouse calls whose size an argument (or the whole input)
sets; they are pure elsewhere, so they are looked at here."""

_AGGREGATE_CLASSES = (
    exp.AnonymousAggFunc,
    exp.CombinedAggFunc,
    exp.ParameterizedAgg,
    exp.CombinedParameterizedAgg,
)


_PARAMETERIZED = (exp.ParameterizedAgg, exp.CombinedParameterizedAgg)
"""``name(parameters)(arguments)``: sqlglot keeps the parameters as ``expressions``."""


def clause_findings(nodes: list[exp.Expr]) -> list[Finding]:
    """``SETTINGS`` and ``FORMAT`` clauses anywhere in the query."""
    found: list[Finding] = []
    for node in nodes:
        if not isinstance(node, exp.Query):
            continue
        args = node.args
        if args.get("settings"):
            # Kept under EXPLAIN too: the tool's own SETTINGS clause goes after the statement.
            found.append(
                writes(
                    "a SETTINGS clause changes query settings (limits, read-only)",
                    when_executed=False,
                )
            )
        if args.get("format"):
            found.append(rejects("a FORMAT clause: the tool chooses how results are returned"))
    return found


def _base_aggregate(name: str) -> str | None:
    """The aggregate under ``name``'s combinators (``avgOrNullIf`` -> ``avg``), if known."""
    for _ in range(4):
        if name in ch.PURE_AGGREGATES or name in ch.BUILDING_AGGREGATES:
            return name
        for suffix in ch.COMBINATORS:
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                break
        else:
            return None
    return name if name in ch.PURE_AGGREGATES or name in ch.BUILDING_AGGREGATES else None


def call_finding(node: exp.Func) -> Finding | Literal[False] | None:
    """The finding for a ClickHouse call, ``None`` when it is a read, or ``False`` when the
    generic rules (typed function classes) decide."""
    if isinstance(node, _AGGREGATE_CLASSES):
        name = node.name.lower()
        base = _base_aggregate(name)
        if base is None:
            return writes(
                f"aggregate {name}() is not known to be free of side effects", when_executed=False
            )
        if base in ch.BUILDING_AGGREGATES:
            return _building(node, name)
        return None
    if not isinstance(node, exp.Anonymous):
        return False
    name = node.name.lower()
    if name in ch.REJECT_FUNCTIONS:
        what = (
            "reads the kernel's Python variables"
            if name == "python"
            else ("runs a program or loads native code on the host")
        )
        return rejects(f"function {name}() {what}")
    if name in ch.EXTERNAL_TABLE_FUNCTIONS:
        return writes(
            f"{name}() reaches files, URLs, other servers or a dictionary's source",
            when_executed=False,
        )
    if name in ch.SIZED_FUNCTIONS:
        return _sized(node, name)
    if name in ch.PURE_FUNCTIONS or name in ch.PURE_TABLE_FUNCTIONS:
        return None
    return writes(f"function {name}() is not known to be free of side effects", when_executed=False)


def _small(value: exp.Expr | None) -> bool:
    """An integer literal of at most :data:`MAX_LITERAL_SIZE` (or a non-numeric literal)."""
    if isinstance(value, exp.Neg):
        value = value.this
    if not isinstance(value, exp.Literal):
        return False
    if value.is_string:
        return True
    try:
        return abs(int(value.this)) <= ch.MAX_LITERAL_SIZE
    except ValueError:  # 1e12, 0.5: not an integer count
        return False


def _sized(node: exp.Expr, name: str) -> Finding | None:
    args = [value for value in node.args.values() if isinstance(value, exp.Expr)]
    args += [value for value in node.expressions if isinstance(value, exp.Expr)]
    numeric = [a for a in args if not (isinstance(a, exp.Literal) and a.is_string)]
    numeric = [a for a in numeric if not isinstance(a, exp.Array | exp.Identifier)]
    if name in ("repeat", "leftpad", "rightpad", "space", "pad") or isinstance(
        node, exp.Repeat | exp.Pad | exp.Space
    ):
        numeric = [a for a in numeric if a is not node.this] or numeric
    if all(_small(a) for a in numeric):
        return None
    return writes(
        f"{name}() with a size that is not a literal of at most "
        f"{ch.MAX_LITERAL_SIZE:,} can exhaust memory or time"
    )


def _building(node: exp.Func, name: str) -> Finding | None:
    params = node.expressions if isinstance(node, _PARAMETERIZED) else []
    if params and _small(params[0]):
        return None
    return writes(f"{name}() keeps its whole input: bound it, as in {name}(1000)(x)")


def size_findings(nodes: list[exp.Expr]) -> list[Finding]:
    """Findings for the typed calls of :data:`SIZED_CLASSES`."""
    found: list[Finding] = []
    for node in nodes:
        if isinstance(node, exp.GroupConcat | exp.ArrayAgg):
            name = "groupConcat" if isinstance(node, exp.GroupConcat) else "groupArray"
            found.append(
                writes(f"{name}() keeps its whole input: bound it, as in groupArray(1000)(x)")
            )
            continue
        finding = _sized(node, type(node).__name__.lower())
        if finding is not None:
            found.append(finding)
    return found


def table_finding(table: exp.Table, schema: str, name: str) -> Finding | None:
    """Why reading ``table`` is not a plain read: a table function sqlglot took for a table
    with a column list (``FROM dictionary('d')``: ClickHouse calls the function), or a
    ``system`` table outside the catalogue."""
    alias = table.args.get("alias")
    if isinstance(alias, exp.TableAlias) and alias.columns and not alias.name:
        if name in ch.REJECT_FUNCTIONS:
            return rejects(f"FROM {name}(...) runs a program, loads code or reads Python objects")
        return writes(f"FROM {name}(...) calls the table function {name}", when_executed=False)
    text = table.sql(dialect="clickhouse")[:80]
    if schema != "system" or name in ch.SYSTEM_READS:
        return None
    return writes(
        f"{text} may expose users, grants, settings, credentials, other queries or host paths"
    )
