"""MySQL calls whose meaning the parse tree does not show: ``DEFAULT(col)``, which
evaluates the column's default expression, and ``name (`` with a space before the
parenthesis, which calls a stored function of that name, not the built-in (MySQL's
IGNORE_SPACE is off by default).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from sqlglot.tokenizer_core import Token, TokenType

from pi_notebook.sql import functions
from pi_notebook.sql.findings import Finding, writes
from pi_notebook.sql.lexical import MYSQL_RESERVED, dialect_of, word

__all__ = ["MYSQL_SPACE_SENSITIVE", "mysql_call_findings"]

MYSQL_SPACE_SENSITIVE = frozenset(
    """ADDDATE BIT_AND BIT_OR BIT_XOR CAST COUNT CURDATE CURTIME DATE_ADD DATE_SUB EXTRACT
    GROUP_CONCAT MAX MID MIN NOW POSITION SESSION_USER STD STDDEV STDDEV_POP STDDEV_SAMP
    SUBDATE SUBSTR SUBSTRING SUM SYSDATE SYSTEM_USER TRIM VARIANCE VAR_POP VAR_SAMP""".split()
)
"""Built-ins MySQL parses as built-ins only when ``(`` follows the name directly (without
IGNORE_SPACE); with a space or comment between, the name is a stored function's."""


@lru_cache(maxsize=1)
def _mysql_function_names() -> frozenset[str]:
    parser = dialect_of("mysql").parser_class
    names = {name.upper() for name in functions.PURE_FUNCTIONS["mysql"]}
    for name, builder in parser.FUNCTIONS.items():
        built = getattr(builder, "__self__", builder)  # a class's from_arg_list, or a lambda
        if not isinstance(built, type) or built.__name__ in functions.PURE_FUNCTION_CLASSES:
            names.add(name.upper())
    names.update(name.upper() for name in parser.FUNCTION_PARSERS)
    return frozenset((names | MYSQL_SPACE_SENSITIVE) - MYSQL_RESERVED - _RESERVED_CALLS)


_RESERVED_CALLS = frozenset(
    """COLUMNS MATCH CHAR CHARACTER DATABASE SCHEMA CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP
    CURRENT_USER LOCALTIME LOCALTIMESTAMP UTC_DATE UTC_TIME UTC_TIMESTAMP""".split()
)
"""Words reserved in MySQL and MariaDB that are also built-ins (never a stored function's
name unquoted), and ``COLUMNS`` of ``JSON_TABLE(... COLUMNS (...))``, a clause."""


def mysql_call_findings(tokens: Sequence[Token], dialect: str) -> list[Finding]:
    """MySQL calls whose meaning the parse tree does not show.

    ``DEFAULT(col)`` evaluates the column's default expression (``UUID_SHORT()``, a
    function...), which sqlglot parses as a plain column. A function name followed by a
    space or a comment before ``(`` is, for ``count``, ``sum``, ``now``... a call of a
    stored function of that name (MySQL's IGNORE_SPACE is off by default); it is treated
    so for every name a stored function could have (any non-reserved word).
    """
    if dialect != "mysql":
        return []
    found: list[Finding] = []
    names = _mysql_function_names()
    for index, token in enumerate(tokens[:-1]):
        following = tokens[index + 1]
        if following.token_type != TokenType.L_PAREN:
            continue
        name = word(token)
        if name == "DEFAULT":
            found.append(
                writes("DEFAULT(column) evaluates the column's default, which may have effects")
            )
        elif following.start > token.end + 1 and name in names:
            previous = word(tokens[index - 1]) if index else ""
            if previous != "AS":
                calls = "calls" if name in MYSQL_SPACE_SENSITIVE else "may call"
                found.append(
                    writes(
                        f"'{token.text} (' with a space before the parenthesis {calls} a stored "
                        f"function named {token.text}, not the built-in",
                        when_executed=False,
                    )
                )
    return found
