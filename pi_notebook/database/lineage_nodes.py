"""What the lineage tracer reads off sqlglot trees: output column names, the nodes of one scope,
renamed sources, the leftmost SELECT of a set operation, view definitions, the functions known
to read only their arguments, and where an alias is defined.

Each helper raises :class:`~.lineage_result.LineageUnknown` where the tree cannot be followed.
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.scope import Scope

from pi_notebook.sql import functions

from .lineage_result import LineageUnknown
from .set_functions import function_name

__all__ = [
    "CATALOG_COLUMNS",
    "OPAQUE",
    "VIEW_ROWS",
    "alias_columns",
    "find_source",
    "first_line",
    "leftmost",
    "output_names",
    "own_nodes",
    "reads_only_arguments",
    "renamed_index",
    "strip_default_schema",
    "view_query",
]

# Catalog tables with no row data of the user's tables: readable without lineage.
CATALOG_COLUMNS = {"sqlite_master": ("type", "name", "tbl_name", "rootpage", "sql")}
CATALOG_COLUMNS["sqlite_schema"] = CATALOG_COLUMNS["sqlite_master"]
OPAQUE = (exp.Pivot, exp.UnpivotColumns, exp.Columns)
VIEW_ROWS = "\0rows"  # in a view's lineage: what decides which rows it has


def output_names(node: exp.Expr) -> list[str]:
    """The output column names of a query, in order (a set operation BY NAME adds the names
    only its right side has, as DuckDB does)."""
    while isinstance(node, exp.Subquery | exp.Paren):
        node = node.this
    if isinstance(node, exp.SetOperation):
        left = output_names(node.left)
        if not node.args.get("by_name"):
            return left
        folded = {n.casefold() for n in left}
        return left + [n for n in output_names(node.right) if n.casefold() not in folded]
    if isinstance(node, exp.Select):
        if any(isinstance(s, exp.Star) or isinstance(s.unalias(), exp.Star) for s in node.selects):
            raise LineageUnknown("a * could not be expanded")
        return [s.alias_or_name for s in node.selects]
    raise LineageUnknown("the columns of a source could not be listed")


def own_nodes(roots: Iterable[exp.Expr]) -> Iterable[exp.Expr]:
    """Every node of ``roots`` that belongs to their scope (subqueries are scopes of their own)."""
    stack = list(roots)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(c for c in node.iter_expressions() if not isinstance(c, exp.Query))


def reads_only_arguments(call: exp.Func, dialect: str) -> bool:
    """Whether a function's value comes only from its arguments: a built-in the classifier
    knows to be pure (``sql.functions``), not one that runs SQL from a string
    (``query_to_xml``, ``ts_stat``), reads files or is user-defined."""
    if isinstance(call, exp.Anonymous):
        parent = call.parent
        if isinstance(parent, exp.Dot) and parent.expression is call:
            schemas = functions.QUALIFIED_SCHEMAS.get(dialect, frozenset())
            if parent.this.name.casefold() not in schemas:
                return False
        return function_name(call) in functions.PURE_FUNCTIONS.get(dialect, frozenset())
    return type(call).__name__ not in functions.IMPURE_FUNCTION_CLASSES


def alias_columns(scope: Scope, alias: str) -> list[str]:
    """The column list of ``FROM src AS alias(a, b, ...)`` where ``alias`` is defined, if any."""
    current: Scope | None = scope
    while current is not None:
        selected = current.selected_sources.get(alias)
        if selected is not None:
            node = selected[0]
            table_alias = node.args.get("alias") if isinstance(node, exp.Expr) else None
            if isinstance(table_alias, exp.TableAlias):
                return [c.name for c in table_alias.columns]
            return []
        current = current.parent
    return []


def renamed_index(original: list[str], renamed: list[str], column: str) -> int:
    """The position of ``column`` among ``original`` names after the first ones were renamed
    to ``renamed`` (PostgreSQL and DuckDB: the columns past the list keep their names)."""
    effective = [*renamed[: len(original)], *original[len(renamed) :]]
    folded = column.casefold()
    matches = [i for i, n in enumerate(effective) if n.casefold() == folded]
    if len(matches) != 1:
        raise LineageUnknown(f"column {column} of a renamed source could not be resolved")
    return matches[0]


def leftmost(node: exp.Expr) -> exp.Expr:
    """The first SELECT of a set operation (its column names are the result's)."""
    while isinstance(node, exp.SetOperation | exp.Subquery | exp.Paren):
        node = node.left if isinstance(node, exp.SetOperation) else node.this
    return node


def first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


def view_query(definition: str, dialect: str) -> exp.Expr:
    try:
        parsed = sqlglot.parse_one(definition.strip().rstrip(";"), read=dialect)
    except Exception as exc:
        raise LineageUnknown(f"a view definition could not be parsed ({first_line(exc)})") from None
    if isinstance(parsed, exp.Create) and isinstance(parsed.expression, exp.Query):
        return parsed.expression
    return parsed


def strip_default_schema(statement: exp.Expr, default: str | None) -> None:
    """``public.customers`` is ``customers`` when ``public`` is the default schema."""
    allowed = {s.casefold() for s in (default, "main") if s}
    for table in statement.find_all(exp.Table):
        if table.db and not table.catalog and table.db.casefold() in allowed:
            table.set("db", None)


def find_source(scope: Scope, alias: str) -> tuple[Scope, exp.Table | Scope | None]:
    """The scope that defines ``alias`` (``scope`` or an outer one) and the table or scope it
    names; ``(scope, None)`` when no scope defines it."""
    current: Scope | None = scope
    while current is not None:
        source = current.sources.get(alias)
        if isinstance(source, exp.Table | Scope):
            return current, source
        current = current.parent
    return scope, None
