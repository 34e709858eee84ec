"""The hooks a warehouse dialect adds to the generic checks (Spark, Trino, Snowflake, BigQuery).

The generic walk (``query.py``, ``tables.py``, ``escapes.py``, ``commands.py``) asks a
dialect's :class:`DialectRules` what only that dialect knows: the query clauses that only
shape a read, why a table source reaches past the data, why a call is refused before the
allow-list is looked at, which statements escape the database (recognised from their
tokens), and how its ``EXPLAIN``/``DESCRIBE`` are written. Each dialect's module holds its
table (``spark.py``, ``trino.py``, ``snowflake.py``, ``bigquery.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.tokenizer_core import Token

from pi_notebook.sql.findings import Finding

__all__ = ["DialectRules", "no_call", "no_escape", "no_table"]


def no_table(_table: exp.Table) -> Finding | None:
    """No dialect-specific finding for a table source."""
    return None


def no_call(_node: exp.Func) -> Finding | None:
    """No dialect-specific finding for a call (the allow-list decides)."""
    return None


def no_escape(_sql: str, _tokens: Sequence[Token], _words: Sequence[str]) -> list[Finding]:
    """No dialect-specific statement found from tokens."""
    return []


@dataclass(frozen=True, kw_only=True)
class DialectRules:
    """What one warehouse dialect adds to the generic checks.

    Attributes:
        pure_nodes: parse-tree classes that only shape a read in this dialect (time travel,
            ``DISTRIBUTE BY``, ``MATCH_RECOGNIZE``...).
        table_finding: why a table source is not a plain read (a path, a stage, a system
            table), or ``None``.
        call_finding: a call refused or asked for before the allow-list is consulted
            (``reflect``, ``SYSTEM$...``), or ``None`` to let the allow-list decide.
        escape_findings: statements recognised from the text, its tokens and their
            upper-case words (``ADD JAR``, ``PUT``, ``${...}`` substitution), before
            sqlglot parses them.
        explain_flags: words allowed between ``EXPLAIN`` and the statement that only
            change how a plan is shown.
        explain_options: names allowed in a parenthesised ``EXPLAIN (...)`` list, or empty
            when the dialect has none.
        has_explain: the dialect has an ``EXPLAIN`` statement.
        has_show: the dialect has ``SHOW`` statements.
        describe: the dialect has ``DESCRIBE``/``DESC`` (of a table: its columns).
        describe_words: words after ``DESCRIBE`` that say what is described
            (``TABLE``, ``EXTENDED``, ``FUNCTION``...); any other kind asks.
        describe_kind_required: ``DESCRIBE`` always names a kind (Snowflake's ``DESC
            TABLE t``), so a first word outside ``describe_words`` is some other kind.
    """

    pure_nodes: frozenset[type[exp.Expr]] = frozenset()
    table_finding: Callable[[exp.Table], Finding | None] = no_table
    call_finding: Callable[[exp.Func], Finding | None] = no_call
    escape_findings: Callable[[str, Sequence[Token], Sequence[str]], list[Finding]] = no_escape
    explain_flags: frozenset[str] = frozenset()
    explain_options: frozenset[str] = frozenset()
    has_explain: bool = True
    has_show: bool = True
    describe: bool = True
    describe_words: frozenset[str] = frozenset()
    describe_kind_required: bool = False
