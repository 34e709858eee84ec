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

Finding SQL and checking its names is :mod:`.offline_sql`; the requests of rule 2 are
:mod:`.offline_requests`; this module holds the model, the choice of the tool that runs SQL,
and its answers.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from .abort import AbortSignal
from .events import AssistantMessageEvent
from .messages import Message, ToolResultMessage, UserMessage, content_text
from .model import Context, ToolSchema
from .offline_requests import understood_request
from .offline_sql import SchemaView, extract_sql, find_sql, schema_view, unknown_name
from .stream import AssistantStream

__all__ = [
    "EDIT_NOTE",
    "OfflineModel",
    "SchemaView",
    "SqlTool",
    "extract_sql",
    "schema_view",
    "sql_tool",
    "understood_request",
    "unknown_name",
]

_ids = itertools.count(1)


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
        sql, why = find_sql(prompt, dialect, schema)
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
