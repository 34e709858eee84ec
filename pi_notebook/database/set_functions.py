"""Functions that make rows, as the lineage tracer sees them.

* Calls that make rows (:func:`set_returning`): generators and unnests whose rows come only
  from their arguments (``generate_series``, ``range``, ``unnest``, ``json_each``,
  ``regexp_split_to_table``...). In ``FROM`` they are the only table functions lineage follows:
  any other may read what the statement does not name (``pragma_storage_info('customers')``
  gives the min/max of stored columns; ``duckdb_columns()``, ``query('SELECT ...')``,
  ``read_text`` of the database file), so its lineage is unknown. In a projection
  (PostgreSQL's ``SELECT unnest(...)``, ``generate_series(...)``) the number of rows they make
  derives from their arguments.
* Aggregates whose value does not depend on the order of their input (:data:`ORDER_FREE`):
  ``count``, ``sum``, ``min``... Any other aggregate (``string_agg``, ``list``, ``array_agg``,
  ``first``) shows the order of the rows it reads.
"""

from __future__ import annotations

from sqlglot import exp

__all__ = ["ORDER_FREE", "function_name", "set_returning"]

_SET_CLASSES: tuple[type[exp.Expr], ...] = (
    exp.GenerateSeries,
    exp.ExplodingGenerateSeries,
    exp.Explode,
    exp.Unnest,
)
_SET_NAMES = frozenset(
    """
    generate_series range unnest generate_subscripts regexp_split_to_table string_to_table
    regexp_matches json_each json_each_text jsonb_each jsonb_each_text json_tree
    json_array_elements json_array_elements_text jsonb_array_elements jsonb_array_elements_text
    json_object_keys jsonb_object_keys jsonb_path_query
    """.split()
)

ORDER_FREE: tuple[type[exp.Expr], ...] = (
    exp.Count,
    exp.CountIf,
    exp.Sum,
    exp.Avg,
    exp.Min,
    exp.Max,
    exp.Stddev,
    exp.StddevPop,
    exp.StddevSamp,
    exp.Variance,
    exp.VariancePop,
    exp.ApproxDistinct,
    exp.LogicalAnd,
    exp.LogicalOr,
)
"""Aggregates whose value is the same whatever the order of the rows they read."""


def function_name(node: exp.Expr) -> str:
    """The name a table function is called by (lower case)."""
    if isinstance(node, exp.Anonymous):
        return str(node.this).casefold()
    if isinstance(node, exp.Func):
        return node.sql_name().casefold()
    return node.key.casefold()


def set_returning(node: exp.Expr) -> bool:
    """Whether ``node`` is a call that makes rows (a table function or a set-returning one)."""
    if isinstance(node, _SET_CLASSES):
        return True
    return isinstance(node, exp.Anonymous) and function_name(node) in _SET_NAMES
