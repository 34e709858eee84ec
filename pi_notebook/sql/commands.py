"""The harmless utility statements sqlglot does not parse into a query tree.

``SHOW``, ``DESCRIBE``, ``EXPLAIN``, ``PRAGMA`` and DuckDB ``SUMMARIZE`` come back from
sqlglot as a generic ``Command`` (or a loose parse) in most dialects, so they are read
from their tokens here, form by form, instead of refusing the whole family:

* ``EXPLAIN`` without ``ANALYZE`` only plans: the inner statement may be a write, but
  function calls and file reads in it still count (planners fold functions and bind
  table functions). ``EXPLAIN ANALYZE`` executes: the inner statement must be a read.
* ``SHOW`` and ``DESCRIBE`` of a name read metadata; with a function call in a filter
  they are not reads.
* ``PRAGMA`` (SQLite, DuckDB) is a read only for listed pragmas, without assignment.

EXPLAIN's options (where the statement starts, whether one executes it) are read by
:mod:`pi_notebook.sql.explain_options`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlglot.tokenizer_core import Token, TokenType

from pi_notebook.sql import warehouses
from pi_notebook.sql.catalogs import SECRET_SETTINGS
from pi_notebook.sql.dialect_rules import DialectRules
from pi_notebook.sql.explain_options import explain_options
from pi_notebook.sql.findings import Finding, writes
from pi_notebook.sql.lexical import word
from pi_notebook.sql.pragmas import PRAGMAS, pragma_statement_is_read

__all__ = ["COMMAND_WORDS", "Assess", "Assessment", "command_assessment"]


@dataclass(frozen=True, slots=True)
class Assessment:
    """Findings about one statement, plus what an enclosing ``EXPLAIN`` needs.

    Attributes:
        findings: every reason the statement is not a pure read.
        plannable: the statement is a query or DML that ``EXPLAIN`` plans without
            executing (so its ``when_executed`` findings do not apply under ``EXPLAIN``).
        read_reason: the reason given when there is no finding.
    """

    findings: tuple[Finding, ...]
    plannable: bool = False
    read_reason: str | None = None


Assess = Callable[[str, str, int], Assessment]
"""``assess(sql, dialect, depth)``: classify an inner statement (EXPLAIN's target)."""

COMMAND_WORDS = frozenset({"EXPLAIN", "DESCRIBE", "DESC", "SHOW", "PRAGMA", "SUMMARIZE"})
"""First words of the statements handled here."""

_QUERY_STARTS = frozenset(
    {
        "SELECT",
        "WITH",
        "FROM",
        "VALUES",
        "TABLE",
        "INSERT",
        "UPDATE",
        "DELETE",
        "MERGE",
        "REPLACE",
        "CREATE",
    }
)
_DUCKDB_SHOW_LISTS = frozenset({"TABLES", "ALL", "DATABASES", "SCHEMAS", "FUNCTIONS"})
"""DuckDB ``SHOW`` forms that list catalog entries; any other ``SHOW x`` describes ``x``."""
_NAME_TYPES = frozenset(
    {
        TokenType.IDENTIFIER,
        TokenType.STRING,
        TokenType.NUMBER,
        TokenType.DOT,
        TokenType.COMMA,
        TokenType.EQ,
        TokenType.STAR,
    }
)


def command_assessment(
    tokens: Sequence[Token], sql: str, dialect: str, depth: int, assess: Assess
) -> Assessment:
    """Assess a statement whose first word is in :data:`COMMAND_WORDS`."""
    first = word(tokens[0])
    if first == "PRAGMA":
        return _pragma(tokens, dialect)
    rules = warehouses.rules_of(dialect)
    if first == "SHOW" and rules is not None and not rules.has_show:
        return Assessment((writes(f"SHOW is not a {dialect} statement"),))
    if first == "SHOW":
        return _show(tokens, sql, dialect, depth, assess)
    if first == "SUMMARIZE":
        return _summarize(tokens, sql, dialect, depth, assess)
    if dialect == "clickhouse":
        return _clickhouse_explain(tokens, sql, dialect, depth, assess)
    if rules is not None and first in ("DESCRIBE", "DESC"):
        return _warehouse_describe(tokens, sql, dialect, depth, assess, rules)
    if rules is not None and not rules.has_explain:
        return Assessment((writes(f"{first} is not a {dialect} statement"),))
    return _explain(tokens, sql, dialect, depth, assess)


_DESCRIBED_NAMES = frozenset({"FUNCTION", "DATABASE", "SCHEMA", "CATALOG"})
"""Kinds of ``DESCRIBE`` that show a routine's or a schema's metadata rather than a table
source's (``DESCRIBE HISTORY``/``DETAIL`` read a table, a path read included)."""


def _warehouse_describe(
    tokens: Sequence[Token],
    sql: str,
    dialect: str,
    depth: int,
    assess: Assess,
    rules: DialectRules,
) -> Assessment:
    """A warehouse's ``DESCRIBE [kind...] name [column]`` or ``DESCRIBE [QUERY] query``: the
    name is judged as the table source it is (a path read asks); an unknown kind asks."""
    first = word(tokens[0])
    if not rules.describe:
        return Assessment((writes(f"{first} is not a {dialect} statement"),))
    index, kinds = 1, set()
    while index < len(tokens) - 1 and word(tokens[index]) in rules.describe_words:
        kinds.add(word(tokens[index]))
        index += 1
    if rules.describe_kind_required and not kinds:
        kind = word(tokens[1]) if len(tokens) > 1 else ""
        return Assessment(
            (writes(f"{first} {kind or 'of this'} is not known to only read a table's columns"),)
        )
    if index >= len(tokens):
        return Assessment((writes(f"{first} without a name"),))
    if word(tokens[index]) in _QUERY_STARTS or tokens[index].token_type == TokenType.L_PAREN:
        return _describe_query(tokens, sql, dialect, depth, assess, start=index)
    rest = tokens[index:]
    if not _is_plain_name_list(rest):
        return Assessment((writes(f"{first} with an expression that may call functions"),))
    if kinds & _DESCRIBED_NAMES:
        return Assessment((), read_reason=f"{first} reads metadata")
    end = index + 1
    while end + 1 < len(tokens) and tokens[end].token_type == TokenType.DOT:
        end += 2
    target = sql[tokens[index].start : tokens[end - 1].end + 1]
    inner = assess(f"SELECT * FROM {target}", dialect, depth + 1)
    return Assessment(inner.findings, read_reason=f"{first} reads a table's columns")


def _rest(tokens: Sequence[Token], sql: str, start: int) -> str:
    return sql[tokens[start].start : tokens[-1].end + 1]


def _is_plain_name_list(tokens: Sequence[Token]) -> bool:
    """Only words, quoted names, literals and ``= , . *``: no call, no operator."""
    return all(word(token) or token.token_type in _NAME_TYPES for token in tokens)


def _is_name(token: Token) -> bool:
    return bool(word(token)) or token.token_type == TokenType.IDENTIFIER


def _is_table_description(tokens: Sequence[Token]) -> bool:
    """MySQL's ``DESCRIBE [db.]table [column | 'pattern']`` and nothing more."""
    rest = list(tokens)
    if len(rest) >= 3 and rest[1].token_type == TokenType.DOT and _is_name(rest[0]):
        rest = rest[2:]
    if not rest or not _is_name(rest[0]):
        return False
    tail = rest[1:]
    return not tail or (
        len(tail) == 1 and (_is_name(tail[0]) or tail[0].token_type == TokenType.STRING)
    )


def _pragma(tokens: Sequence[Token], dialect: str) -> Assessment:
    if dialect not in PRAGMAS:
        return Assessment((writes(f"PRAGMA is not a {dialect} read statement"),))
    rest = list(tokens[1:])
    # An optional schema prefix: PRAGMA main.table_info(t).
    if len(rest) >= 3 and rest[1].token_type == TokenType.DOT:
        rest = rest[2:]
    if not rest or not word(rest[0]):
        return Assessment((writes("PRAGMA without a recognised name"),))
    name = rest[0].text.lower()
    args = rest[1:]
    if any(token.token_type == TokenType.EQ for token in args):
        return Assessment((writes(f"PRAGMA {name} = ... changes a setting"),))
    if not args:
        if pragma_statement_is_read(dialect, name, "bare"):
            return Assessment((), read_reason=f"PRAGMA {name} only reports")
        return Assessment((writes(f"PRAGMA {name} may change state or is not known"),))
    well_formed = (
        args[0].token_type == TokenType.L_PAREN
        and args[-1].token_type == TokenType.R_PAREN
        and _is_plain_name_list(args[1:-1])
    )
    if well_formed and pragma_statement_is_read(dialect, name, "call"):
        return Assessment((), read_reason=f"PRAGMA {name}(...) only reports")
    return Assessment((writes(f"PRAGMA {name} with an argument may change a setting"),))


def _show(
    tokens: Sequence[Token], sql: str, dialect: str, depth: int, assess: Assess
) -> Assessment:
    if dialect == "clickhouse":
        return _clickhouse_show(tokens)
    if dialect == "sqlite":
        return Assessment((writes("SHOW is not a SQLite statement"),))
    rest = tokens[1:]
    if dialect == "duckdb" and rest and word(rest[0]) in _QUERY_STARTS:
        return _describe_query(tokens, sql, dialect, depth, assess, start=1)
    if dialect == "duckdb" and any(t.token_type == TokenType.STRING for t in rest):
        return Assessment((writes("SHOW of a file reads a host file"),))
    if dialect == "duckdb" and rest and word(rest[0]) not in _DUCKDB_SHOW_LISTS:
        # SHOW <name> is DESCRIBE <name>: the name may be a file (SHOW x.csv reads it).
        inner = assess(f"SELECT * FROM {_rest(tokens, sql, 1)}", dialect, depth + 1)
        return Assessment(inner.findings, read_reason="SHOW of a table reads metadata")
    secret = _secret_show([word(t) or t.text.upper() for t in rest[:3]], dialect)
    if secret is not None:
        return Assessment((writes(secret),))
    if _is_plain_name_list(rest):
        return Assessment((), read_reason="SHOW reads settings or metadata")
    return Assessment((writes("SHOW with an expression that may call functions"),))


def _secret_show(words: list[str], dialect: str) -> str | None:
    """Why ``SHOW <words>`` prints secrets, or None."""
    if dialect == "mysql":
        # Verified on MariaDB 10.11: SHOW GRANTS [FOR ...] and SHOW CREATE USER print
        # IDENTIFIED BY PASSWORD '<hash>'. SHOW CREATE SERVER (MariaDB 11.7+, documented)
        # prints the server's PASSWORD option.
        if words[:1] == ["GRANTS"] or words[:2] in (["CREATE", "USER"], ["CREATE", "SERVER"]):
            what = "GRANTS" if words[0] == "GRANTS" else " ".join(words[:2])
            return f"SHOW {what} shows password hashes or passwords"
    if dialect == "postgres" and words and words[0].lower() in SECRET_SETTINGS["postgres"]:
        # SHOW ALL lists primary_conninfo, whose password a superuser sees.
        return f"SHOW {words[0].lower()} shows settings that hold passwords or commands"
    return None


def _summarize(
    tokens: Sequence[Token], sql: str, dialect: str, depth: int, assess: Assess
) -> Assessment:
    if dialect != "duckdb" or len(tokens) < 2:
        return Assessment((writes("SUMMARIZE is a DuckDB statement"),))
    # SUMMARIZE runs its query, so the target must be a read in every respect.
    target = _rest(tokens, sql, 1)
    inner_sql = target if word(tokens[1]) in _QUERY_STARTS else f"SELECT * FROM {target}"
    inner = assess(inner_sql, dialect, depth + 1)
    return Assessment(inner.findings, read_reason="SUMMARIZE of a pure read")


def _explain(
    tokens: Sequence[Token], sql: str, dialect: str, depth: int, assess: Assess
) -> Assessment:
    first = word(tokens[0])
    if first in ("DESCRIBE", "DESC") and dialect not in ("mysql", "duckdb"):
        return Assessment((writes(f"{first} is not a {dialect} statement"),))
    rules = warehouses.rules_of(dialect)
    index, analyze = explain_options(tokens, dialect, rules)
    if index >= len(tokens):
        return Assessment((writes(f"{first} without a statement"),))
    start_word = word(tokens[index])
    if start_word not in _QUERY_STARTS and not tokens[index].token_type == TokenType.L_PAREN:
        # EXPLAIN/DESCRIBE of a table name (MySQL, DuckDB) shows its columns.
        if dialect == "duckdb":
            inner = assess(f"SELECT * FROM {_rest(tokens, sql, index)}", dialect, depth + 1)
            return Assessment(inner.findings, read_reason=f"{first} of a table reads metadata")
        if dialect == "mysql" and not analyze and _is_table_description(tokens[index:]):
            return Assessment((), read_reason=f"{first} of a table reads metadata")
        if not (dialect == "mysql" and start_word == "FOR"):
            return Assessment((writes(f"{first} of something that is not a query"),))
        if _is_plain_name_list(tokens[index:]):
            return Assessment((), read_reason="EXPLAIN FOR CONNECTION reads a plan")
    if analyze:
        inner = assess(_rest(tokens, sql, index), dialect, depth + 1)
        findings = tuple(
            Finding(f.kind, f"{first} ANALYZE executes the statement: {f.reason}", False)
            for f in inner.findings
        )
        return Assessment(findings, read_reason=f"{first} ANALYZE of a pure read")
    return _describe_query(tokens, sql, dialect, depth, assess, start=index)


def _describe_query(
    tokens: Sequence[Token], sql: str, dialect: str, depth: int, assess: Assess, *, start: int
) -> Assessment:
    """Plan-only inspection of a statement: what planning alone may do still counts."""
    first = word(tokens[0])
    inner = assess(_rest(tokens, sql, start), dialect, depth + 1)
    if inner.plannable:
        kept = tuple(f for f in inner.findings if not f.when_executed)
    else:
        kept = inner.findings
    return Assessment(kept, read_reason=f"{first} only plans the statement; it does not run it")


_CLICKHOUSE_SHOW_LISTS = frozenset(
    """TABLES DATABASES COLUMNS FIELDS INDEX INDEXES INDICES KEYS ENGINES FUNCTIONS
    DICTIONARIES FULL EXTENDED TEMPORARY""".split()
)
"""ClickHouse ``SHOW`` forms that list schema objects. The others (``GRANTS``, ``USERS``,
``ACCESS``, ``SETTINGS``, ``PROCESSLIST``, ``QUOTA``, ``CREATE USER``...) show users,
grants, settings or other sessions' queries: a person decides."""
_CLICKHOUSE_SHOW_CREATE = frozenset({"TABLE", "VIEW", "DATABASE", "TEMPORARY"})
_CLICKHOUSE_EXPLAIN_KINDS = frozenset(
    {"AST", "SYNTAX", "QUERY", "TREE", "PLAN", "PIPELINE", "ESTIMATE"}
)


def _clickhouse_show(tokens: Sequence[Token]) -> Assessment:
    words = [word(t) for t in tokens[1:3]]
    listed = bool(words) and words[0] in _CLICKHOUSE_SHOW_LISTS
    created = words[:1] == ["CREATE"] and words[1:2] and words[1] in _CLICKHOUSE_SHOW_CREATE
    if not (listed or created):
        shown = " ".join(w for w in words if w) or "this"
        return Assessment(
            (writes(f"SHOW {shown} may show users, grants, settings or other queries"),)
        )
    if _is_plain_name_list(tokens[1:]):
        return Assessment((), read_reason="SHOW reads metadata")
    return Assessment((writes("SHOW with an expression that may call functions"),))


def _clickhouse_explain(
    tokens: Sequence[Token], sql: str, dialect: str, depth: int, assess: Assess
) -> Assessment:
    """ClickHouse ``DESCRIBE [TABLE] x`` (the columns of a table, table function or query) and
    ``EXPLAIN [AST|SYNTAX|QUERY TREE|PLAN|PIPELINE|ESTIMATE] [name = value, ...] query``
    (no EXPLAIN ANALYZE, but scalar subqueries run while planning: the query must be a read)."""
    first = word(tokens[0])
    index = 1
    if first in ("DESCRIBE", "DESC"):
        if index < len(tokens) and word(tokens[index]) == "TABLE":
            index += 1
        if index >= len(tokens):
            return Assessment((writes(f"{first} without a table"),))
        target = _rest(tokens, sql, index)
        inner = assess(f"SELECT * FROM {target}", dialect, depth + 1)
        return Assessment(inner.findings, read_reason=f"{first} reads a table's columns")
    while index < len(tokens) and word(tokens[index]) in _CLICKHOUSE_EXPLAIN_KINDS:
        index += 1
    # Settings of the explanation: name = literal, separated by commas.
    while (
        index + 2 < len(tokens)
        and word(tokens[index])
        and tokens[index + 1].token_type == TokenType.EQ
        and tokens[index + 2].token_type in (TokenType.NUMBER, TokenType.STRING)
    ):
        index += 3
        if index < len(tokens) and tokens[index].token_type == TokenType.COMMA:
            index += 1
    if index >= len(tokens):
        return Assessment((writes(f"{first} without a statement"),))
    if word(tokens[index]) not in _QUERY_STARTS and tokens[index].token_type != TokenType.L_PAREN:
        return Assessment((writes(f"{first} of something that is not a query"),))
    # ClickHouse runs scalar subqueries while it plans (their values land in the plan's
    # text): the statement explained must be a read in every respect.
    inner = assess(_rest(tokens, sql, index), dialect, depth + 1)
    return Assessment(inner.findings, read_reason=f"{first} of a pure read")
