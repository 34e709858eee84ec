"""The ``offline`` model: a small rule-based stand-in for an LLM, for demos without a key.

It is not a language model and says so. It follows three rules:

1. If the last message is the user's and holds SQL (a fenced block, or a line that
   starts with a SQL keyword, up to the next blank line), and ``query_database`` is
   offered, it calls ``query_database`` with that SQL.
2. If the last messages are tool results, it sums them up in a sentence each.
3. Otherwise it answers with a short help text naming the active tools.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import AsyncIterator, Iterator, Sequence

from .abort import AbortSignal
from .events import AssistantMessageEvent
from .messages import Message, ToolResultMessage, UserMessage, content_text
from .model import Context
from .stream import AssistantStream

__all__ = ["OfflineModel", "extract_sql"]

SQL_TOOL = "query_database"
_SQL_START = re.compile(
    r"^\s*(SELECT|WITH|INSERT|UPDATE|DELETE|MERGE|REPLACE|CREATE|DROP|ALTER|TRUNCATE|PRAGMA|"
    r"SHOW|DESCRIBE|DESC|EXPLAIN|VALUES|TABLE|GRANT|REVOKE|VACUUM|ANALYZE|ATTACH|COPY|SET|CALL|"
    r"BEGIN|COMMIT|ROLLBACK|SUMMARIZE)\b",
    re.IGNORECASE,
)
_FENCE = re.compile(r"```(?:sql)?[ \t]*\n(.*?)```", re.IGNORECASE | re.DOTALL)
_ids = itertools.count(1)


def extract_sql(prompt: str) -> str | None:
    """The SQL in a prompt: the first fenced block, else the first SQL paragraph."""
    fenced = _FENCE.search(prompt)
    if fenced and fenced.group(1).strip():
        return fenced.group(1).strip()
    lines = prompt.splitlines()
    for index, line in enumerate(lines):
        if _SQL_START.match(line):
            block: list[str] = []
            for following in lines[index:]:
                if not following.strip():
                    break
                block.append(following)
            return "\n".join(block).strip()
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
        sql = extract_sql(prompt)
        if sql and SQL_TOOL in tool_names:
            return f"Running this SQL with `{SQL_TOOL}`.", sql
        if sql:
            return (
                f"I found SQL in your prompt, but the `{SQL_TOOL}` tool is not active in this "
                "session, so I cannot run it.",
                None,
            )
        tools = ", ".join(tool_names) if tool_names else "none"
        return (
            "I am the offline demo model: a few rules, not an LLM. Put a SQL statement in your "
            "prompt (a ```sql block, or a line starting with SELECT, INSERT, ...) and I will run "
            f"it with `{SQL_TOOL}`. Active tools: {tools}. For real answers, choose a real model "
            "with %pi_model openai:<model> or anthropic:<model>.",
            None,
        )

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
