"""What naming a table in a query may do beyond reading the data (``FROM x``).

A table source is a read unless it is a host file or URL (DuckDB opens ``'x.csv'``,
``"a/b.parquet"`` and, when no such table exists, ``x.csv``), a catalog that holds secrets
(``catalogs.py``), a pragma with effects (``pragmas.py``), or a table function of a schema
other than the built-ins' (``FROM evil.generate_series(1, 3)`` is a user function).
"""

from __future__ import annotations

from sqlglot import exp

from pi_notebook.sql import catalogs, clickhouse, functions, warehouses
from pi_notebook.sql.findings import Finding, writes
from pi_notebook.sql.pragmas import pragma_table_is_read

__all__ = ["builtin_schema", "table_findings"]

_FILE_LIKE = frozenset("./:\\*?")


def builtin_schema(schema: object, dialect: str) -> bool:
    """The qualifier names the built-ins' schema (``pg_catalog``, or ``"pg_catalog"``:
    quoted names are case-sensitive, so ``"PG_CATALOG"`` is some other schema)."""
    if not isinstance(schema, exp.Identifier):
        return False
    name = schema.name if schema.quoted else schema.name.lower()
    return name in functions.QUALIFIED_SCHEMAS[dialect]


def table_findings(table: exp.Table, dialect: str) -> list[Finding]:
    """Why reading ``table`` is not a plain read (empty when it is one)."""
    rules = warehouses.rules_of(dialect)
    if rules is not None:
        own = rules.table_finding(table)
        if own is not None:
            return [own]
    source = table.this
    if isinstance(source, exp.Literal):
        return [writes("reads a file or URL named in the FROM clause", when_executed=False)]
    if isinstance(source, exp.Func) and (table.args.get("db") or table.args.get("catalog")):
        # FROM evil.generate_series(1, 3) calls a function of schema evil, not the built-in.
        if table.args.get("catalog") or not builtin_schema(table.args["db"], dialect):
            text = table.sql(dialect=dialect)[:80]
            return [
                writes(f"table function {text} is user-defined or unknown", when_executed=False)
            ]
    if not isinstance(source, exp.Identifier):
        return []
    name = source.name.lower()
    schema = table.db.lower()
    if name in catalogs.HOST_FILE_TABLES[dialect]:
        return [writes(f"{name} reads configuration files on the server host")]
    if catalogs.is_listed(catalogs.SECRET_TABLES[dialect], schema, name):
        what = table.sql(dialect=dialect)
        return [writes(f"{what} holds passwords, password hashes, statement logs or raw pages")]
    if name in catalogs.SETTINGS_TABLES[dialect] and not _only_plain_settings(table, dialect):
        return [
            writes(
                f"{name} lists every setting, those holding passwords included: keep rows "
                "by setting name (WHERE name = '...')"
            )
        ]
    if dialect in ("sqlite", "duckdb") and name.startswith("pragma_"):
        if not pragma_table_is_read(dialect, name.removeprefix("pragma_"), with_arguments=False):
            return [writes(f"{name} runs a pragma that may change state", when_executed=False)]
    if dialect == "duckdb":
        return _duckdb_file(table, source, name)
    if dialect == "clickhouse":
        found = clickhouse.table_finding(table, schema, name)
        return [found] if found is not None else []
    return []


def _duckdb_file(table: exp.Table, source: exp.Identifier, name: str) -> list[Finding]:
    if table.args.get("db") and name.rsplit(".", 1)[-1] in catalogs.DUCKDB_FILE_SUFFIXES:
        text = table.sql(dialect="duckdb")
        return [
            writes(
                f"DuckDB reads {text} as a host file when no such table exists", when_executed=False
            )
        ]
    # DuckDB opens a quoted table name that looks like a path or URL as a file, unless a
    # CTE in scope has that name.
    if (
        source.quoted
        and any(char in _FILE_LIKE for char in source.name)
        and not (table.args.get("db") is None and _names_a_cte(table, source.name))
    ):
        return [writes(f"FROM '{source.name}' reads a host file or URL", when_executed=False)]
    return []


def _names_a_cte(table: exp.Table, name: str) -> bool:
    """A CTE named exactly ``name`` is visible where ``table`` is: in its WITH's main query,
    in the later CTEs of that WITH, and in its own body when the WITH is RECURSIVE."""
    child: exp.Expr = table
    parent = table.parent
    while parent is not None:
        if isinstance(parent, exp.With):
            ctes = parent.expressions
            at = next((i for i, cte in enumerate(ctes) if cte is child), 0)
            visible = ctes[: at + 1] if parent.args.get("recursive") else ctes[:at]
        else:
            with_ = parent.args.get("with_")
            visible = (
                with_.expressions if isinstance(with_, exp.With) and child is not with_ else []
            )
        if any(cte.alias == name for cte in visible):
            return True
        child, parent = parent, parent.parent
    return False


def _only_plain_settings(table: exp.Table, dialect: str) -> bool:
    """The query reading ``table`` keeps only rows whose ``name`` is one of some literal,
    non-secret setting names (a top-level ``AND`` of the WHERE clause)."""
    select = table.find_ancestor(exp.Select)
    where = select.args.get("where") if select is not None else None
    if where is None:
        return False
    alias = table.alias_or_name.lower()
    secret = catalogs.SECRET_SETTINGS[dialect]
    for condition in where.this.flatten() if isinstance(where.this, exp.And) else [where.this]:
        names = _setting_names(condition, alias)
        if names is not None:
            return not any(value.lower() in secret for value in names)
    return False


def _setting_names(condition: exp.Expr, alias: str) -> list[str] | None:
    if isinstance(condition, exp.EQ):
        column, values = condition.this, [condition.expression]
    elif isinstance(condition, exp.In) and not condition.args.get("query"):
        column, values = condition.this, condition.expressions
    else:
        return None
    if not isinstance(column, exp.Column) or column.name.lower() != "name":
        return None
    if column.table and column.table.lower() != alias:
        return None
    if not values or not all(isinstance(v, exp.Literal) and v.is_string for v in values):
        return None
    return [value.name for value in values]
