"""EXPLAIN's options: where the explained statement starts, and whether any option makes
EXPLAIN execute it (``ANALYZE`` and the options that only make sense with it).

What EXPLAIN may explain is :mod:`pi_notebook.sql.commands`'s matter; this module only reads
the options between the word and the statement, from the tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot.tokenizer_core import Token, TokenType

from pi_notebook.sql.dialect_rules import DialectRules
from pi_notebook.sql.lexical import word

__all__ = ["explain_options"]

_EXPLAIN_FLAGS = frozenset(
    {
        "ANALYZE",
        "ANALYSE",
        "VERBOSE",
        "EXTENDED",
        "PARTITIONS",
        "QUERY",
        "PLAN",
        "COSTS",
        "BUFFERS",
        "SETTINGS",
        "WAL",
        "TIMING",
        "SUMMARY",
        "GENERIC_PLAN",
        "MEMORY",
    }
)
_PLAN_ONLY_OPTIONS = frozenset(
    {"VERBOSE", "COSTS", "SETTINGS", "GENERIC_PLAN", "BUFFERS", "SUMMARY", "MEMORY", "FORMAT"}
)
"""Options of a parenthesised EXPLAIN list that plan without executing (written unquoted).
``WAL``, ``TIMING`` and ``SERIALIZE`` only make sense with ANALYZE, so they count as it."""


def explain_options(
    tokens: Sequence[Token], dialect: str, rules: DialectRules | None = None
) -> tuple[int, bool]:
    """Index of the first token after EXPLAIN's options, and whether they may execute it.

    Any mention of ANALYZE counts, even ``ANALYZE false`` (DuckDB executes that too):
    being wrong that way costs a click, the other way runs a write. In a parenthesised
    list only plain option names known to plan without executing pass; a quoted or
    Unicode-escaped name (``("analyze")``, ``(U&"\\0061nalyze")``, which PostgreSQL and
    DuckDB both execute), an unknown name or anything odd counts as ANALYZE.
    """
    index = 1
    analyze = False
    flags = rules.explain_flags if rules is not None else frozenset()
    options = rules.explain_options if rules is not None else frozenset()
    while index < len(tokens):
        token = tokens[index]
        name = word(token)
        # PostgreSQL, DuckDB and Trino take a parenthesised option list: EXPLAIN (ANALYZE, ...).
        if (
            token.token_type == TokenType.L_PAREN
            and index == 1
            and (dialect in ("postgres", "duckdb") or options)
        ):
            index, executes = _option_list(tokens, index, options or _PLAN_ONLY_OPTIONS)
            analyze = analyze or executes
            continue
        if name in _EXPLAIN_FLAGS or name in flags:
            analyze = analyze or name in ("ANALYZE", "ANALYSE")
            index += 1
            continue
        if (
            name == "FORMAT"
            and index + 2 < len(tokens)
            and tokens[index + 1].token_type == TokenType.EQ
        ):
            index += 3
            continue
        break
    return index, analyze


def _option_list(
    tokens: Sequence[Token], start: int, plan_only: frozenset[str]
) -> tuple[int, bool]:
    """Skip ``( name [value], ... )`` from ``start``; True when an option may execute."""
    index, depth, executes = start + 1, 1, False
    expect_name = True
    while index < len(tokens) and depth:
        token = tokens[index]
        kind = token.token_type
        if kind == TokenType.L_PAREN:
            depth += 1
            executes = True  # no plan-only option takes a parenthesised value
        elif kind == TokenType.R_PAREN:
            depth -= 1
        elif kind == TokenType.COMMA and depth == 1:
            expect_name = True
        elif expect_name:
            executes = executes or word(token) not in plan_only
            expect_name = False
        index += 1
    return index, executes or depth != 0
