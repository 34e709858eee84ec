"""The warehouse dialects' policy tables, by sqlglot dialect name (see ``dialect_rules.py``)."""

from __future__ import annotations

from pi_notebook.sql import bigquery, snowflake, spark, trino
from pi_notebook.sql.dialect_rules import DialectRules

__all__ = ["RULES", "rules_of"]

RULES: dict[str, DialectRules] = {
    "spark": spark.RULES,
    "trino": trino.RULES,
    "snowflake": snowflake.RULES,
    "bigquery": bigquery.RULES,
}
"""Each warehouse dialect's hooks; SQLite, PostgreSQL, MySQL, DuckDB and ClickHouse have none."""


def rules_of(dialect: str) -> DialectRules | None:
    """The dialect's hooks, or ``None`` for a dialect the generic checks fully cover."""
    return RULES.get(dialect)
