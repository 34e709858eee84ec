"""``classify(sql, dialect)``: is this SQL a pure read, a write, or never to be run?

The order of the checks is the policy (D1):

1. the input itself (text, size, NUL bytes, surrogates, dialect) -> ``reject``;
2. tokens: exactly one statement, no executable or nested comments, sane nesting,
   escapes out of the database (``COPY ... PROGRAM``, ``INTO OUTFILE``..., see
   ``escapes.py``) -> ``reject``; quoting that depends on server settings, MySQL calls the
   tree does not show (``mysql_calls.py``) -> ``write``;
3. utility statements (``EXPLAIN``, ``SHOW``, ``DESCRIBE``, ``PRAGMA``, ``SUMMARIZE``)
   form by form, see ``commands.py``;
4. everything else is parsed by sqlglot; a query root is walked node by node against
   the allow-lists (``query.py``, ``functions.py``); any other root is a ``write``.

Never raises: any failure of the parser is a ``reject`` with the reason.
"""

from __future__ import annotations

import re
from functools import lru_cache, partial

from sqlglot import exp
from sqlglot.tokenizer_core import Token, TokenType

from pi_notebook.sql import duckdb_parser, escapes, lexical, mysql_calls
from pi_notebook.sql.commands import COMMAND_WORDS, Assessment, command_assessment
from pi_notebook.sql.findings import Finding, rejects, verdict_of, writes
from pi_notebook.sql.query import QUERY_ROOTS, query_findings
from pi_notebook.sql.statements import STACKED, one_statement
from pi_notebook.sql.verdict import Verdict, reject

CACHE_SIZE = 4096
"""Verdicts kept, keyed by (SQL text, dialect): the gate and the backend classify the
same statement, and an agent often repeats one."""

MAX_DEPTH = 2
"""How far EXPLAIN/SHOW/SUMMARIZE may wrap another statement (EXPLAIN EXPLAIN ... is not)."""

_DATA_CHANGES = frozenset({exp.Insert, exp.Update, exp.Delete, exp.Merge})

_STATEMENT_REASONS: dict[type[exp.Expr], str] = {
    exp.Transaction: "transaction control (BEGIN) changes session state",
    exp.Commit: "transaction control (COMMIT) ends a transaction",
    exp.Rollback: "transaction control (ROLLBACK) ends a transaction",
    exp.Set: "SET changes session or server settings",
    exp.Use: "USE changes the session's database",
    exp.Attach: "ATTACH opens (and may create) another database file",
    exp.Detach: "DETACH changes the session's databases",
    exp.Copy: "COPY moves data between the database and files",
    exp.Create: "CREATE changes the schema",
    exp.Drop: "DROP removes objects",
    exp.Alter: "ALTER changes the schema",
    exp.TruncateTable: "TRUNCATE deletes all rows",
    exp.Grant: "GRANT changes privileges",
}


def classify(sql: str, dialect: str, *, memory_bounded: bool = False) -> Verdict:
    """Classify one SQL text for one dialect; never raises.

    Args:
        sql: the statement as the model wrote it.
        dialect: sqlglot's dialect name: ``"sqlite"``, ``"postgres"``, ``"mysql"``
            (also MariaDB), ``"duckdb"``, ``"clickhouse"`` or a warehouse's (``"spark"``,
            ``"trino"``, ``"snowflake"``, ``"bigquery"``: see ``warehouses.py``); SQLAlchemy's
            ``"postgresql"`` and ``"mariadb"`` are accepted too. Anything else is a ``reject``.
        memory_bounded: the engine runs under an operating-system memory cap (a DuckDB
            worker process, see :attr:`~pi_notebook.sql.engines.EngineInfo.memory_capped`):
            the rules that only keep a read from exhausting the kernel's memory (the sizes of
            built values and copied aggregates, ``sizes.py``) do not ask, since the cap stops
            such a read. Every other rule holds. Default ``False``: they ask (fail closed).

    Returns:
        ``read`` only for exactly one statement made entirely of known pure read
        constructs and side-effect-free functions; ``reject`` for input that must never
        run (unparseable, stacked statements, escapes out of the database); ``write``
        for everything else. Verdicts are cached by ``(sql, dialect, memory_bounded)``.

    >>> classify("SELECT 1", "sqlite").kind
    'read'
    >>> classify("DELETE FROM t", "postgres").kind
    'write'
    >>> classify("SELECT 1; DROP TABLE t", "mysql").kind
    'reject'
    """
    bounded = memory_bounded is True  # anything but True keeps every rule
    if type(sql) is str and type(dialect) is str and len(sql) <= lexical.MAX_SQL_CHARS:
        # the usual case: checked once, then remembered
        return _classify_cached(sql, dialect, bounded)
    problem = lexical.input_problem(sql, dialect)
    if problem is not None:
        return reject(problem)
    return _classify_cached(sql, dialect, bounded)  # a str subclass


@lru_cache(maxsize=CACHE_SIZE)
def _classify_cached(sql: str, dialect: str, memory_bounded: bool = False) -> Verdict:
    """The verdict on text within :data:`lexical.MAX_SQL_CHARS` (unusable input included:
    its refusal is remembered as well)."""
    problem = lexical.input_problem(sql, dialect)
    if problem is not None:
        return reject(problem)
    dialect = lexical.DIALECTS[dialect.lower()]
    try:
        assessment = assess(sql, dialect, 0, memory_bounded=memory_bounded)
    except RecursionError:
        return reject("the SQL is nested too deeply to analyse")
    except Exception as exc:
        return reject(f"the SQL could not be analysed ({type(exc).__name__})")
    return verdict_of(assessment.findings, assessment.read_reason)


def classify_uncached(sql: str, dialect: str, *, memory_bounded: bool = False) -> Verdict:
    """:func:`classify` without the cache (for benchmarks and tests)."""
    problem = lexical.input_problem(sql, dialect)
    if problem is not None:
        return reject(problem)
    return _classify_cached.__wrapped__(sql, dialect, memory_bounded is True)


def assess(
    sql: str, dialect: str, depth: int, *, memory_bounded: bool = False, fallback: bool = True
) -> Assessment:
    """All findings for ``sql`` in a sqlglot ``dialect`` (already validated).

    ``memory_bounded``: see :func:`classify`. ``fallback``: a DuckDB statement sqlglot cannot
    parse is put to DuckDB's own parser (``duckdb_parser.py``); off for the text that parser
    renders, so it is asked once."""
    inner_assess = partial(assess, memory_bounded=memory_bounded)
    if depth > MAX_DEPTH:
        return Assessment((writes("statement wrapped in too many EXPLAIN/DESCRIBE levels"),))
    checked = _one_statement(sql, dialect)
    if isinstance(checked, Assessment):
        return checked
    tokens, body, types, compound = checked
    early = [
        *lexical.comment_findings(tokens, dialect),
        *escapes.escape_findings(body, dialect, types),
        *lexical.quoting_findings(sql, dialect),
        *lexical.quoted_call_findings(body, dialect, types),
        *mysql_calls.mysql_call_findings(body, dialect),
        *escapes.dialect_escape_findings(sql, body, dialect),
    ]
    if any(finding.kind == "reject" for finding in early):
        return Assessment(tuple(early))
    first = lexical.word(body[0])
    if compound:
        return Assessment((*early, writes("CREATE of a routine or trigger with a compound body")))
    if first in COMMAND_WORDS:
        inner = command_assessment(body, sql, dialect, depth, inner_assess)
        return Assessment((*early, *inner.findings), inner.plannable, inner.read_reason)
    if dialect == "mysql" and first == "VALUES" and depth == 0 and _balanced(body):
        # sqlglot's MySQL parser lacks a bare VALUES statement: judge the same rows
        # as a derived table, which it parses.
        body_sql = sql[body[0].start : body[-1].end + 1]
        inner = inner_assess(f"SELECT * FROM ({body_sql}) AS v", dialect, depth + 1)
        return Assessment((*early, *inner.findings), inner.plannable, inner.read_reason)
    if body[0].token_type in lexical.dialect_of(dialect).tokenizer_class.COMMANDS:
        # sqlglot does not parse these (VACUUM, CALL, PREPARE...); none is a read.
        return Assessment((*early, writes(f"{body[0].text.upper()} is not a known read statement")))
    parsed = _parse(body, sql, dialect)
    if isinstance(parsed, Finding):
        return _unparsed(
            parsed,
            sql,
            dialect,
            depth,
            first,
            early,
            memory_bounded=memory_bounded,
            fallback=fallback,
        )
    return _root_assessment(parsed, dialect, early, memory_bounded)


def _one_statement(
    sql: str, dialect: str
) -> tuple[tuple[Token, ...], list[Token], list[TokenType], bool] | Assessment:
    """The text's tokens, its one statement's tokens and their types, and whether that
    statement is a compound body; or the rejection of text that is not one sane statement."""
    problem = lexical.input_problem(sql, dialect)
    if problem is not None:
        return Assessment((rejects(problem),))
    try:
        tokens = lexical.tokens_of(sql, dialect)
    except Exception as exc:
        return Assessment((rejects(f"the SQL cannot be tokenized: {_first_line(exc)}"),))
    stray = lexical.skipped_text(sql, tokens, dialect)
    if stray is not None:
        return Assessment((rejects(_stray_reason(stray)),))
    body, problem, compound = one_statement(tokens, dialect)
    if problem is not None:
        return Assessment((rejects(problem),))
    types = lexical.token_types(body)
    nesting = lexical.nesting_problem(body, types)
    if nesting is not None:
        return Assessment((rejects(nesting),))
    return tokens, body, types, compound


def _unparsed(
    parsed: Finding,
    sql: str,
    dialect: str,
    depth: int,
    first: str,
    early: list[Finding],
    *,
    memory_bounded: bool,
    fallback: bool,
) -> Assessment:
    """The assessment of a statement sqlglot could not parse (``parsed`` says why)."""
    if fallback and dialect == "duckdb" and parsed.reason != STACKED:
        # sqlglot cannot parse it: DuckDB's own parser may (see duckdb_parser.py).
        rendered = partial(
            assess, dialect=dialect, depth=depth + 1, memory_bounded=memory_bounded, fallback=False
        )
        judged = duckdb_parser.duckdb_assessment(sql, rendered)
        if judged is not None:
            return Assessment((*early, *judged.findings), judged.plannable, judged.read_reason)
    if parsed.kind == "reject" and first in lexical.STATEMENT_VERBS and parsed.reason != STACKED:
        # The verb alone says this is no read; a person can judge the rest.
        return Assessment((*early, writes(f"{first} statement (not fully parsed) is not a read")))
    return Assessment((*early, parsed))


def _stray_reason(char: str) -> str:
    return (
        f"the SQL has the character U+{ord(char):04X} outside quotes and comments, which the "
        "database reads as part of a name: replace it with a plain space"
    )


def _balanced(tokens: list[Token]) -> bool:
    depth = 0
    for token in tokens:
        depth += (token.token_type == TokenType.L_PAREN) - (token.token_type == TokenType.R_PAREN)
        if depth < 0:
            return False
    return depth == 0


def _parse(tokens: list[Token], sql: str, dialect: str) -> exp.Expr | Finding:
    try:
        statements = lexical.parser_of(dialect).parse(tokens, sql)
    except RecursionError:
        return rejects(duckdb_parser.UNPARSED[1])
    except Exception as exc:
        return rejects(f"{duckdb_parser.UNPARSED[0]} as {dialect}: {_first_line(exc)}")
    roots = [s for s in statements if s is not None and not isinstance(s, exp.Semicolon)]
    if len(roots) != 1:
        return rejects(STACKED)
    return roots[0]


def _root_assessment(
    root: exp.Expr, dialect: str, early: list[Finding], memory_bounded: bool
) -> Assessment:
    cls = type(root)
    inside = query_findings(root, dialect, memory_bounded=memory_bounded)
    if cls in QUERY_ROOTS:
        return Assessment((*early, *inside), plannable=True)
    if cls in _DATA_CHANGES:
        # Keep what planning alone may do (function calls, file reads) for EXPLAIN.
        planned = [f for f in inside if not f.when_executed]
        own = writes(f"{root.key.upper()} changes data")
        return Assessment((*early, own, *planned), plannable=True)
    reason = _STATEMENT_REASONS.get(cls)
    if reason is None:
        for base, text in _STATEMENT_REASONS.items():
            if isinstance(root, base):
                reason = text
                break
    if reason is None:
        name = root.name.upper() if isinstance(root, exp.Command) else root.key.upper()
        reason = f"{name} is not a known read statement"
    rejected = [f for f in inside if f.kind == "reject"]
    return Assessment((*early, writes(reason), *rejected))


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _first_line(exc: BaseException) -> str:
    # sqlglot underlines the offending token with terminal escapes; drop them.
    text = _ANSI.sub("", str(exc)).strip().splitlines()
    return text[0][:160] if text else type(exc).__name__
