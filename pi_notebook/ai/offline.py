"""The ``offline`` model: a small rule-based stand-in for an LLM, for demos without a key.

It is not a language model and says so. It follows four rules:

1. If the user's message holds SQL (a fenced block, or a paragraph that starts with a SQL
   keyword *and* has the shape of that statement and parses), and ``query_database`` is
   offered, it calls ``query_database`` with that SQL. English is never taken for SQL:
   "Show me the 5 most expensive products." has no SQL shape, so it is not sent.
2. Else, if the message is one of the few requests it understands (list the tables,
   describe a table, count the rows of a table, optionally per column), it runs the
   matching read.
3. If the last messages are tool results, it sums them up in a sentence each.
4. Otherwise it answers in a few lines what it can do.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
from collections.abc import AsyncIterator, Iterator, Sequence

from .abort import AbortSignal
from .events import AssistantMessageEvent
from .messages import Message, ToolResultMessage, UserMessage, content_text
from .model import Context, ToolSchema
from .stream import AssistantStream

__all__ = ["OfflineModel", "extract_sql", "understood_request"]

SQL_TOOL = "query_database"
_FENCE = re.compile(r"```(?:sql)?[ \t]*\n(.*?)```", re.IGNORECASE | re.DOTALL)
_I = re.IGNORECASE | re.DOTALL
_NAME = r"[\w.\"`\[\]]+"
# The shape each statement must have before it counts as SQL; English sentences that merely
# start with one of these words ("Show me ...", "Delete nothing", "Analyze sales") do not.
_SHAPES: dict[str, re.Pattern[str]] = {
    "select": re.compile(r"^select\s+(.*\bfrom\s+\S|[\d'\"(*-]|\w+\s*\()", _I),
    "with": re.compile(r"^with\s+(recursive\s+)?\w+\s*(\([^)]*\)\s*)?as\s*(not\s+)?(materialized\s+)?\(", _I),
    "insert": re.compile(r"^insert\s+(or\s+\w+\s+)?into\s+\S", _I),
    "update": re.compile(rf"^update\s+{_NAME}\s+set\s+\S+\s*=", _I),
    "delete": re.compile(r"^delete\s+from\s+\S", _I),
    "replace": re.compile(r"^replace\s+into\s+\S", _I),
    "merge": re.compile(r"^merge\s+into\s+\S", _I),
    "create": re.compile(r"^create\s+(or\s+replace\s+)?(temp(orary)?\s+)?(unique\s+)?(table|view|index|schema|trigger|sequence)\s+\S", _I),
    "drop": re.compile(rf"^drop\s+(table|view|index|schema|trigger|sequence)\s+(if\s+exists\s+)?{_NAME}\s*;?\s*$", _I),
    "alter": re.compile(rf"^alter\s+(table|view|index)\s+{_NAME}\s+\w+", _I),
    "truncate": re.compile(rf"^truncate\s+(table\s+)?{_NAME}\s*;?\s*$", _I),
    "pragma": re.compile(r"^pragma\s+[\w.]+\s*(\(|=|;|$)", _I),
    "explain": re.compile(r"^explain\s+(query\s+plan\s+|analyze\s+)?(select|with|insert|update|delete)\b", _I),
    "values": re.compile(r"^values\s*\(", _I),
    "show": re.compile(r"^show\s+(tables|databases|schemas|columns\s+from|create\s+table|full\s+tables|index(es)?\s+from)\b", _I),
    "describe": re.compile(rf"^desc(ribe)?\s+{_NAME}\s*;?\s*$", _I),
}  # fmt: skip
_START = re.compile(r"^\s*(" + "|".join(_SHAPES) + r")\b", re.IGNORECASE)
_STOP = {"the", "a", "an", "table", "tables", "all", "of", "in", "me", "my", "our", "rows",
         "records", "entries", "are", "there", "is", "do", "we", "have", "please"}  # fmt: skip
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


def extract_sql(prompt: str, dialect: str | None = None) -> str | None:
    """The SQL in a prompt: the first fenced block, else the first paragraph that is SQL.

    A paragraph is SQL when it starts with a statement keyword, has that statement's shape
    and parses; English that happens to start with such a word is not SQL.
    """
    fenced = _FENCE.search(prompt)
    if fenced and fenced.group(1).strip():
        return fenced.group(1).strip()
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
            sql = ("SELECT table_name FROM information_schema.tables WHERE table_schema NOT IN "
                   "('information_schema', 'pg_catalog', 'mysql', 'performance_schema', 'sys') "
                   "ORDER BY table_name")  # fmt: skip
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


def _dialect(tools: Sequence[ToolSchema]) -> str | None:
    for tool in tools:
        if tool.name == SQL_TOOL:
            found = re.search(r"\((\w+) dialect\)", tool.description)
            return found.group(1) if found else None
    return None


def _summary(result: ToolResultMessage) -> str:
    first = next(
        (line.strip() for line in content_text(result.content).splitlines() if line.strip()), ""
    )
    if len(first) > 200:
        first = first[:197] + "..."
    if result.is_error:
        return f"The `{result.tool_name}` call did not succeed: {first or 'no reason given'}"
    return f"`{result.tool_name}` finished: {first or 'no output'}"


def _help(tool_names: list[str]) -> str:
    tools = ", ".join(tool_names) if tool_names else "none"
    return (
        "I am the offline demo model: a few rules, not an LLM, so I did not understand that. "
        "I can:\n\n"
        '- **list the tables** ("list the tables")\n'
        '- **describe a table** ("describe customers")\n'
        '- **count rows** ("how many orders are there?", "how many orders per status?")\n'
        f"- **run the SQL you paste** (a ```sql block, or a statement on its own line) with `{SQL_TOOL}`\n\n"
        f"Active tools: {tools}. For real answers, choose a model with "
        "`%pi_model openai:<model>` or `%pi_model anthropic:<model>`."
    )


class OfflineModel:
    """Rule-based demo model (not an LLM). Deterministic; needs no network or key."""

    id = "offline"
    provider = "offline"

    def _answer(self, context: Context) -> tuple[str, str | None]:
        """(text, sql to run or None)."""
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
        dialect = _dialect(context.tools)
        sql = extract_sql(prompt, dialect)
        what = "Running this SQL with `query_database`."
        if sql is None:
            understood = understood_request(prompt, dialect)
            if understood is not None:
                what, sql = understood
        if sql and SQL_TOOL in tool_names:
            return what, sql
        if sql:
            return (
                f"I found SQL in your prompt, but the `{SQL_TOOL}` tool is not active in this "
                "session, so I cannot run it.",
                None,
            )
        return _help(tool_names), None

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
        if sql is not None:
            index, event = out.tool_call_start(id=f"offline_{next(_ids)}", name=SQL_TOOL)
            yield event
            yield out.tool_call_delta(index, json.dumps({"sql": sql}))
            yield out.tool_call_end(index)
        yield out.done()

    async def stream(
        self, context: Context, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        for event in self._events(context, signal):
            yield event
