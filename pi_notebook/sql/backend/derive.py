"""What a write would touch, derived as reads with sqlglot (the write preview).

From one write statement this module derives, without touching a database:

* ``count_sql``: a ``SELECT count(*)`` of the rows the write would change (UPDATE and DELETE:
  the target's rows matching the WHERE; INSERT ... SELECT and CREATE TABLE ... AS: the source
  rows; DROP TABLE and TRUNCATE of one table: all of its rows);
* ``static_rows``: the count when the statement itself states it (INSERT ... VALUES, INSERT
  ... DEFAULT VALUES, and a schema change that changes no rows: CREATE TABLE, INDEX, VIEW);
* ``sample_sql`` / ``sample``: up to :data:`SAMPLE_ROWS` of those rows;
* ``pure``: every expression the statement evaluates (SET values, WHERE, the INSERT source,
  RETURNING, conflict updates) is a pure read by the classifier, so running the statement has
  no effect beyond its own rows (and what the engine adds: triggers, defaults);
* ``target``: the table written, for the engine's checks (triggers, storage engine).

The plan's type is :class:`~.write_plan.WritePlan` (re-exported here).

Every derived SQL text is classified again and kept only when it is a ``read``. Derivation
fails closed: what it cannot derive exactly is ``None`` (UPDATE ... FROM, DELETE ... USING,
multi-table MySQL forms, MERGE, INSERT with a conflict clause have no ``count_sql``).
:func:`plan_write` never raises.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any

import sqlglot
from sqlglot import exp

from pi_notebook.sql import classify
from pi_notebook.sql.backend.write_plan import SAMPLE_ROWS, TableRef, WritePlan

__all__ = ["SAMPLE_ROWS", "TableRef", "WritePlan", "plan_write"]

_ALIAS = "_pi_q"


def plan_write(sql: str, dialect: str) -> WritePlan:
    """Derive the reads of the write ``sql`` (sqlglot ``dialect``); never raises."""
    return _plan_cached(sql, dialect)


@lru_cache(maxsize=256)
def _plan_cached(sql: str, dialect: str) -> WritePlan:
    try:
        roots = [r for r in sqlglot.parse(sql, read=dialect) if r is not None]
    except Exception as exc:
        return WritePlan(
            operation="OTHER", note=f"the statement could not be parsed ({type(exc).__name__})"
        )
    if len(roots) != 1:
        return WritePlan(operation="OTHER", note="not exactly one statement")
    try:
        plan = _derive(roots[0], dialect)
    except Exception as exc:  # an unexpected tree shape: no derivation rather than a wrong one
        return WritePlan(
            operation="OTHER",
            note=f"the statement's rows could not be derived ({type(exc).__name__})",
        )
    return _checked(plan, dialect)


def _checked(plan: WritePlan, dialect: str) -> WritePlan:
    """Keep only derived SQL the classifier calls a pure read."""

    def is_read(text: str | None) -> bool:
        return text is not None and classify(text, dialect).kind == "read"

    count_sql = plan.count_sql if is_read(plan.count_sql) else None
    sample_sql = plan.sample_sql if is_read(plan.sample_sql) else None
    rows_sql = plan.rows_sql if is_read(plan.rows_sql) else None
    pure = plan.pure and all(is_read(p) for p in plan.probes)
    note = plan.note
    if plan.dml and plan.pure and not pure:
        note = note or "it evaluates something that is not a pure read"
    elif plan.count_sql is not None and count_sql is None:
        note = note or "counting its rows would itself not be a pure read"
    return WritePlan(
        operation=plan.operation,
        dml=plan.dml,
        pure=pure,
        target=plan.target,
        count_sql=count_sql,
        static_rows=plan.static_rows,
        sample_sql=sample_sql,
        sample=plan.sample,
        note=note,
        probes=plan.probes,
        rows_sql=rows_sql,
        set_columns=plan.set_columns,
        cascade=plan.cascade,
    )


def _derive(root: exp.Expr, dialect: str) -> WritePlan:
    if isinstance(root, exp.Update):
        return _update(root, dialect)
    if isinstance(root, exp.Delete):
        return _delete(root, dialect)
    if isinstance(root, exp.Insert):
        return _insert(root, dialect)
    if isinstance(root, exp.Merge):
        return WritePlan(
            operation="MERGE", dml=True, note="a MERGE's rows are not derived in advance"
        )
    if isinstance(root, exp.TruncateTable):
        tables = [t for t in root.expressions if isinstance(t, exp.Table)]
        cascade = str(root.args.get("option") or "").upper() == "CASCADE"
        return _whole_table("TRUNCATE", tables, dialect, cascade=cascade)
    if isinstance(root, exp.Drop):
        kind = str(root.args.get("kind") or "").upper()
        if kind == "TABLE":
            return _whole_table(
                "DROP TABLE",
                list(root.args.get("tables") or []),
                dialect,
                cascade=bool(root.args.get("cascade")),
            )
        if kind in ("INDEX", "VIEW"):
            return WritePlan(operation="DDL", static_rows=0)
        return WritePlan(
            operation="DDL", note=f"DROP {kind or 'of this kind'}: rows are not counted"
        )
    if isinstance(root, exp.Create):
        return _create(root, dialect)
    if isinstance(root, exp.Alter):
        return WritePlan(operation="DDL", note="a schema change: rows are not counted")
    return WritePlan(operation="OTHER", note="this statement's effect is not derived in advance")


def _sql(node: exp.Expr, dialect: str) -> str:
    return node.sql(dialect=dialect)


def _ref(table: exp.Table, dialect: str) -> TableRef:
    plain = exp.Table(this=table.this.copy(), db=table.args.get("db"))
    return TableRef(name=table.name, schema=table.db, sql=plain.sql(dialect=dialect))


def _with(root: exp.Expr) -> exp.With | None:
    value = root.args.get("with_") or root.args.get("with")
    return value if isinstance(value, exp.With) else None


def _select(exprs: list[exp.Expr], source: exp.Expr, root: exp.Expr) -> exp.Select:
    select = exp.Select(expressions=exprs).from_(source.copy(), copy=False)
    with_ = _with(root)
    if with_ is not None:
        select.set("with_", with_.copy())
    return select


def _returning(root: exp.Expr) -> list[exp.Expr]:
    returning = root.args.get("returning")
    return [e.copy() for e in returning.expressions] if returning is not None else []


def _count_and_sample(
    root: exp.Expr, table: exp.Table, where: exp.Expr | None, dialect: str
) -> tuple[str, str, str]:
    """``SELECT count(*)``, a sample and all of ``table``'s rows matching ``where`` (with the
    statement's own ORDER BY / LIMIT, as MySQL allows on UPDATE and DELETE)."""
    inner = _select([exp.Star()], table, root)
    if where is not None:
        inner.where(where.copy(), copy=False)
    order, limit = root.args.get("order"), root.args.get("limit")
    if order is not None:
        inner.set("order", order.copy())
    if limit is not None:
        inner.set("limit", limit.copy())
    sample = exp.select("*").from_(inner.subquery(_ALIAS)).limit(SAMPLE_ROWS)
    if order is None and limit is None:
        counted = inner.copy()
        counted.set("expressions", [exp.Count(this=exp.Star())])
        return _sql(counted, dialect), _sql(sample, dialect), _sql(inner, dialect)
    count = exp.select(exp.Count(this=exp.Star())).from_(inner.subquery(_ALIAS))
    return _sql(count, dialect), _sql(sample, dialect), _sql(inner, dialect)


def _single_target(table: Any) -> exp.Table | None:
    if isinstance(table, exp.Table) and not table.args.get("joins") and table.name:
        return table
    return None


def _update(root: exp.Update, dialect: str) -> WritePlan:
    table = _single_target(root.this)
    values = [a.expression.copy() for a in root.expressions if isinstance(a, exp.EQ)]
    where = root.args.get("where")
    where_expr = where.this if isinstance(where, exp.Where) else None
    source: exp.Expr = root.this
    probe = _select([*values, *_returning(root)] or [exp.Star()], source, root)
    from_ = root.args.get("from_") or root.args.get("from")
    if isinstance(from_, exp.From):
        probe.join(from_.this.copy(), copy=False)
    if where_expr is not None:
        probe.where(where_expr.copy(), copy=False)
    probes = (_sql(probe, dialect),)
    if table is None or from_ is not None or len(values) != len(root.expressions):
        return WritePlan(
            operation="UPDATE",
            dml=True,
            pure=True,
            probes=probes,
            target=_ref(table, dialect) if table is not None else None,
            note="an UPDATE over several tables: its rows are not derived in advance",
        )
    count_sql, sample_sql, rows_sql = _count_and_sample(root, table, where_expr, dialect)
    assigned = tuple(
        a.this.name.lower() for a in root.expressions if isinstance(a.this, exp.Column)
    )
    return WritePlan(
        operation="UPDATE",
        dml=True,
        pure=True,
        target=_ref(table, dialect),
        count_sql=count_sql,
        sample_sql=sample_sql,
        probes=probes,
        rows_sql=rows_sql,
        set_columns=assigned,
    )


def _delete(root: exp.Delete, dialect: str) -> WritePlan:
    table = _single_target(root.this)
    where = root.args.get("where")
    where_expr = where.this if isinstance(where, exp.Where) else None
    probe = _select([exp.Star(), *_returning(root)], root.this, root)
    for item in root.args.get("using") or []:
        probe.join(item.copy(), copy=False)
    if where_expr is not None:
        probe.where(where_expr.copy(), copy=False)
    probes = (_sql(probe, dialect),)
    if table is None or root.args.get("using") or root.args.get("tables"):
        return WritePlan(
            operation="DELETE",
            dml=True,
            pure=True,
            probes=probes,
            target=_ref(table, dialect)
            if table is not None and not root.args.get("tables")
            else None,
            note="a DELETE over several tables: its rows are not derived in advance",
        )
    count_sql, sample_sql, rows_sql = _count_and_sample(root, table, where_expr, dialect)
    return WritePlan(
        operation="DELETE",
        dml=True,
        pure=True,
        target=_ref(table, dialect),
        count_sql=count_sql,
        sample_sql=sample_sql,
        probes=probes,
        rows_sql=rows_sql,
    )


def _insert(root: exp.Insert, dialect: str) -> WritePlan:
    this = root.this
    table = this.this if isinstance(this, exp.Schema) else this
    target = _ref(table, dialect) if isinstance(table, exp.Table) and table.name else None
    probes: list[str] = []
    extra = [*_returning(root)]
    conflict = root.args.get("conflict")
    if conflict is not None:
        extra.extend(e.copy() for e in conflict.find_all(exp.EQ))
    if extra and isinstance(table, exp.Table):
        probes.append(_sql(exp.select(*extra).from_(table.copy()), dialect))
    exact = conflict is None and not root.args.get("ignore") and not root.args.get("alternative")
    source = root.expression
    note = None if exact else "a conflict clause decides which rows change"
    base = WritePlan(operation="INSERT", dml=True, pure=True, target=target, note=note)
    if root.args.get("default") and source is None:
        return replace(base, static_rows=1 if exact else None, probes=tuple(probes))
    if isinstance(source, exp.Values):
        columns = [c.name for c in this.expressions] if isinstance(this, exp.Schema) else []
        return _insert_values(base, root, source, columns, probes, exact, dialect)
    if isinstance(source, exp.Query):
        return _insert_query(base, root, source, probes, exact, dialect)
    return WritePlan(
        operation="INSERT",
        dml=True,
        target=target,
        note="this INSERT's rows are not derived in advance",
    )


def _insert_values(
    base: WritePlan,
    root: exp.Insert,
    source: exp.Values,
    columns: list[str],
    probes: list[str],
    exact: bool,
    dialect: str,
) -> WritePlan:
    """INSERT ... VALUES: the rows it adds are stated, and shown as the sample."""
    rows = [t.expressions if isinstance(t, exp.Tuple) else [t] for t in source.expressions]
    values = source.copy()
    values.set("alias", exp.TableAlias(this=exp.to_identifier(_ALIAS)))
    wrapped = _select([exp.Star()], values, root)
    return replace(
        base,
        probes=(*probes, _sql(wrapped, dialect)),
        static_rows=len(rows) if exact else None,
        sample=_literal_sample(columns, rows, dialect),
    )


def _insert_query(
    base: WritePlan,
    root: exp.Insert,
    source: exp.Query,
    probes: list[str],
    exact: bool,
    dialect: str,
) -> WritePlan:
    """INSERT ... SELECT: the source query's rows, counted and sampled (with the statement's
    own WITH)."""
    with_ = _with(root)
    inner = source.copy()
    if with_ is not None and _with(inner) is None:
        inner.set("with_", with_.copy())
    probe = _sql(inner, dialect)
    count = exp.select(exp.Count(this=exp.Star())).from_(inner.subquery(_ALIAS))
    sample = exp.select("*").from_(inner.subquery(_ALIAS)).limit(SAMPLE_ROWS)
    return replace(
        base,
        count_sql=_sql(count, dialect) if exact else None,
        sample_sql=_sql(sample, dialect),
        probes=(*probes, probe),
    )


def _literal_sample(
    columns: list[str], rows: list[list[exp.Expr]], dialect: str
) -> tuple[list[str], list[tuple[Any, ...]]] | None:
    """The first rows of a VALUES list, each value as a Python literal or its SQL text."""
    if not rows:
        return None
    width = len(rows[0])
    names = columns if len(columns) == width else [f"column{i + 1}" for i in range(width)]
    shown: list[tuple[Any, ...]] = []
    for row in rows[:SAMPLE_ROWS]:
        shown.append(tuple(_literal(v, dialect) for v in row))
    return names, shown


def _literal(value: exp.Expr, dialect: str) -> Any:
    if isinstance(value, exp.Null):
        return None
    if isinstance(value, exp.Literal | exp.Boolean):
        try:
            return value.to_py()
        except Exception:
            return value.sql(dialect=dialect)
    return value.sql(dialect=dialect)


def _whole_table(operation: str, tables: list[Any], dialect: str, *, cascade: bool) -> WritePlan:
    if len(tables) != 1 or _single_target(tables[0]) is None:
        return WritePlan(operation=operation, note="several tables: rows are not counted")
    table: exp.Table = tables[0]
    plain = exp.Table(this=table.this.copy(), db=table.args.get("db"))
    count = exp.select(exp.Count(this=exp.Star())).from_(plain.copy())
    sample = exp.select("*").from_(plain.copy()).limit(SAMPLE_ROWS)
    return WritePlan(
        operation=operation,
        target=_ref(table, dialect),
        count_sql=_sql(count, dialect),
        sample_sql=_sql(sample, dialect),
        cascade=cascade,
        rows_sql=_sql(exp.select("*").from_(plain.copy()), dialect),
    )


def _create(root: exp.Create, dialect: str) -> WritePlan:
    kind = str(root.args.get("kind") or "").upper()
    source = root.expression
    if kind == "TABLE" and isinstance(source, exp.Query):
        count = exp.select(exp.Count(this=exp.Star())).from_(source.copy().subquery(_ALIAS))
        sample = exp.select("*").from_(source.copy().subquery(_ALIAS)).limit(SAMPLE_ROWS)
        return WritePlan(
            operation="CREATE TABLE AS",
            count_sql=_sql(count, dialect),
            sample_sql=_sql(sample, dialect),
        )
    if (kind in ("TABLE", "INDEX", "VIEW") and source is None) or kind == "VIEW":
        return WritePlan(operation="DDL", static_rows=0)
    return WritePlan(operation="DDL", note=f"CREATE {kind or 'of this kind'}: rows are not counted")
