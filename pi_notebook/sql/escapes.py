"""Statements that escape the database, recognised from their tokens before anything is
parsed: files written on the server host (``COPY ... TO``, ``INTO OUTFILE``, ``EXPORT``,
``VACUUM INTO``), programs run there (``COPY ... PROGRAM``, untrusted procedural languages,
ClickHouse's ``Executable`` engines), extensions and libraries loaded into the server, and
each warehouse dialect's own escapes (see :mod:`pi_notebook.sql.warehouses`).

Checked before parsing because sqlglot parses some of them loosely (``COPY ... TO
PROGRAM``) or not at all (``SELECT ... INTO OUTFILE``).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot.tokenizer_core import Token, TokenType

from pi_notebook.sql import warehouses
from pi_notebook.sql.findings import Finding, rejects, writes
from pi_notebook.sql.lexical import token_types, word

__all__ = ["dialect_escape_findings", "escape_findings"]

_UNTRUSTED_LANGUAGES = ("c", "internal", "plsh")


def escape_findings(
    tokens: Sequence[Token], dialect: str, types: Sequence[TokenType] | None = None
) -> list[Finding]:
    """Statements that escape the database, recognised from their tokens.

    Checked before parsing because sqlglot parses some of them loosely (``COPY ... TO
    PROGRAM``) or not at all (``SELECT ... INTO OUTFILE``).
    """
    first = word(tokens[0])
    found: list[Finding] = []
    if first in _ESCAPE_STARTS:
        words = [word(token) for token in tokens]
        found.extend(_statement_escapes(tokens, words, first))
    if dialect == "clickhouse":
        found.extend(_clickhouse_escapes(tokens, first))
    if dialect in ("mysql", "clickhouse") and TokenType.INTO in (
        types if types is not None else token_types(tokens)
    ):
        for index, token in enumerate(tokens[:-1]):
            target = word(tokens[index + 1]) if token.token_type == TokenType.INTO else ""
            if target in ("OUTFILE", "DUMPFILE"):
                found.append(rejects(f"SELECT ... INTO {target} writes a file on the server host"))
    return found


_CLICKHOUSE_REFUSED_STARTS = {
    "SYSTEM": "SYSTEM statements control the server (caches, replicas, merges, shutdown)",
    "KILL": "KILL stops other queries or mutations",
    "BACKUP": "BACKUP writes the database to files or object storage",
    "RESTORE": "RESTORE reads a backup from files or object storage",
}


def dialect_escape_findings(sql: str, tokens: Sequence[Token], dialect: str) -> list[Finding]:
    """A warehouse dialect's own escapes, from the whole text and the statement's tokens
    (``ADD JAR``, ``PUT``, Spark's ``${...}`` substitution): see ``warehouses.py``."""
    rules = warehouses.rules_of(dialect)
    if rules is None:
        return []
    return rules.escape_findings(sql, tokens, [word(token) for token in tokens])


def _clickhouse_escapes(tokens: Sequence[Token], first: str) -> list[Finding]:
    """ClickHouse statements that reach past the database: server control, files written by
    ``INSERT INTO FUNCTION``, programs run by an ``Executable`` engine or dictionary source."""
    refused = _CLICKHOUSE_REFUSED_STARTS.get(first)
    if refused is not None:
        return [rejects(refused)]
    words = [word(token) for token in tokens[:400]]
    found: list[Finding] = []
    if first == "INSERT" and "FUNCTION" in words[:5]:
        found.append(rejects("INSERT INTO FUNCTION writes to files, URLs or other servers"))
    ddl = first in ("CREATE", "ATTACH", "ALTER", "REPLACE")
    if ddl and ("EXECUTABLE" in words or "EXECUTABLEPOOL" in words):
        found.append(rejects("an Executable engine or source runs a program on the host"))
    return found


_ESCAPE_STARTS = frozenset(
    {"COPY", "EXPORT", "VACUUM", "INSTALL", "FORCE", "LOAD", "CREATE", "ALTER", "IMPORT"}
)


def _statement_escapes(tokens: Sequence[Token], words: Sequence[str], first: str) -> list[Finding]:
    found: list[Finding] = []
    if first == "COPY":
        found.extend(_copy_findings(tokens, words))
    elif first == "EXPORT" and words[1:2] in (["DATA"], ["MODEL"]):
        found.append(rejects(f"EXPORT {words[1]} writes data outside the database"))
    elif first == "EXPORT":
        found.append(rejects("EXPORT DATABASE writes files outside the database"))
    elif first == "VACUUM" and "INTO" in words:
        found.append(rejects("VACUUM INTO writes a copy of the database to a file"))
    elif (
        first == "INSTALL"
        or words[:2] == ["FORCE", "INSTALL"]
        or (first == "LOAD" and words[1:2] not in (["DATA"], ["XML"]))
    ):
        found.append(rejects("loading an extension or library runs native code in the server"))
    if "SONAME" in words:
        found.append(rejects("SONAME loads a shared library into the server"))
    if first == "CREATE" and "LANGUAGE" in words:
        at = words.index("LANGUAGE") + 1
        lang = tokens[at].text.lower() if at < len(tokens) else ""
        # Untrusted procedural languages are named with a trailing "u" (plpython3u).
        if lang in _UNTRUSTED_LANGUAGES or lang.endswith("u"):
            found.append(rejects(f"a function in language {lang} runs code on the server host"))
    if first in ("CREATE", "ALTER", "IMPORT") and "PROGRAM" in words and "OPTIONS" in words:
        found.append(rejects("the 'program' option runs a shell command on the server"))
    return found


def _copy_findings(tokens: Sequence[Token], words: Sequence[str]) -> list[Finding]:
    if "PROGRAM" in words:
        return [rejects("COPY ... PROGRAM runs a shell command on the server")]
    depth = 0
    for index, token in enumerate(tokens):
        if token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and words[index] == "TO" and index + 1 < len(tokens):
            target = words[index + 1]
            if target in ("STDOUT", "STDERR"):
                return [writes("COPY streams data out of or into the database")]
            return [rejects("COPY ... TO writes a file outside the database")]
    return [writes("COPY loads data into the database (and may read host files)")]
