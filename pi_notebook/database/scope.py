"""What a write does, in the terms a scoped grant is written in: operations × tables.

The tables a statement *writes* (the target of the ``INSERT``, ``UPDATE`` or ``DELETE``, and
every table joined into that target, as MySQL's multi-table forms may write them) are kept
apart from the tables it only *reads* (a ``SELECT`` source, ``FROM`` / ``USING`` lists,
subqueries): a grant's operations apply to written tables only.

:func:`statement_scope` answers only for one plain data change: an ``INSERT``, ``UPDATE`` or
``DELETE`` (upserts count as both of their operations) whose every table is named plainly and
whose every other part is a pure read by the classifier's own rules. Anything else is outside
every scope and returns ``None``: DDL, privileges, settings, file or network access, table
functions, data-modifying CTEs, statements sqlglot cannot parse, and any table whose name cannot
be determined.

Names are normalised as the engine resolves them: SQLite and DuckDB compare case-insensitively,
PostgreSQL folds unquoted names to lower case and keeps quoted ones, MySQL/MariaDB keep names as
written (table names are case-sensitive there). A qualified name stays qualified
(``public.staging_x`` is not ``staging_x``: the search path may resolve the bare one elsewhere).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import sqlglot
from sqlglot import exp

from pi_notebook.sql import classify

__all__ = ["GRANTABLE_OPERATIONS", "StatementScope", "pattern_matches", "statement_scope"]

GRANTABLE_OPERATIONS = frozenset({"INSERT", "UPDATE", "DELETE"})
"""The only operations a grant may cover."""

_CASE_INSENSITIVE = frozenset({"sqlite", "duckdb"})
_DIALECTS = {"postgresql": "postgres", "mariadb": "mysql"}


@dataclass(frozen=True)
class StatementScope:
    """The operations a statement performs, the tables it writes and the tables it only reads
    (normalised names; a table both written and read is in ``written`` only)."""

    operations: frozenset[str]
    written: frozenset[str]
    read: frozenset[str] = frozenset()

    @property
    def tables(self) -> frozenset[str]:
        """Every table the statement touches."""
        return self.written | self.read


def statement_scope(sql: str, dialect: str) -> StatementScope | None:
    """The scope of ``sql``, or ``None`` when it is outside every scope (see the module)."""
    dialect = _DIALECTS.get(dialect.lower(), dialect.lower())
    return _scope_cached(sql, dialect)


@lru_cache(maxsize=1024)
def _scope_cached(sql: str, dialect: str) -> StatementScope | None:
    if classify(sql, dialect).kind != "write":
        return None
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except Exception:  # unparseable: outside every scope
        return None
    if len(statements) != 1:
        return None
    root = statements[0]
    operations = _operations(root)
    if operations is None:
        return None
    if any(
        isinstance(n, exp.Insert | exp.Update | exp.Delete | exp.Merge)
        for n in root.walk()
        if n is not root
    ):
        return None  # a data-modifying CTE or subquery does more than the root says
    tables = _tables(root, dialect)
    if tables is None or not _rest_is_pure(root, dialect):
        return None
    written = _written(root, dialect)
    if not written:
        return None
    return StatementScope(operations=operations, written=written, read=tables - written)


def _operations(root: exp.Expr) -> frozenset[str] | None:
    if isinstance(root, exp.Update):
        return frozenset({"UPDATE"})
    if isinstance(root, exp.Delete):
        return frozenset({"DELETE"})
    if not isinstance(root, exp.Insert):
        return None
    if root.args.get("overwrite") or root.args.get("is_function"):
        return None  # INSERT OVERWRITE empties the table; INSERT INTO FUNCTION writes elsewhere
    ops = {"INSERT"}
    if str(root.args.get("alternative") or "").upper() == "REPLACE":
        ops.add("DELETE")  # INSERT OR REPLACE deletes the rows it conflicts with
    conflict = root.args.get("conflict")
    if isinstance(conflict, exp.OnConflict):
        action = str(conflict.args.get("action") or "").upper()
        if conflict.args.get("duplicate") or conflict.expressions or action != "DO NOTHING":
            ops.add("UPDATE")
    return frozenset(ops)


def _name(table: exp.Table, dialect: str) -> str | None:
    """The normalised name of a plainly named table, else ``None``."""
    parts = [table.args.get(k) for k in ("catalog", "db", "this")]
    if not isinstance(parts[2], exp.Identifier):
        return None
    if any(p is not None and not isinstance(p, exp.Identifier) for p in parts):
        return None
    return ".".join(_normal(p, dialect) for p in parts if isinstance(p, exp.Identifier))


def _delete_aliases(root: exp.Expr) -> set[int]:
    """The ``Table`` nodes of MySQL's ``DELETE s, a FROM …`` list (aliases, not tables)."""
    listed = root.args.get("tables") if isinstance(root, exp.Delete) else None
    return {id(t) for t in listed or () if isinstance(t, exp.Table)}


def _written(root: exp.Expr, dialect: str) -> frozenset[str] | None:
    """The tables the statement writes: every table in its target clause (for MySQL's
    multi-table ``UPDATE`` and ``DELETE`` that is each joined table too: counted as written,
    never as only read), plus names in a ``DELETE t1, t2 FROM`` list that are no alias."""
    target = root.args.get("this")
    if isinstance(target, exp.Schema):
        target = target.this
    names: set[str] = set()
    aliases: set[str] = set()
    if isinstance(target, exp.Expr):
        for table in [target, *target.find_all(exp.Table)]:
            if not isinstance(table, exp.Table):
                continue
            name = _name(table, dialect)
            if name is not None:
                names.add(name)
            if table.alias:
                aliases.add(table.alias.lower())
    listed = root.args.get("tables") if isinstance(root, exp.Delete) else None
    for table in listed or ():
        if not isinstance(table, exp.Table):
            continue
        name = _name(table, dialect)
        if name is None:
            return None
        if name.lower() not in aliases:
            names.add(name)
    return frozenset(names)


def _tables(root: exp.Expr, dialect: str) -> frozenset[str] | None:
    ctes = {cte.alias_or_name.lower() for cte in root.find_all(exp.CTE)}
    aliases = _delete_aliases(root)
    names: set[str] = set()
    for table in root.find_all(exp.Table):
        if id(table) in aliases:
            continue  # checked by _written (an alias, or a table named there too)
        name = _name(table, dialect)
        if name is None:
            return None  # a table function, a file path literal: not a named table
        if "." not in name and name.lower() in ctes:
            continue  # a CTE's name, not a table (its own tables are walked too)
        names.add(name)
    return frozenset(names) if names else None


def _normal(ident: exp.Identifier, dialect: str) -> str:
    name = ident.name
    if dialect in _CASE_INSENSITIVE or (dialect == "postgres" and not ident.quoted):
        return name.lower()
    return name


def _rest_is_pure(root: exp.Expr, dialect: str) -> bool:
    """Every query and every value the statement computes is a pure read by itself."""
    queries: list[exp.Expr] = []
    values: list[exp.Expr] = []

    def visit(node: exp.Expr) -> None:
        for child in node.iter_expressions():
            if isinstance(child, exp.Query):
                queries.append(child)
            elif isinstance(child, exp.Condition) and not isinstance(child, exp.Column):
                values.append(child)
            else:
                visit(child)

    visit(root)
    probes = [q.sql(dialect=dialect) for q in queries]
    if values:
        probes.append(exp.select(*(v.copy() for v in values)).sql(dialect=dialect))
    return all(classify(p, dialect).kind == "read" for p in probes)


@lru_cache(maxsize=256)
def _pattern(pattern: str) -> re.Pattern[str]:
    # ``*`` and ``?`` never cross a dot: ``staging_*`` is no pattern for ``staging_x.secret``.
    body = "".join("[^.]*" if c == "*" else "[^.]" if c == "?" else re.escape(c) for c in pattern)
    return re.compile(body)


def pattern_matches(pattern: str, table: str, dialect: str) -> bool:
    """Whether the grant's table ``pattern`` covers the normalised ``table`` name."""
    dialect = _DIALECTS.get(dialect.lower(), dialect.lower())
    if dialect in _CASE_INSENSITIVE:
        pattern = pattern.lower()
    return _pattern(pattern).fullmatch(table) is not None
