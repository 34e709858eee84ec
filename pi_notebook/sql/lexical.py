"""Checks on the raw text and its tokens, before anything is parsed.

These catch what a parse tree cannot show: input that is not SQL text at all, stacked
statements, comments an engine executes (MySQL ``/*! ... */``), quoting whose meaning
depends on server settings, and calls through quoted names. Tokenising uses the dialect's
own sqlglot tokenizer (one per thread, see :func:`tokenizer_of`), so ``--`` without a
following space is a comment only where the dialect says so (not in MySQL), and nested
``/* */`` only where the engine nests them.

The statements that escape the database (``COPY ... PROGRAM``, ``INTO OUTFILE``, extension
loading), recognised from these tokens before sqlglot gets a chance to parse them into
something harmless-looking, are checked in :mod:`pi_notebook.sql.escapes`; MySQL calls the
tree does not show, in :mod:`pi_notebook.sql.mysql_calls`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from operator import attrgetter
from typing import TypeVar

from sqlglot.dialects.dialect import Dialect
from sqlglot.parser import Parser
from sqlglot.tokenizer_core import Token, TokenType
from sqlglot.tokens import Tokenizer

from pi_notebook.sql.findings import Finding, rejects, writes

__all__ = [
    "DIALECTS",
    "LITERAL_TYPES",
    "MAX_NESTING",
    "MAX_SQL_CHARS",
    "MYSQL_RESERVED",
    "STATEMENT_VERBS",
    "comment_findings",
    "dialect_of",
    "input_problem",
    "nesting_problem",
    "parser_of",
    "quoted_call_findings",
    "quoting_findings",
    "skipped_text",
    "token_types",
    "tokenize",
    "tokenizer_of",
    "tokens_of",
    "word",
]

MAX_SQL_CHARS = 100_000
"""Longer text is refused before tokenising: classification must stay quick, and a
statement a person is asked to approve must be one they can read."""

MAX_NESTING = 200
"""Deeper parenthesis nesting is refused before parsing (the parser recurses)."""

DIALECTS: dict[str, str] = {
    "sqlite": "sqlite",
    "postgres": "postgres",
    "postgresql": "postgres",
    "mysql": "mysql",
    "mariadb": "mysql",
    "duckdb": "duckdb",
    "clickhouse": "clickhouse",
    "spark": "spark",
    "trino": "trino",
    "snowflake": "snowflake",
    "bigquery": "bigquery",
}
"""Accepted dialect names (sqlglot's, plus SQLAlchemy's spellings) to sqlglot names."""

_BACKSLASH_QUOTE = re.compile(r"\\['\"]")
LITERAL_TYPES = frozenset(
    {
        TokenType.STRING,
        TokenType.IDENTIFIER,
        TokenType.NUMBER,
        TokenType.BIT_STRING,
        TokenType.HEX_STRING,
        TokenType.BYTE_STRING,
        TokenType.NATIONAL_STRING,
        TokenType.NATIONAL_RAW_STRING,
        TokenType.RAW_STRING,
        TokenType.HEREDOC_STRING,
        TokenType.UNICODE_STRING,
    }
)
"""Token types whose text is a value or a quoted name, never a keyword."""

MYSQL_RESERVED = frozenset(
    """ADD ALL ALTER AND AS ASC BETWEEN BY CALL CASE CHECK COLUMN CONSTRAINT CONVERT CREATE
    CROSS DEFAULT DELETE DESC DESCRIBE DISTINCT DIV DROP ELSE EXISTS EXPLAIN FALSE
    FOR FOREIGN FROM GRANT GROUP HAVING IF IGNORE IN INDEX INNER INSERT INTERVAL INTO IS JOIN
    KEY LEFT LIKE LIMIT LOCK MOD NATURAL NOT NULL ON OR ORDER OUTER PRIMARY READ REFERENCES
    REGEXP REPLACE REVOKE RIGHT RLIKE SELECT SET SHOW TABLE THEN TRUE UNION UNIQUE
    UNLOCK UPDATE USE USING VALUES WHEN WHERE WITH WRITE XOR""".split()
)
"""Words reserved in both MySQL and MariaDB: never a name, so never a stored function."""


_token_type = attrgetter("token_type")
_local = threading.local()
_T = TypeVar("_T")


def _per_thread(slot: str, name: str, make: Callable[[str], _T]) -> _T:
    """``make(name)``, made once per thread and kept in the thread's ``slot``: sqlglot's
    dialects, tokenizers and parsers are not thread-safe, and making one costs more than
    using it on a short statement."""
    cache: dict[str, _T] | None = getattr(_local, slot, None)
    if cache is None:
        cache = {}
        setattr(_local, slot, cache)
    found = cache.get(name)
    if found is None:
        found = cache[name] = make(name)
    return found


def dialect_of(name: str) -> Dialect:
    """A sqlglot dialect instance, reused per thread."""
    return _per_thread("dialects", name, Dialect.get_or_raise)


def tokenizer_of(name: str) -> Tokenizer:
    """The dialect's tokenizer, reused per thread (``tokenize`` starts afresh on every call)."""
    return _per_thread("tokenizers", name, lambda n: dialect_of(n).tokenizer())


def parser_of(name: str) -> Parser:
    """The dialect's parser, reused per thread (``parse`` starts afresh on every call)."""
    return _per_thread("parsers", name, lambda n: dialect_of(n).parser())


def token_types(tokens: Sequence[Token]) -> list[TokenType]:
    """The tokens' types, in order (computed at C speed, reused by several checks)."""
    return list(map(_token_type, tokens))


def input_problem(sql: object, dialect: object) -> str | None:
    """Why this input cannot be classified at all, or None when it can."""
    if not isinstance(sql, str):
        return f"the SQL must be text, not {type(sql).__name__}"
    if not isinstance(dialect, str) or dialect.lower() not in DIALECTS:
        known = ", ".join(sorted(set(DIALECTS.values())))
        return f"unknown SQL dialect {dialect!r} (known: {known})"
    if len(sql) > MAX_SQL_CHARS:
        return f"the SQL is too long ({len(sql)} characters; at most {MAX_SQL_CHARS})"
    if "\x00" in sql:
        return "the SQL contains a NUL byte"
    try:
        sql.encode("utf-8")
    except UnicodeEncodeError:
        return "the SQL is not valid Unicode (lone surrogate)"
    if not sql.strip():
        return "the SQL is empty"
    return None


@lru_cache(maxsize=512)
def tokens_of(sql: str, dialect: str) -> tuple[Token, ...]:
    """:func:`tokenize`, remembered: classifying a new statement and canonicalising it
    (which the gate and the backend both do) tokenise it once. Callers must not change
    the tokens. Raises what :func:`tokenize` raises (failures are not remembered)."""
    return tuple(tokenize(sql, dialect))


_MYSQL_DASH_NON_ASCII = re.compile(r"--([^\x00-\x7f])")


def skipped_text(sql: str, tokens: Sequence[Token], dialect: str = "") -> str | None:
    """A non-ASCII character outside every token and comment, or None.

    sqlglot skips every Unicode space between tokens; the engines read a no-break space
    (U+00A0) or any other non-ASCII character outside quotes as part of a name, so
    ``FROM t\u00a0`` names another table than ``FROM t``: our tokens are not theirs.
    MySQL starts a ``--`` comment only before ASCII space or a control character, so
    ``--\u00a0x`` is ``- -x`` there (verified on MariaDB) while sqlglot drops a comment.
    """
    if sql.isascii():
        return None
    end, previous_comments = 0, []
    for token in [*tokens, None]:
        start = token.start if token is not None else len(sql)
        gap = sql[end:start]
        dash = _MYSQL_DASH_NON_ASCII.search(gap) if dialect == "mysql" else None
        if dash is not None:
            return dash.group(1)
        comments = [*previous_comments, *(token.comments if token is not None else [])]
        for comment in comments:
            gap = gap.replace(comment, "", 1)
        stray = next((char for char in gap if not char.isascii()), None)
        if stray is not None:
            return stray
        if token is not None:
            end, previous_comments = token.end + 1, list(token.comments)
    return None


def tokenize(sql: str, dialect: str) -> list[Token]:
    """The dialect's tokens for ``sql``; raises whatever the tokenizer raises.

    sqlglot's tokenizer swallows the rest of a command statement (``EXPLAIN ...``,
    ``VACUUM ...``, PostgreSQL ``SHOW ...``) into one string token, hiding its words,
    comments and semicolons from every check. That text is tokenised again here, with
    offsets into ``sql``, so the checks see what the engine will see.
    """
    tokenizer = tokenizer_of(dialect)
    tokens = tokenizer.tokenize(sql)
    if tokenizer.COMMANDS.isdisjoint(token_types(tokens)):
        return tokens
    return _expand_commands(tokenizer, tokens, sql, 0, 0)


def _expand_commands(
    tokenizer: Tokenizer, tokens: list[Token], sql: str, offset: int, depth: int
) -> list[Token]:
    commands = tokenizer.COMMANDS
    expanded: list[Token] = []
    for index, token in enumerate(tokens):
        if token.token_type != TokenType.STRING or index == 0:
            if offset:
                token.start += offset
                token.end += offset
            expanded.append(token)
            continue
        previous = expanded[-1]
        start = previous.end + 1
        while start < len(sql) and sql[start].isspace():
            start += 1
        swallowed = previous.token_type in commands and sql.startswith(token.text, start)
        if not swallowed:
            if offset:
                token.start += offset
                token.end += offset
            expanded.append(token)
            continue
        if depth >= 3:
            raise ValueError("commands nested too deeply")
        inner = tokenizer.tokenize(token.text)  # the outer tokens are a list of their own
        expanded.extend(_expand_commands(tokenizer, inner, sql, start, depth + 1))
    return expanded


def comment_findings(tokens: Sequence[Token], dialect: str) -> list[Finding]:
    """Comments the engine would not treat as comments.

    MySQL and MariaDB execute ``/*! ... */`` and ``/*M! ... */``; sqlglot keeps them as
    comments, so what we would classify is not what runs. A comment opener inside a
    comment is refused everywhere: engines disagree on nesting, and the text then
    means different things to us and to the server.
    """
    found: list[Finding] = []
    for token in [token for token in tokens if token.comments]:
        for comment in token.comments:
            body = comment.lstrip()
            if dialect == "mysql" and (body.startswith("!") or body.upper().startswith("M!")):
                found.append(rejects("MySQL executable comment /*! ... */ hides code"))
            if "/*" in comment:
                found.append(rejects("comment nested inside a comment"))
    return found


def nesting_problem(
    tokens: Sequence[Token], types: Sequence[TokenType] | None = None
) -> str | None:
    """Why the parenthesis nesting is unacceptable, or None (``types``: the tokens' types,
    when already known)."""
    if (types if types is not None else token_types(tokens)).count(
        TokenType.L_PAREN
    ) <= MAX_NESTING:
        return None
    depth = 0
    for token in tokens:
        if token.token_type == TokenType.L_PAREN:
            depth += 1
            if depth > MAX_NESTING:
                return f"expression nested too deeply (more than {MAX_NESTING} levels)"
        elif token.token_type == TokenType.R_PAREN:
            depth -= 1
    return None


def quoting_findings(sql: str, dialect: str) -> list[Finding]:
    """Backslash before a quote: where the string ends depends on server settings.

    MySQL ends ``'a\\'`` at the second quote only without ``NO_BACKSLASH_ESCAPES``;
    PostgreSQL only with ``standard_conforming_strings`` off; Spark only with
    ``spark.sql.parser.escapedStringLiterals`` off. Either way the statement
    may not be the one we parsed, so it is not a read; with a semicolon anywhere in
    the text it may be two statements, so it is a ``reject``.
    """
    if dialect in ("mysql", "postgres", "spark") and _BACKSLASH_QUOTE.search(sql):
        if ";" in sql:
            # Where the string ends decides whether the semicolon separates statements.
            return [
                rejects(
                    "backslash before a quote and a semicolon: whether this is more than one "
                    "statement depends on server settings"
                )
            ]
        return [writes("backslash before a quote: the meaning depends on server settings")]
    return []


def quoted_call_findings(
    tokens: Sequence[Token], dialect: str, types: Sequence[TokenType] | None = None
) -> list[Finding]:
    """A call through a quoted name: ``"LOWER"(x)`` is not the built-in ``lower``.

    PostgreSQL matches quoted names exactly (so only an all-lower-case quoted name can
    be a built-in); MySQL resolves a quoted call to a stored function.
    """
    types = types if types is not None else token_types(tokens)
    if TokenType.IDENTIFIER not in types:
        return []
    for index, kind in enumerate(types[:-1]):
        if kind == TokenType.IDENTIFIER and types[index + 1] == TokenType.L_PAREN:
            token = tokens[index]
            if dialect == "mysql" or token.text != token.text.lower():
                return [
                    writes(
                        f'call through the quoted name "{token.text}" may be a user function',
                        when_executed=False,
                    )
                ]
    return []


STATEMENT_VERBS = frozenset(
    """ALTER ANALYZE ATTACH BACKUP BEGIN CACHE CALL CHECKPOINT CHECKSUM CLUSTER COMMENT COMMIT
    CREATE DEALLOCATE DELETE DETACH DISCARD DO DROP EXECUTE FLUSH GRANT HANDLER IMPORT INSERT
    KILL LOAD LOCK MERGE OPTIMIZE PREPARE PURGE REASSIGN REFRESH REINDEX RELEASE RENAME REPAIR
    REPLACE RESET RESTORE REVOKE ROLLBACK SAVEPOINT SECURITY SET SHUTDOWN SIGNAL START
    TRUNCATE UNLOCK UPDATE USE VACUUM XA""".split()
)
"""First words of statements that are writes whatever follows: when sqlglot cannot
parse one, it still goes to approval (``write``) rather than being refused."""


def word(token: Token) -> str:
    """The token's text in upper case when it is a bare word, else ''."""
    if token.token_type in LITERAL_TYPES:
        return ""
    text = token.text
    return text.upper() if text.replace("_", "a").isalnum() else ""
