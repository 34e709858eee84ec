"""Column lineage of a read: which table columns each output column of a statement derives from.

Built on sqlglot's optimizer: ``qualify`` (with the engine's schema, so ``SELECT *`` expands and
every column is tied to its source) and ``build_scope`` (CTEs, derived tables, subqueries,
set operations, lateral joins and table functions as scopes). :func:`trace` follows each output
column through aliases, expressions, functions, aggregates, window functions, ``CASE``,
CTEs, derived tables, scalar subqueries, ``UNION``/``INTERSECT``/``EXCEPT`` branches, views
(through their definitions) and whole-row references (``to_json(c)``, ``row_to_json(c)``,
``c.*``, DuckDB's ``SELECT c FROM t c``), down to base-table columns.

Values also reach the output through *which rows* there are and *in which order*, so each
scope (a SELECT, a set operation, a derived table, a subquery) has two more sets of sources,
given to every column it outputs (:meth:`~.lineage_rows.RowSources.rows`):

* *sized*: what decides which rows the scope has, and so how many. The arguments of its table
  functions and of set-returning functions in its projection
  (``(SELECT count(*) FROM generate_series(1, ascii(substr(email, 1, 1))))`` is derived from
  ``email``, and so is ``count(*)`` over ``unnest(string_to_array(email, NULL))``, a length);
  its ``LIMIT``/``OFFSET``/``FETCH`` expressions; each condition (``WHERE``, ``ON``,
  ``HAVING``, ``QUALIFY``) that relates rows to other rows (columns of two sources, an outer
  row, a subquery, a window function, a derived table whose rows are not one table's rows:
  ``g = ascii(substr(email, i, 1))``, ``c2.email < c.email``, ``row_number() OVER (ORDER BY
  email) = 1``); what sizes its sources and the subqueries of its conditions; the values
  compared by ``UNION``, ``INTERSECT``, ``EXCEPT``. :attr:`Lineage.rows` is this set for the result: a row count is
  then a derived value, not a count of rows.
* *ordered*: what decides the order of its rows: ``ORDER BY``, window partitions and orders
  (``rank() OVER (ORDER BY email)``), ``GROUP BY`` and ``DISTINCT`` keys (engines sort to
  group), and the order of its sources unless it aggregates. The result's order shows in
  every column; a ``LIMIT``/``OFFSET`` turns order into which rows pass; an aggregate that
  shows order (``string_agg``, ``list``) or a window function takes its sources' order.

Two rules make the result safe to act on:

* A column ``COUNT`` counts as stored (``count(email)``, ``count(DISTINCT email)``, through
  subqueries that pass it on unchanged) is not a source: a count is not a value of the column
  it counts. Everything else that mentions a column derives from it (``length(email)`` does,
  and so does ``count(CASE WHEN g < ascii(email) THEN 1 END)``: over generated rows a count
  is a value). So ``count(*) FROM customers``, ``count(DISTINCT email)`` and ``city,
  count(*) ... GROUP BY city`` show their values; a ``count(*)`` over rows sized by a column
  does not.
* Anything the tracer does not understand makes the lineage *unknown* (with the reason): a
  table missing from the schema (catalog tables such as ``pg_stats`` included), a column it
  cannot resolve, an unexpanded ``*``, ``PIVOT``, DuckDB's ``COLUMNS(...)``, a table function
  other than a generator or unnest (``pragma_storage_info``, ``duckdb_columns()``,
  ``query(...)``: they read what the statement does not name), a function the classifier does
  not know to be pure (``query_to_xml('SELECT ...')``, ``pg_read_file``, a user-defined one),
  a statement that is not a query, a parse failure. The caller must then show no values at all.

What it does not cover, by design: conditions that compare columns of one source with
constants. ``WHERE email LIKE 'a%'`` tells whether each row shown matched a condition the
model wrote, and the row count how many did: at most a few bits per query (one per row
shown), never a value. Conditions that relate a column to another source are covered above,
since a generated series (or any other table) turns that membership into values. Nor does it
cover the order an engine happens to return rows in when nothing orders them: a condition on
an indexed protected column can make the engine read the index (SQLite, ``WHERE email > ''``
with a UNIQUE ``email``), so rows come back in that column's order. That ranks the table's own
rows against each other; ranking them against chosen values needs rows of another source,
which is covered.
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlglot
from sqlglot import exp

from .lineage_nodes import first_line
from .lineage_result import ColumnLineage, Lineage, LineageUnknown, Source
from .lineage_tracer import Tracer
from .schema import SchemaInfo

__all__ = ["ColumnLineage", "Lineage", "Source", "referenced_tables", "sources_of", "trace"]


def trace(
    sql: str,
    dialect: str,
    schema: SchemaInfo,
    *,
    views: dict[str, dict[str, frozenset[Source]]] | None = None,
) -> Lineage:
    """The lineage of each output column of ``sql``, in result order. Never raises: anything
    it cannot follow gives ``Lineage(columns=None, reason=...)``.

    ``views`` caches the lineage of views between calls on the same schema.
    """
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except Exception as exc:
        return Lineage(
            columns=None, reason=f"the statement could not be parsed ({first_line(exc)})"
        )
    if len(statements) != 1:
        return Lineage(columns=None, reason="the text is not exactly one statement")
    tracer = Tracer(schema, dialect, views=views if views is not None else {})
    try:
        columns = tuple(tracer.trace(statements[0]))
        return Lineage(columns=columns, rows=tracer.result_rows)
    except LineageUnknown as exc:
        return Lineage(columns=None, reason=str(exc))
    except Exception as exc:  # a construct the optimizer trips on: unknown, never a pass
        return Lineage(
            columns=None, reason=f"the statement could not be analysed ({first_line(exc)})"
        )


def referenced_tables(sql: str, dialect: str) -> set[str] | None:
    """Names (case-folded) of every table the statement mentions; ``None`` if unparseable."""
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except Exception:
        return None
    names: set[str] = set()
    for statement in statements:
        names.update(t.name.casefold() for t in statement.find_all(exp.Table) if t.name)
    return names


def sources_of(lineage: Iterable[ColumnLineage]) -> set[Source]:
    """Every base column some output derives from."""
    found: set[Source] = set()
    for column in lineage:
        found |= column.sources
    return found
