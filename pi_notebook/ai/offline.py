"""The ``offline`` model: a small rule-based stand-in for an LLM, for demos without a key.

It is not a language model and says so. It follows four rules:

1. If the user's message holds SQL, and a tool that runs SQL is offered, it calls that tool
   with the SQL. It takes the tool from what it is offered, never by a name it knows: the
   first offered tool whose description says "SQL" and that takes a string argument (the
   first required one gets the statement; the database extension's query tool is one). SQL
   is either a fenced block (```` ```sql ````: the
   user said it is SQL), or a paragraph on its own that

   - starts with a SQL keyword, has the shape of that statement and parses, and
   - names only tables of the database and columns of those tables (or aliases the
     statement defines), checked against the schema summary the database extension puts in
     the system prompt (the only view of the database the model has). Where that summary
     lists a table without all its columns, its columns are not checked; where it does not
     list every table, a table it does not list is not accepted.

   With no schema summary at all, a bare read is accepted if it names no English word such
   as "the" as a table or column, and a bare write is not: put it in a ```` ```sql ```` block.
   So English is never taken for SQL: "Show me the 5 most expensive products." has no SQL
   shape, "select 5 products from the shop" names a table ``the``, and "Update products set
   price = cheaper" a column ``cheaper``; none is sent, and none can raise an approval prompt.
2. Else, if the message is one of the few requests it understands (list the tables,
   describe a table, count the rows of a table, optionally per column), and the table (and
   column) it names are in the schema summary, it runs the matching read.
3. If the last messages are tool results, it sums them up in a sentence each.
4. Otherwise it answers in a few lines what it can do (saying why, when the message looked
   like SQL but named something the database does not have).
"""

from __future__ import annotations

import itertools
import json
import logging
import re
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from .abort import AbortSignal
from .events import AssistantMessageEvent
from .messages import Message, ToolResultMessage, UserMessage, content_text
from .model import Context, ToolSchema
from .stream import AssistantStream

__all__ = [
    "OfflineModel",
    "SchemaView",
    "SqlTool",
    "extract_sql",
    "schema_view",
    "sql_tool",
    "understood_request",
]

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
_STOP = {
    "the",
    "a",
    "an",
    "table",
    "tables",
    "all",
    "of",
    "in",
    "me",
    "my",
    "our",
    "rows",
    "records",
    "entries",
    "are",
    "there",
    "is",
    "do",
    "we",
    "have",
    "please",
}
_TABLE = r"(?:the\s+)?[\"`]?(?P<table>[A-Za-z_][A-Za-z0-9_]*)[\"`]?(?:\s+table)?"
_LIST = re.compile(r"^\s*(?:please\s+)?(?:list|show(?:\s+me)?|what|which|name)\b.*\btables\b", _I)
_DESCRIBE = re.compile(
    rf"^\s*(?:please\s+)?(?:describe|(?:what|which)\s+columns\s+(?:does|do|are\s+in|in)|"
    rf"(?:show(?:\s+me)?\s+)?(?:the\s+)?(?:columns|schema|structure)\s+(?:of|in|for))\s+{_TABLE}"
    r"(?:\s+(?:have|has))?\s*[.?!]*\s*$",
    _I,
)
_COUNT = re.compile(
    r"^\s*(?:please\s+)?(?:how\s+many\s+(?:rows\s+(?:are\s+)?(?:there\s+)?(?:in|of)\s+)?|"
    rf"count\s+(?:the\s+)?(?:rows\s+)?(?:in\s+|of\s+)?){_TABLE}"
    r"(?:\s+(?:are\s+there|do\s+we\s+have|are\s+in\s+the\s+database))?"
    r"(?:\s+(?:per|by|for\s+each)\s+(?P<column>[A-Za-z_][A-Za-z0-9_]*))?\s*[.?!]*\s*$",
    _I,
)
_ids = itertools.count(1)
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


def _find_sql(
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
    return _find_sql(prompt, dialect, schema)[0]


def _table(name: str | None) -> str | None:
    return None if name is None or name.lower() in _STOP else name


def understood_request(prompt: str, dialect: str | None = None) -> tuple[str, str] | None:
    """One of the few requests the offline model understands, as ``(what, sql)``; else None.

    List the tables, describe a table (its columns and first rows), count a table's rows
    (optionally per a column). Every statement it makes is a plain read.
    """
    text = " ".join(prompt.split())
    if _LIST.match(text):
        if dialect == "sqlite":
            sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        else:
            sql = (
                "SELECT table_name FROM information_schema.tables WHERE table_schema NOT IN "
                "('information_schema', 'pg_catalog', 'mysql', 'performance_schema', 'sys') "
                "ORDER BY table_name"
            )
        return "Listing the tables.", sql
    described = _DESCRIBE.match(text)
    if described and _table(described.group("table")):
        table = described.group("table")
        return (
            f"Showing the columns of `{table}` and its first 5 rows.",
            f"SELECT * FROM {table} LIMIT 5",
        )
    counted = _COUNT.match(text)
    if counted and _table(counted.group("table")):
        table, column = counted.group("table"), counted.group("column")
        if column:
            return (
                f"Counting the rows of `{table}` per `{column}`.",
                f"SELECT {column}, COUNT(*) AS n FROM {table} GROUP BY {column} ORDER BY n DESC",
            )
        return f"Counting the rows of `{table}`.", f"SELECT COUNT(*) AS n FROM {table}"
    return None


@dataclass(frozen=True, kw_only=True)
class SqlTool:
    """The offered tool that runs SQL: its name, the argument the statement goes in, and the
    dialect its description names (``"(sqlite dialect)"``), if any."""

    name: str
    argument: str
    dialect: str | None


def sql_tool(tools: Sequence[ToolSchema]) -> SqlTool | None:
    """The first offered tool whose description says "SQL" and that takes a string argument
    (its first required one, else its first one); ``None`` when none is offered."""
    for tool in tools:
        if not re.search(r"\bSQL\b", tool.description):
            continue
        raw: Any = tool.parameters.get("properties")
        if not isinstance(raw, dict):
            continue
        properties = cast(dict[str, Any], raw)
        required: Any = tool.parameters.get("required")
        listed = cast(list[Any], required) if isinstance(required, list) else []
        order: list[Any] = [*listed, *properties]
        for name in order:
            spec: Any = properties.get(name) if isinstance(name, str) else None
            if isinstance(spec, dict) and cast(dict[str, Any], spec).get("type") == "string":
                found = re.search(r"\((\w+) dialect\)", tool.description)
                return SqlTool(
                    name=tool.name, argument=name, dialect=found.group(1) if found else None
                )
    return None


def _dialect(tools: Sequence[ToolSchema]) -> str | None:
    """The dialect an offered tool's description names (``"(sqlite dialect)"``), if any."""
    for tool in tools:
        found = re.search(r"\((\w+) dialect\)", tool.description)
        if found:
            return found.group(1)
    return None


EDIT_NOTE = "Note: the user edited the statement"


def _summary(result: ToolResultMessage) -> str:
    parts = list(result.content)
    edited = bool(parts) and content_text(parts[:1]).startswith(EDIT_NOTE)
    if edited:  # the database's note of an edit comes first; the result follows it
        parts = parts[1:]
    first = next((line.strip() for line in content_text(parts).splitlines() if line.strip()), "")
    if len(first) > 200:
        first = first[:197] + "..."
    if result.is_error:
        return f"The `{result.tool_name}` call did not succeed: {first or 'no reason given'}"
    how = " (as you edited it)" if edited else ""
    return f"`{result.tool_name}` finished{how}: {first or 'no output'}"


def _help(tool_names: list[str], why: str | None = None, runs_sql: str | None = None) -> str:
    tools = ", ".join(tool_names) if tool_names else "none"
    lead = "I am the offline demo model: a few rules, not an LLM, so I did not understand that."
    if why:
        lead += (
            f" It reads like SQL, but it names {why} that this database does not have, so I "
            "did not run it; if it is SQL, put it in a ```sql block."
            if why.startswith(("table", "column"))
            else f" It reads like SQL, but it is {why}; if it is SQL, put it in a ```sql block."
        )
    return (
        f"{lead} I can:\n\n"
        '- **list the tables** ("list the tables")\n'
        '- **describe a table** ("describe customers")\n'
        '- **count rows** ("how many orders are there?", "how many orders per status?")\n'
        f"- **run the SQL you paste** with {f'`{runs_sql}`' if runs_sql else 'a tool that runs SQL'}"
        ": in a ```sql block, or a statement on "
        "its own line that names tables and columns of the database\n\n"
        f"Active tools: {tools}. For real answers, choose a model with "
        "`%pi_model openai:<model>` or `%pi_model anthropic:<model>`."
    )


class OfflineModel:
    """Rule-based demo model (not an LLM). Deterministic; needs no network or key."""

    id = "offline"
    provider = "offline"

    def _answer(self, context: Context) -> tuple[str, str | None]:
        """(text, sql to run or None): the SQL goes to :func:`sql_tool` of the offered tools."""
        tool_names = [t.name for t in context.tools]
        messages: Sequence[Message] = context.messages
        last = messages[-1] if messages else None
        if isinstance(last, ToolResultMessage):
            results: list[ToolResultMessage] = []
            for message in reversed(messages):
                if not isinstance(message, ToolResultMessage):
                    break
                results.append(message)
            return " ".join(_summary(r) for r in reversed(results)), None
        prompt = content_text(last.content) if isinstance(last, UserMessage) else ""
        runs_sql = sql_tool(context.tools)
        dialect = runs_sql.dialect if runs_sql is not None else _dialect(context.tools)
        schema = schema_view(context.system_prompt)
        sql, why = _find_sql(prompt, dialect, schema)
        what = f"Running this SQL with `{runs_sql.name if runs_sql else 'a SQL tool'}`."
        if sql is None and why is None:
            understood = understood_request(prompt, dialect)
            if understood is not None:
                # The table (and column) it names must be the database's, when it is known.
                why = unknown_name(understood[1], dialect, schema) if schema else None
                if why is None:
                    what, sql = understood
        if sql and runs_sql is not None:
            return what, sql
        if sql:
            return (
                "I found SQL in your prompt, but a tool that runs SQL is not active in this "
                "session, so I cannot run it.",
                None,
            )
        return _help(tool_names, why, runs_sql.name if runs_sql else None), None

    def _events(
        self, context: Context, signal: AbortSignal | None
    ) -> Iterator[AssistantMessageEvent]:
        text, sql = self._answer(context)
        out = AssistantStream(model=self.id, provider=self.provider)
        yield out.start()
        yield out.text_start()
        for word in re.findall(r"\S+\s*", text):
            if signal is not None and signal.aborted:
                yield out.error("Operation aborted", aborted=True)
                return
            yield out.text_delta(word)
        yield out.text_end()
        runs_sql = sql_tool(context.tools)
        if sql is not None and runs_sql is not None:
            index, event = out.tool_call_start(id=f"offline_{next(_ids)}", name=runs_sql.name)
            yield event
            yield out.tool_call_delta(index, json.dumps({runs_sql.argument: sql}))
            yield out.tool_call_end(index)
        yield out.done()

    async def stream(
        self, context: Context, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        for event in self._events(context, signal):
            yield event
