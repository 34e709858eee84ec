"""Where the offline model finds SQL in a prompt, and whether it names what the database has.

SQL is a fenced block (```` ```sql ````: the user said it is SQL), or a paragraph on its own
that starts with a SQL keyword, has the shape of that statement, parses, and names only tables
of the database and columns of those tables (or aliases the statement defines), checked
against the schema summary the database extension puts in the system prompt
(:func:`schema_view`). English that happens to start with such a word is not SQL.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SchemaView", "extract_sql", "find_sql", "schema_view", "unknown_name"]

_FENCE = re.compile(r"```(?:sql)?[ \t]*\n(.*?)```", re.IGNORECASE | re.DOTALL)
_I = re.IGNORECASE | re.DOTALL
_NAME = r"[\w.\"`\[\]]+"
# The shape each statement must have before it counts as SQL; English sentences that merely
# start with one of these words ("Show me ...", "Delete nothing", "Analyze sales") do not.
_SHAPES: dict[str, re.Pattern[str]] = {
    "select": re.compile(r"^select\s+(.*\bfrom\s+\S|[\d'\"(*-]|\w+\s*\()", _I),
    "with": re.compile(
        r"^with\s+(recursive\s+)?\w+\s*(\([^)]*\)\s*)?as\s*(not\s+)?(materialized\s+)?\(", _I
    ),
    "insert": re.compile(r"^insert\s+(or\s+\w+\s+)?into\s+\S", _I),
    "update": re.compile(rf"^update\s+{_NAME}\s+set\s+\S+\s*=", _I),
    "delete": re.compile(r"^delete\s+from\s+\S", _I),
    "replace": re.compile(r"^replace\s+into\s+\S", _I),
    "merge": re.compile(r"^merge\s+into\s+\S", _I),
    "create": re.compile(
        r"^create\s+(or\s+replace\s+)?(temp(orary)?\s+)?(unique\s+)?(table|view|index|schema|trigger|sequence)\s+\S",
        _I,
    ),
    "drop": re.compile(
        rf"^drop\s+(table|view|index|schema|trigger|sequence)\s+(if\s+exists\s+)?{_NAME}\s*;?\s*$",
        _I,
    ),
    "alter": re.compile(rf"^alter\s+(table|view|index)\s+{_NAME}\s+\w+", _I),
    "truncate": re.compile(rf"^truncate\s+(table\s+)?{_NAME}\s*;?\s*$", _I),
    "pragma": re.compile(r"^pragma\s+[\w.]+\s*(\(|=|;|$)", _I),
    "explain": re.compile(
        r"^explain\s+(query\s+plan\s+|analyze\s+)?(select|with|insert|update|delete)\b", _I
    ),
    "values": re.compile(r"^values\s*\(", _I),
    "show": re.compile(
        r"^show\s+(tables|databases|schemas|columns\s+from|create\s+table|full\s+tables|index(es)?\s+from)\b",
        _I,
    ),
    "describe": re.compile(rf"^desc(ribe)?\s+{_NAME}\s*;?\s*$", _I),
}
_START = re.compile(r"^\s*(" + "|".join(_SHAPES) + r")\b", re.IGNORECASE)
_sqlglot_log = logging.getLogger("sqlglot")
# Words that are English, never a table or column of a pasted statement.
_ENGLISH = frozenset(
    {
        "the",
        "an",
        "my",
        "our",
        "your",
        "their",
        "me",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "please",
        "them",
        "some",
        "every",
    }
)
_READS = ("select", "with", "values", "explain", "show", "describe", "pragma")
_SYSTEM_TABLES = frozenset(
    {"sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_sequence", "dual"}
)
_SYSTEM_SCHEMAS = frozenset(
    {"information_schema", "pg_catalog", "mysql", "sys", "performance_schema"}
)
_SUMMARY_HEAD = re.compile(
    r"^Database \((?P<dialect>[\w ]+)\): (?P<tables>\d+) tables, (?P<views>\d+) views\."
)
_SUMMARY_TABLE = re.compile(r"^- (?P<name>[^(\n]+?)(?: \(view\))?\((?P<columns>[^)\n]*)\)")
_SUMMARY_NAMES = re.compile(r"^Tables: (?P<names>.*?)(?:, and \d+ more)?$")


@dataclass(frozen=True, kw_only=True)
class SchemaView:
    """What the offline model knows of the database: the schema summary in its system prompt.

    Attributes:
        tables: each listed table (lower case) and its columns (lower case), or ``None``
            where the summary did not list all of them.
        complete: whether every table of the database is listed.
    """

    tables: Mapping[str, frozenset[str] | None] = field(
        default_factory=dict[str, frozenset[str] | None]
    )
    complete: bool = False


def schema_view(system_prompt: str) -> SchemaView | None:
    """The schema summary in a system prompt (``database`` extension), or ``None`` if none."""
    lines = system_prompt.splitlines()
    start = next((i for i, line in enumerate(lines) if _SUMMARY_HEAD.match(line)), None)
    if start is None:
        return None
    head = _SUMMARY_HEAD.match(lines[start])
    assert head is not None
    total = int(head.group("tables")) + int(head.group("views"))
    tables: dict[str, frozenset[str] | None] = {}
    for line in lines[start + 1 :]:
        listed = _SUMMARY_TABLE.match(line)
        if listed:
            columns = [c.strip() for c in listed.group("columns").split(",") if c.strip()]
            names = {re.split(r" PK$| -> ", c)[0].strip().lower() for c in columns}
            partial = any(re.fullmatch(r"\+\d+ more", c) for c in columns)
            tables[listed.group("name").strip().lower()] = None if partial else frozenset(names)
            continue
        names_only = _SUMMARY_NAMES.match(line)
        if names_only:
            for name in names_only.group("names").split(", "):
                tables.setdefault(name.strip().lower(), None)
    return SchemaView(tables=tables, complete=len(tables) >= total)


def _parses(sql: str, dialect: str | None) -> bool:
    """Whether sqlglot parses ``sql`` as real statements (not its catch-all ``Command``)."""
    import sqlglot
    from sqlglot import exp

    level = _sqlglot_log.level
    _sqlglot_log.setLevel(logging.ERROR)  # no "falling back to Command" warnings
    try:
        trees = sqlglot.parse(sql, read=dialect, error_level=sqlglot.ErrorLevel.RAISE)
    except Exception:
        return False
    finally:
        _sqlglot_log.setLevel(level)
    return bool(trees) and all(t is not None and not isinstance(t, exp.Command) for t in trees)


def _looks_like_sql(text: str, dialect: str | None) -> bool:
    stripped = text.strip()
    match = _START.match(stripped)
    if match is None or stripped.endswith((".", "?", "!")):
        return False
    shape = _SHAPES[match.group(1).lower()]
    if not shape.match(stripped):
        return False
    if match.group(1).lower() in ("show", "describe"):
        # Only where the engine has these statements; elsewhere they are requests (rule 2).
        return dialect in ("mysql", "duckdb")
    return _parses(stripped, dialect)


def _trees(sql: str, dialect: str | None) -> list[Any]:
    import sqlglot

    level = _sqlglot_log.level
    _sqlglot_log.setLevel(logging.ERROR)
    try:
        return [t for t in sqlglot.parse(sql, read=dialect) if t is not None]
    except Exception:
        return []
    finally:
        _sqlglot_log.setLevel(level)


def unknown_name(sql: str, dialect: str | None, schema: SchemaView | None) -> str | None:
    """Why a bare statement is not taken for SQL: the first name the database does not have
    (as ``table `x` `` or ``column `y` ``), or an English word used as a name; else None.

    With no ``schema``, only English words are caught, and a write is refused (it needs a
    fence).
    """
    from sqlglot import exp

    trees = _trees(sql, dialect)
    if not trees:
        return "a statement that does not parse"
    if schema is None and not sql.lstrip().lower().startswith(_READS):
        return "a write, and I cannot see the database's tables to check it"
    for tree in trees:
        ctes = {str(c.alias_or_name).lower() for c in tree.find_all(exp.CTE)}
        aliases = {str(a.alias).lower() for a in tree.find_all(exp.Alias)}
        columns: set[str] = set()
        unchecked = schema is None
        for alias in tree.find_all(exp.TableAlias):
            aliases.add(str(alias.name).lower())
            aliases.update(str(c.name).lower() for c in alias.columns)
        for table in tree.find_all(exp.Table):
            if not isinstance(table.this, exp.Identifier):
                continue  # a table-valued function such as json_each(...)
            name = str(table.name).lower()
            if name in ctes:
                continue
            if str(table.db).lower() in _SYSTEM_SCHEMAS or name in _SYSTEM_TABLES:
                unchecked = True
                continue
            if name in _ENGLISH:
                return f"table `{table.name}`"
            if schema is None:
                continue
            if name not in schema.tables:
                return f"table `{table.name}`"
            known = schema.tables[name]
            if known is None:
                unchecked = True
            else:
                columns |= known
        named = [c.this for c in tree.find_all(exp.Column)]
        named += [
            i
            for s in tree.find_all(exp.Schema)
            if isinstance(s.this, exp.Table)
            for i in s.expressions
            if isinstance(i, exp.Identifier)
        ]
        for ident in named:
            if not isinstance(ident, exp.Identifier) or ident.quoted:
                continue  # a star, or a quoted name (the user meant it)
            name = str(ident.name).lower()
            if name in _ENGLISH:
                return f"column `{ident.name}`"
            if not unchecked and name not in columns and name not in aliases:
                return f"column `{ident.name}`"
    return None


def _bare_statement(prompt: str, dialect: str | None) -> str | None:
    """The first paragraph that starts with a statement keyword, has its shape and parses."""
    lines = prompt.splitlines()
    for index, line in enumerate(lines):
        if not _START.match(line):
            continue
        block: list[str] = []
        for following in lines[index:]:
            if not following.strip():
                break
            block.append(following)
        candidate = "\n".join(block).strip()
        if _looks_like_sql(candidate, dialect):
            return candidate
    return None


def find_sql(
    prompt: str, dialect: str | None, schema: SchemaView | None
) -> tuple[str | None, str | None]:
    """(the SQL to run, or None; why a statement-like paragraph was not taken, or None)."""
    fenced = _FENCE.search(prompt)
    if fenced and fenced.group(1).strip():
        return fenced.group(1).strip(), None
    candidate = _bare_statement(prompt, dialect)
    if candidate is None:
        return None, None
    why = unknown_name(candidate, dialect, schema)
    return (None, why) if why else (candidate, None)


def extract_sql(
    prompt: str, dialect: str | None = None, schema: SchemaView | None = None
) -> str | None:
    """The SQL in a prompt: the first fenced block, else the first paragraph that is SQL.

    A paragraph is SQL when it starts with a statement keyword, has that statement's shape,
    parses, and names only what ``schema`` has (see :func:`unknown_name`); English that
    happens to start with such a word is not SQL.
    """
    return find_sql(prompt, dialect, schema)[0]
